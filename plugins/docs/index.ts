// Documents: the endpoints of spec 4.7, the ingest pipeline and the built-in worker.
import { createComputePool, type ComputePool } from '../../compute/pool.ts'
import { collectGarbage, trimHeap } from '../../kernel/allocator.ts'
import { definePlugin } from '../../kernel/plugin.ts'
import type { KbService } from '../kb/service.ts'
import { registerCheckRoute } from './check.ts'
import { createProcessor, type PipelineMetrics } from './pipeline.ts'
import { reconcile } from './reconcile.ts'
import { registerDocRoutes } from './routes.ts'
import { createDocsService, type DocsService, type IngestHook } from './service.ts'
import { createWorker, type Worker } from './worker.ts'

/** Documents after which the worker collects the heap once it goes idle (collectGarbage). */
const BURST_DOCUMENTS = 100
/** While documents are being ingested, glibc's free pages go back to the OS this often (trimHeap). */
const TRIM_EVERY_MS = 1000

export interface DocsPlugin {
  service: DocsService
  /** The built-in worker, or null when this process does not consume the queue. */
  worker: Worker | null
  metrics: PipelineMetrics
  /** This process's compute pool (the metrics plugin scrapes its stats). */
  pool: ComputePool
  addIngestHook(hook: IngestHook): void
}

export default definePlugin<DocsPlugin & { close(): Promise<void> }>({
  name: 'docs',
  dependsOn: ['kb'],
  async register(ctx) {
    const { settings, adapters } = ctx
    const kbs = ctx.use<KbService>('kb')
    const service = createDocsService(adapters, settings, kbs)
    registerDocRoutes(ctx, service)
    registerCheckRoute(ctx)

    const pool = createComputePool({
      maxThreads: settings.compute.max_threads || undefined,
      taskTimeoutMs: settings.compute.task_timeout_sec * 1000,
      maxOldGenerationSizeMb: settings.compute.worker_memory_mb,
    })
    const processor = createProcessor({ adapters, pool, repo: service.repo, settings, log: ctx.log, promoteDuplicates: service.promoteDuplicates })
    const consume = ctx.mode === 'worker' || settings.queue_worker.enabled
    let worker: Worker | null = null
    let trimmer: NodeJS.Timeout | undefined
    let startupCheck: Promise<void> = Promise.resolve()
    if (consume) {
      // The end of a bulk ingest: its garbage is collected at once instead of when V8 next gets to it (collectGarbage),
      // and what that freed goes back to the OS (trimHeap).
      const afterBurst = () => {
        const gc = collectGarbage()
        ctx.log.debug({ gc_ms: gc?.ms ?? null, compacted: gc?.compacted ?? null, trim_ms: trimHeap() }, 'bulk ingest over: heap collected')
      }
      // During one, glibc's free pages go back once a second, while documents keep being taken.
      let seen = processor.metrics.documents
      trimmer = setInterval(() => {
        if (processor.metrics.documents === seen) return
        seen = processor.metrics.documents
        trimHeap()
      }, TRIM_EVERY_MS)
      trimmer.unref()
      worker = createWorker({ queue: adapters.queue, repo: service.repo, processor, log: ctx.log, afterBurst }, {
        maxWorkers: settings.queue_worker.max_workers,
        maxPerPoll: settings.queue_poll.max_per_poll,
        pollIntervalMs: settings.queue_poll.poll_interval_sec * 1000,
        retryIntervalMs: settings.queue_poll.retry_interval_sec * 1000,
        leaseMs: Math.max(settings.compute.task_timeout_sec * 3, 300) * 1000,
        heartbeatMs: 10_000,
        staleMs: 60_000,
        burstDocuments: BURST_DOCUMENTS,
      })
      // A fail through this process's API stops the run at once; one through another process, at the worker's next watch.
      service.onLeftRunning((docId) => worker?.cancel(docId))
      // Search agrees with every status before the worker takes an event (plugins/docs/reconcile.ts). With the embedded
      // engines this process owns every store, and the pass is quick (the collections are in memory); on the services
      // it may scroll a whole Qdrant while other processes keep working, so it runs beside the worker (its repairs
      // lock what they change).
      startupCheck = reconcile({ adapters, log: ctx.log }, { repair: true }).then((r) => {
        const repaired = r.disagreements.length
        ctx.log[repaired > 0 ? 'warn' : 'info']({ kbs: r.kbs, documents: r.documents, points: r.points, repaired, ms: r.ms }, repaired > 0
          ? 'start-up check: search disagreed with document statuses, repaired'
          : 'start-up check: search agrees with every document status')
      }, (err) => ctx.log.error({ err }, 'start-up check failed'))
      if (adapters.queue.name === 'embedded') await startupCheck
      // One process owns an embedded queue and its data folder: whatever it finds active at start is orphaned.
      await worker.start({ recoverAll: adapters.queue.name === 'embedded' })
      ctx.log.info({ max_workers: settings.queue_worker.max_workers }, 'worker started')
    }
    return {
      service,
      worker,
      metrics: processor.metrics,
      pool,
      addIngestHook: service.addIngestHook,
      async close() {
        clearInterval(trimmer)
        await startupCheck
        await worker?.stop(settings.server.shutdown_grace_sec * 1000)
        await pool.close({ force: true })
      },
    }
  },
  close: (plugin) => plugin.close(),
})
