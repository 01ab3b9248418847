import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from '../helpers/app.ts'
import { skipUnless } from '../helpers/services.ts'
import { generateRequests, HEAD_BUDGET, Nested, operationsFrom, render } from './fuzz-engine.ts'
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

  it('every request head fits the transport: a longer path, query or header is cut, and says so', async (t) => {
    const svc = await startApp(t, { listen: false })
    const operations = operationsFrom((await svc.app.inject({ method: 'GET', url: '/openapi.json' })).json())
    const byId = new Map(operations.map((o) => [o.id, o]))
    // Seed 201886648 drew two queries of 134,463 and 176,286 characters (requests 4816 and 5051), heads the transport
    // closed the connection on.
    const requests = generateRequests(operations, { seed: 201886648, count: 5200 })
    const fixtures = { kb: 'fuzz-0000', doc: '0123456789abcdef' }
    let cut = 0
    for (const req of requests) {
      const { path, headers } = render(req, byId.get(req.operation)!, fixtures)
      const head = Buffer.byteLength(path) + Object.entries(headers).reduce((n, [k, v]) => n + k.length + Buffer.byteLength(v), 0)
      // The budget counts the generated parts; rendering adds the route's own path and a content-type.
      assert.ok(head <= HEAD_BUDGET + 1000, `#${req.seq} ${req.mutation}: a head of ${head} bytes`)
      if (req.mutation.includes('cut to the head limit')) cut++
    }
    assert.ok(cut >= 2, `the two long queries were cut (${cut} requests cut)`)
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
