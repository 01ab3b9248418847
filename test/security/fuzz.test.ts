import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from '../helpers/app.ts'
import { skipUnless } from '../helpers/services.ts'
import { generateRequests, operationsFrom } from './fuzz-engine.ts'
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
})

describe('fuzz on the embedded default', () => fuzzSuite('embedded', {}))

describe('fuzz on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  fuzzSuite('services', { services: true }))
