import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from '../helpers/app.ts'
import { skipUnless } from '../helpers/services.ts'
import { generateRequests, Nested, operationsFrom } from './fuzz-engine.ts'
import { FUZZ_SEED, fuzzSuite } from './fuzz.suite.ts'

describe('fuzzer', () => {
  it('the same seed gives the same request list, another seed another list', async (t) => {
    const svc = await startApp(t, { listen: false })
    const operations = operationsFrom((await svc.app.inject({ method: 'GET', url: '/openapi.json' })).json())
    const a = generateRequests(operations, { seed: FUZZ_SEED, count: 600 })
    assert.deepStrictEqual(generateRequests(operations, { seed: FUZZ_SEED, count: 600 }), a)
    assert.notDeepStrictEqual(generateRequests(operations, { seed: FUZZ_SEED + 1, count: 600 }), a)
    assert.ok(a.some((r) => r.mutation === 'valid') && a.some((r) => r.mutation !== 'valid'), 'valid and broken requests are mixed')
  })

  it('a nesting whose depth a mutation replaced (1e308, NaN) is written out bounded', () => {
    // seed 20261124 drew such a body: writing out 1e308 levels filled the test's heap
    for (const depth of [1e308, Number.NaN, -5]) assert.ok(new Nested(depth, 'mixed').toJson().length <= 600_010, String(depth))
    assert.equal(new Nested(2, 'array').toJson(), '[["bottom"]]')
  })
})

describe('fuzz on the embedded default', () => fuzzSuite('embedded', {}))

describe('fuzz on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  fuzzSuite('services', { services: true }))
