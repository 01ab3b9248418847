// States read at each scrape, per app: documents by status, the ingest queue, the built-in worker, the
// pipeline's running totals and the compute pool. A source that cannot answer (database down) drops its own
// series and reports quarry_metrics_source_up 0: the scrape itself still succeeds, with everything else.
import { Counter, Gauge, Registry } from 'prom-client'
import type { Queue } from '../../adapters/ports.ts'
import type { ComputePoolStats } from '../../compute/pool.ts'
import type { Logger } from '../../kernel/log.ts'
import type { DocsPlugin } from '../docs/index.ts'
import { STAGES } from '../docs/pipeline.ts'
import { emptyCounts } from '../docs/repo.ts'
import { INGEST_TOPIC } from '../docs/service.ts'

/** Piscina's wait-time histogram (milliseconds), when the pool reports it. */
export interface PoolWait {
  mean: number
  p50: number
  p99: number
}

type PoolStats = ComputePoolStats & { waitMs?: PoolWait }
interface PoolSource {
  stats(): PoolStats
}

/** The docs plugin as a scrape sees it, with its compute pool when it exposes one. */
export type DocsSource = DocsPlugin & { pool?: PoolSource }

export function createScrapeMetrics(docs: DocsSource, queue: Queue, log: Logger) {
  const registry = new Registry()
  const registers = [registry]
  // A scrape starts every collect at once, in registration order, then awaits them all: this one is registered
  // last (below), so that the reads it reports on have all started when it awaits them.
  const reads = new Map<string, Promise<boolean>>()
  const sourceUp = new Gauge({
    name: 'quarry_metrics_source_up', help: '1 when the source answered this scrape, 0 when it failed (its series are left out).',
    labelNames: ['source'] as const, registers: [],
    async collect() {
      for (const [source, ok] of reads) this.set({ source }, (await ok) ? 1 : 0)
      reads.clear()
    },
  })
  const warned = new Set<string>()

  /** One source's read; a failure is logged once per outage, not at every scrape. */
  function read(source: string, fn: () => Promise<void>, ...owned: { reset(): void }[]): Promise<void> {
    const done = fn().then(
      () => {
        warned.delete(source)
        return true
      },
      (err: unknown) => {
        for (const m of owned) m.reset()
        if (!warned.has(source)) log.warn({ err: (err as Error).message, source }, 'metrics source failed')
        warned.add(source)
        return false
      },
    )
    reads.set(source, done)
    return done.then(() => undefined)
  }

  const documents: Gauge<'status'> = new Gauge({
    name: 'quarry_documents', help: 'Documents by status, over every KB.', labelNames: ['status'] as const, registers,
    collect: () => read('documents', async () => {
      const total = emptyCounts()
      for (const counts of (await docs.service.repo.counts()).values()) {
        for (const status in counts) total[status as keyof typeof total] += counts[status as keyof typeof counts]
      }
      for (const status in total) if (status !== 'total') documents.set({ status }, total[status as keyof typeof total])
    }, documents),
  })

  const queued: Gauge<'topic' | 'state'> = new Gauge({
    name: 'quarry_queue_messages', help: 'Queue messages by state: ready, delayed (waiting for a retry or a delay), inflight (reserved by a worker).',
    labelNames: ['topic', 'state'] as const, registers,
    collect: () => read('queue', async () => {
      const depth = await queue.depth(INGEST_TOPIC)
      for (const state of ['ready', 'delayed', 'inflight'] as const) queued.set({ topic: INGEST_TOPIC, state }, depth[state])
    }, queued),
  })

  if (docs.worker) {
    const worker = docs.worker
    new Gauge({
      name: 'quarry_worker_active_documents', help: 'Documents this process is ingesting or removing now.', registers,
      collect() {
        this.set(worker.active)
      },
    })
  }

  const { metrics } = docs
  const totals = (name: string, help: string, value: () => number) =>
    new Counter({ name, help, registers, collect() { this.reset(); this.inc(value()) } })
  new Counter({
    name: 'quarry_ingest_documents_total', help: 'Documents the pipeline finished in this process, by outcome.', labelNames: ['outcome'] as const, registers,
    collect() {
      this.reset()
      for (const outcome of ['indexed', 'failed', 'skipped'] as const) this.inc({ outcome }, metrics[outcome])
    },
  })
  new Counter({
    name: 'quarry_ingest_stage_seconds_total', help: 'Time spent in each ingest stage in this process, over every document.', labelNames: ['stage'] as const, registers,
    collect() {
      this.reset()
      for (const stage of STAGES) this.inc({ stage }, metrics.stageMs[stage] / 1000)
    },
  })
  totals('quarry_ingest_bytes_total', 'Bytes of original files read by the pipeline.', () => metrics.bytes)
  totals('quarry_ingest_chunks_total', 'Chunks produced by the pipeline.', () => metrics.chunks)

  if (docs.pool) registerPool(docs.pool, registers)
  registry.registerMetric(sourceUp)
  return { registry }
}

function registerPool(pool: PoolSource, registers: Registry[]): void {
  const gauge = (name: string, help: string, value: (s: PoolStats) => number) =>
    new Gauge({ name, help, registers, collect() { this.set(value(pool.stats())) } })
  gauge('quarry_compute_pool_utilization', 'Share of the compute pool\'s capacity used since it started (0..1).', (s) => s.utilization)
  gauge('quarry_compute_pool_threads', 'Worker threads alive.', (s) => s.threads)
  gauge('quarry_compute_pool_queued_tasks', 'Compute tasks waiting for a worker thread.', (s) => s.queueSize)
  gauge('quarry_compute_pool_running_tasks', 'Compute tasks running.', (s) => s.running)
  new Counter({
    name: 'quarry_compute_tasks_total', help: 'Compute tasks finished, by outcome (completed counts all; failed, timed_out, crashed are among them).',
    labelNames: ['outcome'] as const, registers,
    collect() {
      const s = pool.stats()
      this.reset()
      this.inc({ outcome: 'completed' }, s.completed)
      this.inc({ outcome: 'failed' }, s.failed)
      this.inc({ outcome: 'timed_out' }, s.timedOut)
      this.inc({ outcome: 'crashed' }, s.crashed)
    },
  })
  // Piscina's histogram reads NaN until a task has run: no sample rather than a NaN that looks like a figure.
  const waited = () => {
    const wait = pool.stats().waitMs
    return wait && Number.isFinite(wait.mean) ? wait : null
  }
  new Gauge({
    name: 'quarry_compute_queue_wait_seconds', help: 'Time compute tasks waited for a worker thread, since start: median and 99th percentile.',
    labelNames: ['quantile'] as const, registers,
    collect() {
      const wait = waited()
      this.reset()
      if (!wait) return
      this.set({ quantile: '0.5' }, wait.p50 / 1000)
      this.set({ quantile: '0.99' }, wait.p99 / 1000)
    },
  })
  new Gauge({
    name: 'quarry_compute_queue_wait_mean_seconds', help: 'Mean time compute tasks waited for a worker thread, since start.', registers,
    collect() {
      const wait = waited()
      this.reset()
      if (wait) this.set(wait.mean / 1000)
    },
  })
}
