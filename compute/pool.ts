// The compute pool: one Piscina pool whose workers run the CPU-heavy tasks (parse, chunk, dedup, sparse) off
// the event loop. Every call either returns its task's value or fails alone with an AppError; a task that
// throws, hangs, exits its thread or runs out of memory costs one call and at most one worker, which Piscina
// replaces, and the next call is served as usual.
import os from 'node:os'
import { WORKER_YOUNG_GENERATION_MB } from '../kernel/allocator.ts'
import { AppError } from '../kernel/errors.ts'
import { compiledTasks } from '../kernel/compiled.mjs'
import { isTaskStartedMessage, TASK_NAME } from './protocol.ts'
import type { TaskEnvelope, TaskName, TaskRequest, TaskValue, WorkerReply } from './protocol.ts'
import { Piscina } from 'piscina'

export interface ComputePoolOptions {
  /**
   * Default: one per core but one, at least one. The main thread (HTTP, the pipeline, the vector index) and
   * the metadata thread keep a core busy during a bulk ingest: with 2 cores, a second worker made ingest no
   * faster (bench/ingest.bench.ts, 600 documents: 81.5 and 81.7 documents/s with 2 workers, 80.2 and 84.8
   * with 1) and cost 110-160 MB of peak RSS.
   */
  maxThreads?: number
  /** Workers kept warm when idle. Default: half the cores, at least 1, at most maxThreads. */
  minThreads?: number
  /** Running time allowed to one call (queue time excluded) before its worker is terminated. */
  taskTimeoutMs?: number
  /**
   * V8 old-generation cap of each worker; a task above it ends its worker, not the process. Default 4096 MB,
   * V8's own default on a machine with memory to spare: V8 collects more often under a lower cap (it grows the
   * heap by a smaller factor), and pdf.js parsing ran 10-25 % slower in two threads at 512 or 1024 MB.
   */
  maxOldGenerationSizeMb?: number
  /** V8 young generation of each worker, MB. Default WORKER_YOUNG_GENERATION_MB (kernel/allocator.ts says why). */
  maxYoungGenerationSizeMb?: number
  /** Workers above minThreads end after this long idle. */
  idleTimeoutMs?: number
  /**
   * The folder (file URL) the workers import compiled tasks from. Default: compiledTasks() (kernel/compiled.mjs), built
   * or reused at creation. null: the workers register tsx and import the TypeScript sources.
   */
  compiledTasks?: string | null
}

export interface RunOptions {
  /** Typed arrays (or buffers) of the request to move into the worker; the caller's views are detached. */
  transfer?: readonly (ArrayBuffer | ArrayBufferView)[]
  /** Overrides taskTimeoutMs for this call. */
  timeoutMs?: number
  /** Aborting it removes a queued call, or terminates the worker running it. */
  signal?: AbortSignal
}

export interface ComputePoolStats {
  threads: number
  minThreads: number
  maxThreads: number
  /** Calls waiting for a worker. */
  queueSize: number
  /** Calls a worker has started and not finished. */
  running: number
  /** Calls finished, whatever their outcome. */
  completed: number
  /** Calls whose task answered ok:false or threw. */
  failed: number
  timedOut: number
  crashed: number
  /** Share of the pool's capacity used since it started (0..1). */
  utilization: number
  /**
   * Time calls waited for a worker since start, in ms (Piscina's wait-time histogram; its mean is NaN before the first
   * call).
   */
  waitMs: { mean: number; p50: number; p99: number }
  /**
   * Time calls took from the hand-off to a worker to its answer since start, in ms (Piscina's run-time histogram; its
   * mean is NaN before the first call): the task's work and the worker's waits for a core.
   */
  runMs: { mean: number; p50: number; p99: number }
}

export interface ComputePool {
  /** Where the workers import the tasks from: the compiled folder, or null for the sources through tsx. */
  readonly compiledTasks: string | null
  run<K extends TaskName>(name: K, request: TaskRequest<K>, opts?: RunOptions): Promise<TaskValue<K>>
  stats(): ComputePoolStats
  /** Refuses new calls, waits for the calls already made, then ends the workers. force: fail them instead. */
  close(opts?: { force?: boolean }): Promise<void>
}

export const COMPUTE_TASK_FAILED = 'COMPUTE_TASK_FAILED'
export const COMPUTE_TIMEOUT = 'COMPUTE_TIMEOUT'
export const COMPUTE_WORKER_CRASHED = 'COMPUTE_WORKER_CRASHED'
export const COMPUTE_ABORTED = 'COMPUTE_ABORTED'
export const COMPUTE_CLOSED = 'COMPUTE_CLOSED'

const WORKER_ENTRY = new URL('./worker.cjs', import.meta.url).href

interface ResolvedOptions {
  maxThreads: number
  minThreads: number
  taskTimeoutMs: number
  maxOldGenerationSizeMb: number
  maxYoungGenerationSizeMb: number
  idleTimeoutMs: number
}

function resolveOptions(opts: ComputePoolOptions): ResolvedOptions {
  const cores = os.availableParallelism()
  const positiveInt = (name: string, v: number, min: number) => {
    if (!Number.isInteger(v) || v < min) throw new AppError('COMPUTE_CONFIG', 500, `compute pool: ${name} must be an integer >= ${min}, got ${v}`)
    return v
  }
  const maxThreads = positiveInt('maxThreads', opts.maxThreads ?? Math.max(1, cores - 1), 1)
  const minThreads = positiveInt('minThreads', opts.minThreads ?? Math.min(maxThreads, Math.max(1, Math.floor(cores / 2))), 0)
  if (minThreads > maxThreads) {
    throw new AppError('COMPUTE_CONFIG', 500, `compute pool: minThreads (${minThreads}) must not exceed maxThreads (${maxThreads})`)
  }
  return {
    maxThreads,
    minThreads,
    taskTimeoutMs: positiveInt('taskTimeoutMs', opts.taskTimeoutMs ?? 60_000, 1),
    maxOldGenerationSizeMb: positiveInt('maxOldGenerationSizeMb', opts.maxOldGenerationSizeMb ?? 4096, 16),
    maxYoungGenerationSizeMb: positiveInt('maxYoungGenerationSizeMb', opts.maxYoungGenerationSizeMb ?? WORKER_YOUNG_GENERATION_MB, 2),
    idleTimeoutMs: positiveInt('idleTimeoutMs', opts.idleTimeoutMs ?? 60_000, 1),
  }
}

/** ArrayBuffers to move: only views that own their whole buffer (moving a slice would detach its neighbours). */
function transferList(items: RunOptions['transfer']): ArrayBuffer[] {
  const out = new Set<ArrayBuffer>()
  for (const item of items ?? []) {
    if (item instanceof ArrayBuffer) out.add(item)
    else if (item.buffer instanceof ArrayBuffer && item.byteOffset === 0 && item.byteLength === item.buffer.byteLength) out.add(item.buffer)
  }
  return [...out]
}

export function createComputePool(opts: ComputePoolOptions = {}): ComputePool {
  const o = resolveOptions(opts)
  const compiled = opts.compiledTasks !== undefined ? opts.compiledTasks : compiledTasks()
  const piscina = new Piscina({
    filename: WORKER_ENTRY,
    workerData: { compiledTasks: compiled },
    minThreads: o.minThreads,
    maxThreads: o.maxThreads,
    idleTimeout: o.idleTimeoutMs,
    // The worker entry registers tsx itself where it needs it; inheriting the parent's flags (--import tsx,
    // --test, loaders of tsx's CLI) would register it twice, or where no thread needs it.
    execArgv: [],
    resourceLimits: { maxOldGenerationSizeMb: o.maxOldGenerationSizeMb, maxYoungGenerationSizeMb: o.maxYoungGenerationSizeMb },
  })

  let seq = 0
  let closing = false
  let running = 0
  const counts = { failed: 0, timedOut: 0, crashed: 0 }
  const onStarted = new Map<number, () => void>()
  const inflight = new Set<Promise<unknown>>()

  piscina.on('message', (m: unknown) => {
    if (isTaskStartedMessage(m)) onStarted.get(m.quarryTaskStarted)?.()
  })
  // A worker that fails with no call on it (an error after its task answered) is replaced by Piscina; the
  // listener keeps that from becoming an unhandled 'error' event that would end the process.
  piscina.on('error', () => {
    counts.crashed++
  })

  async function call<K extends TaskName>(name: K, request: TaskRequest<K>, ro: RunOptions): Promise<TaskValue<K>> {
    if (!TASK_NAME.test(name)) throw new AppError(COMPUTE_TASK_FAILED, 500, `invalid compute task name ${JSON.stringify(name)}`)
    const timeoutMs = ro.timeoutMs ?? o.taskTimeoutMs
    const id = ++seq
    const ac = new AbortController()
    const callerSignal = ro.signal
    let timer: NodeJS.Timeout | undefined
    let timedOut = false
    let started = false
    onStarted.set(id, () => {
      started = true
      running++
      timer = setTimeout(() => {
        timedOut = true
        ac.abort(new Error('timeout'))
      }, timeoutMs)
    })
    const onCallerAbort = () => ac.abort(callerSignal?.reason)
    if (callerSignal?.aborted) throw new AppError(COMPUTE_ABORTED, 503, `compute task '${name}' aborted before it started`)
    callerSignal?.addEventListener('abort', onCallerAbort, { once: true })

    const envelope: TaskEnvelope = { id, task: name, request }
    let reply: WorkerReply
    try {
      reply = await piscina.run(envelope, { signal: ac.signal, transferList: transferList(ro.transfer) as never })
    } catch (err) {
      throw classify(name, err, { timedOut, timeoutMs, aborted: callerSignal?.aborted === true, started })
    } finally {
      clearTimeout(timer)
      onStarted.delete(id)
      if (started) running--
      callerSignal?.removeEventListener('abort', onCallerAbort)
    }
    if ('thrown' in reply) {
      counts.failed++
      throw new AppError(COMPUTE_TASK_FAILED, 500, `compute task '${name}' failed: ${reply.thrown}`)
    }
    if (!reply.result.ok) {
      counts.failed++
      // The task's own code and message: a parse failure reads as the document's last_error.
      throw new AppError(reply.result.code, 422, reply.result.message)
    }
    return reply.result.value as TaskValue<K>
  }

  function classify(name: string, err: unknown, s: { timedOut: boolean; timeoutMs: number; aborted: boolean; started: boolean }): AppError {
    const e = err as { message?: string; code?: string; name?: string }
    if (s.timedOut) {
      counts.timedOut++
      return new AppError(COMPUTE_TIMEOUT, 500, `compute task '${name}' timed out after ${s.timeoutMs} ms; its worker was terminated`, { cause: err })
    }
    if (s.aborted) {
      return new AppError(COMPUTE_ABORTED, 503, `compute task '${name}' aborted ${s.started ? 'while running' : 'while queued'}`, { cause: err })
    }
    if (closing && e.name === 'AbortError') {
      return new AppError(COMPUTE_CLOSED, 503, `compute task '${name}' not run: the compute pool is closing`, { cause: err })
    }
    if (e.code === 'ERR_WORKER_OUT_OF_MEMORY') {
      counts.crashed++
      return new AppError(COMPUTE_WORKER_CRASHED, 500, `compute task '${name}' ran out of memory (worker heap cap ${o.maxOldGenerationSizeMb} MB); its worker was replaced`, { cause: err })
    }
    if (e.name === 'DataCloneError') {
      counts.failed++
      return new AppError(COMPUTE_TASK_FAILED, 500, `compute task '${name}' failed: its request or result cannot cross threads (${e.message})`, { cause: err })
    }
    counts.crashed++
    return new AppError(COMPUTE_WORKER_CRASHED, 500, `compute task '${name}' crashed its worker (${e.message ?? String(err)}); the worker was replaced`, { cause: err })
  }

  return {
    compiledTasks: compiled,
    run(name, request, ro = {}) {
      if (closing) return Promise.reject(new AppError(COMPUTE_CLOSED, 503, `compute task '${name}' not run: the compute pool is closed`))
      const p = call(name, request, ro)
      inflight.add(p)
      const forget = () => inflight.delete(p)
      p.then(forget, forget)
      return p
    },
    stats() {
      const wait = piscina.histogram.waitTime
      const run = piscina.histogram.runTime
      return {
        threads: piscina.threads.length,
        minThreads: o.minThreads,
        maxThreads: o.maxThreads,
        queueSize: piscina.queueSize,
        running,
        completed: piscina.completed,
        failed: counts.failed,
        timedOut: counts.timedOut,
        crashed: counts.crashed,
        utilization: piscina.utilization,
        waitMs: { mean: wait.mean, p50: wait.p50, p99: wait.p99 },
        runMs: { mean: run.mean, p50: run.p50, p99: run.p99 },
      }
    },
    async close({ force = false } = {}) {
      closing = true
      if (force) {
        await piscina.destroy()
        return
      }
      await Promise.allSettled([...inflight])
      await piscina.close()
    },
  }
}
