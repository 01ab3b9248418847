// Test-only task: each mode misbehaves in one way the pool must survive (tests in test/compute/pool.test.ts).
import type { TaskResult } from '../types.ts'

export type SelftestRequest =
  | { mode: 'echo'; value: string }
  | { mode: 'double'; data: Float32Array }
  | { mode: 'fail'; code: string; message: string }
  | { mode: 'throw'; message: string }
  | { mode: 'hang' }
  | { mode: 'sleep'; ms: number }
  | { mode: 'exit'; code: number }
  | { mode: 'oom' }
  | { mode: 'thread' }
  | { mode: 'globals' }
  | { mode: 'lastResultBytes' }
  | { mode: 'spin'; ms: number }
  | { mode: 'limits' }
  | { mode: 'typescript'; url: string }

export interface SelftestValue {
  echo?: string
  data?: Float32Array
  /** byteLength of the request's typed array as the worker saw it. */
  receivedBytes?: number
  threadId?: number
  /** The worker's V8 heap limits (worker_threads.resourceLimits). */
  limits?: { maxYoungGenerationSizeMb?: number; maxOldGenerationSizeMb?: number }
}

// The array the last 'double' call returned: detached (0 bytes) once the reply has moved it to the caller.
let lastResult: Float32Array | null = null

export default async function selftest(req: SelftestRequest): Promise<TaskResult<SelftestValue>> {
  switch (req.mode) {
    case 'echo':
      return { ok: true, value: { echo: req.value } }
    case 'double': {
      const out = new Float32Array(req.data.length)
      for (let i = 0; i < out.length; i++) out[i] = req.data[i] * 2
      lastResult = out
      return { ok: true, value: { data: out, receivedBytes: req.data.byteLength } }
    }
    case 'fail':
      return { ok: false, code: req.code, message: req.message }
    case 'throw':
      throw new Error(req.message)
    case 'hang':
      // A synchronous loop: only terminating the thread stops it.
      for (;;) Math.random()
    case 'sleep':
      await new Promise((r) => setTimeout(r, req.ms))
      return { ok: true, value: {} }
    case 'exit':
      process.exit(req.code)
    case 'oom': {
      const hold: number[][] = []
      for (;;) hold.push(new Array(1_000_000).fill(Math.random()))
    }
    case 'spin': {
      // CPU-bound work for about ms milliseconds of this thread's time.
      const end = performance.now() + req.ms
      let x = 0
      while (performance.now() < end) x += Math.sqrt(x + 1)
      return { ok: true, value: { receivedBytes: x > 0 ? 1 : 0 } }
    }
    case 'lastResultBytes':
      return { ok: true, value: { receivedBytes: lastResult?.byteLength ?? -1 } }
    case 'globals':
      // What compute/worker.mjs leaves of the web globals it changes.
      return { ok: true, value: { echo: typeof (globalThis as { DecompressionStream?: unknown }).DecompressionStream } }
    case 'thread': {
      const { threadId } = await import('node:worker_threads')
      return { ok: true, value: { threadId } }
    }
    case 'typescript':
      // Whether this thread imports TypeScript (tsx registered): compute/worker.mjs registers it only where needed.
      try {
        await import(req.url)
        return { ok: true, value: { echo: 'imported' } }
      } catch (err) {
        return { ok: true, value: { echo: (err as { code?: string }).code ?? String(err) } }
      }
    case 'limits': {
      const { resourceLimits } = await import('node:worker_threads')
      return { ok: true, value: { limits: { maxYoungGenerationSizeMb: resourceLimits.maxYoungGenerationSizeMb, maxOldGenerationSizeMb: resourceLimits.maxOldGenerationSizeMb } } }
    }
  }
}
