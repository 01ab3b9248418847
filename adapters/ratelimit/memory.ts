// In-process rate-limit counters (the embedded engines: one process serves every request). Windows that ended
// are swept every minute, so memory follows the users active in the last window, not every user ever seen.
import type { RateCounter, WindowCount } from './counter.ts'

const SWEEP_MS = 60_000

export function createMemoryRateCounter(now: () => number = Date.now): RateCounter {
  const windows = new Map<string, { count: number; resetAt: number }>()
  const sweep = setInterval(() => {
    const t = now()
    for (const [key, w] of windows) if (w.resetAt <= t) windows.delete(key)
  }, SWEEP_MS)
  sweep.unref()
  return {
    name: 'memory',
    async hit(key, weight, windowMs): Promise<WindowCount> {
      const t = now()
      let w = windows.get(key)
      if (!w || w.resetAt <= t) windows.set(key, (w = { count: 0, resetAt: t + windowMs }))
      w.count += weight
      return { count: w.count, ttlMs: w.resetAt - t }
    },
    async close() {
      clearInterval(sweep)
      windows.clear()
    },
  }
}
