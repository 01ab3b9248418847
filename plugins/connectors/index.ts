// Connectors: the endpoints of spec 4.8, the sync engine feeding the ingestion pipeline, one file per
// source under sources/, and schedules in every mode.
import { definePlugin, type Plugin } from '../../kernel/plugin.ts'
import type { AuthzService } from '../authz/types.ts'
import type { DocsPlugin } from '../docs/index.ts'
import type { KbService } from '../kb/service.ts'
import type { Resolve } from './egress.ts'
import { registerConnectorRoutes } from './routes.ts'
import { readEnv } from './secrets.ts'
import { createConnectorsService, type ConnectorsService } from './service.ts'
import { createConfluenceSource } from './sources/confluence.ts'
import { createGithubSource } from './sources/github.ts'
import { createWebSource } from './sources/web.ts'

export type { ConnectorsService }

export interface ConnectorsPluginOptions {
  /** A claimed sync whose heartbeat is older than this belongs to a dead process (default 60 s). */
  staleMs?: number
  /** How often changes to schedules made by other processes are picked up (default 15 s). */
  scheduleRefreshMs?: number
  /** Host name resolution of the egress policy (default: the system's, dns.lookup); tests pass one they control. */
  resolve?: Resolve
}

export function createConnectorsPlugin(options: ConnectorsPluginOptions = {}): Plugin<ConnectorsService> {
  return definePlugin<ConnectorsService>({
    name: 'connectors',
    dependsOn: ['kb', 'docs', 'authz'],
    async register(ctx) {
      const { settings, adapters } = ctx
      const authz = ctx.use<AuthzService | null>('authz')
      // [ENT] Routes under /api/connectors/{connector_id} take the role of the connector's KB.
      authz?.registerResolver('connector', async (connectorId, db) =>
        (await db.query<{ kb_id: string }>('SELECT kb_id FROM connectors WHERE connector_id = $1::uuid', [connectorId]))[0]?.kb_id ?? null)
      const service = createConnectorsService({
        adapters, settings, log: ctx.log, docs: ctx.use<DocsPlugin>('docs').service, kbs: ctx.use<KbService>('kb'),
        sources: { web: createWebSource, confluence: createConfluenceSource, github: createGithubSource },
        consume: ctx.mode === 'worker' || settings.queue_worker.enabled,
        secretKey: readEnv('CONNECTOR_SECRET_KEY'),
        listeningPorts: ctx.listeningPorts,
        ...options,
      })
      registerConnectorRoutes(ctx, service, authz)
      // DELETE /api/kb/{kb} answers 409 while one of the KB's connectors syncs.
      ctx.use<KbService>('kb').addDeleteGuard(service.kbDeleteGuard)
      await service.start()
      return service
    },
    close: (service) => service.close(),
  })
}

export default createConnectorsPlugin()
