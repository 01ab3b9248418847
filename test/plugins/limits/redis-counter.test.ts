// The rate limiter's Redis counters on a real Redis: one script per hit (count and time left), one counter shared by
// every process pointing at the same Redis, and fail open (the request passes, one warning) when Redis is down.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:net'
import { Writable } from 'node:stream'
import { describe, test } from 'node:test'
import { createRedisRateCounter } from '../../../adapters/ratelimit/redis.ts'
import { resolveSettings } from '../../../kernel/config/load.ts'
import { createLogger } from '../../../kernel/log.ts'
import { createRateLimiter } from '../../../plugins/limits/rate-limit.ts'
import { compileRules } from '../../../plugins/limits/rules.ts'
import { serviceUrl, skipUnless } from '../../helpers/services.ts'
import { waitFor } from '../../helpers/wait.ts'

const rules = (limit: string) => compileRules(resolveSettings({ rate_limit: { enabled: true, default: limit } }, {}).settings.rate_limit)

/** A logger whose lines the test reads. */
function capturingLogger() {
  const lines: Record<string, unknown>[] = []
  const dest = new Writable({
    write(chunk, _enc, cb) {
      for (const line of String(chunk).split('\n')) if (line.trim()) lines.push(JSON.parse(line))
      cb()
    },
  })
  return { log: createLogger('INFO', dest), lines }
}

/** A port nothing listens on. */
async function deadPort(): Promise<number> {
  const srv = createServer()
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r))
  const { port } = srv.address() as { port: number }
  await new Promise<void>((r) => srv.close(() => r()))
  return port
}

describe('rate limit counters in Redis', { skip: skipUnless('redis') }, () => {
  const redis = () => new URL(serviceUrl('redis')!)
  const open = (prefix: string) => createRedisRateCounter({ host: redis().hostname, port: Number(redis().port || 6379), prefix })
  const ready = async (c: Awaited<ReturnType<typeof open>>) =>
    waitFor(() => c.hit(`warmup-${randomBytes(4).toString('hex')}`, 1, 1000).then(() => true, () => false), 'redis counter connected', 5000)

  test('one script per hit returns the window total and the time left; the window starts at the first hit', async () => {
    const c = await open(`qt-${randomBytes(4).toString('hex')}`)
    try {
      await ready(c)
      const first = await c.hit('search:alice', 1, 60_000)
      assert.equal(first.count, 1)
      assert.ok(first.ttlMs > 59_000 && first.ttlMs <= 60_000, `ttl ${first.ttlMs}`)
      const second = await c.hit('search:alice', 10, 60_000)
      assert.equal(second.count, 11)
      assert.ok(second.ttlMs <= first.ttlMs, 'the window is not extended by later hits')
      assert.equal((await c.hit('search:bob', 1, 60_000)).count, 1, 'per key')
    } finally {
      await c.close()
    }
  })

  test('two processes on the same Redis share the counters', async () => {
    const prefix = `qt-${randomBytes(4).toString('hex')}`
    const a = await open(prefix)
    const b = await open(prefix)
    try {
      await ready(a)
      await ready(b)
      const la = createRateLimiter(rules('2/minute'), a, createLogger('SILENT'))
      const lb = createRateLimiter(rules('2/minute'), b, createLogger('SILENT'))
      await la.check('carol', '/api/kb')
      await lb.check('carol', '/api/kb')
      await assert.rejects(la.check('carol', '/api/kb'), { status: 429, message: "Rate limit exceeded for 'default' requests" })
      await assert.rejects(lb.check('carol', '/api/kb'), { status: 429 })
    } finally {
      await a.close()
      await b.close()
    }
  })
})

describe('rate limiting with Redis down', () => {
  test('requests pass (fail open) and one warning is logged, not one per request', async () => {
    const c = await createRedisRateCounter({ host: '127.0.0.1', port: await deadPort(), commandTimeoutMs: 200 })
    const { log, lines } = capturingLogger()
    try {
      const limiter = createRateLimiter(rules('1/hour'), c, log)
      for (let i = 0; i < 20; i++) await limiter.check('dave', '/api/kb') // far over 1/hour: nothing is counted
      const warnings = lines.filter((l) => l.level === 'warn')
      assert.equal(warnings.length, 1, JSON.stringify(lines))
      assert.match(String(warnings[0].msg), /rate limiting skipped: the counter store \(redis\) is unavailable/)
    } finally {
      await c.close()
    }
  })
})
