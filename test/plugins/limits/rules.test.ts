// Rate-limit rules and the limiter on the in-process counter (spec 8, notes.md): `*` matches one segment, the
// first matching rule wins, weights, units, the default rule, exempt paths, fixed windows, the 429's text and
// Retry-After. The Redis counter and the HTTP wiring are tested in redis-counter.test.ts and rate-limit.suite.ts.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { createMemoryRateCounter } from '../../../adapters/ratelimit/memory.ts'
import { resolveSettings } from '../../../kernel/config/load.ts'
import { AppError } from '../../../kernel/errors.ts'
import { createLogger } from '../../../kernel/log.ts'
import { createRateLimiter } from '../../../plugins/limits/rate-limit.ts'
import { compileRules, parseLimit, pathPattern } from '../../../plugins/limits/rules.ts'

const cfg = (rateLimit: Record<string, unknown>) => resolveSettings({ rate_limit: { enabled: true, ...rateLimit } }, {}).settings.rate_limit

const RULES = cfg({
  rules: [
    { name: 'search', paths: ['/api/search'], limit: '10/second' },
    { name: 'upload', paths: ['/api/kb/*/docs/upload', '/api/kb/*/docs/upload/batch'], limit: '30/minute', weights: { '/api/kb/*/docs/upload/batch': 10 } },
    { name: 'kb-docs', paths: ['/api/kb/*/docs/*'], limit: '100/hour' },
  ],
  default: '120/minute',
})

describe('rate limit rules', () => {
  test('limits: count per second, minute or hour', () => {
    assert.deepEqual(parseLimit('10/second'), { count: 10, windowMs: 1000 })
    assert.deepEqual(parseLimit('30/minute'), { count: 30, windowMs: 60_000 })
    assert.deepEqual(parseLimit('5/hour'), { count: 5, windowMs: 3_600_000 })
    assert.throws(() => parseLimit('5/day'), /not <count>\/<second\|minute\|hour>/)
  })

  test('settings refuse a limit of another form', () => {
    assert.throws(() => cfg({ default: '10 per minute' }))
    assert.throws(() => cfg({ rules: [{ name: 'x', paths: ['/a'], limit: '1/day' }] }))
  })

  test('`*` matches exactly one path segment; other characters are literal', () => {
    const re = pathPattern('/api/kb/*/docs/upload')
    assert.ok(re.test('/api/kb/handbook/docs/upload'))
    assert.ok(!re.test('/api/kb/a/b/docs/upload'), 'two segments')
    assert.ok(!re.test('/api/kb//docs/upload'), 'an empty segment')
    assert.ok(!re.test('/api/kb/handbook/docs/upload/batch'), 'anchored at the end')
    assert.ok(!re.test('/x/api/kb/handbook/docs/upload'), 'anchored at the start')
    assert.ok(pathPattern('/api/v1.0').test('/api/v1.0') && !pathPattern('/api/v1.0').test('/api/v1x0'), 'a dot is a dot')
  })

  test('the first matching rule wins; weights apply within the rule; unmatched paths take the default', () => {
    const rules = compileRules(RULES)
    const batch = rules.ruleFor('/api/kb/hr/docs/upload/batch')!
    assert.equal(batch.name, 'upload', 'upload is listed before kb-docs, which matches the single upload too')
    assert.equal(batch.weight('/api/kb/hr/docs/upload/batch'), 10)
    const single = rules.ruleFor('/api/kb/hr/docs/upload')!
    assert.equal(single.name, 'upload')
    assert.equal(single.weight('/api/kb/hr/docs/upload'), 1)
    assert.equal(single.key, batch.key, "a rule's paths share one counter")
    assert.equal(rules.ruleFor('/api/kb/hr/docs/abc')!.name, 'kb-docs')
    assert.deepEqual(rules.ruleFor('/api/search')!.limit, { count: 10, windowMs: 1000 })
    const other = rules.ruleFor('/api/kb/hr')!
    assert.equal(other.name, 'default')
    assert.deepEqual(other.limit, { count: 120, windowMs: 60_000 })
    assert.equal(rules.ruleFor('/api/search/')!.name, 'search', 'a trailing slash is ignored')
  })

  test('exempt paths are not counted (the defaults: health, readiness, documentation)', () => {
    const rules = compileRules(RULES)
    for (const p of ['/health', '/ready', '/docs', '/redoc', '/openapi.json']) assert.equal(rules.ruleFor(p), null, p)
    const custom = compileRules(cfg({ exempt_paths: ['/api/kb/*/docs/status'] }))
    assert.equal(custom.ruleFor('/api/kb/hr/docs/status'), null)
    assert.equal(custom.ruleFor('/health')!.name, 'default', 'a list replaces the defaults')
  })
})

describe('rate limiter (in-process counter)', () => {
  const start = 1_700_000_000_000
  const clock = { t: start }
  const log = createLogger('SILENT')

  const rejected = async (p: Promise<void>, rule: string, retryAfter: number) => {
    const err = await p.then(() => null, (e: unknown) => e)
    assert.ok(err instanceof AppError, 'refused')
    assert.equal(err.status, 429)
    assert.equal(err.message, `Rate limit exceeded for '${rule}' requests`)
    assert.deepEqual(err.headers, { 'retry-after': String(retryAfter) })
  }

  test('fixed windows per rule and user; Retry-After is the whole seconds left', async () => {
    clock.t = start
    const counter = createMemoryRateCounter(() => clock.t)
    const limiter = createRateLimiter(compileRules(cfg({ rules: [{ name: 'search', paths: ['/api/search'], limit: '3/minute' }], default: '2/second' })), counter, log)
    for (let i = 0; i < 3; i++) await limiter.check('alice', '/api/search')
    clock.t += 20_500
    await rejected(limiter.check('alice', '/api/search'), 'search', 40)
    await limiter.check('bob', '/api/search') // another user has a counter of his own
    await limiter.check('alice', '/api/kb') // the default rule has its own counter
    await limiter.check('alice', '/api/kb/x/docs')
    await rejected(limiter.check('alice', '/api/kb/y'), 'default', 1)
    clock.t = start + 60_000 // the window ends: counting starts again
    await limiter.check('alice', '/api/search')
    await counter.close()
  })

  test('a weighted request counts as its weight and is refused when it would go over', async () => {
    clock.t = start
    const counter = createMemoryRateCounter(() => clock.t)
    const limiter = createRateLimiter(compileRules(RULES), counter, log)
    await limiter.check('u', '/api/kb/a/docs/upload/batch') // 10
    await limiter.check('u', '/api/kb/b/docs/upload/batch') // 20
    for (let i = 0; i < 10; i++) await limiter.check('u', '/api/kb/a/docs/upload') // 30
    await rejected(limiter.check('u', '/api/kb/a/docs/upload'), 'upload', 60)
    await counter.close()
  })

  test('exempt paths never touch the counter', async () => {
    clock.t = start
    const counter = createMemoryRateCounter(() => clock.t)
    const limiter = createRateLimiter(compileRules(cfg({ default: '1/hour' })), counter, log)
    for (let i = 0; i < 5; i++) await limiter.check('u', '/health')
    await limiter.check('u', '/api/kb')
    await rejected(limiter.check('u', '/api/kb'), 'default', 3600)
    await counter.close()
  })
})
