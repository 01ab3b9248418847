// Connectors (spec 2.5, 3.3, 4.8): validation, secrets, the sync state machine, abort, delete. Syncs are
// queued on the `connector-sync` topic and run by a process that consumes the queue (the built-in worker's
// API process, or `npm run worker`), so an API process started without a worker still hands them on; every
// state change is a compare-and-set in the metadata store, which is what makes abort work across processes.
import { randomUUID } from 'node:crypto'
import type { TSchema } from '@sinclair/typebox'
import type { Adapters, SqlRunner } from '../../adapters/ports.ts'
import type { Settings } from '../../kernel/config/schema.ts'
import { AppError, clip, conflict, invalid, notFound, serviceUnavailable, ValidationError, type ValidationIssue } from '../../kernel/errors.ts'
import type { Logger } from '../../kernel/log.ts'
import { compile, type CompiledSchema } from '../../kernel/validate.ts'
import { emptyCounts, type DocCounts, type ListFilter } from '../docs/repo.ts'
import { publicRecord, type DocsService } from '../docs/service.ts'
import type { DocStatus } from '../docs/states.ts'
import { kbNotFound, type KbService } from '../kb/service.ts'
import { createEgress, type Resolve } from './egress.ts'
import { ABORTED, createEngine, type Source } from './engine.ts'
import { createConnectorRepo, type ConnectorRow, type LastSync } from './repo.ts'
import { checkCron, createScheduler } from './schedule.ts'
import { CONFIG_SCHEMAS, type SourceType, type WebConfigT } from './schemas.ts'
import { createCredentialPolicy, createSecretBox, MASK, storeSecret, type SecretBox } from './secrets.ts'
import { normaliseUrl } from './url.ts'

export const SYNC_TOPIC = 'connector-sync'
const INTERRUPTED = 'Sync interrupted: the process running it stopped'

interface SyncEvent {
  connector_id: string
  run_id: string
  trigger: LastSync['trigger']
}

export interface ConnectorsOptions {
  adapters: Adapters
  settings: Readonly<Settings>
  log: Logger
  docs: DocsService
  kbs: KbService
  sources: Record<SourceType, (sql: Adapters['sql']) => Source>
  /** Whether this process runs syncs (it consumes the queue). */
  consume: boolean
  secretKey: string | undefined
  /** Syncs run at once by this process. */
  maxSyncs?: number
  /** A claimed sync whose heartbeat is older than this belongs to a dead process. */
  staleMs?: number
  scheduleRefreshMs?: number
  /** The ports the service listens on now: connectors may not reach them on a local address. */
  listeningPorts?: () => readonly number[]
  /** Host name resolution of the egress policy (default: the system's); tests pass a resolver they control. */
  resolve?: Resolve
}

export const connectorNotFound = (id: string) => notFound(`Connector not found: ${clip(id)}`, 'CONNECTOR_NOT_FOUND')

/** The response shape: internal bookkeeping dropped, every secret masked. */
export function publicConnector(c: ConnectorRow) {
  return {
    connector_id: c.connector_id, kb_id: c.kb_id, name: c.name, source_type: c.source_type, config: maskConfig(c.source_type, c.config),
    sync_schedule: c.sync_schedule, schedule_enabled: c.schedule_enabled, sync_status: c.sync_status, sync_started_at: c.sync_started_at,
    last_synced_at: c.last_synced_at, status: c.status, last_error: c.last_error, created_at: c.created_at, updated_at: c.updated_at,
  }
}

export function maskConfig(type: SourceType, config: Record<string, unknown>): Record<string, unknown> {
  if (type !== 'web') return config
  const web = config as Partial<WebConfigT>
  const out: Record<string, unknown> = { ...config }
  if (web.auth_headers) out.auth_headers = Object.fromEntries(Object.keys(web.auth_headers).map((k) => [k, MASK]))
  if (web.auth_basic) out.auth_basic = { username: web.auth_basic.username, password: MASK }
  return out
}

/** What makes two connectors of a KB the same (notes.md: same kb_id, source_type and config source). */
export function sourceKey(type: SourceType, config: Record<string, any>): string {
  switch (type) {
    case 'web': return [...new Set((config.seed_urls as string[]).map((u) => normaliseUrl(u) ?? u))].sort().join(' ')
    case 'confluence': return `${(normaliseUrl(config.base_url) ?? config.base_url).toLowerCase()}#${config.space_key}`
    case 'github': return `${String(config.owner).toLowerCase()}/${String(config.repo).toLowerCase()}@${config.branch}:${String(config.path_prefix).replace(/^\/+|\/+$/g, '')}`
  }
}

const compiled = new Map<SourceType, CompiledSchema<TSchema>>()

/** The config checked against its source's shape, defaults filled; a bad field is named under body.config. */
function parseConfig(type: SourceType, raw: unknown): Record<string, any> {
  let schema = compiled.get(type)
  if (!schema) compiled.set(type, (schema = compile(CONFIG_SCHEMAS[type])))
  try {
    return structuredClone(schema.parse(structuredClone(raw), 'body')) as Record<string, any>
  } catch (err) {
    if (err instanceof ValidationError) throw new ValidationError(err.issues.map((i) => ({ ...i, loc: ['body', 'config', ...i.loc.slice(1)] })))
    throw err
  }
}

/** The origins a config sends its credentials to: the seeds' (web), base_url's (confluence), api_url's (github). */
function targetOrigins(type: SourceType, config: Record<string, any>): Set<string> {
  const urls: string[] = type === 'web' ? config.seed_urls : [type === 'confluence' ? config.base_url : config.api_url]
  const origins = new Set<string>()
  for (const u of urls) {
    try {
      origins.add(new URL(u).origin)
    } catch { /* the schema admitted it; an unparsable URL has no origin to compare */ }
  }
  return origins
}

/**
 * Secrets of a config made storable: env:NAME kept (when the name is allowed), literals sealed, the mask swapped
 * for what is stored unless the config now sends credentials to an origin the stored ones were not given for.
 */
function sealSecrets(box: SecretBox, type: SourceType, config: Record<string, any>, previous: Record<string, any> | null): void {
  if (typeof config.auth_token_secret === 'string') {
    const problem = box.credentials.problem(config.auth_token_secret)
    if (problem) throw invalid(['body', 'config', 'auth_token_secret'], problem, 'env_name_not_allowed')
  }
  const before = previous ? targetOrigins(type, previous) : null
  const targetChanged = before !== null && [...targetOrigins(type, config)].some((o) => !before.has(o))
  const headers = config.auth_headers as Record<string, string> | undefined
  if (headers) {
    for (const [name, value] of Object.entries(headers)) {
      headers[name] = storeSecret(box, value, previous?.auth_headers?.[name], ['body', 'config', 'auth_headers', name], targetChanged)
    }
  }
  if (config.auth_basic) {
    config.auth_basic.password = storeSecret(box, config.auth_basic.password, previous?.auth_basic?.password, ['body', 'config', 'auth_basic', 'password'], targetChanged)
  }
}

/** The fields of a config that name where its requests go. */
function destinations(type: SourceType, config: Record<string, any>): [(string | number)[], string][] {
  if (type === 'web') return (config.seed_urls as string[]).map((u, i) => [['body', 'config', 'seed_urls', i], u])
  return type === 'confluence' ? [[['body', 'config', 'base_url'], config.base_url]] : [[['body', 'config', 'api_url'], config.api_url]]
}

function checkedCron(expr: string | null | undefined): string | null | undefined {
  if (expr === undefined || expr === null) return expr
  const trimmed = expr.trim().replace(/\s+/g, ' ')
  try {
    if (trimmed.split(' ').length !== 5) throw new Error('expected 5 fields (minute hour day-of-month month day-of-week)')
    checkCron(trimmed)
  } catch (err) {
    throw invalid(['body', 'sync_schedule'], `Invalid cron expression '${clip(expr, 100)}': ${(err as Error).message}`, 'cron_invalid')
  }
  return trimmed
}

export function createConnectorsService(opts: ConnectorsOptions) {
  const { adapters, settings, log, docs, kbs } = opts
  const repo = createConnectorRepo(adapters.sql)
  const secrets = createSecretBox(opts.secretKey, createCredentialPolicy(settings.connectors.secret_env_names))
  const staleMs = opts.staleMs ?? 60_000
  const owner = `${process.pid}-${randomUUID().slice(0, 8)}`
  const sources = Object.fromEntries(Object.entries(opts.sources).map(([k, make]) => [k, make(adapters.sql)])) as Record<SourceType, Source>

  const { allow, private_networks: privateNetworks } = settings.connectors.egress
  const egress = createEgress({
    allow,
    // 'auto': the base edition (no oidc.issuer_url; every caller may do anything) reaches private ranges, as the
    // older service did for internal wikis; the access-controlled edition, where any KB owner adds connectors, not.
    privateNetworks: privateNetworks === 'allow' || (privateNetworks === 'auto' && !settings.oidc.issuer_url),
    ownPorts: () => [settings.server.port, ...(opts.listeningPorts?.() ?? [])],
    resolve: opts.resolve,
  })

  /**
   * 422 for each configured destination the egress policy refuses now: a literal address, or a name that
   * resolves (one that does not is left to the sync). Each origin is looked up once.
   */
  async function checkDestinations(type: SourceType, config: Record<string, any>): Promise<void> {
    const byOrigin = new Map<string, ReturnType<typeof egress.check>>()
    const found = await Promise.all(destinations(type, config).map(async ([loc, url]) => {
      let origin = url
      try {
        origin = new URL(url).origin
      } catch { /* checked as given */ }
      let refused = byOrigin.get(origin)
      if (!refused) byOrigin.set(origin, (refused = egress.check(url)))
      return { loc, refused: await refused }
    }))
    const issues: ValidationIssue[] = []
    for (const { loc, refused } of found) {
      if (!refused) continue
      const how = refused.addressClass === 'private' ? 'connectors.egress.allow (a CIDR or the host name) or connectors.egress.private_networks: allow'
        : refused.addressClass === 'own listener' ? 'connectors.egress.allow (the address with this port, such as 127.0.0.1:8000)'
          : 'connectors.egress.allow (the address or a CIDR holding it)'
      issues.push({ loc, msg: `${refused.message}; an operator allows it in the settings with ${how}`, type: 'destination_not_allowed' })
    }
    if (issues.length > 0) throw new ValidationError(issues)
  }

  const engine = createEngine({
    adapters, settings, log, docs, repo, secrets, egress, sources, heartbeatMs: Math.min(10_000, staleMs / 4),
    async configOf(c) {
      if (c.source_type !== 'web') return c.config
      const kb = await kbs.effectiveSettings(c.kb_id)
      return {
        ...c.config,
        min_content_chars: (c.config as Partial<WebConfigT>).min_content_chars ?? kb.ingestion.min_content_chars,
        html_extraction_policy: kb.ingestion.html_extraction_policy,
      }
    },
  })

  const background = new Set<Promise<unknown>>()
  const track = <T>(p: Promise<T>) => {
    background.add(p)
    void p.finally(() => background.delete(p))
    return p
  }

  const requireConnector = async (id: string) => {
    const c = await repo.get(id)
    if (!c) throw connectorNotFound(id)
    return c
  }

  async function startSync(id: string, trigger: LastSync['trigger']): Promise<ConnectorRow> {
    const runId = randomUUID()
    const c = await repo.startSync(id, runId)
    if (!c) {
      const now = await requireConnector(id)
      if (now.status === 'paused') throw conflict(`Connector is paused: ${clip(id)}`, 'CONNECTOR_PAUSED')
      throw conflict(`Sync already in progress: ${clip(id)}`, 'SYNC_RUNNING')
    }
    try {
      await adapters.queue.enqueue<SyncEvent>(SYNC_TOPIC, id, { connector_id: id, run_id: runId, trigger })
    } catch (err) {
      await repo.interrupt(id, runId, 'Could not queue the sync').catch(() => null)
      throw err instanceof AppError ? err : serviceUnavailable(`Queue unavailable: ${(err as Error).message}`, err)
    }
    return c
  }

  /**
   * Ends runs whose process is gone; their documents left `fetching` fail. The pending ones are the documents
   * worker's: queued, or queued again by its recovery when the process died before their event was.
   */
  async function recover(all: boolean): Promise<number> {
    const dead: { c: ConnectorRow; unclaimed: boolean }[] = (await repo.stale(staleMs, all)).map((c) => ({ c, unclaimed: false }))
    // Runs no process took whose event is gone: the process that started one died before queueing it (`all`
    // has them already). An event is acked only after its claim, and interrupt checks the owner, so a run
    // claimed meanwhile goes on.
    const waiting = all ? [] : await repo.unclaimed(staleMs)
    if (waiting.length > 0) {
      const queued = await adapters.queue.present(SYNC_TOPIC, waiting.map((c) => c.connector_id))
      for (const c of waiting) if (!queued.has(c.connector_id)) dead.push({ c, unclaimed: true })
    }
    let n = 0
    for (const { c, unclaimed } of dead) {
      if (engine.isRunningHere(c.connector_id)) continue
      const ended = await repo.interrupt(c.connector_id, c.sync_run_id, INTERRUPTED, unclaimed)
      if (!ended) continue
      n++
      await engine.failInFlight(c.connector_id, INTERRUPTED, { states: ['fetching'] })
      log.warn({ connector_id: c.connector_id }, 'connector sync left behind by a stopped process ended')
    }
    return n
  }

  // The consumer of sync events: at most maxSyncs runs at once in this process.
  const maxSyncs = opts.maxSyncs ?? 4
  let consuming = false
  let wake: (() => void) | null = null
  let loop: Promise<void> | null = null
  let unsubscribe: (() => void) | null = null
  const runs = new Set<Promise<void>>()

  async function consume(): Promise<void> {
    const pollMs = settings.queue_poll.poll_interval_sec * 1000
    while (consuming) {
      const room = maxSyncs - runs.size
      if (room > 0) {
        try {
          for (const msg of await adapters.queue.reserve<SyncEvent>(SYNC_TOPIC, room, 60_000)) {
            const event = msg.payload
            // The claim comes before the ack: a process that dies between the two leaves an owned run (its
            // heartbeat goes stale) or a message delivered again, never an unowned run with no message. From
            // here on liveness is the run's heartbeat, not the lease.
            const c = await repo.claim(event.connector_id, event.run_id, owner)
            await adapters.queue.ack(SYNC_TOPIC, msg.id)
            if (!c) continue // aborted, superseded or taken by another process meanwhile
            const p: Promise<void> = engine.run(c, event.run_id, event.trigger).catch((err) => log.error({ err, connector_id: event.connector_id }, 'connector sync crashed'))
            runs.add(p)
            void p.finally(() => {
              runs.delete(p)
              nudge()
            })
          }
        } catch (err) {
          if (consuming) log.warn({ err }, 'connector queue poll failed; retrying')
        }
      }
      // Closed while the poll above was out (its nudge found no wait to end): no wait of a whole poll interval.
      if (!consuming) break
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, pollMs)
        wake = () => {
          clearTimeout(timer)
          resolve()
        }
      })
    }
  }
  const nudge = () => {
    const w = wake
    wake = null
    w?.()
  }

  const scheduler = createScheduler({ repo, log, fire: (id, at) => fireSchedule(id, at), refreshMs: opts.scheduleRefreshMs ?? 15_000 })
  let recoveryTimer: NodeJS.Timeout | null = null

  /**
   * One firing of a connector's schedule. 'claimed_elsewhere' when another process (or an earlier call)
   * took this scheduled time; 'skipped' when the schedule is off, the connector paused or a sync running.
   */
  async function fireSchedule(id: string, scheduledAt: Date): Promise<'started' | 'claimed_elsewhere' | 'skipped'> {
    if (!(await repo.claimRun(id, scheduledAt))) return 'claimed_elsewhere'
    const c = await repo.get(id)
    if (!c || !c.schedule_enabled || c.status === 'paused' || !c.sync_schedule) return 'skipped'
    try {
      await startSync(id, 'schedule')
      return 'started'
    } catch (err) {
      if (err instanceof AppError && err.status === 409) return 'skipped'
      throw err
    }
  }

  async function docCounts(id: string): Promise<DocCounts> {
    const rows = await adapters.sql.query<{ status: DocStatus; n: number }>(
      'SELECT status, count(*)::int AS n FROM documents WHERE connector_id = $1::uuid GROUP BY status', [id])
    const counts = emptyCounts()
    for (const r of rows) {
      counts[r.status] = r.n
      counts.total += r.n
    }
    return counts
  }

  /** Removes the connector's documents (chunks, files, rows); an active one is retried until it settles. */
  async function removeDocuments(kbId: string, id: string): Promise<void> {
    for (let attempt = 0; attempt < 120; attempt++) {
      const rows = await adapters.sql.query<{ doc_id: string; status: DocStatus }>(
        `SELECT doc_id, status FROM documents WHERE connector_id = $1::uuid AND status NOT IN ('deleting')`, [id])
      let busy = 0
      for (const d of rows) {
        try {
          await docs.delete(kbId, d.doc_id, true)
        } catch (err) {
          if (err instanceof AppError && err.status === 409) busy++
          else if (!(err instanceof AppError && err.status === 404)) throw err
        }
      }
      if (busy === 0) return
      await new Promise((r) => setTimeout(r, 1000).unref())
    }
    log.warn({ connector_id: id }, 'some documents of a deleted connector stayed active and were left in place')
  }

  return {
    repo,
    engine,
    scheduler,
    secrets,
    fireSchedule,
    recover,

    async start(): Promise<void> {
      // One process owns an embedded deployment: a sync it finds running at start has no process behind it.
      await recover(adapters.queue.name === 'embedded').catch((err) => log.error({ err }, 'connector recovery failed'))
      recoveryTimer = setInterval(() => void recover(false).catch((err) => log.warn({ err }, 'connector recovery failed')), Math.max(staleMs / 2, 1000))
      recoveryTimer.unref()
      await scheduler.start()
      if (opts.consume) {
        consuming = true
        unsubscribe = adapters.queue.subscribe(SYNC_TOPIC, nudge)
        loop = consume()
      }
    },

    async close(): Promise<void> {
      scheduler.stop()
      if (recoveryTimer) clearInterval(recoveryTimer)
      consuming = false
      unsubscribe?.()
      nudge()
      await engine.close()
      await loop
      await Promise.allSettled([...runs, ...background])
      egress.close()
    },

    async create(body: { kb_id: string; name: string; source_type: SourceType; config: Record<string, unknown>; sync_schedule?: string | null; schedule_enabled?: boolean }) {
      const config = parseConfig(body.source_type, body.config)
      const cron = checkedCron(body.sync_schedule) ?? null
      if (!(await kbs.exists(body.kb_id))) throw kbNotFound(body.kb_id)
      sealSecrets(secrets, body.source_type, config, null)
      await checkDestinations(body.source_type, config)
      const c = await repo.insert({
        kb_id: body.kb_id, name: body.name, source_type: body.source_type, config, source_key: sourceKey(body.source_type, config),
        sync_schedule: cron, schedule_enabled: body.schedule_enabled ?? false,
      })
      scheduler.apply(c.connector_id, c.sync_schedule)
      return publicConnector(c)
    },

    async list(f: { kb_id?: string; source_type?: string; status?: string; search?: string; sort_by: string; sort_order: 'asc' | 'desc' }) {
      const rows = await repo.list({ kbId: f.kb_id, sourceType: f.source_type, status: f.status, search: f.search, sortBy: f.sort_by, sortOrder: f.sort_order })
      return { items: rows.map(publicConnector) }
    },

    get: async (id: string) => publicConnector(await requireConnector(id)),

    async patch(id: string, body: { name?: string; config?: Record<string, unknown>; sync_schedule?: string | null; schedule_enabled?: boolean; status?: 'active' | 'paused' }) {
      const current = await requireConnector(id)
      const fields: Parameters<typeof repo.update>[1] = { name: body.name, schedule_enabled: body.schedule_enabled }
      if (body.config !== undefined) {
        const config = parseConfig(current.source_type, body.config)
        sealSecrets(secrets, current.source_type, config, current.config)
        await checkDestinations(current.source_type, config)
        fields.config = config
        fields.source_key = sourceKey(current.source_type, config)
      }
      if (body.sync_schedule !== undefined) fields.sync_schedule = checkedCron(body.sync_schedule)
      if (body.status !== undefined) {
        fields.status = body.status
        fields.last_error = null
      }
      // sync_schedule: null must reach the statement (it removes the schedule); undefined means untouched.
      const c = body.sync_schedule === null ? await repo.update(id, { ...fields, sync_schedule: null }) : await repo.update(id, fields)
      if (!c) throw connectorNotFound(id)
      scheduler.apply(c.connector_id, c.sync_schedule)
      return publicConnector(c)
    },

    async remove(id: string) {
      const c = await requireConnector(id)
      if (!(await repo.remove(id))) {
        if (await repo.get(id)) throw conflict(`Cannot delete connector while sync is running: ${clip(id)}`, 'SYNC_RUNNING')
        throw connectorNotFound(id)
      }
      scheduler.apply(id, null)
      track(removeDocuments(c.kb_id, id).catch((err) => log.error({ err, connector_id: id }, 'removing the documents of a deleted connector failed')))
      return { connector_id: id, status: 'deleting' as const }
    },

    async sync(id: string) {
      await startSync(id, 'manual')
      return { connector_id: id, sync_status: 'running' as const }
    },

    /**
     * Spec 3.3/4.8: idle at once; queued documents removed from the queue and failed, running ones failed;
     * the loop (in whatever process) stops at its next checkpoint.
     */
    async abort(id: string) {
      const c = await repo.requestAbort(id)
      if (!c) {
        await requireConnector(id)
        throw conflict(`No sync in progress: ${clip(id)}`, 'SYNC_NOT_RUNNING')
      }
      engine.stopLocal(id)
      await engine.failInFlight(id, ABORTED)
      return { connector_id: id, status: 'abort_requested' as const }
    },

    async reset(id: string) {
      const c = await repo.reset(id)
      if (!c) throw connectorNotFound(id)
      engine.stopLocal(id)
      return { connector_id: id, sync_status: 'idle' as const }
    },

    async status(id: string) {
      const c = await requireConnector(id)
      return {
        connector_id: c.connector_id, status: c.status, sync_status: c.sync_status, sync_started_at: c.sync_started_at,
        last_synced_at: c.last_synced_at, last_error: c.last_error, doc_counts: await docCounts(id), last_sync: c.last_sync,
      }
    },

    async documents(id: string, f: Omit<ListFilter, 'connectorId' | 'kbId'>) {
      const c = await requireConnector(id)
      const { items, total } = await docs.list({ ...f, kbId: c.kb_id, connectorId: id })
      return { items: items.map(publicRecord), total, page: f.page, page_size: f.pageSize }
    },

    /**
     * The check DELETE /api/kb/{kb} needs: 409 while one of the KB's connectors syncs. Wired by the kb
     * service's delete guard once it has one (see the report).
     */
    async kbDeleteGuard(kbId: string, db: SqlRunner): Promise<void> {
      const running = await createConnectorRepo(db).runningIn(kbId)
      if (running.length > 0) {
        throw new AppError('KB_SYNC_RUNNING', 409, `Cannot delete KB while connector sync is running: kb_id=${clip(kbId)} connectors=[${running.map((r) => `'${r}'`).join(', ')}]`)
      }
    },
  }
}

export type ConnectorsService = ReturnType<typeof createConnectorsService>
