// The queue consumer: up to max_workers documents at once, polling every poll_interval_sec (and woken at
// once when something is queued), at most max_per_poll events per poll. An event for a document that is
// already being processed goes to the delay queue for retry_interval_sec. Stale rows left by a crashed
// process (no heartbeat, or pending with no event queued) are re-queued or failed, at start and periodically.
// A document that leaves `running` while it is processed (failed through the API, in this process or another)
// has its run stopped: at once when this process is told (cancel), else at the next watch tick, which reads the
// status of the rows in progress; the pipeline honours the run's signal at its check points and cleans up.
import type { Queue, QueueMessage } from '../../adapters/ports.ts'
import type { Logger } from '../../kernel/log.ts'
import type { DocRepo, DocumentRecord, PendingOp } from './repo.ts'
import { INGEST_TOPIC, type DocEvent } from './service.ts'
import { truncateError } from './states.ts'
import { telemetry } from '../../kernel/telemetry.ts'

/** How often the recovery pass looks for pending documents whose event never reached the queue (and at start). */
const PENDING_CHECK_MS = 5 * 60_000

export interface WorkerOptions {
  maxWorkers: number
  maxPerPoll: number
  pollIntervalMs: number
  retryIntervalMs: number
  /** How long a reserved event stays invisible to other consumers. */
  leaseMs: number
  heartbeatMs: number
  /**
   * How often the rows in progress are read to notice one that left `running` in another process (a fail
   * through an API process); default 500 ms. One query per tick, and none while nothing is in progress.
   */
  watchMs?: number
  /**
   * A row in uploading/running/deleting whose heartbeat is older than this belongs to a dead process; so does a
   * row pending this long with no event in the queue.
   */
  staleMs: number
  /**
   * After this many documents, the worker calls `afterBurst` once it has had nothing to do for `burstIdleMs`
   * (default 1 s): the end of a bulk ingest, not a pause between two uploads.
   */
  burstDocuments?: number
  burstIdleMs?: number
}

/**
 * The abort reason of a run whose document left `running` while it was processed (a fail through the API): the
 * pipeline stops at its next check point, removes what it wrote and leaves the status alone. Any other abort
 * reason is a shutdown, after which the row stays running for recovery.
 */
export class RunStopped extends Error {
  constructor(readonly docId: string) {
    super(`document ${docId} left running while it was being processed`)
    this.name = 'RunStopped'
  }
}

/** The run was stopped because its document left `running` (not a shutdown). */
export const runStopped = (signal: AbortSignal): boolean => signal.aborted && signal.reason instanceof RunStopped

export interface Processor {
  /** doc comes from the claim, with its KB's settings overrides. */
  ingest(doc: DocumentRecord & { kb_overrides: Record<string, unknown> | null }, event: Extract<DocEvent, { op: 'ingest' }>, signal: AbortSignal): Promise<void>
  remove(doc: DocumentRecord, hard: boolean): Promise<void>
}

export interface Worker {
  start(opts?: { recoverAll?: boolean }): Promise<void>
  /** Stops taking events and waits for the documents in progress (at most graceMs). */
  stop(graceMs: number): Promise<void>
  /** Resolves when no event is queued or in progress (tests and benchmarks). */
  idle(): Promise<void>
  /**
   * Stops the run of a document that left `running` (a fail through the API of this process): its pipeline stops at
   * its next check point and frees its slot. False when this process is not processing it.
   */
  cancel(docId: string): boolean
  readonly active: number
}

/**
 * Active documents at or below which the worker takes more: it refills its slots in batches of about half of
 * max_workers instead of one as each frees. A batch's claims go out as one statement (repo.claimIngest), and on the
 * embedded store each statement costs the metadata thread about a millisecond of CPU: one claim per document was
 * 0.88 statements per document in a 1,000-document ingest. The documents still waiting keep the compute pool busy
 * while the batch is claimed, and a lone upload, with nothing active, is taken at once.
 */
export const refillBelow = (maxWorkers: number): number => maxWorkers - Math.ceil(maxWorkers / 2)

export function createWorker(deps: { queue: Queue; repo: DocRepo; processor: Processor; log: Logger; afterBurst?: () => void }, opts: WorkerOptions): Worker {
  const { queue, repo, processor, log } = deps
  const refillAt = refillBelow(opts.maxWorkers)
  /** Runs in progress: their abort, and the claim's process_started_at, which tells this run from a later one. */
  const inProgress = new Map<string, { abort: AbortController; startedAt: string | null }>()
  let running = false
  let wake: (() => void) | null = null
  let loop: Promise<void> | null = null
  let unsubscribe: (() => void) | null = null
  let unsubscribeLoss: (() => void) | null = null
  let recoveryTimer: NodeJS.Timeout | null = null
  let heartbeatTimer: NodeJS.Timeout | null = null
  let watchTimer: NodeJS.Timeout | null = null
  let watching = false
  const idleWaiters: (() => void)[] = []
  let lastPendingCheck = -Infinity
  // Documents handled since afterBurst last ran, and its timer while the worker is idle.
  let handled = 0
  let burstTimer: NodeJS.Timeout | null = null
  const cancelBurstEnd = () => {
    if (burstTimer !== null) clearTimeout(burstTimer)
    burstTimer = null
  }
  const armBurstEnd = () => {
    if (deps.afterBurst === undefined || burstTimer !== null || handled < (opts.burstDocuments ?? Infinity)) return
    burstTimer = setTimeout(() => {
      burstTimer = null
      handled = 0
      deps.afterBurst!()
    }, opts.burstIdleMs ?? 1000)
    burstTimer.unref()
  }

  const nudge = () => {
    const w = wake
    wake = null
    w?.()
  }

  /** Why a claim failed: defer while someone else holds the document, drop the event when it is stale. */
  async function release(msg: QueueMessage<DocEvent>): Promise<void> {
    const doc = await repo.getById(msg.payload.doc_id)
    if (doc && (doc.status === 'running' || doc.status === 'deleting' || doc.status === 'uploading')) {
      return queue.defer(INGEST_TOPIC, msg.id, opts.retryIntervalMs)
    }
    // Gone, or failed/indexed/deleted meanwhile; a pending document with another event queued is that event's.
    return queue.ack(INGEST_TOPIC, msg.id)
  }

  async function handle(msg: QueueMessage<DocEvent>): Promise<void> {
    const event = msg.payload
    if (event.op === 'delete') {
      // The claim is the compare-and-set itself: no read before it on the common path.
      const claimed = await repo.transition(event.doc_id, ['pending'], 'deleting')
      if (!claimed) return release(msg)
      try {
        await processor.remove(claimed, event.hard)
      } catch (err) {
        log.error({ err, doc_id: event.doc_id }, 'delete failed')
        await repo.transition(event.doc_id, ['deleting'], 'failed', { last_error: truncateError(`Delete failed: ${(err as Error).message}`) })
      }
      return queue.ack(INGEST_TOPIC, msg.id)
    }

    // A stopped run of the same document still removing what it wrote: the new run waits until it is done.
    if (inProgress.has(event.doc_id)) return queue.defer(INGEST_TOPIC, msg.id, opts.retryIntervalMs)
    const claimed = await repo.claimIngest(event.doc_id)
    if (!claimed) return release(msg)
    const abort = new AbortController()
    inProgress.set(event.doc_id, { abort, startedAt: claimed.process_started_at })
    try {
      await telemetry.span('ingest.document', () => processor.ingest(claimed, event, abort.signal), { 'quarry.kb_id': claimed.kb_id, 'quarry.doc_id': claimed.doc_id })
    } catch (err) {
      // The processor records specific failures itself; this catches what escaped it.
      if (!abort.signal.aborted) {
        log.error({ err, doc_id: event.doc_id }, 'ingest failed')
        await repo.transition(event.doc_id, ['running'], 'failed', { last_error: truncateError((err as Error).message || 'Processing failed') })
      }
    } finally {
      inProgress.delete(event.doc_id)
    }
    return queue.ack(INGEST_TOPIC, msg.id)
  }

  async function poll(): Promise<void> {
    const active = new Set<Promise<void>>()
    while (running) {
      const room = active.size <= refillAt ? Math.min(opts.maxPerPoll, opts.maxWorkers - active.size) : 0
      let batch: QueueMessage<DocEvent>[] = []
      if (room > 0) {
        try {
          batch = await queue.reserve<DocEvent>(INGEST_TOPIC, room, opts.leaseMs)
        } catch (err) {
          log.warn({ err }, 'queue poll failed; retrying')
        }
      }
      if (batch.length > 0) cancelBurstEnd()
      handled += batch.length
      for (const msg of batch) {
        // A failure outside the run (the claim or the ack met PostgreSQL or Redis down): the event comes back after the
        // retry interval instead of its lease, which outlasts a restart by minutes.
        const p = handle(msg).catch((err) => {
          log.error({ err, event: msg.payload }, 'event handling failed; the event is retried')
          return queue.defer(INGEST_TOPIC, msg.id, opts.retryIntervalMs).catch(() => {})
        })
        active.add(p)
        void p.finally(() => {
          active.delete(p)
          nudge()
        })
      }
      if (batch.length === 0 || active.size > refillAt) {
        // Stopped while the queue was asked (stop's nudge found no wait to end): no wait of a whole poll interval.
        if (!running) break
        if (active.size === 0 && batch.length === 0) {
          armBurstEnd()
          await notifyIfIdle()
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, opts.pollIntervalMs)
          wake = () => {
            clearTimeout(timer)
            resolve()
          }
        })
      }
    }
    await Promise.allSettled([...active])
    cancelBurstEnd()
  }

  async function notifyIfIdle(): Promise<void> {
    if (idleWaiters.length === 0) return
    const depth = await queue.depth(INGEST_TOPIC).catch(() => null)
    if (depth && depth.ready + depth.delayed + depth.inflight === 0) for (const w of idleWaiters.splice(0)) w()
  }

  function cancel(docId: string): boolean {
    const run = inProgress.get(docId)
    if (!run) return false
    if (!run.abort.signal.aborted) run.abort.abort(new RunStopped(docId))
    return true
  }

  /** Stops the runs whose rows left `running`, or were claimed again by a later run (a fail, then a re-upload). */
  async function watch(): Promise<void> {
    if (watching || inProgress.size === 0) return
    watching = true
    try {
      const runs = [...inProgress].filter(([, r]) => !r.abort.signal.aborted).map(([docId, r]) => ({ docId, startedAt: r.startedAt }))
      if (runs.length === 0) return
      for (const docId of await repo.leftRunning(runs)) cancel(docId)
    } finally {
      watching = false
    }
  }

  /**
   * Rows stuck with no live process behind them: uploading, running or deleting with no heartbeat, and pending
   * with no event queued (a process killed between writing the row and queueing its event).
   */
  async function recover(staleMs: number): Promise<void> {
    for (const doc of await repo.stale(['uploading', 'running', 'deleting'], staleMs)) {
      if (inProgress.has(doc.doc_id)) continue
      if (doc.status === 'uploading') {
        await repo.transition(doc.doc_id, ['uploading'], 'failed', { last_error: 'Upload interrupted: the service stopped while the file was being stored; upload it again' })
        log.warn({ doc_id: doc.doc_id }, 'interrupted upload marked failed')
        continue
      }
      const op = doc.status === 'running' ? 'ingest' : (await repo.pendingOp(doc.doc_id)) === 'delete_hard' ? 'delete_hard' : 'delete'
      if (await requeue(doc, op)) log.warn({ doc_id: doc.doc_id, was: doc.status }, 'document left behind by a stopped process re-queued')
    }
    // Asking the queue reads every message of the topic (Redis: one pass over its hash, in every worker process),
    // and a lost event takes a crash at one exact moment: at start, then at most every PENDING_CHECK_MS.
    const now = Date.now()
    if (now - lastPendingCheck < PENDING_CHECK_MS) return
    lastPendingCheck = now
    await requeueLost(staleMs)
  }

  /** Queues again the documents pending for at least minAgeMs whose event the queue does not hold. */
  async function requeueLost(minAgeMs: number): Promise<void> {
    const pending = await repo.pendingSince(minAgeMs)
    if (pending.length === 0) return
    const queued = await queue.present(INGEST_TOPIC, pending.map((d) => d.doc_id))
    for (const doc of pending) {
      if (queued.has(doc.doc_id)) continue
      // Pending -> pending: only if no one moved it since (a worker that got its event after all, a delete).
      if (await requeue(doc, doc.pending_op ?? 'ingest')) log.warn({ doc_id: doc.doc_id }, 'pending document with no queued event re-queued')
    }
  }

  /** Moves the row to pending (if it is still as read) and queues the event of op; false if it moved meanwhile. */
  async function requeue(doc: DocumentRecord, op: PendingOp): Promise<boolean> {
    const moved = await repo.transition(doc.doc_id, [doc.status], 'pending', { pending_op: op })
    if (!moved) return false
    const event: DocEvent = op === 'ingest'
      ? { op: 'ingest', kb_id: doc.kb_id, doc_id: doc.doc_id, force: true }
      : { op: 'delete', kb_id: doc.kb_id, doc_id: doc.doc_id, hard: op === 'delete_hard' }
    await queue.enqueue(INGEST_TOPIC, doc.doc_id, event)
    return true
  }

  return {
    get active() {
      return inProgress.size
    },
    async start(startOpts = {}) {
      if (running) return
      running = true
      await recover(startOpts.recoverAll ? 0 : opts.staleMs).catch((err) => log.error({ err }, 'start-up recovery failed'))
      unsubscribe = queue.subscribe(INGEST_TOPIC, nudge)
      // The queue's server came back without its messages (a Redis restarted without persistence): every pending
      // document whatever its age is looked for at once (an event queued twice is harmless: the claim is a
      // compare-and-set, and the second event is dropped).
      unsubscribeLoss = queue.onLoss?.(() => {
        log.warn('the queue may have lost messages (its server restarted): looking for pending documents without an event')
        void requeueLost(0).then(nudge, (err) => log.warn({ err }, 'looking for lost events failed'))
      }) ?? null
      heartbeatTimer = setInterval(() => {
        void repo.heartbeat([...inProgress.keys()]).catch((err) => log.warn({ err }, 'heartbeat failed'))
      }, opts.heartbeatMs)
      heartbeatTimer.unref()
      watchTimer = setInterval(() => {
        void watch().catch((err) => log.warn({ err }, 'watch of the documents in progress failed'))
      }, opts.watchMs ?? 500)
      watchTimer.unref()
      recoveryTimer = setInterval(() => {
        void recover(opts.staleMs).catch((err) => log.warn({ err }, 'recovery pass failed'))
      }, Math.max(opts.staleMs / 2, 1000))
      recoveryTimer.unref()
      loop = poll()
    },
    async stop(graceMs) {
      if (!running) return
      running = false
      unsubscribe?.()
      unsubscribeLoss?.()
      if (heartbeatTimer) clearInterval(heartbeatTimer)
      if (watchTimer) clearInterval(watchTimer)
      if (recoveryTimer) clearInterval(recoveryTimer)
      nudge()
      const timeout = new Promise<void>((r) => setTimeout(r, graceMs).unref())
      await Promise.race([loop, timeout])
      for (const r of inProgress.values()) r.abort.abort()
    },
    idle() {
      return new Promise<void>((resolve) => {
        idleWaiters.push(resolve)
        nudge()
      })
    },
    cancel,
  }
}
