// The Qdrant driver's protocol. No Qdrant server can run here, so a local HTTP server answers with the
// response bodies of Qdrant's REST API (test/fixtures/qdrant/, shapes from Qdrant's OpenAPI spec
// docs/redoc/v1.19.x/openapi.json in github.com/qdrant/qdrant and the examples of
// https://qdrant.tech/documentation/concepts/collections/ and .../concepts/indexing/), records what the
// driver sends, and the cases check method, path and body of each request and how answers, errors and
// a dead server are mapped. It is not a Qdrant engine: search results are canned, not computed.
//
// With TEST_QDRANT_URL set (http://host:port of a real Qdrant), the shared VectorStore contract also
// runs against that server.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, it } from 'node:test'
import type { VectorStore } from '../../adapters/ports.ts'
import { createQdrantVectorStore, pointId, type QdrantVectorStoreOptions } from '../../adapters/vectors/qdrant.ts'
import { axis, DIMS, point, sparse, vectorStoreContract } from './vectors.contract.ts'

const fixture = (name: string): Record<string, unknown> =>
  JSON.parse(readFileSync(new URL(`../fixtures/qdrant/${name}.json`, import.meta.url), 'utf8')) as Record<string, unknown>

interface Recorded {
  method: string
  path: string
  query: Record<string, string>
  headers: IncomingMessage['headers']
  body: unknown
}

type Answer = { status: number; body: unknown } | 'hang'
type Route = Answer | ((req: Recorded, nth: number) => Answer)

const ok = (name: string): Answer => ({ status: 200, body: fixture(name) })
const notFound: Answer = { status: 404, body: fixture('not-found') }

/** A recording HTTP server: routes are keyed "METHOD /path" (query string excluded). */
class FakeQdrant {
  readonly requests: Recorded[] = []
  private routes = new Map<string, Route>()
  private counts = new Map<string, number>()
  private server: Server
  private hanging = new Set<import('node:http').ServerResponse>()
  port = 0

  constructor() {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const url = new URL(req.url ?? '/', 'http://x')
        const text = Buffer.concat(chunks).toString('utf8')
        const rec: Recorded = {
          method: req.method ?? '',
          path: url.pathname,
          query: Object.fromEntries(url.searchParams),
          headers: req.headers,
          body: text === '' ? undefined : (JSON.parse(text) as unknown),
        }
        this.requests.push(rec)
        const key = `${rec.method} ${rec.path}`
        const n = this.counts.get(key) ?? 0
        this.counts.set(key, n + 1)
        const route = this.routes.get(key)
        const answer: Answer =
          route === undefined ? { status: 500, body: { status: { error: `fake Qdrant has no route for ${key}` }, time: 0 } } : typeof route === 'function' ? route(rec, n) : route
        if (answer === 'hang') {
          this.hanging.add(res)
          return
        }
        res.writeHead(answer.status, { 'content-type': 'application/json' })
        res.end(JSON.stringify(answer.body))
      })
    })
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve))
    this.port = (this.server.address() as AddressInfo).port
  }

  on(key: string, route: Route): this {
    this.routes.set(key, route)
    return this
  }

  reset(): void {
    this.requests.length = 0
    this.routes.clear()
    this.counts.clear()
  }

  async stop(): Promise<void> {
    for (const res of this.hanging) res.destroy()
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}

const rejectsWith = (promise: Promise<unknown>, code: string, status: number, mentions: string[] = []) =>
  assert.rejects(promise, (err: unknown) => {
    const e = err as { code?: string; status?: number; message?: string }
    assert.equal(e.code, code, e.message)
    assert.equal(e.status, status)
    for (const m of mentions) assert.ok(e.message?.includes(m), `message "${e.message}" should mention ${m}`)
    return true
  })

describe('qdrant driver: protocol against a recording server', () => {
  const fake = new FakeQdrant()
  let store: VectorStore
  const make = (extra: Partial<QdrantVectorStoreOptions> = {}) =>
    createQdrantVectorStore({ host: '127.0.0.1', port: fake.port, insecure: true, dimensions: DIMS, ...extra })

  before(async () => {
    await fake.start()
    store = await make({ apiKey: 'secret-key' })
  })
  after(async () => {
    await store.close()
    await fake.stop()
  })

  /** A collection the driver already knows (so a case sees only its own requests). */
  async function known(kb: string): Promise<void> {
    fake.reset()
    fake.on(`GET /collections/${kb}`, ok('collection-info'))
    await store.ensureCollection(kb, DIMS)
    fake.reset()
  }

  /** The collection-info fixture with only these payload indexes (a new collection has none). */
  function infoWithIndexes(fields: string[]): Record<string, unknown> {
    const info = fixture('collection-info')
    const schema = (info.result as Record<string, unknown>).payload_schema as Record<string, unknown>
    for (const key of Object.keys(schema)) if (!fields.includes(key)) delete schema[key]
    return info
  }

  const INDEX_BODIES = [
    { field_name: 'doc_id', field_schema: 'keyword' },
    { field_name: 'source_type', field_schema: 'keyword' },
    { field_name: 'doc_type', field_schema: 'keyword' },
    { field_name: 'source', field_schema: { type: 'keyword', prefix: true } },
    { field_name: 'updated_at', field_schema: 'datetime' },
  ]

  it('creates a collection with a named dense vector, a sparse IDF vector and the payload indexes filters use', async () => {
    fake.reset()
    const kb = 'new-kb'
    const unindexed = infoWithIndexes([])
    fake
      .on(`GET /collections/${kb}`, (_req, n) => (n === 0 ? notFound : { status: 200, body: unindexed }))
      .on(`PUT /collections/${kb}`, ok('bool-true'))
      .on(`PUT /collections/${kb}/index`, ok('update-completed'))
    await store.ensureCollection(kb, DIMS)
    const seen = fake.requests.map((r) => `${r.method} ${r.path}`)
    assert.deepEqual(seen, [`GET /collections/${kb}`, `PUT /collections/${kb}`, `GET /collections/${kb}`, ...INDEX_BODIES.map(() => `PUT /collections/${kb}/index`)])
    assert.deepEqual(fake.requests[1].body, {
      vectors: { dense: { size: DIMS, distance: 'Cosine' } },
      sparse_vectors: { sparse: { modifier: 'idf' } },
    })
    assert.deepEqual(fake.requests.slice(3).map((r) => r.body), INDEX_BODIES)
    for (const r of fake.requests.slice(3)) assert.equal(r.query.wait, 'true')
    assert.equal(fake.requests[0].headers['api-key'], 'secret-key')
    // Known now: a second ensure costs no request.
    fake.requests.length = 0
    await store.ensureCollection(kb, DIMS)
    assert.equal(fake.requests.length, 0)
  })

  it('adds the filter indexes to a collection made before them, and a prefix index where source had a plain one', async () => {
    fake.reset()
    const info = infoWithIndexes(['doc_id', 'source'])
    ;((info.result as Record<string, unknown>).payload_schema as Record<string, unknown>).source = { data_type: 'keyword', points: 3 }
    fake.on('GET /collections/older', { status: 200, body: info }).on('PUT /collections/older/index', ok('update-completed'))
    await store.ensureCollection('older', DIMS)
    assert.deepEqual(fake.requests.slice(1).map((r) => r.body), INDEX_BODIES.slice(1))
  })

  it('uses an existing collection of the right size without recreating it', async () => {
    fake.reset()
    fake.on('GET /collections/docs', ok('collection-info'))
    await store.ensureCollection('docs', DIMS)
    assert.deepEqual(fake.requests.map((r) => `${r.method} ${r.path}`), ['GET /collections/docs'])
  })

  it('refuses an existing collection of another size, or one without the named vectors', async () => {
    fake.reset()
    fake.on('GET /collections/other-size', ok('collection-info'))
    await rejectsWith(store.ensureCollection('other-size', 16), 'VECTOR_DIMENSION_MISMATCH', 500, ['8', '16'])
    const unnamed = fixture('collection-info')
    ;((unnamed.result as { config: { params: Record<string, unknown> } }).config.params).vectors = { size: 8, distance: 'Cosine' }
    fake.on('GET /collections/foreign', { status: 200, body: unnamed })
    await rejectsWith(store.ensureCollection('foreign', DIMS), 'VECTOR_COLLECTION_INCOMPATIBLE', 500, ['foreign'])
  })

  it('upserts in batches with wait=true, UUID point ids and named vectors', async () => {
    await known('docs')
    fake.on('PUT /collections/docs/points', ok('update-completed'))
    const points = Array.from({ length: 600 }, (_, i) => point('docs', `doc${i % 3}`, i, axis(i, 0.5), i === 5 ? [] : [[i, 1.5], [100000 + (i % 7), 0.25]]))
    await store.upsert('docs', points)
    assert.equal(fake.requests.length, 3)
    const sizes = fake.requests.map((r) => (r.body as { points: unknown[] }).points.length)
    assert.deepEqual(sizes, [256, 256, 88])
    for (const r of fake.requests) {
      assert.equal(r.method, 'PUT')
      assert.equal(r.query.wait, 'true')
    }
    const sent = (fake.requests[0].body as { points: { id: string; vector: Record<string, unknown>; payload: Record<string, unknown> }[] }).points
    const first = sent[0]
    assert.match(first.id, /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    assert.equal(first.id, pointId('doc0:0'))
    assert.notEqual(pointId('doc0:0'), pointId('doc0:1'))
    assert.deepEqual(first.vector, { dense: axis(0, 0.5), sparse: { indices: [0, 100000], values: [1.5, 0.25] } })
    assert.deepEqual(first.payload, points[0].payload as unknown as Record<string, unknown>)
    // A chunk without terms gets no sparse vector rather than an empty one.
    assert.deepEqual(Object.keys(sent[5].vector), ['dense'])
  })

  it('creates the collection on the first upsert into an unknown KB', async () => {
    fake.reset()
    fake
      .on('GET /collections/fresh', (_r, n) => (n === 0 ? notFound : ok('collection-info')))
      .on('PUT /collections/fresh', ok('bool-true'))
      .on('PUT /collections/fresh/points', ok('update-completed'))
    await store.upsert('fresh', [point('fresh', 'd', 0, axis(1))])
    assert.deepEqual(fake.requests.map((r) => `${r.method} ${r.path}`), ['GET /collections/fresh', 'PUT /collections/fresh', 'GET /collections/fresh', 'PUT /collections/fresh/points'])
  })

  it('upserts into an existing collection of its own size, whatever the store default', async () => {
    fake.reset()
    const wide = await make({ dimensions: 1024 })
    fake.on('GET /collections/docs', ok('collection-info')).on('PUT /collections/docs/points', ok('update-completed'))
    await wide.upsert('docs', [point('docs', 'd', 0, axis(1))])
    assert.deepEqual(fake.requests.map((r) => `${r.method} ${r.path}`), ['GET /collections/docs', 'PUT /collections/docs/points'])
    await rejectsWith(wide.upsert('docs', [point('docs', 'd', 1, new Array(1024).fill(0.5))]), 'VECTOR_DIMENSION_MISMATCH', 500, ['8', '1024'])
    await wide.close()
  })

  it('deletes a document by a doc_id filter and returns how many points it had', async () => {
    await known('docs')
    fake.on('POST /collections/docs/points/count', ok('count')).on('POST /collections/docs/points/delete', ok('update-completed'))
    assert.equal(await store.deleteByDoc('docs', 'a1b2c3d4e5f60718'), 3)
    const filter = { must: [{ key: 'doc_id', match: { value: 'a1b2c3d4e5f60718' } }] }
    assert.deepEqual(fake.requests.map((r) => `${r.method} ${r.path}`), ['POST /collections/docs/points/count', 'POST /collections/docs/points/delete'])
    assert.deepEqual(fake.requests[0].body, { filter, exact: true })
    assert.deepEqual(fake.requests[1].body, { filter })
    assert.equal(fake.requests[1].query.wait, 'true')
    // Nothing to delete: no delete request.
    fake.reset()
    fake.on('POST /collections/docs/points/count', { status: 200, body: { result: { count: 0 }, status: 'ok', time: 0.0001 } })
    assert.equal(await store.deleteByDoc('docs', 'nothing'), 0)
    assert.deepEqual(fake.requests.map((r) => r.path), ['/collections/docs/points/count'])
  })

  it('searches dense and sparse in one query batch and maps the scored points to hits', async () => {
    await known('docs')
    fake.on('POST /collections/docs/points/query/batch', ok('query-batch'))
    const q = Float32Array.from(axis(2, 0.5))
    const { dense, sparse: hits } = await store.search('docs', { dense: q, sparse: sparse([[17, 1], [4, 0.5]]), limit: 5 })
    assert.equal(fake.requests.length, 1)
    assert.deepEqual(fake.requests[0].body, {
      searches: [
        { query: Array.from(q), using: 'dense', limit: 5, with_payload: true },
        { query: { indices: [17, 4], values: [1, 0.5] }, using: 'sparse', limit: 5, with_payload: true },
      ],
    })
    const expected = fixture('query-batch').result as { points: { score: number; payload: unknown }[] }[]
    assert.deepEqual(dense, expected[0].points.map((p) => ({ score: p.score, id: (p.payload as { chunk_id: string }).chunk_id, payload: p.payload })))
    assert.deepEqual(hits, expected[1].points.map((p) => ({ score: p.score, id: (p.payload as { chunk_id: string }).chunk_id, payload: p.payload })))
  })

  it('sends a dense query with less than the whole effort with its share of hnsw_ef, never below the limit', async () => {
    await known('docs')
    fake.on('POST /collections/docs/points/query/batch', ok('query-batch'))
    const q = Float32Array.from(axis(1))
    await store.search('docs', { dense: q, limit: 5, effort: 0.25 })
    await store.search('docs', { dense: q, limit: 40, effort: 0.1 })
    await store.search('docs', { dense: q, limit: 5, effort: 1 })
    const params = fake.requests.map((r) => (r.body as { searches: { params?: unknown }[] }).searches[0].params)
    // QueryRequest.params is SearchParams; the store's default hnsw_ef is Qdrant's default ef_construct, 100.
    assert.deepEqual(params, [{ hnsw_ef: 25 }, { hnsw_ef: 40 }, undefined])
  })

  it('sends a filter as a Qdrant Filter with each query of the batch: match.any, match.prefix, a datetime range', async () => {
    await known('docs')
    fake.on('POST /collections/docs/points/query/batch', ok('query-batch'))
    const q = Float32Array.from(axis(2))
    const filter = {
      docIds: ['a1b2c3d4e5f60718', 'b1b2c3d4e5f60718'],
      sourceTypes: ['file', 'web'],
      docTypes: ['pdf'],
      sourcePrefix: 'https://example.com/hr/',
      updatedAfter: Date.parse('2024-02-01T00:00:00Z'),
      updatedBefore: Date.parse('2024-03-01T12:00:00Z'),
    }
    const { dense } = await store.search('docs', { dense: q, sparse: sparse([[17, 1]]), limit: 5, filter })
    const expected = {
      must: [
        { key: 'doc_id', match: { any: ['a1b2c3d4e5f60718', 'b1b2c3d4e5f60718'] } },
        { key: 'source_type', match: { any: ['file', 'web'] } },
        { key: 'doc_type', match: { any: ['pdf'] } },
        { key: 'source', match: { prefix: 'https://example.com/hr/' } },
        { key: 'updated_at', range: { gte: '2024-02-01T00:00:00.000Z', lt: '2024-03-01T12:00:00.000Z' } },
      ],
    }
    assert.deepEqual(fake.requests[0].body, {
      searches: [
        { query: Array.from(q), using: 'dense', limit: 5, filter: expected, with_payload: true },
        { query: { indices: [17], values: [1] }, using: 'sparse', limit: 5, filter: expected, with_payload: true },
      ],
    })
    assert.equal(dense.length, (fixture('query-batch').result as { points: unknown[] }[])[0].points.length)
    // One bound only: the range has one key.
    fake.requests.length = 0
    await store.search('docs', { dense: q, limit: 5, filter: { updatedBefore: Date.parse('2024-03-01T00:00:00Z') } })
    assert.deepEqual((fake.requests[0].body as { searches: { filter: unknown }[] }).searches[0].filter, { must: [{ key: 'updated_at', range: { lt: '2024-03-01T00:00:00.000Z' } }] })
  })

  it('answers a filter that can match nothing without a request, and refuses a malformed one before sending', async () => {
    await known('docs')
    const q = { dense: Float32Array.from(axis(2)), limit: 5 }
    assert.deepEqual(await store.search('docs', { ...q, filter: { docIds: [] } }), { dense: [], sparse: [] })
    assert.deepEqual(await store.search('docs', { ...q, filter: { updatedAfter: 10, updatedBefore: 10 } }), { dense: [], sparse: [] })
    await rejectsWith(store.search('docs', { ...q, filter: { docTypes: [1] as unknown as string[] } }), 'INVALID_VECTOR_FILTER', 500, ['docTypes'])
    assert.equal(fake.requests.length, 0)
  })

  it('sends only the dense query when there is no sparse one', async () => {
    await known('docs')
    fake.on('POST /collections/docs/points/query/batch', (req) => {
      const n = (req.body as { searches: unknown[] }).searches.length
      const all = fixture('query-batch').result as unknown[]
      return { status: 200, body: { result: all.slice(0, n), status: 'ok', time: 0.001 } }
    })
    const r = await store.search('docs', { dense: Float32Array.from(axis(0)), sparse: sparse([]), limit: 2 })
    assert.equal((fake.requests[0].body as { searches: { using: string }[] }).searches.map((s) => s.using).join(), 'dense')
    assert.equal(r.dense.length, 2)
    assert.deepEqual(r.sparse, [])
    await rejectsWith(store.search('docs', { dense: new Float32Array(4), limit: 2 }), 'VECTOR_DIMENSION_MISMATCH', 500)
  })

  it('reads a document\'s vectors page by page and orders them by chunk_index', async () => {
    await known('docs')
    fake.on('POST /collections/docs/points/scroll', (_r, n) => ok(n === 0 ? 'scroll-page-1' : 'scroll-page-2'))
    const vectors = await store.docVectors('docs', 'a1b2c3d4e5f60718')
    assert.equal(fake.requests.length, 2)
    const filter = { must: [{ key: 'doc_id', match: { value: 'a1b2c3d4e5f60718' } }] }
    assert.deepEqual(fake.requests[0].body, { filter, limit: 256, with_payload: ['chunk_index'], with_vector: ['dense'] })
    assert.deepEqual(fake.requests[1].body, { filter, limit: 256, offset: '33333333-3333-5333-8333-333333333333', with_payload: ['chunk_index'], with_vector: ['dense'] })
    // The fixture's points hold axis 2, 0, 1 at chunk_index 2, 0, 1, spread over two pages.
    assert.deepEqual(vectors.map((v) => Array.from(v)), [axis(0), axis(1), axis(2)])
    assert.ok(vectors.every((v) => v instanceof Float32Array))
  })

  it('reads a document\'s whole points (both named vectors and the payload) and orders them by chunk_index', async () => {
    await known('docs')
    fake.on('POST /collections/docs/points/scroll', ok('scroll-points-1'))
    const points = await store.docPoints('docs', 'a1b2c3d4e5f60718')
    const filter = { must: [{ key: 'doc_id', match: { value: 'a1b2c3d4e5f60718' } }] }
    assert.deepEqual(fake.requests.map((r) => r.body), [{ filter, limit: 256, with_payload: true, with_vector: ['dense', 'sparse'] }])
    assert.deepEqual(points.map((p) => p.payload.chunk_id), ['a1b2c3d4e5f60718-0', 'a1b2c3d4e5f60718-1'])
    assert.equal(points[0].payload.parent_chunk_id, 'a1b2c3d4e5f60718-p0-0')
    assert.equal(points[1].payload.text, 'Chunk 1 of the leave policy.')
    assert.deepEqual(points.map((p) => Array.from(p.dense)), [axis(0), axis(1)])
    assert.ok(points[0].dense instanceof Float32Array && points[0].sparse.indices instanceof Uint32Array && points[0].sparse.values instanceof Float32Array)
    assert.deepEqual([Array.from(points[0].sparse.indices), Array.from(points[0].sparse.values)], [[7, 3_000_000_000], [0.5, 1.25]])
    // Stored without terms: an empty sparse vector, not an error.
    assert.deepEqual([points[1].sparse.indices.length, points[1].sparse.values.length], [0, 0])
  })

  it('counts each document\'s points over a scroll of the whole collection, doc_id only, page by page', async () => {
    await known('docs')
    fake.on('POST /collections/docs/points/scroll', (_r, n) => ok(n === 0 ? 'scroll-doc-ids-1' : 'scroll-doc-ids-2'))
    const counts = await store.docChunkCounts('docs')
    assert.deepEqual(fake.requests.map((r) => r.body), [
      { limit: 1000, with_payload: ['doc_id'], with_vector: false },
      { limit: 1000, offset: '44444444-4444-5444-8444-444444444444', with_payload: ['doc_id'], with_vector: false },
    ])
    assert.deepEqual(counts, new Map([['a1b2c3d4e5f60718', 3], ['0f1e2d3c4b5a6978', 1]]))
  })

  it('counts exactly', async () => {
    await known('docs')
    fake.on('POST /collections/docs/points/count', ok('count'))
    assert.equal(await store.count('docs'), 3)
    assert.deepEqual(fake.requests[0].body, { exact: true })
  })

  it('answers an absent collection (404) with empty results', async () => {
    fake.reset()
    const kb = 'missing-kb'
    fake
      .on(`POST /collections/${kb}/points/query/batch`, notFound)
      .on(`POST /collections/${kb}/points/count`, notFound)
      .on(`POST /collections/${kb}/points/scroll`, notFound)
      .on(`GET /collections/${kb}/exists`, ok('exists-false'))
    assert.deepEqual(await store.search(kb, { dense: Float32Array.from(axis(0)), sparse: sparse([[1, 1]]), limit: 3 }), { dense: [], sparse: [] })
    assert.equal(await store.count(kb), 0)
    assert.deepEqual(await store.docVectors(kb, 'd'), [])
    assert.deepEqual(await store.docChunkCounts(kb), new Map())
    assert.deepEqual(await store.docPoints(kb, 'd'), [])
    assert.equal(await store.deleteByDoc(kb, 'd'), 0)
    assert.equal(await store.hasCollection(kb), false)
    assert.equal(await store.dropCollection(kb), false)
    assert.ok(!fake.requests.some((r) => r.method === 'DELETE'), 'no DELETE for a collection that does not exist')
  })

  it('drops an existing collection', async () => {
    await known('docs')
    fake.on('GET /collections/docs/exists', ok('exists-true')).on('DELETE /collections/docs', ok('bool-true'))
    assert.equal(await store.hasCollection('docs'), true)
    assert.equal(await store.dropCollection('docs'), true)
    assert.deepEqual(fake.requests.map((r) => `${r.method} ${r.path}`), ['GET /collections/docs/exists', 'GET /collections/docs/exists', 'DELETE /collections/docs'])
    // Forgotten: the next upsert checks the collection again.
    fake.reset()
    fake.on('GET /collections/docs', ok('collection-info')).on('PUT /collections/docs/points', ok('update-completed'))
    await store.upsert('docs', [point('docs', 'd', 0, axis(0))])
    assert.equal(fake.requests[0].path, '/collections/docs')
  })

  it('maps a refused request (400) to a 500 carrying Qdrant\'s message, and a server error to 503', async () => {
    await known('docs')
    fake.on('PUT /collections/docs/points', { status: 400, body: fixture('bad-request') })
    await rejectsWith(store.upsert('docs', [point('docs', 'd', 0, axis(0))]), 'VECTOR_STORE_ERROR', 500, ['Vector dimension error'])
    fake.on('POST /collections/docs/points/query/batch', { status: 500, body: { status: { error: 'Service internal error: RocksDB failed' }, time: 0.001 } })
    await rejectsWith(store.search('docs', { dense: Float32Array.from(axis(0)), limit: 1 }), 'SERVICE_UNAVAILABLE', 503, ['RocksDB'])
    fake.on('POST /collections/docs/points/count', { status: 429, body: { status: { error: 'Too many requests' }, time: 0 } })
    await rejectsWith(store.count('docs'), 'SERVICE_UNAVAILABLE', 503)
  })

  it('times out a server that does not answer (503)', async () => {
    await known('docs')
    const slow = await make({ timeoutMs: 150 })
    fake.on('GET /collections/docs', ok('collection-info')).on('POST /collections/docs/points/query/batch', 'hang')
    await rejectsWith(slow.search('docs', { dense: Float32Array.from(axis(0)), limit: 1 }), 'SERVICE_UNAVAILABLE', 503, ['timed out'])
    await slow.close()
  })

  it('answers ping from the root endpoint', async () => {
    fake.reset()
    fake.on('GET /', { status: 200, body: fixture('version') })
    assert.equal(await store.ping(), true)
    assert.equal(fake.requests[0].path, '/')
  })

  it('refuses invalid points before sending anything', async () => {
    await known('docs')
    await rejectsWith(store.upsert('docs', [point('docs', 'd', 0, axis(0), [[2, 1], [2, 1]])]), 'INVALID_VECTOR_POINT', 500)
    await rejectsWith(store.upsert('docs', [point('docs', 'd', 0, [1, 2, 3])]), 'VECTOR_DIMENSION_MISMATCH', 500)
    await rejectsWith(store.search('../x', { limit: 1 }), 'INVALID_KB_ID', 422)
    assert.equal(fake.requests.length, 0)
  })
})

describe('qdrant driver: server down', () => {
  it('maps a refused connection to 503 and ping to false', async () => {
    const fake = new FakeQdrant()
    await fake.start()
    const port = fake.port
    await fake.stop()
    const store = await createQdrantVectorStore({ host: '127.0.0.1', port, insecure: true, dimensions: DIMS, timeoutMs: 2000 })
    await rejectsWith(store.search('docs', { dense: Float32Array.from(axis(0)), limit: 1 }), 'SERVICE_UNAVAILABLE', 503, [`127.0.0.1:${port}`])
    await rejectsWith(store.ensureCollection('docs', DIMS), 'SERVICE_UNAVAILABLE', 503)
    await rejectsWith(store.upsert('docs', [point('docs', 'd', 0, axis(0))]), 'SERVICE_UNAVAILABLE', 503)
    assert.equal(await store.ping(), false)
    await store.close()
  })
})

// The contract against a real Qdrant (CI sets TEST_QDRANT_URL; the fake above cannot compute rankings).
const qdrantUrl = process.env.TEST_QDRANT_URL
if (qdrantUrl) {
  const u = new URL(qdrantUrl)
  vectorStoreContract('qdrant (real server)', (dimensions) =>
    createQdrantVectorStore({
      host: u.hostname,
      port: Number(u.port || (u.protocol === 'https:' ? 443 : 6333)),
      insecure: u.protocol !== 'https:',
      apiKey: process.env.TEST_QDRANT_API_KEY || undefined,
      dimensions,
      collectionPrefix: 'quarry-test-',
    }),
  )
} else {
  describe('VectorStore contract: qdrant (real server)', { skip: 'TEST_QDRANT_URL not set' }, () => {
    it('runs against a real Qdrant', () => {})
  })
}
