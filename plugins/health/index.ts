// /health (liveness) and /ready (real reachability checks of what is configured; notes.md Health).
import { Type } from '@sinclair/typebox'
import { reply, definePlugin } from '../../kernel/plugin.ts'
import type { Adapters } from '../../adapters/ports.ts'

const CHECK_TIMEOUT_MS = 3000

/** Check keys name what is in use: postgres or pglite, redis or embedded_queue, qdrant, pgvector or embedded_vectors, s3 or local_files. */
export function readinessProbes(a: Adapters, providerName: string): { key: string; critical: boolean; probe: () => Promise<boolean> }[] {
  return [
    { key: a.sql.name, critical: true, probe: () => a.sql.ping() },
    { key: a.queue.name === 'redis' ? 'redis' : 'embedded_queue', critical: true, probe: () => a.queue.ping() },
    { key: a.vectors.name === 'embedded' ? 'embedded_vectors' : a.vectors.name, critical: true, probe: () => a.vectors.ping() },
    { key: a.objects.name === 's3' ? 's3' : 'local_files', critical: false, probe: () => a.objects.ping() },
    { key: providerName, critical: true, probe: () => a.embedder.ping() },
  ]
}

const withTimeout = (p: Promise<boolean>): Promise<boolean> =>
  Promise.race([p.catch(() => false), new Promise<boolean>((r) => setTimeout(r, CHECK_TIMEOUT_MS, false).unref())])

export default definePlugin({
  name: 'health',
  register(ctx) {
    const tags = ['health']
    ctx.route({
      method: 'GET', path: '/health', summary: 'Liveness', tags, access: { level: 'public' },
      responses: { 200: { description: 'Alive', schema: Type.Object({ status: Type.Literal('ok') }) } },
      handler: () => ({ status: 'ok' }),
    })
    const ReadyBody = Type.Object({
      status: Type.Union([Type.Literal('ready'), Type.Literal('not_ready')]),
      provider: Type.String(),
      checks: Type.Record(Type.String(), Type.Boolean()),
    })
    ctx.route({
      method: 'GET', path: '/ready', summary: 'Readiness: every critical backing service reachable', tags, access: { level: 'public' },
      responses: { 200: { description: 'Ready', schema: ReadyBody }, 503: { description: 'Not ready', schema: ReadyBody } },
      handler: async () => {
        const probes = readinessProbes(ctx.adapters, ctx.settings.provider.name)
        const results = await Promise.all(probes.map((p) => withTimeout(p.probe())))
        const checks: Record<string, boolean> = {}
        probes.forEach((p, i) => (checks[p.key] = results[i]))
        const ready = probes.every((p, i) => !p.critical || results[i])
        return reply(ready ? 200 : 503, { status: ready ? 'ready' : 'not_ready', provider: ctx.settings.provider.name, checks })
      },
    })
  },
})
