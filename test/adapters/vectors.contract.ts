// The VectorStore contract: every driver runs these cases (test/adapters/vectors.test.ts for the embedded
// driver; test/adapters/qdrant.test.ts runs them against a real Qdrant when TEST_QDRANT_URL is set).
// Expected rankings and scores are computed here from the definitions (cosine; Qdrant's IDF formula),
// never taken from a driver.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import type { ChunkPayload, SparseVector, VectorFilter, VectorPoint, VectorStore } from '../../adapters/ports.ts'

export const DIMS = 8

export type VectorStoreFactory = (dimensions: number) => Promise<VectorStore>

/** A unique KB id per case, so suites sharing one server never see each other's collections. */
export const kbName = (tag: string) => `t${randomBytes(4).toString('hex')}-${tag}`

export function sparse(entries: [number, number][]): SparseVector {
  return { indices: Uint32Array.from(entries.map((e) => e[0])), values: Float32Array.from(entries.map((e) => e[1])) }
}

export function payload(kbId: string, docId: string, index: number, extra: Partial<ChunkPayload> = {}): ChunkPayload {
  return {
    chunk_id: `${docId}:${index}`,
    kb_id: kbId,
    doc_id: docId,
    chunk_index: index,
    title: `Title of ${docId}`,
    source_type: 'file',
    source: `${docId}.md`,
    doc_type: 'md',
    page_num: 1,
    page_label: '1',
    text: `chunk ${index} of ${docId}`,
    start: index * 100,
    end: index * 100 + 99,
    parent_chunk_id: null,
    updated_at: '2024-05-01T00:00:00.000Z',
    ...extra,
  }
}

export function point(kbId: string, docId: string, index: number, dense: number[], sp: [number, number][] = [], extra: Partial<ChunkPayload> = {}): VectorPoint {
  return { dense: Float32Array.from(dense), sparse: sparse(sp), payload: payload(kbId, docId, index, extra) }
}

/** A basis-like vector: weight 1 on axis a, plus small weights to make cosines distinct. */
export function axis(a: number, tweak = 0): number[] {
  const v = new Array<number>(DIMS).fill(0)
  v[a % DIMS] = 1
  v[(a + 1) % DIMS] = tweak
  return v
}

export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let dot = 0
  let na = 0
  let nb = 0
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i]
    na += a[i] * a[i]
    nb += b[i] * b[i]
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb)
}

/** Qdrant's IDF ("Indexing / IDF Modifier"): ln((N - n + 0.5) / (n + 0.5) + 1). */
export const qdrantIdf = (n: number, df: number) => Math.log((n - df + 0.5) / (df + 0.5) + 1)

/** Reference sparse scores over a set of live points: sum over shared terms of idf * q * d. */
export function sparseScores(points: readonly VectorPoint[], query: SparseVector): Map<string, number> {
  const df = new Map<number, number>()
  for (const p of points) for (const t of p.sparse.indices) df.set(t, (df.get(t) ?? 0) + 1)
  const scores = new Map<string, number>()
  for (const p of points) {
    let s = 0
    let shared = false
    for (let i = 0; i < query.indices.length; i++) {
      const j = p.sparse.indices.indexOf(query.indices[i])
      if (j < 0) continue
      shared = true
      s += qdrantIdf(points.length, df.get(query.indices[i])!) * query.values[i] * p.sparse.values[j]
    }
    if (shared) scores.set(p.payload.chunk_id, s)
  }
  return scores
}

const ids = (hits: { payload: ChunkPayload }[]) => hits.map((h) => h.payload.chunk_id)

const rejectsWith = (promise: Promise<unknown>, code: string, status: number, mentions: string[] = []) =>
  assert.rejects(promise, (err: unknown) => {
    const e = err as { code?: string; status?: number; message?: string }
    assert.equal(e.code, code)
    assert.equal(e.status, status)
    for (const m of mentions) assert.ok(e.message?.includes(m), `message "${e.message}" should mention ${m}`)
    return true
  })

export function vectorStoreContract(name: string, factory: VectorStoreFactory): void {
  describe(`VectorStore contract: ${name}`, () => {
    let store: VectorStore
    before(async () => {
      store = await factory(DIMS)
    })
    after(async () => {
      await store.close()
    })

    it('creates collections lazily and reports them', async () => {
      const kb = kbName('ensure')
      assert.equal(await store.hasCollection(kb), false)
      await store.ensureCollection(kb, DIMS)
      assert.equal(await store.hasCollection(kb), true)
      assert.equal(await store.count(kb), 0)
      // A second ensure with the same size is a no-op.
      await store.ensureCollection(kb, DIMS)
      assert.equal(await store.count(kb), 0)
    })

    it('refuses a collection of another vector size, naming both sizes', async () => {
      const kb = kbName('dims')
      await store.ensureCollection(kb, DIMS)
      await rejectsWith(store.ensureCollection(kb, DIMS * 2), 'VECTOR_DIMENSION_MISMATCH', 500, [String(DIMS), String(DIMS * 2)])
    })

    it('ranks dense hits by cosine, nearest first, with cosine scores', async () => {
      const kb = kbName('dense')
      await store.ensureCollection(kb, DIMS)
      const vectors = [axis(0), axis(0, 0.5), axis(0, 2), axis(1), axis(3, -0.2), axis(0, -1)]
      const points = vectors.map((v, i) => point(kb, 'd1', i, v))
      await store.upsert(kb, points)
      const q = Float32Array.from(axis(0, 0.3))
      const expected = points.map((p) => ({ id: p.payload.chunk_id, s: cosine(q, p.dense) })).sort((a, b) => b.s - a.s)
      const { dense, sparse: sp } = await store.search(kb, { dense: q, limit: 4 })
      assert.deepEqual(ids(dense), expected.slice(0, 4).map((e) => e.id))
      for (let i = 0; i < dense.length; i++) assert.ok(Math.abs(dense[i].score - expected[i].s) < 1e-4, `score ${dense[i].score} vs ${expected[i].s}`)
      assert.deepEqual(sp, [])
    })

    it('returns whole payloads with each hit', async () => {
      const kb = kbName('payload')
      await store.ensureCollection(kb, DIMS)
      const p = point(kb, 'doc-a', 3, axis(2), [[5, 1]], { parent_chunk_id: 'doc-a:p0', page_num: 7, page_label: 'vii', text: 'héllo wörld ✓ 한국어' })
      await store.upsert(kb, [p])
      const { dense, sparse: sp } = await store.search(kb, { dense: Float32Array.from(axis(2)), sparse: sparse([[5, 1]]), limit: 1 })
      assert.deepEqual(dense[0].payload, p.payload)
      assert.deepEqual(sp[0].payload, p.payload)
      assert.equal(dense[0].id, p.payload.chunk_id)
      assert.equal(sp[0].id, p.payload.chunk_id)
    })

    it('ranks sparse hits by IDF-weighted dot product: a rare term outranks a common one', async () => {
      const kb = kbName('idf')
      await store.ensureCollection(kb, DIMS)
      // Term 1 is in every point but one, term 7 in a single point, term 3 in two.
      const points = [
        point(kb, 'd', 0, axis(0), [[7, 1]]),
        point(kb, 'd', 1, axis(1), [[1, 1]]),
        point(kb, 'd', 2, axis(2), [[1, 1], [3, 0.5]]),
        point(kb, 'd', 3, axis(3), [[1, 2]]),
        point(kb, 'd', 4, axis(4), [[1, 1], [3, 1]]),
        point(kb, 'd', 5, axis(5), [[1, 0.5], [9, 1]]),
      ]
      await store.upsert(kb, points)
      const query = sparse([[1, 1], [7, 1], [3, 1]])
      const expected = [...sparseScores(points, query)].sort((a, b) => b[1] - a[1])
      // The premise of the case: the rare term alone beats a common term at twice the weight.
      assert.equal(expected[0][0], 'd:0')
      const { sparse: hits, dense } = await store.search(kb, { sparse: query, limit: 10 })
      assert.deepEqual(dense, [])
      assert.deepEqual(ids(hits), expected.map((e) => e[0]))
      for (let i = 0; i < hits.length; i++) assert.ok(Math.abs(hits[i].score - expected[i][1]) < 1e-4, `score ${hits[i].score} vs ${expected[i][1]}`)
      const top2 = await store.search(kb, { sparse: query, limit: 2 })
      assert.deepEqual(ids(top2.sparse), expected.slice(0, 2).map((e) => e[0]))
    })

    it('replaces a point upserted again under the same chunk_id', async () => {
      const kb = kbName('replace')
      await store.ensureCollection(kb, DIMS)
      await store.upsert(kb, [point(kb, 'd', 0, axis(0), [[11, 1]]), point(kb, 'd', 1, axis(1), [[12, 1]])])
      await store.upsert(kb, [point(kb, 'd', 0, axis(4), [[13, 1]], { text: 'new text' })])
      assert.equal(await store.count(kb), 2)
      const { dense } = await store.search(kb, { dense: Float32Array.from(axis(4)), limit: 1 })
      assert.equal(dense[0].payload.chunk_id, 'd:0')
      assert.equal(dense[0].payload.text, 'new text')
      assert.ok(Math.abs(dense[0].score - 1) < 1e-4)
      assert.deepEqual((await store.search(kb, { sparse: sparse([[11, 1]]), limit: 5 })).sparse, [])
      assert.deepEqual(ids((await store.search(kb, { sparse: sparse([[13, 1]]), limit: 5 })).sparse), ['d:0'])
      const vectors = await store.docVectors(kb, 'd')
      assert.ok(cosine(vectors[0], axis(4)) > 0.9999)
    })

    it('deletes by document: only that document, returning its count, and IDF forgets it', async () => {
      const kb = kbName('delete')
      await store.ensureCollection(kb, DIMS)
      const keep = [point(kb, 'keep', 0, axis(0), [[1, 1], [2, 1]]), point(kb, 'keep', 1, axis(1), [[1, 1]])]
      const gone = [0, 1, 2].map((i) => point(kb, 'gone', i, axis(0, 0.1 * (i + 1)), [[2, 1], [3, 1]]))
      await store.upsert(kb, [...keep, ...gone])
      assert.equal(await store.count(kb), 5)
      assert.equal(await store.deleteByDoc(kb, 'gone'), 3)
      assert.equal(await store.count(kb), 2)
      assert.equal(await store.deleteByDoc(kb, 'gone'), 0)
      assert.equal(await store.deleteByDoc(kb, 'never-there'), 0)
      const { dense } = await store.search(kb, { dense: Float32Array.from(axis(0)), limit: 10 })
      assert.deepEqual(ids(dense).sort(), ['keep:0', 'keep:1'])
      const query = sparse([[2, 1], [3, 1], [1, 1]])
      const expected = [...sparseScores(keep, query)].sort((a, b) => b[1] - a[1])
      const { sparse: hits } = await store.search(kb, { sparse: query, limit: 10 })
      assert.deepEqual(ids(hits), expected.map((e) => e[0]))
      for (let i = 0; i < hits.length; i++) assert.ok(Math.abs(hits[i].score - expected[i][1]) < 1e-4)
      assert.deepEqual(await store.docVectors(kb, 'gone'), [])
    })

    it('keeps collections of different KBs apart', async () => {
      const a = kbName('iso-a')
      const b = kbName('iso-b')
      await store.ensureCollection(a, DIMS)
      await store.ensureCollection(b, DIMS)
      await store.upsert(a, [point(a, 'shared-doc', 0, axis(0), [[1, 1]])])
      await store.upsert(b, [point(b, 'shared-doc', 0, axis(0), [[1, 1]]), point(b, 'other', 0, axis(1), [[1, 1]])])
      assert.equal(await store.count(a), 1)
      assert.equal(await store.count(b), 2)
      const ra = await store.search(a, { dense: Float32Array.from(axis(0)), sparse: sparse([[1, 1]]), limit: 10 })
      assert.deepEqual(ra.dense.map((h) => h.payload.kb_id), [a])
      assert.deepEqual(ra.sparse.map((h) => h.payload.kb_id), [a])
      assert.equal(await store.deleteByDoc(a, 'shared-doc'), 1)
      assert.equal(await store.count(b), 2)
      assert.equal(await store.dropCollection(a), true)
      assert.equal(await store.count(b), 2)
      assert.equal(await store.hasCollection(b), true)
    })

    it('returns a document\'s dense vectors in chunk order', async () => {
      const kb = kbName('docvec')
      await store.ensureCollection(kb, DIMS)
      const order = [3, 0, 4, 1, 2]
      await store.upsert(kb, order.map((i) => point(kb, 'doc', i, axis(i, 0.25))))
      await store.upsert(kb, [point(kb, 'other', 0, axis(7))])
      const vectors = await store.docVectors(kb, 'doc')
      assert.equal(vectors.length, 5)
      for (let i = 0; i < 5; i++) {
        assert.ok(vectors[i] instanceof Float32Array)
        assert.equal(vectors[i].length, DIMS)
        // Qdrant stores cosine vectors normalised, so compare directions.
        assert.ok(cosine(vectors[i], axis(i, 0.25)) > 0.9999, `vector ${i} out of order`)
      }
    })

    it('returns a document\'s whole points in chunk order: dense, sparse and payload as written', async () => {
      const kb = kbName('docpoints')
      await store.ensureCollection(kb, DIMS)
      const written = [2, 0, 1].map((i) => point(kb, 'doc', i, axis(i, 0.5), i === 1 ? [] : [[7 + i, 0.25 * (i + 1)], [4_000_000_000, 1.5]], { parent_chunk_id: i === 2 ? 'doc-p0-0' : null }))
      await store.upsert(kb, written)
      await store.upsert(kb, [point(kb, 'other', 0, axis(7), [[7, 1]])])
      // Replaced: the second write is what comes back.
      const replaced = point(kb, 'doc', 0, axis(5, 0.5), [[9, 2]])
      await store.upsert(kb, [replaced])
      const points = await store.docPoints(kb, 'doc')
      const want = [replaced, written[2], written[0]]
      assert.deepEqual(points.map((p) => p.payload), want.map((p) => p.payload))
      for (let i = 0; i < 3; i++) {
        assert.ok(points[i].dense instanceof Float32Array && points[i].dense.length === DIMS)
        assert.ok(cosine(points[i].dense, want[i].dense) > 0.9999, `dense vector of chunk ${i}`)
        // Terms in any order (a store may sort them), ids past 2^31 intact, weights as written.
        const terms = (p: VectorPoint) => [...p.sparse.indices].map((t, k) => [t, p.sparse.values[k]]).sort((x, y) => x[0] - y[0])
        assert.deepEqual(terms(points[i]), terms(want[i]), `sparse vector of chunk ${i}`)
      }
      assert.deepEqual(await store.docPoints(kb, 'nothing'), [])
      assert.deepEqual(await store.docPoints(kbName('absent'), 'doc'), [])
    })

    it('counts the points of each document, after upserts that replace and deletes', async () => {
      const kb = kbName('counts')
      await store.ensureCollection(kb, DIMS)
      assert.deepEqual(await store.docChunkCounts(kb), new Map())
      await store.upsert(kb, [0, 1, 2].map((i) => point(kb, 'three', i, axis(i))))
      await store.upsert(kb, [point(kb, 'one', 0, axis(3)), point(kb, 'gone', 0, axis(4)), point(kb, 'gone', 1, axis(5))])
      // The same chunk again replaces its point: still three.
      await store.upsert(kb, [point(kb, 'three', 1, axis(6))])
      await store.deleteByDoc(kb, 'gone')
      assert.deepEqual(await store.docChunkCounts(kb), new Map([['three', 3], ['one', 1]]))
      assert.deepEqual(await store.docChunkCounts(kbName('absent')), new Map())
    })

    it('answers an absent collection with empty results', async () => {
      const kb = kbName('absent')
      assert.deepEqual(await store.search(kb, { dense: Float32Array.from(axis(0)), sparse: sparse([[1, 1]]), limit: 5 }), { dense: [], sparse: [] })
      assert.equal(await store.count(kb), 0)
      assert.deepEqual(await store.docVectors(kb, 'd'), [])
      assert.equal(await store.deleteByDoc(kb, 'd'), 0)
      assert.equal(await store.hasCollection(kb), false)
      assert.equal(await store.dropCollection(kb), false)
    })

    it('drops a collection and can create it again empty', async () => {
      const kb = kbName('drop')
      await store.ensureCollection(kb, DIMS)
      await store.upsert(kb, [point(kb, 'd', 0, axis(0), [[1, 1]])])
      assert.equal(await store.dropCollection(kb), true)
      assert.equal(await store.hasCollection(kb), false)
      assert.equal(await store.count(kb), 0)
      assert.deepEqual(await store.search(kb, { dense: Float32Array.from(axis(0)), limit: 5 }), { dense: [], sparse: [] })
      await store.ensureCollection(kb, DIMS)
      assert.equal(await store.count(kb), 0)
      assert.deepEqual((await store.search(kb, { dense: Float32Array.from(axis(0)), limit: 5 })).dense, [])
    })

    it('upserts in batches larger than one request and counts them all', async () => {
      const kb = kbName('batch')
      await store.ensureCollection(kb, DIMS)
      const points = Array.from({ length: 700 }, (_, i) => point(kb, `doc${i % 7}`, i, axis(i, (i % 13) / 13), [[i % 50, 1]]))
      await store.upsert(kb, points)
      assert.equal(await store.count(kb), 700)
      assert.equal(await store.deleteByDoc(kb, 'doc3'), 100)
      assert.equal(await store.count(kb), 600)
      assert.equal((await store.docVectors(kb, 'doc4')).length, 100)
    })

    it('filters inside the index: a filtered search still returns `limit` hits, ranked as without the filter', async () => {
      const kb = kbName('filter-fill')
      await store.ensureCollection(kb, DIMS)
      // 30 chunks of an md document lie nearest the query on both sides; 10 of a pdf lie further away.
      const near = Array.from({ length: 30 }, (_, i) => point(kb, 'near', i, axis(0, 0.01 * i), [[1, 2], [4, 1]]))
      const far = Array.from({ length: 10 }, (_, i) => {
        const v = axis(0)
        v[3] = 1.5 + 0.2 * i
        return point(kb, 'far', i, v, [[1, 0.1 * (i + 1)], [2, 1]], { doc_type: 'pdf' })
      })
      const all = [...near, ...far]
      await store.upsert(kb, all)
      const q = Float32Array.from(axis(0))
      const sq = sparse([[1, 1]])
      const unfiltered = await store.search(kb, { dense: q, sparse: sq, limit: 5 })
      assert.ok(unfiltered.dense.every((h) => h.payload.doc_id === 'near'), 'premise: the top 5 are all md')
      const { dense, sparse: sp } = await store.search(kb, { dense: q, sparse: sq, limit: 5, filter: { docTypes: ['pdf'] } })
      const expectedDense = far.map((p) => ({ id: p.payload.chunk_id, s: cosine(q, p.dense) })).sort((a, b) => b.s - a.s).slice(0, 5)
      assert.deepEqual(ids(dense), expectedDense.map((e) => e.id))
      for (let i = 0; i < dense.length; i++) assert.ok(Math.abs(dense[i].score - expectedDense[i].s) < 1e-4)
      // IDF over the whole collection, as without a filter: a chunk's score does not depend on the filter.
      const scores = sparseScores(all, sq)
      const expectedSparse = far.map((p) => [p.payload.chunk_id, scores.get(p.payload.chunk_id)!] as const).sort((a, b) => b[1] - a[1]).slice(0, 5)
      assert.deepEqual(ids(sp), expectedSparse.map((e) => e[0]))
      for (let i = 0; i < sp.length; i++) assert.ok(Math.abs(sp[i].score - expectedSparse[i][1]) < 1e-4, `sparse score ${sp[i].score} vs ${expectedSparse[i][1]}`)
      assert.ok(dense.every((h) => h.payload.doc_type === 'pdf') && sp.every((h) => h.payload.doc_type === 'pdf'))
    })

    it('filters by documents, source type, document type, source prefix and update time; conditions combine with AND', async () => {
      const kb = kbName('filter-fields')
      await store.ensureCollection(kb, DIMS)
      const docs = [
        { doc: 'a', source_type: 'file', doc_type: 'md', source: 'hr/leave.md', updated_at: '2024-01-10T00:00:00.000Z' },
        { doc: 'b', source_type: 'file', doc_type: 'pdf', source: 'hr/payroll.pdf', updated_at: '2024-02-10T00:00:00.000Z' },
        { doc: 'c', source_type: 'web', doc_type: 'html', source: 'https://example.com/hr/faq', updated_at: '2024-03-10T00:00:00.000Z' },
        { doc: 'd', source_type: 'github', doc_type: 'md', source: 'github://acme/wiki/main/hr.md', updated_at: '2024-04-10T12:30:00.000Z' },
      ]
      await store.upsert(kb, docs.flatMap(({ doc, ...extra }, d) => [0, 1].map((i) => point(kb, doc, i, axis(d, 0.1 * i), [[1, 1], [10 + d, 1]], extra))))
      const q = { dense: Float32Array.from(axis(0, 0.5)), sparse: sparse([[1, 1]]), limit: 20 }
      const docsOf = async (filter: VectorFilter) => {
        const r = await store.search(kb, { ...q, filter })
        const dense = [...new Set(r.dense.map((h) => h.payload.doc_id))].sort().join('')
        assert.equal([...new Set(r.sparse.map((h) => h.payload.doc_id))].sort().join(''), dense, 'dense and sparse keep the same points')
        assert.equal(r.dense.length, dense.length * 2, 'every chunk of a kept document')
        return dense
      }
      const ms = (iso: string) => Date.parse(iso)
      assert.equal(await docsOf({}), 'abcd')
      assert.equal(await docsOf({ docIds: ['b', 'd', 'nope'] }), 'bd')
      assert.equal(await docsOf({ sourceTypes: ['file'] }), 'ab')
      assert.equal(await docsOf({ sourceTypes: ['web', 'github'] }), 'cd')
      assert.equal(await docsOf({ docTypes: ['md'] }), 'ad')
      assert.equal(await docsOf({ sourcePrefix: 'hr/' }), 'ab')
      assert.equal(await docsOf({ sourcePrefix: 'hr/p' }), 'b')
      assert.equal(await docsOf({ sourcePrefix: 'https://example.com/' }), 'c')
      assert.equal(await docsOf({ sourcePrefix: 'HR/' }), '', 'case-sensitive')
      // after <= updated_at < before.
      assert.equal(await docsOf({ updatedAfter: ms('2024-02-10T00:00:00.000Z') }), 'bcd')
      assert.equal(await docsOf({ updatedBefore: ms('2024-02-10T00:00:00.000Z') }), 'a')
      assert.equal(await docsOf({ updatedAfter: ms('2024-02-01T00:00:00Z'), updatedBefore: ms('2024-04-10T12:30:00.001Z') }), 'bcd')
      assert.equal(await docsOf({ updatedAfter: ms('2024-04-10T12:30:00.001Z') }), '')
      assert.equal(await docsOf({ docTypes: ['md'], sourceTypes: ['github'] }), 'd')
      assert.equal(await docsOf({ docIds: ['a', 'b', 'c'], docTypes: ['md', 'pdf'], updatedAfter: ms('2024-02-01T00:00:00Z') }), 'b')
      // Nothing can match: an unknown value, an empty list, an empty window.
      assert.equal(await docsOf({ docTypes: ['docx'] }), '')
      assert.equal(await docsOf({ docIds: [] }), '')
      assert.equal(await docsOf({ updatedAfter: ms('2024-03-01T00:00:00Z'), updatedBefore: ms('2024-03-01T00:00:00Z') }), '')
    })

    it('filters on what a point holds now: a re-upserted chunk moves between filters, a deleted one leaves them', async () => {
      const kb = kbName('filter-rewrite')
      await store.ensureCollection(kb, DIMS)
      await store.upsert(kb, [point(kb, 'd', 0, axis(0), [[1, 1]]), point(kb, 'd', 1, axis(1), [[1, 1]]), point(kb, 'e', 0, axis(2), [[1, 1]], { doc_type: 'pdf' })])
      await store.upsert(kb, [point(kb, 'd', 1, axis(1), [[1, 1]], { doc_type: 'pdf', updated_at: '2025-01-01T00:00:00.000Z' })])
      const q = { dense: Float32Array.from(axis(0)), sparse: sparse([[1, 1]]), limit: 10 }
      assert.deepEqual(ids((await store.search(kb, { ...q, filter: { docTypes: ['pdf'] } })).dense).sort(), ['d:1', 'e:0'])
      assert.deepEqual(ids((await store.search(kb, { ...q, filter: { docTypes: ['md'] } })).sparse), ['d:0'])
      assert.deepEqual(ids((await store.search(kb, { ...q, filter: { updatedAfter: Date.parse('2024-12-01T00:00:00Z') } })).dense), ['d:1'])
      await store.deleteByDoc(kb, 'e')
      assert.deepEqual(ids((await store.search(kb, { ...q, filter: { docTypes: ['pdf'] } })).sparse), ['d:1'])
    })

    it('refuses a filter of the wrong shape (a caller bug) with 500', async () => {
      const kb = kbName('filter-bad')
      await store.upsert(kb, [point(kb, 'd', 0, axis(0), [[1, 1]])])
      const q = { dense: Float32Array.from(axis(0)), limit: 3 }
      await rejectsWith(store.search(kb, { ...q, filter: { docIds: 'd' as unknown as string[] } }), 'INVALID_VECTOR_FILTER', 500, ['docIds'])
      await rejectsWith(store.search(kb, { ...q, filter: { updatedAfter: Number.NaN } }), 'INVALID_VECTOR_FILTER', 500, ['updatedAfter'])
      await rejectsWith(store.search(kb, { ...q, filter: { sourcePrefix: 3 as unknown as string } }), 'INVALID_VECTOR_FILTER', 500, ['sourcePrefix'])
    })

    it('answers the connectivity check', async () => {
      assert.equal(await store.ping(), true)
    })
  })
}
