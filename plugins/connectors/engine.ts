// The sync engine: runs one connector's source, stores what it yields as documents through the ingestion
// pipeline's own steps (row `fetching` -> object stored -> `pending` + queued), skips unchanged versions,
// prunes what the source no longer lists after a complete run, and ends the run (spec 3.3). Before each source
// request it passes a checkpoint in the metadata store, so an abort from any process stops it there.
import { setTimeout as sleep } from 'node:timers/promises'
import type { Adapters } from '../../adapters/ports.ts'
import type { DocType } from '../../compute/types.ts'
import type { Settings } from '../../kernel/config/schema.ts'
import { AppError } from '../../kernel/errors.ts'
import { kbFrozen } from '../kb/errors.ts'
import type { Logger } from '../../kernel/log.ts'
import { newDocId, type DocRepo, type DocumentRecord } from '../docs/repo.ts'
import { INGEST_TOPIC, type DocEvent, type DocsService } from '../docs/service.ts'
import { isActive, truncateError, type DocStatus } from '../docs/states.ts'
import { documentKey } from '../docs/storage-key.ts'
import type { Egress, EgressResponse } from './egress.ts'
import type { ConnectorRepo, ConnectorRow, LastSync } from './repo.ts'
import type { SecretBox } from './secrets.ts'
import { telemetry } from '../../kernel/telemetry.ts'

/** What a source hands over for one document. */
export interface SourceItem {
  /** documents.source: the normalised URL, the page's web URL, github://owner/repo/branch/path. */
  source: string
  sourceUri: string
  title: string
  /** content_version: ETag or text hash (web), version number (wiki), blob SHA (git). */
  version: string
  /** Name of the stored object; its extension tells the parser what it is. */
  fileName: string
  docType: DocType
  contentType: string
  body: Uint8Array
}

export interface KnownDoc {
  doc_id: string
  status: DocStatus
  content_version: string | null
  storage_key: string | null
}

export type StoreOutcome = 'stored' | 'unchanged' | 'busy'

export interface SourceResponse {
  status: number
  ok: boolean
  headers: Headers
  /** Null when not read (see wantBody) or longer than maxBytes. */
  body: Uint8Array | null
  tooLarge: boolean
}

/** Reads a body up to `limit` bytes; null when it is longer (the item is skipped, never truncated). */
async function readCapped(res: EgressResponse, limit: number): Promise<Uint8Array | null> {
  const declared = Number(res.headers.get('content-length'))
  if (Number.isFinite(declared) && declared > limit) {
    res.discard()
    return null
  }
  const parts: Uint8Array[] = []
  let size = 0
  for await (const part of res.body as AsyncIterable<Uint8Array>) {
    size += part.byteLength
    // Leaving the loop destroys the body (and its connection).
    if (size > limit) return null
    parts.push(part)
  }
  return parts.length === 1 ? parts[0] : Buffer.concat(parts, size)
}

/** Thrown out of a source when the run must stop (abort, superseded, shutdown). */
export class SyncStopped extends Error {
  constructor(readonly reason: 'aborted' | 'superseded' | 'shutdown') {
    super(reason === 'aborted' ? 'Aborted' : reason === 'superseded' ? 'A newer sync took over' : 'The service is shutting down')
  }
}

/** Thrown by a source for a failure of the whole sync (its message becomes last_error). */
export class SyncFailure extends Error {}

export interface Counters {
  fetched: number
  stored: number
  unchanged: number
  skipped: number
  failed: number
}

/** What a source sees of the run. */
export interface SyncContext {
  readonly connector: ConnectorRow
  readonly config: any
  readonly settings: Readonly<Settings>
  readonly log: Logger
  readonly secrets: SecretBox
  readonly counters: Counters
  /** Aborted when the run must stop: pass it to every request. */
  readonly signal: AbortSignal
  /**
   * Call before each source request: waits out request_delay_ms since the previous request, then passes
   * the checkpoint (throws SyncStopped when the run was aborted or superseded).
   */
  beforeRequest(): Promise<void>
  /**
   * One GET after the checkpoint, through the egress policy (egress.ts: a refused destination throws
   * DestinationRefused), with the connector's timeout (body included) and the run's signal. The body is read
   * when wantBody says so (default: 2xx), up to maxBytes (beyond: body null, tooLarge).
   */
  fetch(url: string, init: { headers?: Record<string, string>; redirect?: 'follow' | 'manual' }, opts: { maxBytes: number; wantBody?: (status: number, headers: Headers) => boolean }): Promise<SourceResponse>
  /** The document this connector holds for a source, from the run's start. */
  known(source: string): KnownDoc | undefined
  /** The source still lists this: pruning keeps it (also for sources skipped as unchanged or failed). */
  keep(source: string): void
  store(item: SourceItem): Promise<StoreOutcome>
  /** The run was cut (max_pages, max_files, queue cap): nothing is pruned. */
  truncate(): void
  /** Waits (abortably) up to ms; used for rate-limit waits. */
  wait(ms: number): Promise<void>
}

export type Source = (ctx: SyncContext) => Promise<void>

export const USER_AGENT = 'Quarry-WebConnector/0.1.0'
/** Source requests in flight at once when request_delay_ms is 0 (any delay means one at a time). */
export const PARALLEL_REQUESTS = 8
export const ABORTED = 'Aborted'
const WAIT_POLL_MS = 250

/**
 * Runs `work` over a queue that grows while it runs, `limit` entries at a time, in queue order. `more()` is asked
 * before each entry is taken (false stops taking). A worker that finds the queue empty waits while others are
 * in flight, since they may add to it. The first error stops every worker and is rethrown.
 */
export async function crawlQueue<T>(queue: T[], limit: number, more: () => boolean, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  let inFlight = 0
  const failed: unknown[] = []
  let wake: (() => void)[] = []
  const notify = () => {
    const w = wake
    wake = []
    for (const f of w) f()
  }
  const worker = async () => {
    for (;;) {
      if (failed.length > 0) return
      if (next >= queue.length) {
        if (inFlight === 0) return notify()
        await new Promise<void>((r) => wake.push(r))
        continue
      }
      if (!more()) return notify()
      const item = queue[next]
      queue[next++] = undefined as never // what was taken is not kept alive by the queue
      inFlight++
      try {
        await work(item)
      } catch (err) {
        failed.push(err)
      } finally {
        inFlight--
        notify()
      }
    }
  }
  await Promise.all(Array.from({ length: limit }, worker))
  if (failed.length > 0) throw failed[0]
}

/**
 * A source's requests over a growing queue: with request_delay_ms 0 several are in flight at once, any delay
 * means one at a time; after `max` items (max_pages, max_files) the run is marked truncated and takes no more.
 */
export function crawlCapped<T>(queue: T[], ctx: Pick<SyncContext, 'truncate'>, requestDelayMs: number, max: number, work: (item: T) => Promise<void>): Promise<void> {
  let taken = 0
  return crawlQueue(queue, requestDelayMs === 0 ? PARALLEL_REQUESTS : 1, () => {
    if (taken < max) return true
    ctx.truncate()
    return false
  }, (item) => {
    taken++
    return work(item)
  })
}

export interface EngineDeps {
  adapters: Adapters
  settings: Readonly<Settings>
  log: Logger
  docs: DocsService
  repo: ConnectorRepo
  secrets: SecretBox
  /** The only way a source reaches the network: the egress policy's HTTP client. */
  egress: Egress
  sources: Record<string, Source>
  /** How often a run refreshes its heartbeat while a request is in flight; keep it well below the stale limit. */
  heartbeatMs: number
  /** Config as the source reads it: defaults filled, KB settings it depends on resolved. */
  configOf(c: ConnectorRow): Promise<any>
}

export function createEngine(deps: EngineDeps) {
  const { adapters, settings, log, docs, repo } = deps
  const docRepo: DocRepo = docs.repo
  const running = new Map<string, AbortController>()
  let closing = false

  /**
   * [ENT] A frozen KB takes no writes, a connector's neither (scheduled or not): the sync ends with this error
   * (status error) and nothing is stored or pruned. Checked before the source starts, before each document it
   * stores and before pruning, so a KB frozen during a sync stops it too.
   */
  async function refuseFrozen(c: ConnectorRow): Promise<void> {
    const rows = await adapters.sql.query<{ status: string }>('SELECT status FROM knowledge_bases WHERE kb_id = $1', [c.kb_id])
    if (rows[0]?.status === 'frozen') throw kbFrozen(c.kb_id)
  }

  async function knownDocs(c: ConnectorRow): Promise<Map<string, KnownDoc>> {
    const rows = await adapters.sql.query<KnownDoc & { source: string }>(
      `SELECT doc_id, source, status, content_version, storage_key FROM documents WHERE connector_id = $1::uuid`, [c.connector_id])
    return new Map(rows.map((r) => [r.source, r]))
  }

  /**
   * Fails a connector's documents in flight: queued events removed first, then the rows (spec 3.1 "connector
   * abort"). `only` limits it to some documents, `states` to some states.
   */
  async function failInFlight(connectorId: string, reason: string, opts: { only?: readonly string[]; states?: readonly DocStatus[] } = {}): Promise<number> {
    const states = opts.states ?? ['fetching', 'pending', 'running']
    const rows = await adapters.sql.query<{ doc_id: string; status: DocStatus }>(
      `SELECT doc_id, status FROM documents WHERE connector_id = $1::uuid AND status = ANY($2::text[])
         ${opts.only ? 'AND doc_id = ANY($3::text[])' : ''}`,
      opts.only ? [connectorId, states as DocStatus[], opts.only as string[]] : [connectorId, states as DocStatus[]])
    let n = 0
    for (const d of rows) {
      if (d.status === 'pending') await adapters.queue.removeByKey(INGEST_TOPIC, d.doc_id).catch(() => 0)
      // From any in-flight state, not only the one read: a worker may have claimed the document (pending ->
      // running) since, and a running document is failed too (its pipeline only finishes a running one).
      if (await docRepo.transition(d.doc_id, states, 'failed', { last_error: reason })) n++
    }
    return n
  }

  /**
   * One claimed run. Whatever fails before or after the source's own work still ends it: the row goes back to
   * idle with the error (never left `running` until the stale window), the heartbeat stops, the slot is freed.
   */
  async function run(c: ConnectorRow, runId: string, trigger: LastSync['trigger']): Promise<void> {
    const controller = new AbortController()
    const startedAt = new Date().toISOString()
    const counters: Counters = { fetched: 0, stored: 0, unchanged: 0, skipped: 0, failed: 0 }
    let heartbeat: NodeJS.Timeout | undefined
    let ended = false
    running.set(c.connector_id, controller)
    try {
      await runClaimed(c, runId, trigger, controller, counters, startedAt, (timer) => void (heartbeat = timer), () => void (ended = true))
    } catch (err) {
      if (ended) throw err
      const error = truncateError(`Sync failed: ${(err as Error).message}`)
      log.warn({ err, connector_id: c.connector_id }, 'sync failed before it could finish')
      const lastSync: LastSync = { run_id: runId, trigger, outcome: 'failed', started_at: startedAt, finished_at: new Date().toISOString(), ...counters, pruned: 0, truncated: false, fetch_ms: 0 }
      await repo.finish(c.connector_id, runId, { error, lastSync, synced: false })
    } finally {
      clearInterval(heartbeat)
      running.delete(c.connector_id)
    }
  }

  async function runClaimed(
    c: ConnectorRow, runId: string, trigger: LastSync['trigger'], controller: AbortController, counters: Counters, startedAt: string,
    onHeartbeat: (timer: NodeJS.Timeout) => void, onEnded: () => void,
  ): Promise<void> {
    const kept = new Set<string>()
    const queued: string[] = []
    let truncated = false
    let stopped: SyncStopped | null = null
    const config = await deps.configOf(c)
    const delayMs: number = config.request_delay_ms ?? 0
    const timeoutMs: number = (config.request_timeout_sec ?? 30) * 1000
    let lastRequestAt = 0

    /** Why the run may not go on: an abort, or a newer run that took over after the 30-minute window (or a reset). */
    const stopReason = async (): Promise<SyncStopped> => {
      if (closing) return new SyncStopped('shutdown')
      // An abort sets the flag (a newer run clears it when it starts); a takeover or a reset does not.
      const now = await repo.get(c.connector_id).catch(() => null)
      return new SyncStopped(now && !now.abort_requested ? 'superseded' : 'aborted')
    }
    // Requests in flight together share one read of the flag: each still reads it after it was decided on.
    let reading: Promise<boolean> | null = null
    const checkpoint = async () => {
      if (closing) throw new SyncStopped('shutdown')
      if (!controller.signal.aborted) {
        reading ??= repo.mayContinue(c.connector_id, runId).finally(() => void (reading = null))
        if (await reading) return
      }
      controller.abort()
      throw await stopReason()
    }
    const heartbeat = setInterval(() => {
      void repo.checkpoint(c.connector_id, runId).then((ok) => {
        if (!ok) controller.abort()
      }, (err) => log.warn({ err, connector_id: c.connector_id }, 'sync heartbeat failed'))
    }, deps.heartbeatMs)
    heartbeat.unref()
    onHeartbeat(heartbeat)

    const wait = async (ms: number) => {
      try {
        await sleep(ms, undefined, { signal: controller.signal })
      } catch {
        throw await stopReason()
      }
    }

    const known = await knownDocs(c)
    const ctx: SyncContext = {
      connector: c, config, settings, log, secrets: deps.secrets, counters, signal: controller.signal,
      async beforeRequest() {
        const gap = lastRequestAt + delayMs - Date.now()
        if (lastRequestAt > 0 && gap > 0) await wait(gap)
        await checkpoint()
        lastRequestAt = Date.now()
      },
      async fetch(url, init, opts) {
        await ctx.beforeRequest()
        // A controller per request joined to the run's by hand and released when the body is read: AbortSignal.any
        // would leave a dependant on the long-lived run signal per request (nodejs/node#55351), and a sync makes
        // thousands of requests. The timeout covers the body too.
        const request = new AbortController()
        const stop = () => request.abort(controller.signal.reason)
        controller.signal.addEventListener('abort', stop, { once: true })
        const timer = setTimeout(() => request.abort(new DOMException(`no answer within ${timeoutMs / 1000} s (request_timeout_sec)`, 'TimeoutError')), timeoutMs)
        try {
          const res = await deps.egress.get(url, { ...init, signal: request.signal })
          const want = opts.wantBody ? opts.wantBody(res.status, res.headers) : res.ok
          const body = want ? await readCapped(res, opts.maxBytes) : (res.discard(), null)
          return { status: res.status, ok: res.ok, headers: res.headers, body, tooLarge: want && body === null }
        } catch (err) {
          if (controller.signal.aborted) throw await stopReason()
          // The timeout's own text (no answer within N s), whichever stream noticed the abort first.
          if (request.signal.aborted) throw request.signal.reason
          throw err
        } finally {
          clearTimeout(timer)
          controller.signal.removeEventListener('abort', stop)
        }
      },
      known: (source) => known.get(source),
      keep: (source) => void kept.add(source),
      truncate: () => void (truncated = true),
      wait,
      async store(item) {
        kept.add(item.source)
        const prev = known.get(item.source)
        if (prev && prev.content_version === item.version && prev.status !== 'failed' && prev.status !== 'deleted') return 'unchanged'
        if (prev && isActive(prev.status)) return 'busy'
        await refuseFrozen(c)
        const outcome = await storeItem(c, runId, item, prev)
        if (outcome.docId) {
          queued.push(outcome.docId)
          known.set(item.source, { doc_id: outcome.docId, status: 'pending', content_version: item.version, storage_key: null })
        }
        return outcome.result
      },
    }

    let error: string | null = null
    let outcome: LastSync['outcome'] = 'completed'
    const fetchStarted = performance.now()
    try {
      await refuseFrozen(c)
      await deps.sources[c.source_type](ctx)
    } catch (err) {
      if (err instanceof SyncStopped) stopped = err
      else {
        error = err instanceof SyncFailure || err instanceof AppError ? err.message : `Sync failed: ${(err as Error).message}`
        if (!(err instanceof SyncFailure) && !(err instanceof AppError)) log.warn({ err, connector_id: c.connector_id }, 'sync failed')
      }
    }

    const fetchMs = Math.round(performance.now() - fetchStarted)
    let pruned = 0
    const waitFor = [...queued]
    try {
      if (!stopped && !error && !truncated) {
        await refuseFrozen(c)
        const gone = await prune(c, known, kept)
        pruned = gone.length
        waitFor.push(...gone)
      }
      // Spec: a sync stays running until the documents it queued are indexed or failed (within the window);
      // the deletions of pruned ones are waited for too, so the counts read at idle are final.
      if (!stopped && waitFor.length > 0) await waitForQueued(c, waitFor, checkpoint)
    } catch (err) {
      if (err instanceof SyncStopped) stopped = err
      else if (err instanceof TimedOut) outcome = 'timed_out'
      else error ??= err instanceof AppError ? err.message : `Sync failed: ${(err as Error).message}`
    } finally {
      clearInterval(heartbeat)
    }
    // From here on the run ends itself (or leaves the row to the newer run or to recovery).
    onEnded()

    if (stopped?.reason === 'superseded') {
      // The newer run owns the connector and the documents; this one leaves without a trace.
      log.info({ connector_id: c.connector_id, ...counters }, 'connector sync superseded by a newer run')
      return
    }
    if (stopped) outcome = stopped.reason === 'aborted' ? 'aborted' : 'interrupted'
    else if (error) outcome = 'failed'
    telemetry.metrics.connectorSyncs.inc({ source_type: c.source_type, outcome })
    const lastSync: LastSync = { run_id: runId, trigger, outcome, started_at: startedAt, finished_at: new Date().toISOString(), ...counters, pruned, truncated, fetch_ms: fetchMs }
    if (stopped?.reason === 'aborted') {
      // Whatever this run queued after the abort's own sweep (a page stored between checkpoint and abort).
      await failInFlight(c.connector_id, ABORTED, { only: queued }).catch((err) => log.warn({ err }, 'abort clean-up failed'))
      await repo.recordAborted(c.connector_id, lastSync).catch(() => {})
      log.info({ connector_id: c.connector_id, ...lastSync }, 'connector sync aborted')
      return
    }
    if (stopped) {
      // Shutdown: the row stays running with this run; recovery at the next start (or the window) ends it.
      return
    }
    const finished = await repo.finish(c.connector_id, runId, { error: error === null ? null : truncateError(error), lastSync, synced: error === null })
    log.info({ connector_id: c.connector_id, finished: finished !== null, ...lastSync, error }, 'connector sync finished')
  }

  class TimedOut extends Error {}

  async function waitForQueued(c: ConnectorRow, docIds: string[], checkpoint: () => Promise<void>): Promise<void> {
    const deadline = (c.sync_started_at ? Date.parse(c.sync_started_at) : Date.now()) + 30 * 60 * 1000
    for (;;) {
      const [{ n }] = await adapters.sql.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM documents WHERE doc_id = ANY($1::text[]) AND status IN ('fetching', 'pending', 'running', 'deleting')`, [docIds])
      if (n === 0) return
      if (Date.now() > deadline) throw new TimedOut()
      await checkpoint()
      await sleep(WAIT_POLL_MS)
    }
  }

  /** Documents gone from the source after a complete run: soft-deleted through the documents service. */
  async function prune(c: ConnectorRow, known: Map<string, KnownDoc>, kept: Set<string>): Promise<string[]> {
    const gone: string[] = []
    for (const [source, doc] of known) {
      if (kept.has(source) || doc.status === 'deleted' || isActive(doc.status)) continue
      try {
        await docs.delete(c.kb_id, doc.doc_id, false)
        gone.push(doc.doc_id)
      } catch (err) {
        log.warn({ err, doc_id: doc.doc_id, connector_id: c.connector_id }, 'could not prune a document gone from the source')
      }
    }
    return gone
  }

  /**
   * One document: the row moves to `fetching` (new row, or a stable one of the same source: same doc_id,
   * spec 3.1), the body goes to object storage, then `pending` with the new version and the run that fetched it,
   * then the queue.
   */
  async function storeItem(c: ConnectorRow, runId: string, item: SourceItem, prev: KnownDoc | undefined): Promise<{ result: StoreOutcome; docId?: string }> {
    const fields = { title: item.title, source_uri: item.sourceUri, doc_type: item.docType, content_type: item.contentType }
    let doc: DocumentRecord | null = null
    let oldKey = prev?.storage_key ?? null
    if (prev && prev.status !== 'deleted') doc = await docRepo.transition(prev.doc_id, [prev.status], 'fetching', fields)
    else {
      const added = await addNewDocument(c, item.source, async (r): Promise<{ doc: DocumentRecord | null; oldKey?: string | null } | { result: StoreOutcome }> => {
        if (prev) return { doc: await r.transition(prev.doc_id, ['deleted'], 'fetching', fields) }
        const inserted = await r.insert({
          doc_id: newDocId(), kb_id: c.kb_id, source: item.source, status: 'fetching', source_type: c.source_type,
          connector_id: c.connector_id, ...fields,
        })
        if (inserted) return { doc: inserted }
        // The source exists already in the KB (uploaded directly, or another connector): reuse its doc_id.
        const existing = await r.findBySource(c.kb_id, item.source)
        if (!existing || isActive(existing.status)) return { result: 'busy' }
        if (existing.content_version === item.version && existing.status !== 'failed' && existing.status !== 'deleted') return { result: 'unchanged' }
        return { doc: await r.transition(existing.doc_id, [existing.status], 'fetching', fields), oldKey: existing.storage_key }
      })
      if ('result' in added) return { result: added.result }
      doc = added.doc
      if (added.oldKey !== undefined) oldKey = added.oldKey
    }
    if (!doc) return { result: 'busy' }
    const key = documentKey(c.kb_id, doc.doc_id, item.fileName)
    let info
    try {
      info = await adapters.objects.put(key, item.body, { size: item.body.byteLength, contentType: item.contentType })
    } catch (err) {
      await docRepo.transition(doc.doc_id, ['fetching'], 'failed', { last_error: truncateError(`Object storage failed: ${(err as Error).message}`) })
      throw err
    }
    const moved = await docRepo.transition(doc.doc_id, ['fetching'], 'pending', {
      storage_key: key, file_size: info.size, etag: info.etag, content_version: item.version, last_error: null, duplicate_of: null,
      pending_op: 'ingest', run_id: runId,
    })
    if (!moved) {
      // Failed meanwhile (an abort): the stored body is not referenced by anything.
      if (key !== oldKey) await adapters.objects.delete([key]).catch(() => 0)
      return { result: 'busy' }
    }
    if (oldKey && oldKey !== key) await adapters.objects.delete([oldKey]).catch(() => 0)
    const event: DocEvent = { op: 'ingest', kb_id: c.kb_id, doc_id: doc.doc_id, force: true }
    try {
      await adapters.queue.enqueue(INGEST_TOPIC, doc.doc_id, event)
    } catch (err) {
      await docRepo.transition(doc.doc_id, ['pending'], 'failed', { last_error: truncateError(`Could not queue the document: ${(err as Error).message}`) })
      throw err
    }
    return { result: 'stored', docId: doc.doc_id }
  }

  /**
   * A document new to the KB (or back after its deletion): the documents service's ingest hooks and [ENT] document
   * cap, the check atomic with `add`. A refusal (403 `Document limit reached ...`) propagates out of the source and
   * ends the sync cleanly with its message as last_error; what was stored before it stays.
   */
  async function addNewDocument<R>(c: ConnectorRow, source: string, add: (r: DocRepo) => Promise<R>): Promise<R> {
    const max = await docs.beforeDocument(c.kb_id, source, null, 'connector')
    return docs.addDocument(c.kb_id, source, max, add)
  }

  return {
    run,
    failInFlight,
    /** Stops the runs of this process (shutdown): they stay `running` until recovery ends them. */
    async close(): Promise<void> {
      closing = true
      for (const a of running.values()) a.abort()
    },
    isRunningHere: (id: string) => running.has(id),
    /** Stops a local run at once (its abort flag is already set; this spares it the wait for a checkpoint). */
    stopLocal(id: string) {
      running.get(id)?.abort()
    },
  }
}

export type Engine = ReturnType<typeof createEngine>
