// The per-user rate limiter ([ENT], spec 8, notes.md): fixed windows per rule and user, 429 with Retry-After
// (whole seconds left in the window) and `Rate limit exceeded for '<rule>' requests`. When the counter store
// cannot be reached the request passes (fail open) and a warning is logged, at most once a minute.
import type { RateCounter } from '../../adapters/ratelimit/counter.ts'
import { AppError } from '../../kernel/errors.ts'
import type { Logger } from '../../kernel/log.ts'
import { telemetry } from '../../kernel/telemetry.ts'
import type { RuleSet } from './rules.ts'

const WARN_EVERY_MS = 60_000

export const rateLimited = (rule: string, retryAfterSec: number) =>
  new AppError('RATE_LIMITED', 429, `Rate limit exceeded for '${rule}' requests`, { headers: { 'retry-after': String(retryAfterSec) } })

export interface RateLimiter {
  /** Counts one request of `userId` to `path`; throws the 429 when it goes over its rule's limit. */
  check(userId: string, path: string): Promise<void>
}

export function createRateLimiter(rules: RuleSet, counter: RateCounter, log: Logger): RateLimiter {
  let lastWarn = 0
  let unchecked = 0
  return {
    async check(userId, path) {
      const rule = rules.ruleFor(path)
      if (!rule) return
      let window
      try {
        window = await counter.hit(`${rule.key}:${userId}`, rule.weight(path), rule.limit.windowMs)
      } catch (err) {
        unchecked++
        const now = Date.now()
        if (now - lastWarn >= WARN_EVERY_MS) {
          log.warn({ err, unchecked }, `rate limiting skipped: the counter store (${counter.name}) is unavailable; requests pass unchecked`)
          lastWarn = now
          unchecked = 0
        }
        return
      }
      if (window.count <= rule.limit.count) return
      telemetry.metrics.rateLimited.inc({ rule: rule.name })
      throw rateLimited(rule.name, Math.max(1, Math.ceil(window.ttlMs / 1000)))
    },
  }
}
