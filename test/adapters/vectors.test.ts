// The embedded vector store: the shared contract, then what only it has to prove (persistence across
// restarts, torn log records, kill -9, a graph rebuilt from the arena, reuse of deleted rows, concurrency).
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { promises as fs } from 'node:fs'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { after, describe, it, type TestContext } from 'node:test'
import { fileURLToPath } from 'node:url'
import { createEmbeddedVectorStore, type EmbeddedVectorStore, type EmbeddedVectorStoreOptions } from '../../adapters/vectors/embedded.ts'
import { defaultQuantization, DenseIndex, GRAPH_FORMAT, GRAPH_REBUILD_MIN, GRAPH_REBUILD_SHARE, quantizeI8, SEGMENT_ROWS } from '../../adapters/vectors/dense-index.ts'
import { rescoredRows } from '../../adapters/vectors/rescore.ts'
import { decodeRows, encodeRows, MAX_ROWS, SparseIndex } from '../../adapters/vectors/sparse-index.ts'
import { postingSections, readSnapshot, writeSnapshot, type SnapshotCapture } from '../../adapters/vectors/snapshot.ts'
import { PayloadRef } from '../../adapters/vectors/payloads.ts'
import { deleteDocRecord, readRecords, upsertRecord, type WalRecordWriter } from '../../adapters/vectors/wal.ts'
import type { ChunkPayload, VectorFilter, VectorHit, VectorPoint } from '../../adapters/ports.ts'
import { poolByScore } from '../../plugins/search/fusion.ts'
import { rescoreAcrossKbs } from '../../plugins/search/service.ts'
import { axis, cosine, DIMS, point, sparse, sparseScores, vectorStoreContract } from './vectors.contract.ts'
import { mulberry32 as rng } from '../../bench/lib/rng.ts'

describe('embedded vector store: one query over several KBs', () => {
  it('answers each KB as if asked alone when one query array goes to KB after KB, and again after the array is rewritten', async (t) => {
    const dir = await tempDir(t)
    const dims = 48
    // The graph path (i8, the default) and the exact scan: both read the query prepared for the KB before.
    const store = await open(dir, { exactBudget: 0, dimensions: dims })
    t.after(() => store.close())
    const small = await open(await tempDir(t), { dimensions: dims })
    t.after(() => small.close())
    const kbs = ['ka', 'kb', 'kc']
    for (const [i, kb] of kbs.entries()) {
      await store.upsert(kb, randomPoints(kb, 400, 90 + i, dims))
      await small.upsert(kb, randomPoints(kb, 30, 95 + i, dims))
    }
    await store.whenIndexed()
    const r = rng(99)
    const queries = Array.from({ length: 6 }, () => Float32Array.from({ length: dims }, () => r() * 2 - 1))
    const ids = (hits: { id: string; score: number }[]) => hits.map((h) => `${h.id} ${h.score}`)
    // Each KB alone, each query a fresh array.
    const alone = new Map<string, string[][]>()
    for (const s of [store, small]) {
      for (const kb of kbs) {
        for (const [qi, q] of queries.entries()) {
          // Another query between two, so that none is prepared already.
          await s.search(kb, { dense: queries[(qi + 1) % queries.length].slice(), limit: 3 })
          const x = await s.search(kb, { dense: q.slice(), limit: 10, effort: 0.5 })
          const y = await s.search(kb, { dense: q.slice(), limit: 10, rankOnly: true })
          alone.set(`${s === store} ${kb} ${qi}`, [ids(x.dense), ids(y.dense)])
        }
      }
    }
    // One array for every KB in turn, rewritten in place for the next query.
    const shared = new Float32Array(dims)
    for (const [qi, q] of queries.entries()) {
      shared.set(q)
      for (const s of [store, small]) {
        for (const kb of kbs) {
          const x = await s.search(kb, { dense: shared, limit: 10, effort: 0.5 })
          const y = await s.search(kb, { dense: shared, limit: 10, rankOnly: true })
          assert.deepEqual([ids(x.dense), ids(y.dense)], alone.get(`${s === store} ${kb} ${qi}`), `${kb}, query ${qi}`)
        }
      }
    }
  })

  it('rescores the hits of a rank-only search exactly: the scores an exact search gives them; NaN once their chunks left', async (t) => {
    const dims = 48
    const dir = await tempDir(t)
    // A spill file holds most f32 rows: the rescored ones are read from it, as at 100k chunks.
    const store = await open(dir, { exactBudget: 0, dimensions: dims, segmentRows: 64 })
    t.after(() => store.close())
    await store.upsert('kb', randomPoints('kb', 400, 31, dims))
    await store.whenIndexed('kb')
    const r = rng(32)
    for (let qi = 0; qi < 5; qi++) {
      const dense = Float32Array.from({ length: dims }, () => r() * 2 - 1)
      const approx = (await store.search('kb', { dense, limit: 10, rankOnly: true })).dense
      const exact = new Map((await store.search('kb', { dense, limit: 400 })).dense.map((h) => [h.id, h.score]))
      const scores = await store.rescore('kb', dense, approx)
      assert.equal(scores.length, 10)
      assert.deepEqual([...scores], approx.map((h) => exact.get(h.id)))
      assert.ok(approx.some((h, i) => h.score !== scores[i]), 'the rank-only scores are the graph\'s own')
    }
    const dense = Float32Array.from({ length: dims }, () => r() * 2 - 1)
    const hits = (await store.search('kb', { dense, limit: 40, rankOnly: true })).dense
    const gone = hits[0].payload.doc_id
    await store.deleteByDoc('kb', gone)
    const after = await store.rescore('kb', dense, hits)
    assert.deepEqual(hits.map((h, i) => Number.isNaN(after[i])), hits.map((h) => h.payload.doc_id === gone))
    assert.ok([...(await store.rescore('no-such-kb', dense, hits))].every(Number.isNaN))
  })

  it('similarity over several KBs in two steps (rank-only lists, the best of all rescored) pools as the exact lists do', async (t) => {
    const dims = 48
    const store = await open(await tempDir(t), { exactBudget: 0, dimensions: dims, segmentRows: 64 })
    t.after(() => store.close())
    const kbs = ['k0', 'k1', 'k2', 'k3', 'k4', 'k5']
    for (const [i, kb] of kbs.entries()) await store.upsert(kb, randomPoints(kb, 200, 40 + i, dims))
    await store.whenIndexed()
    const r = rng(41)
    const topK = 10
    const effort = 1 / kbs.length
    // Two steps ask each KB for as many candidates as the margin of all (rescoredRows(10) = 20), by the graph's scores.
    const lists = async (dense: Float32Array, rankOnly: boolean) =>
      Promise.all(kbs.map(async (kb) => (await store.search(kb, { dense, limit: rankOnly ? rescoredRows(topK) : topK, effort, rankOnly })).dense.map((hit) => ({ hit, score: hit.score }))))
    const shown = (pooled: { hit: { id: string }; final: number }[]) => pooled.map((p) => `${p.hit.id} ${p.final}`)
    let approximate = 0
    for (let qi = 0; qi < 8; qi++) {
      const dense = Float32Array.from({ length: dims }, () => r() * 2 - 1)
      const exact = await lists(dense, false)
      const ranked = await lists(dense, true)
      if (ranked.some((l, kb) => l.slice(0, topK).some((x, i) => x.score !== exact[kb][i]?.score))) approximate++
      const rescored: number[] = []
      const counting = { rescore: (kb: string, q: Float32Array, hits: readonly VectorHit[]) => (rescored.push(hits.length), store.rescore(kb, q, hits)) }
      for (const minScore of [0, 0.2]) {
        rescored.length = 0
        const two = await rescoreAcrossKbs(counting, kbs, ranked, dense, topK, minScore)
        // The best 20 of the 120 candidates (rescoredRows(10)), not each KB's 10 and its margin.
        assert.equal(rescored.reduce((a, b) => a + b, 0), 20)
        const want = { pooled: 0 }
        const got = poolByScore(two.lists, minScore, topK)
        assert.deepEqual(shown(got), shown(poolByScore(exact, minScore, topK, want)), `query ${qi}, min_score ${minScore}`)
        assert.equal(two.candidates, want.pooled, `query ${qi}, min_score ${minScore}: candidates`)
      }
    }
    assert.ok(approximate >= 6, 'the rank-only lists carry the graph\'s own scores')
  })

  it('rescores a share of the margin for a KB searched among several, the whole margin alone', () => {
    assert.equal(rescoredRows(10), 20)
    assert.equal(rescoredRows(10, 1), 20)
    assert.equal(rescoredRows(3), 13)
    assert.equal(rescoredRows(40), 80)
    assert.equal(rescoredRows(10, 0.1), 11)
    assert.equal(rescoredRows(10, 0.5), 15)
    assert.equal(rescoredRows(21, 0.1), 24)
    assert.equal(rescoredRows(10, 0.001), 11)
  })
})

describe('embedded vector store: searches of one KB that meet in a turn', () => {
  const ids = (hits: { id: string; score: number }[]) => hits.map((h) => `${h.id} ${h.score}`)
  const turn = () => new Promise((r) => setImmediate(r))

  for (const quantization of ['i8', 'f32'] as const) {
    it(`answers each as it is answered alone, the graph searched for the unfiltered ones in one batch (${quantization})`, async (t) => {
      const dims = 48
      // Built from nothing by the background insertion with one thread (indexThreads), through many growths of the
      // graph: a batch searched by two threads needs the graph to hold two search contexts.
      const store = await open(await tempDir(t), { exactBudget: 0, dimensions: dims, quantization, searchThreads: 2, indexThreads: 1 })
      t.after(() => store.close())
      const points = randomPoints('kb', 600, 7, dims)
      for (let i = 0; i < points.length; i += 50) await store.upsert('kb', points.slice(i, i + 50))
      await store.whenIndexed('kb')
      const r = rng(8)
      const vec = () => Float32Array.from({ length: dims }, () => r() * 2 - 1)
      const filter: VectorFilter = { docIds: ['doc1', 'doc2', 'doc3'] }
      const queries = [
        { dense: vec(), limit: 10 },
        { dense: vec(), limit: 10, rankOnly: true },
        { dense: vec(), limit: 5, effort: 0.3 },
        { dense: vec(), limit: 10, filter },
        { dense: vec(), limit: 10, sparse: sparse([[3, 1.5], [7, 0.4]]) },
        { dense: vec(), limit: 10, rankOnly: true, effort: 0.5 },
        { sparse: sparse([[2, 1]]), limit: 10 },
      ]
      const alone: string[][] = []
      for (const q of queries) {
        await turn()
        const x = await store.search('kb', q)
        alone.push([...ids(x.dense), '|', ...ids(x.sparse)])
      }
      const before = (await store.stats('kb'))!.batchedSearches
      await turn()
      const together = await Promise.all(queries.map((q) => store.search('kb', q)))
      assert.deepEqual(together.map((x) => [...ids(x.dense), '|', ...ids(x.sparse)]), alone)
      assert.ok(alone.every((x) => x.length > 1), 'every search found something')
      // The first is answered at once; the filtered one and the one without a dense vector too. The four others wait
      // for the end of the turn and take their graph search from one batch.
      assert.equal((await store.stats('kb'))!.batchedSearches - before, 4)
    })
  }

  it('answers the searches of requests over several KBs that meet in a turn as each alone (one query, its KBs)', async (t) => {
    const dims = 32
    const store = await open(await tempDir(t), { exactBudget: 0, dimensions: dims, searchThreads: 2 })
    t.after(() => store.close())
    const kbs = ['k0', 'k1', 'k2']
    for (const [i, kb] of kbs.entries()) await store.upsert(kb, randomPoints(kb, 300, 20 + i, dims))
    await store.whenIndexed()
    const r = rng(9)
    const vec = () => Float32Array.from({ length: dims }, () => r() * 2 - 1)
    // Requests as the search service makes them: one query (its arrays) for each of its KBs, some in hybrid.
    const requests = Array.from({ length: 5 }, (_, i) => ({ dense: vec(), limit: 6, effort: 1 / 3, rankOnly: i % 2 === 1, sparse: i % 2 === 1 ? sparse([[i, 1], [i + 5, 0.5]]) : undefined }))
    const alone: string[][] = []
    for (const q of requests) {
      for (const kb of kbs) {
        await turn()
        const x = await store.search(kb, q)
        alone.push([...ids(x.dense), '|', ...ids(x.sparse)])
      }
    }
    // A waiting request's array reused for another query at once: each gets its own query.
    const reused = Float32Array.from(requests[1].dense)
    const before = await Promise.all(kbs.map(async (kb) => (await store.stats(kb))!.batchedSearches))
    await turn()
    const pending = requests.flatMap((q, i) => kbs.map((kb) => store.search(kb, i === 1 ? { ...q, dense: reused } : q)))
    reused.set(requests[2].dense)
    const extra = kbs.map((kb) => store.search(kb, { ...requests[2], dense: reused }))
    const together = await Promise.all(pending)
    assert.deepEqual(together.map((x) => [...ids(x.dense), '|', ...ids(x.sparse)]), alone)
    assert.deepEqual((await Promise.all(extra)).map((x) => [...ids(x.dense), '|', ...ids(x.sparse)]), alone.slice(6, 9))
    assert.ok(alone.every((x) => x.length > 2), 'every search found something')
    // The first request is answered at once; the four others and the reused array's wait, in each KB.
    const after = await Promise.all(kbs.map(async (kb) => (await store.stats(kb))!.batchedSearches))
    assert.deepEqual(after.map((n, i) => n - before[i]), [5, 5, 5])
  })

  it('keeps in the graph the rows of the adds that went through when a later add of the slice fails', async (t) => {
    const dims = 8
    const index = new DenseIndex((await import('usearch')).default, {
      dimensions: dims, quantization: 'i8', connectivity: 16, expansionAdd: 64, expansionSearch: 64, exactBudget: 0,
      filterScanBudget: 0, filterGraphCost: 3, indexThreads: 1, searchThreads: 2, indexSliceMs: 1000,
    })
    t.after(() => index.stop())
    const r = rng(11)
    const rows = Array.from({ length: 40 }, () => Float32Array.from({ length: dims }, () => r() * 2 - 1))
    for (const [row, v] of rows.entries()) index.set(row, v)
    // The graph grows from nothing in one-row adds (addToGraph): the third fails, as a reserve that runs out of memory.
    const graph = (index as unknown as { hnsw: { add(...a: unknown[]): void } }).hnsw
    const add = graph.add.bind(graph)
    let calls = 0
    Object.defineProperty(graph, 'add', {
      value: (...a: unknown[]) => {
        if (++calls === 3) throw new Error('Failed to reserve memory')
        add(...a)
      },
    })
    assert.equal(index.indexSlice(), 2)
    assert.deepEqual([index.graphCount, index.pendingCount, String(index.failure)], [2, 38, 'Error: Failed to reserve memory'])
    // Every row is found once: the two in the graph are not also scanned as waiting rows.
    const found = index.search(rows[0], 40)
    assert.equal(new Set(found.rows).size, found.rows.length)
    assert.equal(found.rows.length, 40)
    assert.equal(found.rows[0], 0)
  })

  it('rebuilds a graph churned by removals, answering from the old one meanwhile and keeping what changed during it', async (t) => {
    const dims = 8
    const index = new DenseIndex((await import('usearch')).default, {
      dimensions: dims, quantization: 'f32', connectivity: 16, expansionAdd: 64, expansionSearch: 256, exactBudget: 0,
      filterScanBudget: 0, filterGraphCost: 3, indexThreads: 1, indexSliceMs: 0.05,
    })
    t.after(() => index.stop())
    const r = rng(21)
    const vec = () => Float32Array.from({ length: dims }, () => r() * 2 - 1)
    const live = new Map<number, Float32Array>()
    const add = (row: number) => {
      const v = vec()
      live.set(row, v)
      index.set(row, v)
    }
    const drop = (row: number) => {
      live.delete(row)
      index.remove(row)
    }
    const drain = () => {
      while (index.indexSlice() > 0);
    }
    const top1 = (v: Float32Array) => index.search(v, 1).rows[0]
    for (let row = 0; row < 400; row++) add(row)
    drain()
    assert.deepEqual([index.graphCount, index.pendingCount, index.graphChurn], [400, 0, 0])
    // Removals up to just under the share of the rows left in the graph start nothing; the next one starts the rebuild.
    let threshold = 1
    while (threshold < Math.max(GRAPH_REBUILD_MIN, (400 - threshold) * GRAPH_REBUILD_SHARE)) threshold++
    let next = 0
    while (index.graphChurn < threshold - 1) drop(next++)
    assert.equal(index.graphRebuilding, false)
    drop(next++)
    assert.deepEqual([index.graphRebuilding, index.graphChurn], [true, threshold])
    // Part of it built (slices of a few rows): the rows first in line are in the new graph, the rest not yet.
    assert.ok(index.indexSlice() > 0)
    assert.equal(index.graphRebuilding, true)
    const first = next
    // Meanwhile: a row already in the new graph removed, one not yet in it removed and its number reused at once (the
    // rebuild's list then names it twice), a row removed before reused, a new row.
    drop(first)
    drop(399)
    add(399)
    add(3)
    add(400)
    assert.equal(index.pendingCount, 3)
    for (const [row, v] of live) assert.equal(top1(v), row, `row ${row} found during the rebuild`)
    // Slices of waiting rows take turns with the rebuild's: the three reach the graph searched meanwhile.
    for (let i = 0; i < 6; i++) index.indexSlice()
    assert.deepEqual([index.graphRebuilding, index.pendingCount, [3, 399, 400].every((row) => index.isInGraph(row))], [true, 0, true])
    for (const [row, v] of live) assert.equal(top1(v), row, `row ${row} found during the rebuild`)
    while (index.graphRebuilding) index.indexSlice()
    assert.deepEqual([index.graphRebuilds, index.pendingCount, index.graphCount], [1, 0, live.size], 'the new graph took them too')
    assert.equal(index.graphChurn, 1, 'the removal the new graph had already taken')
    // Every live row is found by its own vector, no removed row is, and the top 5 are the exact ones.
    for (const [row, v] of live) assert.equal(top1(v), row, `row ${row} found after the rebuild`)
    const q = rng(22)
    for (let i = 0; i < 200; i++) {
      const v = Float32Array.from({ length: dims }, () => q() * 2 - 1)
      const expected = [...live].map(([row, x]) => ({ row, s: cosine(v, x) })).sort((a, b) => b.s - a.s).slice(0, 5)
      assert.deepEqual([...index.search(v, 5).rows], expected.map((e) => e.row))
    }
  })

  it('answers a KB dropped while its searches waited with nothing, and refuses them once the store closed', async (t) => {
    const dims = 16
    const store = await open(await tempDir(t), { exactBudget: 0, dimensions: dims, searchThreads: 2 })
    await store.upsert('ka', randomPoints('ka', 200, 3, dims))
    await store.upsert('kb', randomPoints('kb', 200, 4, dims))
    await store.whenIndexed()
    const q = { dense: Float32Array.from({ length: dims }, (_, i) => i - 8), limit: 5 }
    await turn()
    const first = store.search('ka', q)
    const waiting = [store.search('ka', q), store.search('ka', q)]
    const dropped = store.dropCollection('ka')
    assert.equal((await first).dense.length, 5)
    await dropped
    for (const w of waiting) assert.deepEqual(await w, { dense: [], sparse: [] })
    await turn()
    const now = store.search('kb', q)
    const later = [store.search('kb', q), store.search('kb', q)]
    assert.equal((await now).dense.length, 5)
    const refused = later.map((w) => assert.rejects(w, /closed/))
    await store.close()
    await Promise.all(refused)
  })

  it('reads a waiting search\'s query when it is made: the caller may reuse its array at once', async (t) => {
    const dims = 16
    const store = await open(await tempDir(t), { exactBudget: 0, dimensions: dims, searchThreads: 2 })
    t.after(() => store.close())
    const points = randomPoints('kb', 200, 5, dims)
    await store.upsert('kb', points)
    await store.whenIndexed()
    const shared = Float32Array.from(points[10].dense)
    await turn()
    const a = store.search('kb', { dense: shared, limit: 1 })
    const b = store.search('kb', { dense: shared, limit: 1 })
    shared.set(points[20].dense)
    const c = store.search('kb', { dense: shared, limit: 1 })
    assert.deepEqual([(await a).dense[0].id, (await b).dense[0].id, (await c).dense[0].id], [points[10].payload.chunk_id, points[10].payload.chunk_id, points[20].payload.chunk_id])
  })
})

async function tempDir(t: TestContext | null, prefix = 'quarry-vectors-'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix))
  t?.after(() => fs.rm(dir, { recursive: true, force: true }))
  return dir
}

const open = (dir: string, extra: Partial<EmbeddedVectorStoreOptions> = {}) =>
  createEmbeddedVectorStore({ dir, dimensions: DIMS, snapshotIdleMs: 0, ...extra })

// The contract on the two dense paths: exact scan (small collections) and HNSW graph (exactBudget 0).
const dirs: string[] = []
after(() => Promise.all(dirs.map((d) => fs.rm(d, { recursive: true, force: true }))))
vectorStoreContract('embedded (exact scan)', async (dimensions) => {
  const dir = await tempDir(null)
  dirs.push(dir)
  return createEmbeddedVectorStore({ dir, dimensions })
})
vectorStoreContract('embedded (HNSW graph, f32)', async (dimensions) => {
  const dir = await tempDir(null)
  dirs.push(dir)
  return createEmbeddedVectorStore({ dir, dimensions, exactBudget: 0, quantization: 'f32' })
})
// Segments of 16 rows: every full one goes to the spill file, so the contract's reads come from disk.
vectorStoreContract('embedded (HNSW graph, f32 originals on disk)', async (dimensions) => {
  const dir = await tempDir(null)
  dirs.push(dir)
  return createEmbeddedVectorStore({ dir, dimensions, exactBudget: 0, quantization: 'f32', segmentRows: 16 })
})


function randomPoints(kb: string, n: number, seed: number, dims = DIMS, docSize = 10, prefix = 'doc'): VectorPoint[] {
  const r = rng(seed)
  return Array.from({ length: n }, (_, i) => {
    const dense = Array.from({ length: dims }, () => r() * 2 - 1)
    const terms = new Map<number, number>()
    const nnz = 1 + Math.floor(r() * 6)
    while (terms.size < nnz) terms.set(Math.floor(r() * r() * 200), Math.round(r() * 30) / 10 + 0.1)
    return { ...point(kb, `${prefix}${Math.floor(i / docSize)}`, i % docSize, [], [...terms]), dense: Float32Array.from(dense) }
  })
}

/**
 * Checks a store's answers for a KB against a brute-force reference over the live points. `denseMissed`: how many of
 * a query's true top 5 its dense hits may leave out (a graph that churned is approximate: GRAPH_REBUILD_SHARE); every
 * hit must still be a live point with its own payload and its exact score, best first.
 */
async function assertMatchesReference(store: EmbeddedVectorStore, kb: string, live: VectorPoint[], seed: number, dims = DIMS, denseMissed = 0) {
  assert.equal(await store.count(kb), live.length)
  const r = rng(seed)
  const byId = new Map(live.map((p) => [p.payload.chunk_id, p]))
  for (let q = 0; q < 5; q++) {
    const query = Float32Array.from({ length: dims }, () => r() * 2 - 1)
    const expected = live.map((p) => ({ id: p.payload.chunk_id, s: cosine(query, p.dense) })).sort((a, b) => b.s - a.s).slice(0, 5)
    const { dense } = await store.search(kb, { dense: query, limit: 5 })
    if (denseMissed === 0) assert.deepEqual(dense.map((h) => h.payload.chunk_id), expected.map((e) => e.id))
    else {
      assert.equal(dense.length, expected.length)
      const found = expected.filter((e) => dense.some((h) => h.payload.chunk_id === e.id)).length
      assert.ok(found >= expected.length - denseMissed, `${found} of the true top ${expected.length} found`)
    }
    for (const h of dense) {
      assert.equal(h.id, h.payload.chunk_id)
      assert.deepEqual(h.payload, byId.get(h.payload.chunk_id)?.payload)
    }
    for (let i = 0; i < dense.length; i++) {
      assert.ok(Math.abs(dense[i].score - cosine(query, byId.get(dense[i].id)!.dense)) < 1e-5)
      if (i > 0) assert.ok(dense[i].score <= dense[i - 1].score)
      if (denseMissed === 0) assert.ok(Math.abs(dense[i].score - expected[i].s) < 1e-5)
    }
    const sq = sparse([[Math.floor(r() * 20), 1], [Math.floor(r() * 200), 0.5], [Math.floor(r() * 5), 2]])
    const sExpected = [...sparseScores(live, sq)].sort((a, b) => b[1] - a[1] || 0).slice(0, 8)
    const { sparse: hits } = await store.search(kb, { sparse: sq, limit: 8 })
    assert.equal(hits.length, sExpected.length)
    for (let i = 0; i < hits.length; i++) assert.ok(Math.abs(hits[i].score - sExpected[i][1]) < 1e-4, `sparse score ${i}: ${hits[i].score} vs ${sExpected[i][1]}`)
  }
}

describe('embedded vector store: persistence', () => {
  it('keeps points, deletions and replacements across a restart (log replay, then snapshot)', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-persist'
    let store = await open(dir, { snapshotOnClose: false })
    await store.ensureCollection(kb, DIMS)
    const first = randomPoints(kb, 60, 1)
    await store.upsert(kb, first)
    assert.equal(await store.deleteByDoc(kb, 'doc2'), 10)
    const replaced = randomPoints(kb, 5, 99).map((p, i) => ({ ...p, payload: { ...first[i].payload, text: `replaced ${i}` } }))
    await store.upsert(kb, replaced)
    const live = [...replaced, ...first.slice(5).filter((p) => p.payload.doc_id !== 'doc2')]
    await store.close()
    const files = await fs.readdir(join(dir, kb))
    assert.ok(!files.some((f) => f.startsWith('points-')), 'no snapshot yet: the restart must replay the log')

    store = await open(dir, { snapshotOnClose: true })
    await assertMatchesReference(store, kb, live, 7)
    assert.equal((await store.search(kb, { dense: replaced[0].dense, limit: 1 })).dense[0].payload.text, 'replaced 0')
    await store.close()
    const after = await fs.readdir(join(dir, kb))
    assert.ok(after.some((f) => f.startsWith('points-')), 'close wrote a snapshot')

    store = await open(dir)
    const stats = await store.stats(kb)
    assert.equal(stats?.walBytes, 0, 'nothing left to replay after a snapshot')
    await assertMatchesReference(store, kb, live, 8)
    // Writes after the snapshot land in the log and survive a restart on top of it.
    const more = randomPoints(kb, 20, 3, DIMS, 10, 'late')
    await store.upsert(kb, more)
    assert.equal(await store.deleteByDoc(kb, 'doc4'), 10)
    const live2 = [...live.filter((p) => p.payload.doc_id !== 'doc4'), ...more]
    await store.close()
    store = await createEmbeddedVectorStore({ dir, dimensions: DIMS, snapshotOnClose: false, preload: false })
    await assertMatchesReference(store, kb, live2, 9)
    assert.equal(await store.hasCollection('kb-never'), false)
    // A snapshot of restored rows (payloads kept as the old snapshot's bytes) plus new ones reads back the same.
    const last = randomPoints(kb, 7, 4, DIMS, 7, 'last')
    await store.upsert(kb, last)
    await store.snapshot(kb)
    await store.close()
    store = await open(dir)
    await assertMatchesReference(store, kb, [...live2, ...last], 10)
    assert.deepEqual(await store.docVectors(kb, 'last0'), last.map((p) => p.dense))
    await store.close()
  })

  it('replays log groups of every size after a restart: one past the write loop\'s buffer, and small ones written over a larger one\'s bytes', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-groups'
    const dims = 512
    const reopen = () => createEmbeddedVectorStore({ dir, dimensions: dims, snapshotIdleMs: 0, snapshotOnClose: false })
    let store = await reopen()
    await store.ensureCollection(kb, dims)
    const batch = (n: number, seed: number, prefix: string) => randomPoints(kb, n, seed, dims, 10, prefix)
    // Written in one tick: the first write is a group of its own, the two after it share the next one, in the buffer the
    // first left 600 KB of its bytes in.
    const big = batch(300, 31, 'big')
    const small = [batch(5, 32, 'sa'), batch(7, 33, 'sb')]
    await Promise.all([store.upsert(kb, big), ...small.map((b) => store.upsert(kb, b))])
    // Over 2 MB (1,200 points of 512 dimensions): a buffer of its own.
    const huge = batch(1200, 34, 'huge')
    await store.upsert(kb, huge)
    assert.equal(await store.deleteByDoc(kb, 'big3'), 10)
    const late = batch(12, 35, 'late')
    await Promise.all([store.upsert(kb, late.slice(0, 6)), store.upsert(kb, late.slice(6))])
    const live = [...big.filter((p) => p.payload.doc_id !== 'big3'), ...small.flat(), ...huge, ...late]
    await assertMatchesReference(store, kb, live, 41, dims)
    await store.close()
    const files = await fs.readdir(join(dir, kb))
    assert.ok(!files.some((f) => f.startsWith('points-')), 'no snapshot: the restart replays the log')
    store = await reopen()
    t.after(() => store.close())
    await assertMatchesReference(store, kb, live, 42, dims)
    assert.deepEqual(await store.docVectors(kb, 'late1'), late.slice(10).map((p) => p.dense))
  })

  it('a hit keeps the payload of the moment it was found, when its row is rewritten before the payload is read', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-lazy'
    let store = await open(dir)
    await store.ensureCollection(kb, DIMS)
    const pts = randomPoints(kb, 12, 21)
    await store.upsert(kb, pts)
    await store.close()
    // Restored rows hold their payload as snapshot bytes (parsed on read); the rewritten row then holds an object.
    store = await open(dir)
    for (const round of ['snapshot bytes', 'object']) {
      const { dense: [before] } = await store.search(kb, { dense: pts[0].dense, limit: 1 })
      assert.equal(before.id, pts[0].payload.chunk_id, round)
      const text = `rewritten after a search over ${round}`
      await store.upsert(kb, [{ ...pts[0], payload: { ...pts[0].payload, text } }])
      assert.notEqual(before.payload.text, text, `${round}: the earlier hit still reads the payload it was found with`)
      assert.equal(before.payload, before.payload, 'one object per hit')
      const { dense: [after] } = await store.search(kb, { dense: pts[0].dense, limit: 1 })
      assert.equal(after.payload.text, text, round)
      pts[0] = { ...pts[0], payload: after.payload }
    }
    await store.close()
  })

  it('refuses to reopen a collection with another vector size', async (t) => {
    const dir = await tempDir(t)
    let store = await open(dir)
    await store.ensureCollection('kb-dims', DIMS)
    await store.close()
    store = await createEmbeddedVectorStore({ dir, dimensions: 16 })
    t.after(() => store.close())
    await assert.rejects(store.ensureCollection('kb-dims', 16), (e: { code?: string; message?: string }) => e.code === 'VECTOR_DIMENSION_MISMATCH' && /\b8\b/.test(e.message ?? '') && /\b16\b/.test(e.message ?? ''))
    // An upsert of the store's default size into it is refused the same way, before anything is logged.
    await assert.rejects(store.upsert('kb-dims', [point('kb-dims', 'd', 0, new Array(16).fill(1))]), { code: 'VECTOR_DIMENSION_MISMATCH' })
    await assert.rejects(store.search('kb-dims', { dense: new Float32Array(16), limit: 3 }), { code: 'VECTOR_DIMENSION_MISMATCH' })
  })

  it('drops a torn last log record and keeps appending after the intact ones', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-torn'
    let store = await open(dir, { snapshotOnClose: false })
    const a = randomPoints(kb, 10, 11, DIMS, 10, 'a')
    const b = randomPoints(kb, 10, 12, DIMS, 10, 'b')
    await store.upsert(kb, a)
    await store.upsert(kb, b)
    await store.close()
    const wal = (await fs.readdir(join(dir, kb))).find((f) => f.startsWith('wal-'))!
    const path = join(dir, kb, wal)
    const full = (await fs.stat(path)).size
    // A kill -9 in the middle of the second write: only part of it reached the file.
    await fs.truncate(path, full - 37)

    store = await open(dir, { snapshotOnClose: false })
    await assertMatchesReference(store, kb, a, 21)
    const c = randomPoints(kb, 10, 13, DIMS, 10, 'c')
    await store.upsert(kb, c)
    await store.close()
    store = await open(dir, { snapshotOnClose: false })
    await assertMatchesReference(store, kb, [...a, ...c], 22)
    await store.close()
  })

  it('drops a last record whose checksum does not match', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-crc'
    let store = await open(dir, { snapshotOnClose: false })
    const a = randomPoints(kb, 8, 31, DIMS, 4, 'a')
    const b = randomPoints(kb, 8, 32, DIMS, 4, 'b')
    await store.upsert(kb, a)
    await store.upsert(kb, b)
    await store.close()
    const wal = (await fs.readdir(join(dir, kb))).find((f) => f.startsWith('wal-'))!
    const path = join(dir, kb, wal)
    const bytes = await fs.readFile(path)
    bytes[bytes.length - 5] ^= 0xff
    await fs.writeFile(path, bytes)
    store = await open(dir)
    t.after(() => store.close())
    await assertMatchesReference(store, kb, a, 33)
  })

  it('rebuilds the HNSW graph when its file is missing', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-rebuild'
    let store = await open(dir, { exactBudget: 0 })
    const points = randomPoints(kb, 300, 41)
    await store.upsert(kb, points)
    await store.whenIndexed(kb)
    await store.close()
    const graph = (await fs.readdir(join(dir, kb))).find((f) => f.startsWith('hnsw-'))
    assert.ok(graph, 'the snapshot saved the graph')
    await fs.rm(join(dir, kb, graph))
    store = await open(dir, { exactBudget: 0 })
    t.after(() => store.close())
    // Searchable at once (the rows waiting for the graph are scanned), and again once rebuilt.
    const before = await store.stats(kb)
    assert.equal(before?.points, 300)
    await assertMatchesReference(store, kb, points, 42)
    await store.whenIndexed(kb)
    assert.equal((await store.stats(kb))?.inGraph, 300)
    const probe = points[17]
    assert.equal((await store.search(kb, { dense: probe.dense, limit: 1 })).dense[0].payload.chunk_id, probe.payload.chunk_id)
  })

  it('rebuilds a graph saved with other parameters (an f16 graph, the earlier default, opened with the default type), then loads the new one', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-requantize'
    let store = await open(dir, { exactBudget: 0, quantization: 'f16' })
    const points = randomPoints(kb, 300, 44)
    await store.upsert(kb, points)
    await store.whenIndexed(kb)
    await store.close()
    // Slices of 1 ms starting at one row: the graph cannot be rebuilt by the time the first stats are read.
    store = await open(dir, { exactBudget: 0, indexSliceMs: 1 })
    const reopened = await store.stats(kb)
    assert.equal(reopened?.points, 300)
    assert.ok((reopened?.inGraph ?? 0) < 300, `the f16 graph is not used by a store of the default type, ${defaultQuantization()} (${reopened?.inGraph} rows in its graph)`)
    await assertMatchesReference(store, kb, points, 45)
    await store.whenIndexed(kb)
    assert.equal((await store.stats(kb))?.inGraph, 300)
    await store.close()
    // Saved with the new parameters: the next open loads it whole.
    store = await open(dir, { exactBudget: 0, indexSliceMs: 1 })
    t.after(() => store.close())
    assert.equal((await store.stats(kb))?.inGraph, 300, 'the rebuilt graph is loaded')
    const probe = points[123]
    assert.equal((await store.search(kb, { dense: probe.dense, limit: 1 })).dense[0].payload.chunk_id, probe.payload.chunk_id)
  })

  it('snapshots while writes and deletes keep coming, and reopens to the same state', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-busy'
    let store = await open(dir, { snapshotMinBytes: 2048, snapshotOnClose: false })
    const points = randomPoints(kb, 600, 71, DIMS, 10)
    // Issued without waiting: the store applies them in call order, so the expected state is sequential.
    const ops: Promise<unknown>[] = []
    let live: VectorPoint[] = []
    for (let i = 0; i < 600; i += 30) {
      const batch = points.slice(i, i + 30)
      ops.push(store.upsert(kb, batch))
      live.push(...batch)
      if (i % 90 === 60) {
        const doc = `doc${i / 10 - 4}`
        ops.push(store.deleteByDoc(kb, doc))
        live = live.filter((p) => p.payload.doc_id !== doc)
      }
      // Let the write loop run, so the operations spread over many group commits and snapshots.
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    await Promise.all(ops)
    await store.snapshot(kb)
    // Each snapshot starts a new log segment. The first group of writes alone passes the threshold, so at
    // least one snapshot was captured while later writes and deletes were still arriving.
    const stats = await store.stats(kb)
    assert.ok((stats?.snapshotSeq ?? 0) >= 2, `a snapshot was taken during the writes (seq ${stats?.snapshotSeq})`)
    await assertMatchesReference(store, kb, live, 72)
    await store.close()
    store = await open(dir)
    t.after(() => store.close())
    await assertMatchesReference(store, kb, live, 73)
  })

  it('keeps the last graph file in a snapshot taken while a large graph trails the writes, and reopens to the same answers', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-keep-graph'
    const manifest = async () => JSON.parse(await fs.readFile(join(dir, kb, 'manifest.json'), 'utf8')) as { snapshot: { seq: number; graph: string | null; graphRows: number } }
    // Graph building gets a thousandth of the time while writes arrive, so it trails them; every graph counts as
    // too large to write then; a snapshot is due once the log is half the last snapshot's size.
    let store = await open(dir, { exactBudget: 0, snapshotOnClose: false, snapshotMinBytes: 0, snapshotGraphMaxBytes: 1, indexSliceMs: 1, busyShare: 0.001 })
    const first = randomPoints(kb, 400, 81, DIMS, 10, 'a')
    await store.upsert(kb, first)
    await store.whenIndexed(kb)
    await store.snapshot(kb) // asked for: writes the graph, whole
    const saved = (await manifest()).snapshot
    assert.ok(saved.graph !== null && saved.graphRows === 400, `the first snapshot wrote the graph (${JSON.stringify(saved)})`)
    // A few points join the graph after that file was written: a kept file lacks them.
    const late = randomPoints(kb, 40, 84, DIMS, 10, 'c')
    await store.upsert(kb, late)
    await store.whenIndexed(kb)
    assert.equal((await manifest()).snapshot.seq, saved.seq, 'no snapshot was due for these few')
    // Rows held by that graph file are deleted (15 of 40 documents: enough for their rows to be handed out
    // again), then new points take some of those rows while the graph trails.
    let live = [...first, ...late]
    for (let d = 0; d < 15; d++) {
      await store.deleteByDoc(kb, `a${d}`)
      live = live.filter((p) => p.payload.doc_id !== `a${d}`)
    }
    const second = randomPoints(kb, 400, 82, DIMS, 10, 'b')
    await store.upsert(kb, second)
    live = [...live, ...second]
    let stats = await store.stats(kb)
    for (let i = 0; i < 200 && (stats?.snapshotSeq ?? 0) <= saved.seq; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10))
      stats = await store.stats(kb)
    }
    const kept = (await manifest()).snapshot
    assert.ok(kept.seq > saved.seq, `a snapshot was due after the second batch (seq ${kept.seq})`)
    assert.equal(kept.graph, saved.graph, 'that snapshot kept the graph file of the first one')
    assert.equal(kept.graphRows, 400)
    assert.ok((stats?.rows ?? 840) < 840, `new points took rows of deleted ones (${stats?.rows} rows for 840 points written)`)
    await store.close() // no snapshot on close: the next start reads the kept graph file
    store = await open(dir, { exactBudget: 0, indexSliceMs: 1 })
    t.after(() => store.close())
    const reopened = await store.stats(kb)
    assert.equal(reopened?.points, live.length)
    assert.ok((reopened?.inGraph ?? 0) >= 250, `the kept file's 250 live rows are in the graph at once (${reopened?.inGraph})`)
    await assertMatchesReference(store, kb, live, 83)
    await store.whenIndexed(kb)
    assert.equal((await store.stats(kb))?.graphFailure, null)
    assert.equal((await store.stats(kb))?.inGraph, live.length)
    // Each point finds itself first, by exact score and by the graph's own order: no row answers with the
    // vector of the point that held its number before.
    for (const p of live) {
      for (const rankOnly of [false, true]) {
        const hit = (await store.search(kb, { dense: p.dense, limit: 1, rankOnly })).dense[0]
        assert.equal(hit?.payload.chunk_id, p.payload.chunk_id, `${p.payload.chunk_id} finds itself (rankOnly ${rankOnly})`)
      }
    }
    // The next snapshot asked for writes the whole graph again, and the kept file goes.
    await store.snapshot(kb)
    const rewritten = (await manifest()).snapshot
    assert.notEqual(rewritten.graph, saved.graph)
    assert.equal(rewritten.graphRows, live.length)
    await assert.rejects(fs.access(join(dir, kb, saved.graph!)))
  })

  it('snapshots an empty collection and drops collections a lazy store has not opened', async (t) => {
    const dir = await tempDir(t)
    let store = await open(dir)
    await store.ensureCollection('kb-empty', DIMS)
    await store.upsert('kb-gone', randomPoints('kb-gone', 5, 81))
    await store.upsert('kb-emptied', randomPoints('kb-emptied', 10, 82))
    assert.equal(await store.deleteByDoc('kb-emptied', 'doc0'), 10)
    await store.snapshot()
    await store.close()
    store = await open(dir, { preload: false })
    t.after(() => store.close())
    assert.equal(await store.count('kb-empty'), 0)
    assert.equal(await store.count('kb-emptied'), 0)
    assert.equal(await store.dropCollection('kb-gone'), true)
    assert.equal(await store.hasCollection('kb-gone'), false)
    assert.deepEqual((await fs.readdir(dir)).filter((f) => f.startsWith('kb-')).sort(), ['kb-emptied', 'kb-empty'])
    await store.upsert('kb-empty', randomPoints('kb-empty', 3, 83))
    assert.equal(await store.count('kb-empty'), 3)
  })

  it('folds the log into a snapshot once writes go quiet', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-idle'
    const store = await createEmbeddedVectorStore({ dir, dimensions: DIMS, snapshotIdleMs: 30, snapshotOnClose: false })
    t.after(() => store.close())
    const points = randomPoints(kb, 40, 91)
    await store.upsert(kb, points)
    assert.ok(((await store.stats(kb))?.walBytes ?? 0) > 0)
    // Waits for the timer (bounded); what is asserted is that it fired, not how fast.
    for (let i = 0; i < 250 && ((await store.stats(kb))?.walBytes ?? 1) > 0; i++) await new Promise((r) => setTimeout(r, 20))
    const stats = await store.stats(kb)
    assert.equal(stats?.walBytes, 0)
    assert.ok((stats?.snapshotSeq ?? 0) >= 1)
    assert.ok((await fs.readdir(join(dir, kb))).some((f) => f.startsWith('points-')))
  })

  it('writes periodic snapshots and truncates the log', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-snap'
    let store = await open(dir, { snapshotMinBytes: 4096, snapshotOnClose: false })
    const points = randomPoints(kb, 200, 51)
    for (let i = 0; i < 200; i += 20) await store.upsert(kb, points.slice(i, i + 20))
    await store.snapshot(kb)
    const stats = await store.stats(kb)
    assert.ok((stats?.snapshotSeq ?? 0) > 1, 'several snapshots were taken')
    const wals = (await fs.readdir(join(dir, kb))).filter((f) => f.startsWith('wal-'))
    assert.equal(wals.length, 1, 'segments folded into a snapshot are deleted')
    await store.close()
    store = await open(dir)
    t.after(() => store.close())
    await assertMatchesReference(store, kb, points, 52)
  })
})

describe('embedded vector store: the i8 graph', () => {
  it('scales each vector by its own largest component to +-127 and rounds', () => {
    const src = Float32Array.from([0, 0.5, -2, 1.01, 0.0079, -0.0079, 99])
    const out = new Int8Array(9).fill(55)
    // Elements 1..4 of src, written from out[2]: the largest is -2, so 0.5 -> 31.75 -> 32, 1.01 -> 64.135 -> 64.
    quantizeI8(src.subarray(1, 5), 4, out.subarray(2, 6))
    assert.deepEqual([...out], [55, 55, 32, -127, 64, 1, 55, 55, 55])
    // Scale does not matter (cosine): a vector times 1,000 gives the same bytes.
    const big = Float32Array.from(src, (x) => x * 1000)
    const out2 = new Int8Array(4)
    quantizeI8(big.subarray(1, 5), 4, out2)
    assert.deepEqual([...out2], [32, -127, 64, 1])
    // A zero vector, or one with an infinite component, becomes zeros; a NaN component becomes 0.
    const zeros = new Int8Array(3).fill(9)
    quantizeI8(new Float32Array(3), 3, zeros)
    assert.deepEqual([...zeros], [0, 0, 0])
    zeros.fill(9)
    quantizeI8(Float32Array.from([1, Number.POSITIVE_INFINITY, 2]), 3, zeros)
    assert.deepEqual([...zeros], [0, 0, 0])
    quantizeI8(Float32Array.from([1, Number.NaN, 2]), 3, zeros)
    assert.deepEqual([...zeros], [64, 0, 127])
  })

  it('is the default: answers keep exact f32 scores, rank-only ones are the graph\'s i8 cosines, the manifest records it', async (t) => {
    assert.equal(defaultQuantization(), 'i8')
    const dir = await tempDir(t)
    const kb = 'kb-i8'
    const dims = 1024
    const store = await open(dir, { exactBudget: 0, dimensions: dims })
    t.after(() => store.close())
    // Embedding-like rows: a few strong components over a spread of small ones (the built-in embedder's are ~6x the rms).
    const r = rng(71)
    const points = randomPoints(kb, 600, 72, dims).map((p) => {
      const dense = Float32Array.from(p.dense, (x) => x * 0.2)
      for (let k = 0; k < 8; k++) dense[Math.floor(r() * dims)] += r() < 0.5 ? 1 : -1
      return { ...p, dense }
    })
    await store.upsert(kb, points)
    await store.whenIndexed(kb)
    assert.equal((await store.stats(kb))?.inGraph, 600)
    let rescoredOverlap = 0
    let fromExact = 0
    for (let q = 0; q < 20; q++) {
      // Near a stored row, so that the top of the list is not a tie of unrelated rows.
      const near = points[Math.floor(r() * points.length)].dense
      const query = Float32Array.from(near, (x) => x + (r() * 2 - 1) * 0.3)
      const exact = points.map((p) => ({ id: p.payload.chunk_id, s: cosine(query, p.dense) })).sort((a, b) => b.s - a.s).slice(0, 10)
      const { dense } = await store.search(kb, { dense: query, limit: 10 })
      assert.equal(dense[0].id, exact[0].id, 'the row the query was drawn near comes first')
      const ids = new Set(exact.map((e) => e.id))
      rescoredOverlap += dense.filter((h) => ids.has(h.id)).length / 10 / 20
      for (const h of dense) {
        const p = points.find((x) => x.payload.chunk_id === h.id)!
        assert.ok(Math.abs(h.score - cosine(query, p.dense)) < 1e-5, 'exact f32 scores')
      }
      const ranked = (await store.search(kb, { dense: query, limit: 10, rankOnly: true })).dense
      assert.equal(ranked.length, 10)
      assert.equal(ranked[0].id, exact[0].id, 'rank-only puts the near row first too')
      for (const h of ranked) {
        const p = points.find((x) => x.payload.chunk_id === h.id)!
        fromExact = Math.max(fromExact, Math.abs(h.score - cosine(query, p.dense)))
      }
    }
    // The cosines of the rows' and the query's i8 copies (see assertGraphHoldsI8Copies), near the exact f32 ones.
    assert.ok(fromExact > 1e-4 && fromExact < 0.03, `rank-only scores are the graph's i8 cosines, near the exact ones (off by ${fromExact})`)
    assert.ok(rescoredOverlap >= 0.95, `the rescored search finds the exact neighbours (${rescoredOverlap})`)
    await store.close()
    const manifest = JSON.parse(await fs.readFile(join(dir, kb, 'manifest.json'), 'utf8'))
    assert.equal(manifest.graph.quantization, 'i8')
  })

  it('holds the copies quantizeI8 makes, and searches with the query\'s copy', async (t) => {
    const dims = 256
    const store = await open(await tempDir(t), { exactBudget: 0, dimensions: dims })
    t.after(() => store.close())
    const points = randomPoints('kb-copies', 300, 81, dims)
    await store.upsert('kb-copies', points)
    await store.whenIndexed('kb-copies')
    assert.equal((await store.stats('kb-copies'))?.inGraph, 300)
    await assertGraphHoldsI8Copies(store, 'kb-copies', points, dims, 82)
  })

  it('rebuilds a graph saved in an earlier format (usearch\'s cast of the copies) from the arena, then loads the new one', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-old-graph'
    const dims = 256
    let store = await open(dir, { exactBudget: 0, dimensions: dims })
    const points = randomPoints(kb, 300, 83, dims)
    await store.upsert(kb, points)
    await store.whenIndexed(kb)
    await store.close()
    // A manifest written before GRAPH_FORMAT has no format: its graph file is of format 1.
    const manifestPath = join(dir, kb, 'manifest.json')
    const manifest = JSON.parse(await fs.readFile(manifestPath, 'utf8'))
    assert.equal(manifest.graph.format, GRAPH_FORMAT)
    assert.ok(manifest.snapshot.graph !== null && manifest.snapshot.graphRows === 300, 'the snapshot saved the graph')
    delete manifest.graph.format
    await fs.writeFile(manifestPath, JSON.stringify(manifest))
    // Slices of 1 ms starting at one row: the graph cannot be rebuilt by the time the first stats are read.
    store = await open(dir, { exactBudget: 0, dimensions: dims, indexSliceMs: 1 })
    const reopened = await store.stats(kb)
    assert.equal(reopened?.points, 300)
    assert.ok((reopened?.inGraph ?? 0) < 300, `the old graph file is not loaded (${reopened?.inGraph} rows in the graph)`)
    await assertMatchesReference(store, kb, points, 84, dims)
    await store.whenIndexed(kb)
    assert.equal((await store.stats(kb))?.inGraph, 300)
    await assertGraphHoldsI8Copies(store, kb, points, dims, 85)
    await store.close()
    assert.equal(JSON.parse(await fs.readFile(manifestPath, 'utf8')).graph.format, GRAPH_FORMAT, 'the rebuilt graph is saved in the current format')
    store = await open(dir, { exactBudget: 0, dimensions: dims, indexSliceMs: 1 })
    t.after(() => store.close())
    assert.equal((await store.stats(kb))?.inGraph, 300, 'the rebuilt graph is loaded')
    await assertGraphHoldsI8Copies(store, kb, points, dims, 86)
  })
})

/**
 * Checks that a KB's i8 graph compares quantizeI8's copies themselves: a rank-only score (the graph's own distance)
 * is the cosine of the query's and the row's copies. usearch's cast of them (x / |x| * 127, truncated) gives
 * other integers: at 256 dimensions its scores were 1e-3 to 1e-2 away from these.
 */
async function assertGraphHoldsI8Copies(store: EmbeddedVectorStore, kb: string, points: VectorPoint[], dims: number, seed: number) {
  const copy = (v: Float32Array) => {
    const out = new Int8Array(dims)
    quantizeI8(v, dims, out)
    return out
  }
  const rows = new Map(points.map((p) => [p.payload.chunk_id, copy(p.dense)]))
  const r = rng(seed)
  let worst = 0
  for (let q = 0; q < 10; q++) {
    const query = Float32Array.from({ length: dims }, () => r() * 2 - 1)
    const qCopy = copy(query)
    const ranked = (await store.search(kb, { dense: query, limit: 10, rankOnly: true })).dense
    assert.equal(ranked.length, 10)
    for (const h of ranked) worst = Math.max(worst, Math.abs(h.score - cosine(qCopy, rows.get(h.id)!)))
  }
  assert.ok(worst < 1e-5, `rank-only scores are the cosines of quantizeI8's copies (off by up to ${worst})`)
}

describe('sparse index: posting lists', () => {
  /** Term `term`'s list as the index holds it: its rows decoded, its arrays as they are. */
  function listOf(index: SparseIndex, term: number) {
    const c = index.capture()
    const i = [...c.terms].indexOf(term)
    const rows = new Uint32Array(c.lens[i])
    decodeRows(c.bytes[i], c.lens[i], rows)
    return { rows: [...rows], bytes: c.bytes[i], weights: c.weights[i], len: c.lens[i] }
  }

  /** The index's answer over every live row, against scores computed here from the rows' own terms (IDF over the live rows). */
  function assertAsBruteForce(index: SparseIndex, rows: Map<number, { indices: Uint32Array; values: Float32Array }>, query: { indices: Uint32Array; values: Float32Array }) {
    const df = new Map<number, number>()
    for (const v of rows.values()) for (const term of v.indices) df.set(term, (df.get(term) ?? 0) + 1)
    const expected: [number, number][] = []
    for (const [row, v] of rows) {
      let s = 0
      let shared = false
      for (let i = 0; i < query.indices.length; i++) {
        const j = v.indices.indexOf(query.indices[i])
        if (j < 0) continue
        shared = true
        s += Math.log((rows.size - df.get(query.indices[i])! + 0.5) / (df.get(query.indices[i])! + 0.5) + 1) * query.values[i] * v.values[j]
      }
      if (shared) expected.push([row, s])
    }
    expected.sort((a, b) => b[1] - a[1] || a[0] - b[0])
    const got = index.search(query, expected.length + 5)
    assert.equal(got.rows.length, expected.length)
    for (let i = 0; i < expected.length; i++) {
      assert.ok(Math.abs(got.scores[i] - expected[i][1]) < 1e-4 * Math.max(1, Math.abs(expected[i][1])), `rank ${i}: ${got.scores[i]} against ${expected[i][1]}`)
    }
    // Ties aside, the same rows in the same order.
    const distinct = (list: [number, number][]) => list.filter((e, i) => (i === 0 || list[i - 1][1] - e[1] > 1e-4) && (i === list.length - 1 || e[1] - list[i + 1][1] > 1e-4)).map((e) => e[0])
    const gotList = [...got.rows].map((row, i) => [row, got.scores[i]] as [number, number])
    assert.deepEqual(distinct(gotList), distinct(expected))
  }

  it('grows each list past its small arrays in one buffer shared by its weights and encoded rows, shrinks it on compaction, and scores as brute force', () => {
    const index = new SparseIndex({ blockEntries: 256 })
    const r = rng(907)
    const rows = new Map<number, { indices: Uint32Array; values: Float32Array }>()
    // Term t is held by the rows whose number is a multiple of SPREAD[t]: lists of 1 to 1,200 entries.
    const SPREAD = [1, 2, 3, 75, 76, 1200, 1201]
    for (let row = 0; row < 1200; row++) {
      const terms = SPREAD.map((m, t) => (row % m === 0 ? t : -1)).filter((t) => t >= 0)
      const v = { indices: Uint32Array.from(terms), values: Float32Array.from(terms, () => Math.round(r() * 40) / 10 + 0.1) }
      index.add(row, v)
      rows.set(row, v)
    }
    for (let t = 0; t < SPREAD.length; t++) {
      const l = listOf(index, t)
      const expectedRows = Array.from({ length: Math.ceil(1200 / SPREAD[t]) }, (_, j) => j * SPREAD[t])
      assert.equal(l.len, expectedRows.length)
      assert.deepEqual(l.rows, expectedRows)
      assert.ok(l.weights.length >= l.len)
      // Room grows by half past 64 entries: at most half again what the list holds (the first 4 aside).
      assert.ok(l.weights.length <= Math.max(4, 2 * l.len), `term ${t}: ${l.weights.length} for ${l.len}`)
      if (l.weights.length > 64) assert.ok(l.weights.length <= Math.ceil(1.5 * l.len), `term ${t}: ${l.weights.length} for ${l.len}`)
      // Each row a byte or two: the difference from the row before (the first from row 0), zigzag coded, as a varint.
      const used = encodeRows(expectedRows).length
      assert.equal(used, expectedRows.reduce((n, row, j) => n + (2 * (row - (j === 0 ? 0 : expectedRows[j - 1])) < 128 ? 1 : 2), 0))
      assert.ok(l.bytes.length >= used && l.bytes.length <= Math.max(8, 2 * used + 2), `term ${t}: ${l.bytes.length} bytes for ${used}`)
      // Past 16 entries or 64 bytes of room, one buffer: the weights, then the rows.
      if (l.weights.length > 16 || l.bytes.length > 64) {
        assert.equal(l.bytes.buffer, l.weights.buffer, `term ${t}`)
        assert.equal(l.bytes.byteOffset, l.weights.length * 4)
        assert.equal(l.bytes.buffer.byteLength, l.weights.length * 4 + l.bytes.length)
      } else {
        assert.notEqual(l.bytes.buffer, l.weights.buffer, `term ${t}`)
      }
    }
    const queries = [[0], [0, 5], [3, 4], [5, 6], [1, 2, 5], [6]].map((terms) => ({ indices: Uint32Array.from(terms), values: Float32Array.from(terms, (_, i) => 1 + i / 2) }))
    for (const q of queries) assertAsBruteForce(index, rows, q)
    // Three rows in four deleted: term 0's list keeps 300 of 1,200 entries and shrinks on compaction.
    const before = listOf(index, 0).weights.length
    for (let row = 0; row < 1200; row++) {
      if (row % 4 === 0) continue
      index.remove(row)
      rows.delete(row)
    }
    index.compact()
    const after = listOf(index, 0)
    assert.equal(after.len, 300)
    assert.deepEqual(after.rows, Array.from({ length: 300 }, (_, j) => 4 * j))
    assert.ok(after.weights.length < before && after.weights.length <= 450, `${after.weights.length} after ${before}`)
    assert.equal(after.bytes.buffer, after.weights.buffer)
    for (const q of queries) assertAsBruteForce(index, rows, q)
    // Rows added after compaction grow the shrunk lists again.
    for (let row = 1200; row < 1600; row++) {
      const v = { indices: Uint32Array.of(0, 7), values: Float32Array.of(0.5 + (row % 7) / 10, 1) }
      index.add(row, v)
      rows.set(row, v)
    }
    assert.equal(listOf(index, 0).len, 700)
    assert.deepEqual(listOf(index, 0).rows, [...Array.from({ length: 300 }, (_, j) => 4 * j), ...Array.from({ length: 400 }, (_, j) => 1200 + j)])
    for (const q of [...queries, { indices: Uint32Array.of(7, 0), values: Float32Array.of(2, 1) }]) assertAsBruteForce(index, rows, q)
  })

  it('encodes rows in any order and of any size below MAX_ROWS, and compacts lists of mixed differences in place', () => {
    const r = rng(4021)
    // Differences of every varint length, both signs: rows up and down the whole range.
    const rows = [0, 1, 0, 127, 128, 16383, 16384, 2 ** 21, 5, 2 ** 28, 3, MAX_ROWS - 1, 0, MAX_ROWS - 1, MAX_ROWS - 2]
    for (let i = 0; i < 500; i++) rows.push(Math.floor(r() * (r() < 0.5 ? 300 : MAX_ROWS)))
    const bytes = encodeRows(rows)
    const back = new Uint32Array(rows.length)
    decodeRows(bytes, rows.length, back)
    assert.deepEqual([...back], rows)
    // Zigzag: a difference of 0, -1, 1, -64 and 63 takes one byte, of 64 or -65 two.
    assert.equal(encodeRows([0, 0, 63, 62, 125, 61]).length, 6)
    assert.equal(encodeRows([64]).length, 2)
    assert.equal(encodeRows([65, 0]).length, 4)

    // An index whose rows arrive out of order (as after compaction reuses rows) and far apart.
    const index = new SparseIndex({ blockEntries: 64 })
    const live = new Map<number, { indices: Uint32Array; values: Float32Array }>()
    const order = [900, 3, 70000, 4, 123456, 5, 2, 16384, 1, 600000]
    for (let i = 0; i < 300; i++) order.push(1000 + Math.floor(r() * 200000))
    for (const row of [...new Set(order)]) {
      const terms = [0, ...(row % 2 === 0 ? [1] : []), ...(row % 3 === 0 ? [2] : [])]
      const v = { indices: Uint32Array.from(terms), values: Float32Array.from(terms, () => Math.round(r() * 40) / 10 + 0.1) }
      index.add(row, v)
      live.set(row, v)
    }
    assert.deepEqual(listOf(index, 0).rows, [...live.keys()])
    const queries = [[0], [1], [2], [0, 1, 2]].map((ts) => ({ indices: Uint32Array.from(ts), values: Float32Array.from(ts, (_, i) => 1 + i) }))
    for (const q of queries) assertAsBruteForce(index, live, q)
    // Every other row deleted, compacted, and rows added again below the largest.
    let k = 0
    for (const row of [...live.keys()]) if (k++ % 2 === 1) {
      index.remove(row)
      live.delete(row)
    }
    index.compact()
    assert.deepEqual(listOf(index, 0).rows, [...live.keys()])
    for (const q of queries) assertAsBruteForce(index, live, q)
    for (const row of [7, 600001, 8]) {
      const v = { indices: Uint32Array.of(0, 1), values: Float32Array.of(1.5, 0.5) }
      index.add(row, v)
      live.set(row, v)
    }
    assert.deepEqual(listOf(index, 0).rows, [...live.keys()])
    for (const q of queries) assertAsBruteForce(index, live, q)
    assert.throws(() => index.add(MAX_ROWS, { indices: Uint32Array.of(0), values: Float32Array.of(1) }), /rows below 1073741824/)

    // Restored from its lists as a snapshot stores them (each list in its own order), the index reads back the same.
    const terms = [0, 1, 2]
    const lists = terms.map((t) => listOf(index, t))
    const postingOffsets = Uint32Array.from([0, ...lists.map((_, i) => lists.slice(0, i + 1).reduce((n, l) => n + l.len, 0))])
    const postings = { terms: Uint32Array.from(terms), offsets: postingOffsets, rows: Uint32Array.from(lists.flatMap((l) => l.rows)), weights: Float32Array.from(lists.flatMap((l) => [...l.weights.subarray(0, l.len)])) }
    const liveRows = [...live.keys()]
    const offsets = Uint32Array.from([0, ...liveRows.map((_, i) => liveRows.slice(0, i + 1).reduce((n, row) => n + live.get(row)!.indices.length, 0))])
    const vectors = { offsets, indices: Uint32Array.from(liveRows.flatMap((row) => [...live.get(row)!.indices])), values: Float32Array.from(liveRows.flatMap((row) => [...live.get(row)!.values])) }
    const restored = new SparseIndex({ blockEntries: 64 })
    restored.restore(Uint32Array.from(liveRows), vectors, postings, Math.max(...liveRows) + 1)
    for (const t of terms) assert.deepEqual(listOf(restored, t).rows, lists[t].rows)
    for (const q of queries) assertAsBruteForce(restored, live, q)
    // Appending after the restore continues each list from its last row.
    const v = { indices: Uint32Array.of(0, 2), values: Float32Array.of(1, 2) }
    restored.add(6, v)
    live.set(6, v)
    assert.deepEqual(listOf(restored, 0).rows, [...lists[0].rows, 6])
    for (const q of queries) assertAsBruteForce(restored, live, q)
  })

  it("copies a restored snapshot's list out into a buffer of its own the first time it grows", () => {
    // 40 rows: term 0 in every one, term 1 in the even ones, term 2 in row 5 only; as a snapshot stores them.
    const rows = new Map<number, { indices: Uint32Array; values: Float32Array }>()
    for (let row = 0; row < 40; row++) {
      const terms = [0, ...(row % 2 === 0 ? [1] : []), ...(row === 5 ? [2] : [])]
      rows.set(row, { indices: Uint32Array.from(terms), values: Float32Array.from(terms, (t) => 1 + ((row * 7 + t) % 5) / 2) })
    }
    const offsets = new Uint32Array(41)
    for (let row = 0; row < 40; row++) offsets[row + 1] = offsets[row] + rows.get(row)!.indices.length
    const vectors = { offsets, indices: new Uint32Array(offsets[40]), values: new Float32Array(offsets[40]) }
    for (let row = 0; row < 40; row++) {
      vectors.indices.set(rows.get(row)!.indices, offsets[row])
      vectors.values.set(rows.get(row)!.values, offsets[row])
    }
    const terms = Uint32Array.of(0, 1, 2)
    const lists = [0, 1, 2].map((t) => [...rows].filter(([, v]) => v.indices.includes(t)).map(([row, v]) => [row, v.values[v.indices.indexOf(t)]]))
    const postingOffsets = Uint32Array.of(0, lists[0].length, lists[0].length + lists[1].length, lists[0].length + lists[1].length + 1)
    const postings = { terms, offsets: postingOffsets, rows: Uint32Array.from(lists.flat(), (e) => e[0]), weights: Float32Array.from(lists.flat(), (e) => e[1]) }
    const index = new SparseIndex({ blockEntries: 64 })
    index.restore(Uint32Array.from({ length: 40 }, (_, i) => i), vectors, postings, 40)
    assert.equal(listOf(index, 0).weights.buffer, postings.weights.buffer, "a restored list's weights are a view of the snapshot's array")
    // The rows of every list encoded back to back in one array, each list's exactly as long as its rows take.
    const restored = listOf(index, 0).bytes.buffer
    assert.equal(listOf(index, 2).bytes.buffer, restored)
    for (const term of [0, 1, 2]) {
      assert.deepEqual(listOf(index, term).rows, lists[term].map((e) => e[0]))
      assert.equal(listOf(index, term).bytes.length, encodeRows(lists[term].map((e) => e[0])).length)
    }
    const queries = [[0], [1], [2, 0], [0, 1, 2, 3]].map((ts) => ({ indices: Uint32Array.from(ts), values: Float32Array.from(ts, (_, i) => 1 + i) }))
    for (const q of queries) assertAsBruteForce(index, rows, q)
    for (let row = 40; row < 45; row++) {
      const v = { indices: Uint32Array.of(0, 2, 3), values: Float32Array.of(0.5, 2, 1) }
      index.add(row, v)
      rows.set(row, v)
    }
    for (const term of [0, 2]) {
      const l = listOf(index, term)
      assert.notEqual(l.weights.buffer, postings.weights.buffer, `term ${term}`)
      assert.equal(l.len, term === 0 ? 45 : 6)
      assert.deepEqual(l.rows, [...lists[term].map((e) => e[0]), 40, 41, 42, 43, 44])
    }
    // Term 0 outgrew the snapshot's 40 entries: twice that (doubling below 64), in one buffer.
    assert.equal(listOf(index, 0).bytes.buffer, listOf(index, 0).weights.buffer)
    assert.equal(listOf(index, 0).weights.length, 80)
    // Term 1, which took no row, is still a view of the restore's array.
    assert.equal(listOf(index, 1).bytes.buffer, restored)
    // The snapshot's arrays are as they were.
    assert.deepEqual([...postings.rows.subarray(0, 40)], Array.from({ length: 40 }, (_, i) => i))
    for (const q of queries) assertAsBruteForce(index, rows, q)
  })
})

describe('embedded vector store: snapshot postings', () => {
  it('writes the per-point sparse vectors and the postings in chunks and reads them back whole', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-stream'
    // 900 points of 120 terms: 108k entries, two chunks of each streamed section (65,536 entries).
    const r = rng(111)
    const points = randomPoints(kb, 900, 112).map((p) => {
      const terms = new Set<number>()
      while (terms.size < 120) terms.add(Math.floor(r() * r() * 4000))
      const indices = Uint32Array.from([...terms].sort((a, b) => a - b))
      return { ...p, sparse: { indices, values: Float32Array.from(indices, () => Math.round(r() * 30) / 10 + 0.1) } }
    })
    let store = await open(dir)
    await store.upsert(kb, points)
    assert.equal(await store.deleteByDoc(kb, 'doc50'), 10)
    let live = points.filter((p) => p.payload.doc_id !== 'doc50')
    await store.snapshot(kb)
    await store.close()
    store = await open(dir)
    t.after(() => store.close())
    const check = async (seed: number) => {
      const q = rng(seed)
      for (let n = 0; n < 8; n++) {
        const sq = sparse([[Math.floor(q() * 30), 1], [Math.floor(q() * 400), 0.5], [Math.floor(q() * 3000), 2]])
        const all = sparseScores(live, sq)
        const { sparse: hits } = await store.search(kb, { sparse: sq, limit: 10 })
        const top = [...all].sort((a, b) => b[1] - a[1]).slice(0, 10)
        // The ten best scores; which of the chunks tied at a score come first is the store's tie order (by what they say).
        assert.deepEqual(hits.map((h) => all.get(h.id)), top.map(([, score]) => score))
        assert.equal(new Set(hits.map((h) => h.id)).size, hits.length)
        // The rows of a few documents, scored one by one from their own vectors: first, middle (across the
        // sections' chunk border near row 546) and last.
        const docs = ['doc1', 'doc54', 'doc88']
        const { sparse: rowHits } = await store.search(kb, { sparse: sq, limit: 30, filter: { docIds: docs } })
        const expected = live.filter((p) => docs.includes(p.payload.doc_id) && all.has(p.payload.chunk_id))
        assert.equal(rowHits.length, expected.length)
        for (const h of rowHits) assert.ok(Math.abs(h.score - all.get(h.id)!) < 1e-4, `${h.id}: ${h.score} vs ${all.get(h.id)}`)
      }
    }
    await check(113)
    // Deleting reads each row's own vector back to lower its terms' document frequencies (the IDF): the first
    // document, the one holding the last row of the first chunk (index 545 of the 890 points captured), the last.
    const gone = ['doc0', 'doc55', 'doc89']
    for (const d of gone) assert.equal(await store.deleteByDoc(kb, d), 10)
    live = live.filter((p) => !gone.includes(p.payload.doc_id))
    await check(114)
  })

  // Posting lists as a capture holds them: arrays with room (and stale values) past each captured length.
  function capture(rowsEnd: number, liveRows: number[], lists: [term: number, entries: [row: number, weight: number][]][]) {
    const postings = {
      terms: Uint32Array.from(lists.map(([term]) => term)),
      bytes: lists.map(([, e]) => encodeRows([...e.map(([r]) => r), 77, 78])),
      weights: lists.map(([, e]) => Float32Array.from([...e.map(([, w]) => w), 9, 9])),
      lens: Uint32Array.from(lists.map(([, e]) => e.length)),
    }
    return { rows: Int32Array.from(liveRows), rowsEnd, postings }
  }
  /** The sections postingSections streams, each gathered whole (what the snapshot file holds), as plain arrays. */
  const packPostings = async (c: Parameters<typeof postingSections>[0], sliceMs?: number) => {
    const sections = await postingSections(c, sliceMs)
    const whole = (parts: Iterable<Uint8Array>, out: Uint32Array | Float32Array) => {
      const bytes = new Uint8Array(out.buffer)
      let at = 0
      for (const part of parts) {
        bytes.set(part, at)
        at += part.length
      }
      return [...out]
    }
    const total = sections.offsets[sections.offsets.length - 1] ?? 0
    return { terms: [...sections.terms], offsets: [...sections.offsets], rows: whole(sections.rows(), new Uint32Array(total)), weights: whole(sections.weights(), new Float32Array(total)) }
  }

  it('copies every list whole when all rows are live, and keeps only live rows otherwise', async () => {
    const lists: [number, [number, number][]][] = [[5, [[0, 1.5], [3, 2]]], [9, [[1, 0.5], [4, 1]]], [2, [[2, 3], [5, 0.25]]]]
    assert.deepEqual(await packPostings(capture(6, [0, 1, 2, 3, 4, 5], lists)), {
      terms: [5, 9, 2], offsets: [0, 2, 4, 6], rows: [0, 3, 1, 4, 2, 5], weights: [1.5, 2, 0.5, 1, 3, 0.25],
    })
    // Rows 1 and 4 deleted: term 9 holds no live row and is dropped.
    assert.deepEqual(await packPostings(capture(6, [0, 2, 3, 5], lists)), {
      terms: [5, 2], offsets: [0, 2, 4], rows: [0, 3, 2, 5], weights: [1.5, 2, 3, 0.25],
    })
  })

  it('yields to the event loop between slices and packs the same lists', async () => {
    const lists = Array.from({ length: 300 }, (_, t): [number, [number, number][]] => [t * 7, Array.from({ length: 1 + (t % 5) }, (_, j) => [(t + j) % 50, t + j / 10])])
    const live = Array.from({ length: 50 }, (_, r) => r).filter((r) => r % 7 !== 3)
    let turns = 0
    let done = false
    const tick = () => {
      turns++
      if (!done) setImmediate(tick)
    }
    setImmediate(tick)
    const sliced = await packPostings(capture(50, live, lists), 0)
    done = true
    assert.ok(turns >= 3, `the event loop ran ${turns} turn(s) while 300 lists were packed in slices of 0 ms`)
    assert.deepEqual(sliced, await packPostings(capture(50, live, lists), Infinity))
    const expected = lists.map(([term, e]) => [term, e.filter(([r]) => r % 7 !== 3)] as const).filter(([, e]) => e.length > 0)
    assert.deepEqual(sliced.terms, expected.map(([term]) => term))
    assert.deepEqual(sliced.rows, expected.flatMap(([, e]) => e.map(([r]) => r)))
  })
})

describe('vector snapshot file: ids and payloads', () => {
  // Points of every kind a capture holds: payload objects, JSON bytes restored from an earlier snapshot, and records of
  // the payload spill file (three that follow one another there, one elsewhere); ids of several bytes per character
  // and one longer than the small buffers below; a payload larger than them.
  const payload = (i: number, text: string) => ({ chunk_id: `c${i}`, kb_id: 'kb', doc_id: `d${i >> 1}`, chunk_index: i, text })
  const expected = Array.from({ length: 12 }, (_, i) => payload(i, i === 11 ? '긴 본문 '.repeat(40) : `본문 ${i} ${'x'.repeat(i * 3)}`))
  const chunkIds = expected.map((p, i) => (i === 7 ? `${p.chunk_id}-${'아이디'.repeat(12)}` : `${p.chunk_id}-청크`))
  const docIds = expected.map((p) => p.doc_id)

  function capture(reads: { at: number; length: number }[]): SnapshotCapture {
    // The spill file: point 9's record first, then a gap, then points 4, 5 and 6 back to back.
    const recs = [9, -1, 4, 5, 6].map((i) => Buffer.from(i < 0 ? 'gap' : JSON.stringify(expected[i]), 'utf8'))
    const file = Buffer.concat(recs)
    const at = (k: number) => recs.slice(0, k).reduce((n, b) => n + b.length, 0)
    const refs = new Map([[9, new PayloadRef(at(0), recs[0].length)], [4, new PayloadRef(at(2), recs[2].length)], [5, new PayloadRef(at(3), recs[3].length)], [6, new PayloadRef(at(4), recs[4].length)]])
    const n = expected.length
    return {
      dims: 2, rowsEnd: n, rows: Int32Array.from({ length: n }, (_, i) => i), inGraph: new Uint8Array(n), norms: new Float32Array(n).fill(1),
      dense: [new Uint8Array(n * 2 * 4)],
      sparse: { indices: [new Uint32Array(0)], values: [new Float32Array(0)], block: new Int32Array(n), start: new Uint32Array(n), len: new Uint32Array(n), read: () => {} },
      postings: { terms: new Uint32Array(0), bytes: [], weights: [], lens: new Uint32Array(0) },
      chunkIds, docIds, chunkIndex: Int32Array.from({ length: n }, (_, i) => i),
      payloads: expected.map((p, i) => refs.get(i) ?? (i % 3 === 0 ? Buffer.from(JSON.stringify(p), 'utf8') : (structuredClone(p) as unknown as ChunkPayload))),
      readPayloads: (from, into) => {
        reads.push({ at: from, length: into.length })
        file.copy(into, 0, from, from + into.length)
      },
    }
  }

  for (const chunkBytes of [40, 64, 97, undefined]) {
    it(`writes them through a buffer of ${chunkBytes ?? 'the default'} bytes and reads them back`, async (t) => {
      const dir = await tempDir(t)
      const reads: { at: number; length: number }[] = []
      await writeSnapshot(join(dir, 'points.bin'), capture(reads), { chunkBytes })
      const back = await readSnapshot(join(dir, 'points.bin'), 2, (rows) => [new Uint8Array(rows * 2 * 4)])
      assert.deepEqual(back.chunkIds, chunkIds)
      assert.deepEqual(back.docIds, docIds)
      const payloads = expected.map((_, i) => JSON.parse(back.payloadBlob.toString('utf8', back.payloadOffsets[i], back.payloadOffsets[i + 1])))
      assert.deepEqual(payloads, expected)
      // Every record of the spill file read once; with room for them, the three that follow one another in one read.
      assert.equal(reads.reduce((n, r) => n + r.length, 0), [4, 5, 6, 9].reduce((n, i) => n + Buffer.byteLength(JSON.stringify(expected[i])), 0))
      if (chunkBytes === undefined) assert.equal(reads.length, 2)
    })
  }
})

describe('embedded vector store: behaviour', () => {
  it('ranks chunks that tie by what they say, not by their rows: a KB and its import answer alike (exact scan, graph, after a restart)', async (t) => {
    // Twelve chunks with one dense and one sparse vector, so every score ties. The import holds them under other ids
    // (doc ids derived for the new KB, as plugins/transfer/import.ts makes them) and in the other order of rows.
    const chunk = (kb: string, doc: string, i: number) => point(kb, doc, i, axis(0), [[7, 1]], { text: `note ${i}: ${'abcdefghijkl'[i].repeat(3)}`, title: 'Notes', source: `notes-${i}.md` })
    const texts = (hits: { payload: { text: string } }[]) => hits.map((h) => h.payload.text)
    for (const [kind, extra] of [['exact scan', {}], ['graph', { exactBudget: 0 }]] as const) {
      const dir = await tempDir(t)
      let store = await open(dir, extra)
      await store.upsert('orig', Array.from({ length: 12 }, (_, i) => chunk('orig', `a${i}`, i)))
      await store.upsert('copy', Array.from({ length: 12 }, (_, j) => chunk('copy', `x${(11 - j) * 7919}`, 11 - j)))
      await store.whenIndexed()
      const answers = async () => {
        const out: string[][] = []
        for (const kb of ['orig', 'copy']) {
          // A cut (5) inside the tie: which of the twelve come, and in what order.
          const hybrid = await store.search(kb, { dense: Float32Array.from(axis(0)), sparse: sparse([[7, 1]]), limit: 5, rankOnly: true })
          const exact = await store.search(kb, { dense: Float32Array.from(axis(0)), limit: 5 })
          // A filter that keeps every chunk: the scan of the rows it keeps orders the tie alike.
          const filtered = await store.search(kb, { dense: Float32Array.from(axis(0)), sparse: sparse([[7, 1]]), limit: 5, filter: { sourcePrefix: 'notes-' } })
          out.push([...texts(hybrid.dense), '|', ...texts(hybrid.sparse), '|', ...texts(exact.dense), '|', ...texts(filtered.dense), '|', ...texts(filtered.sparse)])
        }
        return out
      }
      const [orig, copy] = await answers()
      assert.equal(orig.length, 29, kind)
      assert.deepEqual(copy, orig, `${kind}: the import ranks the tied chunks as the original does`)
      // Every path ranks the tie in one order, the filtered ones too.
      const lists = orig.join(',').split(',|,')
      assert.deepEqual(lists.slice(1), lists.slice(1).map(() => lists[0]), `${kind}: one tie order on every path`)
      await store.close()
      store = await open(dir, extra)
      t.after(() => store.close())
      await store.whenIndexed()
      // Restored from the snapshot (payloads as JSON bytes): the same order.
      assert.deepEqual(await answers(), [orig, orig], `${kind}, after a restart`)
    }
  })

  it('reuses the rows of deleted points without stale hits (sparse, dense, graph)', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-churn'
    // f32 graph: the subject is rows handed back and reused, checked against exact answers. In DIMS (8) dimensions
    // the i8 copies' rounding (up to 1/254 of a row's largest component) is as large as the gaps between neighbours,
    // so an i8 graph's best 15 may leave out the true fifth (2 runs in 8 after the graph took quantizeI8's copies).
    const store = await open(dir, { exactBudget: 0, quantization: 'f32' })
    t.after(() => store.close())
    let live: VectorPoint[] = []
    // Each round removes more rows from the graph than GRAPH_REBUILD_SHARE of it, so the graph is rebuilt; searches
    // between rebuilds still meet a churned graph (in 180,000 such queries 4 missed one of the true top 5), so a
    // query may miss one, never return a deleted point.
    for (let round = 0; round < 6; round++) {
      const batch = randomPoints(kb, 400, 100 + round, DIMS, 20, `r${round}-`)
      await store.upsert(kb, batch)
      live.push(...batch)
      // Delete most of the older documents so rows are handed back and reused by the next round.
      const docs = [...new Set(live.map((p) => p.payload.doc_id))].filter((_, i) => i % 4 !== 0)
      for (const d of docs.slice(0, Math.floor(docs.length * 0.7))) await store.deleteByDoc(kb, d)
      const dropped = new Set(docs.slice(0, Math.floor(docs.length * 0.7)))
      live = live.filter((p) => !dropped.has(p.payload.doc_id))
      if (round % 2 === 1) await store.whenIndexed(kb)
      await assertMatchesReference(store, kb, live, 200 + round, DIMS, 1)
    }
    const stats = await store.stats(kb)
    assert.ok(stats !== null && stats.rows < 6 * 400, `rows were reused (${stats?.rows} rows for ${6 * 400} upserts)`)
    assert.ok(stats.graphRebuilds >= 2, `the churned graph was rebuilt (${stats.graphRebuilds} times)`)
    // Each hit's number (VectorHit.key, what fusion matches the two lists by) is one chunk's, in both lists alike.
    for (const p of live.slice(0, 20)) {
      const { dense, sparse } = await store.search(kb, { dense: p.dense, sparse: p.sparse, limit: 30 })
      const keyOf = new Map<string, number>()
      for (const h of [...dense, ...sparse]) {
        assert.equal(typeof h.key, 'number')
        if (keyOf.has(h.id)) assert.equal(keyOf.get(h.id), h.key, `${h.id}: one number in both lists`)
        keyOf.set(h.id, h.key!)
      }
      assert.equal(new Set(keyOf.values()).size, keyOf.size, 'no two chunks share a number')
      assert.ok(dense.some((h) => sparse.some((x) => x.id === h.id)), 'the lists share chunks')
    }
  })

  it('keeps each row\'s sparse terms through deletes, packing and reused rows, a restart, and packing the restored rows', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-sparse-rows'
    // One document's rows against the common terms: a filter that selective is scored row by row from the rows'
    // own terms (SparseIndex.searchRows), against the reference over every live point (IDF included).
    const query = sparse(Array.from({ length: 100 }, (_, term) => [term, 1 + term / 50] as [number, number]))
    const check = async (store: EmbeddedVectorStore, live: VectorPoint[], seed: number) => {
      await assertMatchesReference(store, kb, live, seed)
      const all = sparseScores(live, query)
      for (const doc of [...new Set(live.map((p) => p.payload.doc_id))].slice(0, 4)) {
        const truth = live.filter((p) => p.payload.doc_id === doc && all.has(p.payload.chunk_id)).map((p) => all.get(p.payload.chunk_id)!).sort((a, b) => b - a)
        const { sparse: hits } = await store.search(kb, { sparse: query, limit: 20, filter: { docIds: [doc] } })
        assert.ok(truth.length > 0)
        assert.deepEqual(hits.map((h) => h.score.toFixed(4)), truth.map((x) => x.toFixed(4)))
      }
    }
    let live: VectorPoint[] = []
    const churn = async (store: EmbeddedVectorStore, round: number) => {
      const batch = randomPoints(kb, 400, 300 + round, DIMS, 20, `s${round}-`)
      await store.upsert(kb, batch)
      live.push(...batch)
      const docs = [...new Set(live.map((p) => p.payload.doc_id))]
      const dropped = new Set(docs.filter((_, i) => i % 3 !== 0))
      for (const d of dropped) await store.deleteByDoc(kb, d)
      live = live.filter((p) => !dropped.has(p.payload.doc_id))
    }
    let store = await open(dir)
    for (let round = 0; round < 3; round++) await churn(store, round)
    const rows = (await store.stats(kb))!.rows
    assert.ok(rows < 3 * 400, `rows were packed and reused (${rows} rows for ${3 * 400} upserts)`)
    await check(store, live, 1)
    await store.snapshot(kb)
    await store.close()
    store = await open(dir)
    await check(store, live, 2)
    // The restored rows are packed with the new ones when enough of them are deleted.
    for (let round = 3; round < 5; round++) await churn(store, round)
    await check(store, live, 3)
    await store.snapshot(kb)
    await store.close()
    store = await open(dir)
    t.after(() => store.close())
    await check(store, live, 4)
  })

  it('holds rows across several arena segments: exact scan, graph, vectors and a snapshot all read the right row', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-segments'
    const n = 2 * SEGMENT_ROWS + 300
    // Every row in the exact scan, which then runs once per segment.
    let store = await open(dir, { exactBudget: 2 ** 30, snapshotOnClose: true })
    const points = randomPoints(kb, n, 41, DIMS, 100)
    for (let i = 0; i < n; i += 1000) await store.upsert(kb, points.slice(i, i + 1000))
    // A document in the first segment and one across the second and third go; their rows stay dead in the arena.
    const gone = new Set(['doc3', `doc${Math.floor((2 * SEGMENT_ROWS) / 100)}`])
    for (const d of gone) assert.equal(await store.deleteByDoc(kb, d), 100)
    const live = points.filter((p) => !gone.has(p.payload.doc_id))
    await assertMatchesReference(store, kb, live, 42)
    await store.close()

    // Restored from the snapshot, segment by segment, then searched through the graph.
    store = await open(dir, { exactBudget: 0, quantization: 'f32' })
    t.after(() => store.close())
    await store.whenIndexed(kb)
    await assertMatchesReference(store, kb, live, 43)
    const last = `doc${Math.floor((n - 1) / 100)}`
    assert.deepEqual(await store.docVectors(kb, last), points.filter((p) => p.payload.doc_id === last).map((p) => p.dense))
    for (const p of [points[SEGMENT_ROWS - 1], points[SEGMENT_ROWS], points[n - 1]]) {
      assert.equal((await store.search(kb, { dense: p.dense, limit: 1 })).dense[0].id, p.payload.chunk_id)
    }
  })

  it('spends a dense search effort below 1 on a shorter candidate list, still returning exact scores best first', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-effort'
    const dims = 48
    const store = await open(dir, { exactBudget: 0, dimensions: dims })
    t.after(() => store.close())
    const points = randomPoints(kb, 3000, 77, dims)
    await store.upsert(kb, points)
    await store.whenIndexed(kb)
    const r = rng(78)
    const recall = { full: 0, default: 0, low: 0 }
    for (let q = 0; q < 40; q++) {
      const query = Float32Array.from({ length: dims }, () => r() * 2 - 1)
      const truth = new Set(points.map((p) => ({ id: p.payload.chunk_id, s: cosine(query, p.dense) })).sort((a, b) => b.s - a.s).slice(0, 10).map((x) => x.id))
      for (const [name, effort] of [['full', 1], ['default', undefined], ['low', 0.01]] as const) {
        const { dense } = await store.search(kb, effort === undefined ? { dense: query, limit: 10 } : { dense: query, limit: 10, effort })
        assert.equal(dense.length, 10)
        for (let i = 0; i < dense.length; i++) {
          const p = points.find((x) => x.payload.chunk_id === dense[i].id)!
          assert.ok(Math.abs(dense[i].score - cosine(query, p.dense)) < 1e-5, 'exact score')
          if (i > 0) assert.ok(dense[i - 1].score >= dense[i].score, 'best first')
        }
        recall[name] += dense.filter((h) => truth.has(h.id)).length / 10 / 40
      }
    }
    assert.equal(recall.default, recall.full, 'no effort given is the whole effort')
    assert.ok(recall.full >= 0.95, `full effort finds the true neighbours (${recall.full})`)
    assert.ok(recall.low < recall.full - 0.05, `a candidate list of 10 instead of 256 misses some (${recall.low} vs ${recall.full})`)
  })

  it('ranks graph rows by the graph\'s own bf16 distances when only the order is wanted; rows not yet in the graph are scored exactly', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-rank-only'
    const dims = 48
    // A bf16 graph; after the first batch the graph trails the writes, so later rows wait a while.
    const store = await open(dir, { exactBudget: 0, dimensions: dims, indexSliceMs: 1, busyShare: 0.001, quantization: 'bf16' })
    t.after(() => store.close())
    const points = randomPoints(kb, 3000, 91, dims)
    await store.upsert(kb, points)
    await store.whenIndexed(kb)
    const r = rng(92)
    let overlap = 0
    let differs = 0
    for (let q = 0; q < 40; q++) {
      const query = Float32Array.from({ length: dims }, () => r() * 2 - 1)
      const exact = (await store.search(kb, { dense: query, limit: 10 })).dense
      const ranked = (await store.search(kb, { dense: query, limit: 10, rankOnly: true })).dense
      assert.equal(ranked.length, 10)
      for (let i = 0; i < ranked.length; i++) {
        const p = points.find((x) => x.payload.chunk_id === ranked[i].id)!
        const err = Math.abs(ranked[i].score - cosine(query, p.dense))
        assert.ok(err < 3e-3, `a bf16 cosine is within 0.003 of the exact one (${err})`)
        if (err > 1e-6) differs++
        if (i > 0) assert.ok(ranked[i - 1].score >= ranked[i].score, 'best first')
      }
      const ids = new Set(exact.map((h) => h.id))
      overlap += ranked.filter((h) => ids.has(h.id)).length / 10 / 40
    }
    assert.ok(differs > 0, 'the scores are the graph\'s, not rescored')
    assert.ok(overlap >= 0.95, `the same neighbours as the rescored search (${overlap})`)
    // Rows still waiting for the graph: found by the exact scan, with exact scores, beside the graph's rows. More
    // than one slice takes (at most 200 rows: 1 ms at no less than 5 us a row), and the rest after a slice is 999
    // times its length, so the last row still waits when the search runs.
    const late = randomPoints(kb, 400, 93, dims, 10, 'late')
    await store.upsert(kb, late)
    const waiting = await store.stats(kb)
    assert.ok(waiting !== null && waiting.pending > 0, `some rows wait for the graph (pending ${waiting?.pending})`)
    const target = late[late.length - 1]
    const { dense } = await store.search(kb, { dense: target.dense, limit: 5, rankOnly: true })
    assert.equal(dense[0].id, target.payload.chunk_id)
    assert.ok(Math.abs(dense[0].score - 1) < 1e-6, `exact score for a waiting row (${dense[0].score})`)
  })

  it('lets the graph trail behind a stream of writes: new points are searchable at once and the graph catches up', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-trail'
    // One row per slice at first and a long rest after each slice while writes keep arriving.
    const store = await open(dir, { exactBudget: 0, quantization: 'f32', indexSliceMs: 1, busyShare: 0.001 })
    const points = randomPoints(kb, 60, 7)
    await store.upsert(kb, points)
    await new Promise((r) => setImmediate(r))
    const lagging = await store.stats(kb)
    assert.ok(lagging !== null && lagging.pending > 30, `the graph trails the writes (pending ${lagging?.pending})`)
    for (const p of points.slice(0, 10)) {
      const { dense } = await store.search(kb, { dense: p.dense, limit: 1 })
      assert.equal(dense[0]?.payload.chunk_id, p.payload.chunk_id, 'a point not yet in the graph is found by the exact scan')
    }
    await store.whenIndexed(kb)
    const done = await store.stats(kb)
    assert.deepEqual({ pending: done?.pending, inGraph: done?.inGraph }, { pending: 0, inGraph: 60 })
    // Closing while a rest timer is pending must leave the event loop's immediate queue intact.
    await store.upsert(kb, randomPoints(kb, 20, 8, DIMS, 10, 'late'))
    await new Promise((r) => setImmediate(r))
    await store.close()
    const fired = await Promise.race([new Promise((r) => setImmediate(() => r('immediate'))), new Promise((r) => setTimeout(() => r('timeout'), 2000))])
    assert.equal(fired, 'immediate')
  })

  it('serves searches while upserts and deletes run, and acknowledges every concurrent write', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-concurrent'
    const store = await open(dir, { exactBudget: 0 })
    t.after(() => store.close())
    const points = randomPoints(kb, 1000, 61, DIMS, 10)
    const writes = []
    for (let i = 0; i < 1000; i += 25) writes.push(store.upsert(kb, points.slice(i, i + 25)))
    const searches = []
    for (let i = 0; i < 200; i++) {
      searches.push(store.search(kb, { dense: points[i].dense, sparse: points[i].sparse, limit: 5 }).then((r) => {
        for (const h of [...r.dense, ...r.sparse]) assert.equal(typeof h.payload.chunk_id, 'string')
        assert.ok(r.dense.length <= 5 && r.sparse.length <= 5)
      }))
    }
    await Promise.all([...writes, ...searches])
    assert.equal(await store.count(kb), 1000)
    const deletes = await Promise.all(Array.from({ length: 20 }, (_, i) => store.deleteByDoc(kb, `doc${i}`)))
    assert.deepEqual(deletes, new Array(20).fill(10))
    assert.equal(await store.count(kb), 800)
    // Every acknowledged point is findable by its own vector, before and after the graph catches up.
    for (const p of points.slice(200, 260)) assert.equal((await store.search(kb, { dense: p.dense, limit: 1 })).dense[0].payload.chunk_id, p.payload.chunk_id)
    await store.whenIndexed(kb)
    for (const p of points.slice(900, 960)) assert.equal((await store.search(kb, { dense: p.dense, limit: 1 })).dense[0].payload.chunk_id, p.payload.chunk_id)
  })

  it('settles every write of a strictly sequential caller (no lost wake-up of the write loop)', async (t) => {
    const dir = await tempDir(t)
    const store = await open(dir)
    t.after(() => store.close())
    const kb = 'kb-seq'
    await store.ensureCollection(kb, DIMS)
    for (let i = 0; i < 100; i++) {
      await store.upsert(kb, [point(kb, `d${i}`, 0, axis(i), [[i, 1]])])
      assert.equal(await store.deleteByDoc(kb, `d${i - 1}`), i === 0 ? 0 : 1)
    }
    assert.equal(await store.count(kb), 1)
  })

  it('refuses points it could not replay: bad sparse vectors, missing ids', async (t) => {
    const dir = await tempDir(t)
    const store = await open(dir)
    t.after(() => store.close())
    const kb = 'kb-bad'
    const dup = point(kb, 'd', 0, axis(0), [[3, 1], [3, 2]])
    await assert.rejects(store.upsert(kb, [dup]), { code: 'INVALID_VECTOR_POINT' })
    const uneven = { ...point(kb, 'd', 1, axis(0)), sparse: { indices: Uint32Array.of(1, 2), values: Float32Array.of(1) } }
    await assert.rejects(store.upsert(kb, [uneven]), { code: 'INVALID_VECTOR_POINT' })
    const nan = point(kb, 'd', 2, [NaN, 0, 0, 0, 0, 0, 0, 0])
    await assert.rejects(store.upsert(kb, [nan]), { code: 'INVALID_VECTOR_POINT' })
    const noId = point(kb, 'd', 3, axis(0))
    noId.payload.chunk_id = ''
    await assert.rejects(store.upsert(kb, [noId]), { code: 'INVALID_VECTOR_POINT' })
    await assert.rejects(store.search('../etc', { limit: 1 }), { code: 'INVALID_KB_ID' })
    assert.equal(await store.count(kb), 0)
  })

  it('lets one store at a time use a folder', async (t) => {
    const dir = await tempDir(t)
    const store = await open(dir)
    await assert.rejects(open(dir), { code: 'VECTOR_STORE_LOCKED' })
    await store.close()
    const again = await open(dir)
    assert.equal(await again.ping(), true)
    await again.close()
    assert.equal(await again.ping(), false)
  })
})

describe('embedded vector store: f32 originals on disk', () => {
  const spillFile = (dir: string, kb: string) => join(dir, kb, 'dense.f32')
  const payloadFile = (dir: string, kb: string) => join(dir, kb, 'payloads.jsonl')
  const exists = (path: string) => fs.stat(path).then(() => true, () => false)

  it('answers from spilled segments as from memory: pending scan, graph rescoring, reused rows, docVectors, snapshot and restart', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-spill'
    const opts = { exactBudget: 0, quantization: 'f32' as const, segmentRows: 16, snapshotOnClose: true }
    let store = await open(dir, opts)
    const points = randomPoints(kb, 900, 91)
    for (let i = 0; i < points.length; i += 150) await store.upsert(kb, points.slice(i, i + 150))
    let stats = (await store.stats(kb))!
    // Every full segment but the last is on disk; rows still waiting for the graph are scanned from there too.
    assert.equal(stats.onDiskRows, Math.floor((900 - 1) / 16) * 16)
    assert.ok(await exists(spillFile(dir, kb)))
    assert.equal((await fs.stat(spillFile(dir, kb))).size, stats.onDiskRows * DIMS * 4)
    // Their payloads followed them, one record each; search hits below read them back.
    assert.equal(stats.payloadsOnDisk, stats.onDiskRows)
    const records = (await fs.readFile(payloadFile(dir, kb), 'utf8')).match(/\{"chunk_id"/g) ?? []
    assert.equal(records.length, stats.onDiskRows)
    await assertMatchesReference(store, kb, points, 92)
    await store.whenIndexed(kb)
    await assertMatchesReference(store, kb, points, 93)
    const first = 'doc1'
    assert.deepEqual(await store.docVectors(kb, first), points.filter((p) => p.payload.doc_id === first).map((p) => p.dense))

    // Deleting 40 % of the documents frees rows all over the spilled segments; new points take them.
    const gone = new Set(Array.from({ length: 90 }, (_, d) => `doc${d}`).filter((_, d) => d % 5 < 2))
    for (const d of gone) assert.equal(await store.deleteByDoc(kb, d), 10)
    const fresh = randomPoints(kb, 300, 94, DIMS, 10, 'new')
    await store.upsert(kb, fresh)
    await store.upsert(kb, randomPoints(kb, 10, 95, DIMS, 10, 'more'))
    stats = (await store.stats(kb))!
    assert.ok(stats.rows < 900 + 310, `rows were reused (${stats.rows} rows for ${900 + 310} upserts)`)
    // Reused rows of spilled segments hold their new payload in memory; the deleted ones left the file's count.
    assert.ok(stats.payloadsOnDisk > 0 && stats.payloadsOnDisk <= stats.onDiskRows && stats.payloadsOnDisk < 900 + 310 - 360, `payloads on disk: ${stats.payloadsOnDisk}`)
    const more = randomPoints(kb, 10, 95, DIMS, 10, 'more')
    let live = [...points.filter((p) => !gone.has(p.payload.doc_id)), ...fresh, ...more]
    await assertMatchesReference(store, kb, live, 96)
    assert.deepEqual(await store.docVectors(kb, 'new7'), fresh.filter((p) => p.payload.doc_id === 'new7').map((p) => p.dense))
    await store.whenIndexed(kb)
    await assertMatchesReference(store, kb, live, 97)

    // The snapshot reads the spilled segments back from the file; the file goes with the close.
    await store.snapshot(kb)
    await store.close()
    assert.equal(await exists(spillFile(dir, kb)), false)
    assert.equal(await exists(payloadFile(dir, kb)), false)
    store = await open(dir, opts)
    assert.equal((await store.stats(kb))!.onDiskRows, Math.floor(stats.rows / 16) * 16)
    await assertMatchesReference(store, kb, live, 98)
    // A filtered search fills the restored rows' filter columns; the snapshot's payloads then go to the file.
    const someDocs = ['doc2', 'new5', 'more0']
    const filtered = await store.search(kb, { dense: live[0].dense, limit: 50, filter: { docIds: someDocs } })
    assert.deepEqual(filtered.dense.map((h) => h.payload.doc_id).sort(), live.filter((p) => someDocs.includes(p.payload.doc_id)).map((p) => p.payload.doc_id).sort())
    // Written a slice per turn of the event loop (one slice at this size).
    for (let turn = 0; turn < 200 && (await store.stats(kb))!.payloadsOnDisk < live.length; turn++) await new Promise((r) => setTimeout(r, 10))
    assert.equal((await store.stats(kb))!.payloadsOnDisk, live.length)
    await assertMatchesReference(store, kb, live, 100)
    live = live.filter((p) => p.payload.doc_id !== 'new3')
    assert.equal(await store.deleteByDoc(kb, 'new3'), 10)
    // A hit whose payload is still on disk when its collection closes answers 503, not a wrong payload.
    const held = (await store.search(kb, { dense: live[0].dense, limit: 1 })).dense[0]
    await store.close()
    assert.throws(() => held.payload, (err: Error & { status?: number }) => err.status === 503 && /closed/.test(err.message))
    // The same files opened with everything in memory.
    store = await open(dir, { ...opts, denseOnDisk: false })
    t.after(() => store.close())
    assert.equal((await store.stats(kb))!.onDiskRows, 0)
    assert.equal(await exists(spillFile(dir, kb)), false)
    await assertMatchesReference(store, kb, live, 99)
  })

  it("keeps full blocks of the sparse rows' own terms on disk: deletes, filtered search, docPoints, snapshot, compaction, restart", async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-sparse-spill'
    const sparseFile = join(dir, kb, 'sparse.bin')
    const opts = { segmentRows: 16, sparseBlockEntries: 64, snapshotOnClose: true }
    const entries = (ps: VectorPoint[]) => ps.reduce((n, p) => n + p.sparse.indices.length, 0)
    // A filtered sparse search scores the few rows the filter keeps one by one, from their own terms (read back from
    // the file); the reference: every live point's score (IDF over all of them), kept for the filter's documents.
    const filteredMatches = async (live: VectorPoint[], docs: string[]) => {
      const query = sparse(Array.from({ length: 60 }, (_, t) => [t, 1 + (t % 3) / 2] as [number, number]))
      const expected = [...sparseScores(live, query)]
        .filter(([id]) => docs.includes(live.find((p) => p.payload.chunk_id === id)!.payload.doc_id))
        .sort((a, b) => b[1] - a[1])
      const { sparse: hits } = await store.search(kb, { sparse: query, limit: 50, filter: { docIds: docs } })
      assert.ok(expected.length > 0, `the query shares a term with ${docs.join(', ')}`)
      assert.deepEqual(hits.map((h) => h.payload.chunk_id).sort(), expected.map(([id]) => id).sort())
      for (let i = 0; i < hits.length; i++) assert.ok(Math.abs(hits[i].score - expected[i][1]) < 1e-4, `filtered sparse score ${i}`)
    }
    let store = await open(dir, opts)
    const points = randomPoints(kb, 600, 111)
    for (let i = 0; i < points.length; i += 100) await store.upsert(kb, points.slice(i, i + 100))
    let stats = (await store.stats(kb))!
    // Every block but the one rows are appended to (at most 64 entries) is in the file, its terms and values.
    assert.ok(stats.sparseOnDiskEntries >= entries(points) - 64 && stats.sparseOnDiskEntries < entries(points), `on disk: ${stats.sparseOnDiskEntries} of ${entries(points)}`)
    assert.equal((await fs.stat(sparseFile)).size, stats.sparseOnDiskEntries * 8)
    await assertMatchesReference(store, kb, points, 112)
    await filteredMatches(points, ['doc3'])
    assert.deepEqual((await store.docPoints(kb, 'doc4')).map((p) => p.sparse), points.filter((p) => p.payload.doc_id === 'doc4').map((p) => p.sparse))

    // Deletes read a row's terms back to lower the document frequencies; then compaction packs the live rows into a
    // new file. New points reuse the rows.
    const gone = Array.from({ length: 60 }, (_, d) => `doc${d}`).filter((_, d) => d % 3 === 0)
    for (const d of gone) assert.equal(await store.deleteByDoc(kb, d), 10)
    let live = points.filter((p) => !gone.includes(p.payload.doc_id))
    await assertMatchesReference(store, kb, live, 113)
    const fresh = randomPoints(kb, 200, 114, DIMS, 10, 'new')
    await store.upsert(kb, fresh)
    live = [...live, ...fresh]
    stats = (await store.stats(kb))!
    assert.ok(stats.rows < 800, `rows were reused (${stats.rows} rows for 800 upserts)`)
    // Compaction came once a quarter of the entries were dead (the deletes after it leave theirs in the file).
    const written = entries(points) + entries(fresh)
    assert.ok(stats.sparseOnDiskEntries >= entries(live) - 64 && stats.sparseOnDiskEntries < written - entries(points) / 4, `after compaction, on disk: ${stats.sparseOnDiskEntries}, ${entries(live)} live, ${written} written`)
    assert.equal((await fs.stat(sparseFile)).size, stats.sparseOnDiskEntries * 8)
    assert.equal(await exists(`${sparseFile}.pack`), false)
    await assertMatchesReference(store, kb, live, 115)
    await filteredMatches(live, ['doc4'])
    await filteredMatches(live, ['new3'])
    assert.deepEqual((await store.docPoints(kb, 'doc5')).map((p) => p.sparse), points.filter((p) => p.payload.doc_id === 'doc5').map((p) => p.sparse))

    // The snapshot reads the spilled terms back; the file goes with the close; the restored block goes to the file.
    await store.snapshot(kb)
    await store.close()
    assert.equal(await exists(sparseFile), false)
    store = await open(dir, opts)
    stats = (await store.stats(kb))!
    assert.equal(stats.sparseOnDiskEntries, entries(live))
    assert.equal((await fs.stat(sparseFile)).size, entries(live) * 8)
    await assertMatchesReference(store, kb, live, 116)
    await filteredMatches(live, ['doc7'])
    assert.equal(await store.deleteByDoc(kb, 'doc8'), 10)
    live = live.filter((p) => p.payload.doc_id !== 'doc8')
    const more = randomPoints(kb, 30, 117, DIMS, 10, 'more')
    await store.upsert(kb, more)
    live = [...live, ...more]
    await assertMatchesReference(store, kb, live, 118)
    await store.close()
    // The same files opened with everything in memory answer alike.
    store = await open(dir, { ...opts, denseOnDisk: false })
    t.after(() => store.close())
    assert.equal((await store.stats(kb))!.sparseOnDiskEntries, 0)
    assert.equal(await exists(sparseFile), false)
    await assertMatchesReference(store, kb, live, 119)
    await filteredMatches(live, ['new3', 'more1'])
  })

  it("scores a filter's few rows from their spilled terms as from memory, and walks the postings for many", async (t) => {
    const dir = await tempDir(t)
    const inMemory = new SparseIndex({ blockEntries: 64 })
    const spilled = new SparseIndex({ blockEntries: 64, spillPath: join(dir, 'sparse.bin') })
    t.after(() => spilled.close())
    const r = rng(131)
    const n = 3000
    for (let row = 0; row < n; row++) {
      const v = { indices: Uint32Array.of(0, 1, 2 + Math.floor(r() * 50)), values: Float32Array.of(0.5 + r(), 0.5 + r(), 1 + r()) }
      inMemory.add(row, v)
      spilled.add(row, v)
    }
    assert.ok(spilled.onDiskEntries >= 3 * n - 64, `on disk: ${spilled.onDiskEntries}`)
    // A delete reads the row's terms back to lower their document frequencies.
    for (const row of [7, 1500]) {
      inMemory.remove(row)
      spilled.remove(row)
    }
    const query = { indices: Uint32Array.of(0, 1, 9), values: Float32Array.of(1, 1, 2) }
    const subset = (rows: number[]) => {
      const mask = new Uint8Array(n)
      for (const row of rows) mask[row] = 1
      return { rows: Int32Array.from(rows), count: rows.length, mask }
    }
    // Two rows: scored one by one (the query's postings hold 6,000 entries), from the file for both.
    // 600 rows: the postings are walked instead.
    const few = subset([5, 1234])
    const many = subset(Array.from({ length: 600 }, (_, i) => i * 5))
    for (const [s, k] of [[few, 2], [many, 10]] as const) {
      const a = spilled.search(query, k, s)
      const b = inMemory.search(query, k, s)
      assert.equal(a.rows.length, k)
      assert.deepEqual([...a.rows], [...b.rows])
      assert.deepEqual([...a.scores], [...b.scores])
    }
    assert.deepEqual(spilled.rowVector(1234), inMemory.rowVector(1234))
    assert.deepEqual(spilled.rowVector(7), { indices: new Uint32Array(0), values: new Float32Array(0) })
  })

  it('keeps a collection within the exact-scan size in memory', async (t) => {
    const dir = await tempDir(t)
    const store = await open(dir, { segmentRows: 16 })
    t.after(() => store.close())
    const points = randomPoints('kb-small', 100, 101)
    await store.upsert('kb-small', points)
    assert.equal((await store.stats('kb-small'))!.onDiskRows, 0)
    assert.equal(await exists(spillFile(dir, 'kb-small')), false)
    await assertMatchesReference(store, 'kb-small', points, 102)
  })

  it('refuses a segment size that is not a power of two', async (t) => {
    await assert.rejects(open(await tempDir(t), { segmentRows: 24 }), /segmentRows must be a power of two/)
  })
})

describe('embedded vector store: filtered search', () => {
  /** randomPoints with a doc_type per document: one in 100 documents 'rare', one in 5 'pdf', the rest 'md'. */
  function typedPoints(kb: string, n: number, seed: number, dims: number): VectorPoint[] {
    return randomPoints(kb, n, seed, dims, 10).map((p, i) => {
      const doc = Math.floor(i / 10)
      const doc_type = doc % 100 === 7 ? 'rare' : doc % 5 === 0 ? 'pdf' : 'md'
      return { ...p, payload: { ...p.payload, doc_type, source: `${doc_type}/${p.payload.doc_id}` } }
    })
  }

  /** Dense and sparse answers against brute force over the points the filter keeps (IDF over all live points). */
  async function assertFiltered(store: EmbeddedVectorStore, kb: string, live: VectorPoint[], keep: (p: VectorPoint) => boolean, filter: VectorFilter, seed: number, dims: number) {
    const r = rng(seed)
    const kept = live.filter(keep)
    let found = 0
    for (let q = 0; q < 10; q++) {
      const query = Float32Array.from({ length: dims }, () => r() * 2 - 1)
      const sq = sparse([[Math.floor(r() * 5), 1], [Math.floor(r() * 60), 0.5]])
      const { dense, sparse: hits } = await store.search(kb, { dense: query, sparse: sq, limit: 10, filter })
      const truth = kept.map((p) => ({ id: p.payload.chunk_id, s: cosine(query, p.dense) })).sort((a, b) => b.s - a.s).slice(0, 10)
      assert.equal(dense.length, Math.min(10, kept.length), 'the filtered search fills the limit')
      const byId = new Map(kept.map((p) => [p.payload.chunk_id, p]))
      for (let i = 0; i < dense.length; i++) {
        const p = byId.get(dense[i].id)
        assert.ok(p !== undefined, `${dense[i].id} passes the filter`)
        assert.ok(Math.abs(dense[i].score - cosine(query, p.dense)) < 1e-5, 'exact score')
      }
      const truthIds = new Set(truth.map((t) => t.id))
      found += dense.filter((h) => truthIds.has(h.id)).length
      const all = sparseScores(live, sq)
      const sTruth = kept.flatMap((p) => (all.has(p.payload.chunk_id) ? [[p.payload.chunk_id, all.get(p.payload.chunk_id)!] as const] : [])).sort((a, b) => b[1] - a[1]).slice(0, 10)
      assert.equal(hits.length, sTruth.length)
      for (let i = 0; i < hits.length; i++) {
        assert.ok(byId.has(hits[i].id), `${hits[i].id} passes the filter`)
        assert.ok(Math.abs(hits[i].score - sTruth[i][1]) < 1e-4, `sparse score ${i}: ${hits[i].score} vs ${sTruth[i][1]}`)
      }
    }
    return found / (10 * Math.min(10, kept.length))
  }

  /** A store holding 2,000 typed points of 32 dimensions, all in the graph. */
  async function graphStore(t: TestContext, kb: string, seed: number, extra: Partial<EmbeddedVectorStoreOptions>) {
    const store = await open(await tempDir(t), { exactBudget: 0, dimensions: 32, ...extra })
    t.after(() => store.close())
    const points = typedPoints(kb, 2000, seed, 32)
    await store.upsert(kb, points)
    await store.whenIndexed(kb)
    return { store, points, dims: 32 }
  }

  it('searches the graph for a large filtered subset and scans a small one, filling the limit either way', async (t) => {
    const kb = 'kb-filter-graph'
    // No scan budget, graph cost 0: every filtered search goes through the graph, the rare type included (0.5%
    // of rows, so the candidate list has to widen until ten pass).
    const { store, points, dims } = await graphStore(t, kb, 31, { filterScanBudget: 0, filterGraphCost: 0 })
    const recallPdf = await assertFiltered(store, kb, points, (p) => p.payload.doc_type === 'pdf', { docTypes: ['pdf'] }, 32, dims)
    const recallRare = await assertFiltered(store, kb, points, (p) => p.payload.doc_type === 'rare', { docTypes: ['rare'] }, 33, dims)
    assert.ok(recallPdf >= 0.9, `graph recall of a 20% filter: ${recallPdf}`)
    assert.ok(recallRare >= 0.9, `graph recall of a 0.5% filter: ${recallRare}`)
    // Rows not yet in the graph are filtered too.
    const late = typedPoints(kb, 200, 34, dims).map((p) => ({ ...p, payload: { ...p.payload, chunk_id: `late-${p.payload.chunk_id}`, doc_id: `late-${p.payload.doc_id}` } }))
    await store.upsert(kb, late)
    await assertFiltered(store, kb, [...points, ...late], (p) => p.payload.doc_type === 'pdf' && p.payload.doc_id.startsWith('late-'), { docTypes: ['pdf'], docIds: late.map((p) => p.payload.doc_id) }, 35, dims)
  })

  it('gives the same answers on the exact-scan path, and scores sparse rows one by one for a selective filter', async (t) => {
    const kb = 'kb-filter-scan'
    const { store, points, dims } = await graphStore(t, kb, 41, {})
    // 20 rows x 32 dims and 400 x 32 are both under the default scan budget: exact, so recall 1.
    assert.equal(await assertFiltered(store, kb, points, (p) => p.payload.doc_type === 'rare', { docTypes: ['rare'] }, 42, dims), 1)
    assert.equal(await assertFiltered(store, kb, points, (p) => p.payload.source.startsWith('pdf/'), { sourcePrefix: 'pdf/' }, 43, dims), 1)
    // Two documents (20 rows): queries with common terms score the rows one by one, the others walk the
    // posting lists (the cheaper of the two); both against the same reference.
    assert.equal(await assertFiltered(store, kb, points, (p) => p.payload.doc_id === 'doc3' || p.payload.doc_id === 'doc9', { docIds: ['doc3', 'doc9'] }, 44, dims), 1)
  })

  it('scans a kept set above the gather budget row by row when that reads fewer vectors than the graph would', async (t) => {
    const kb = 'kb-filter-loop'
    const { store, points, dims } = await graphStore(t, kb, 61, { filterScanBudget: 0, filterGraphCost: 1e9 })
    assert.equal(await assertFiltered(store, kb, points, (p) => p.payload.doc_type === 'pdf', { docTypes: ['pdf'] }, 62, dims), 1)
    assert.equal(await assertFiltered(store, kb, points, (p) => p.payload.doc_type === 'rare', { docTypes: ['rare'], updatedBefore: Date.parse('2100-01-01T00:00:00Z') }, 63, dims), 1)
  })

  it('gives the same filtered answers with the f32 originals on disk (gathered runs, the row loop, waiting rows)', async (t) => {
    for (const [i, extra] of [{}, { filterScanBudget: 0, filterGraphCost: 1e9 }, { filterScanBudget: 0, filterGraphCost: 0 }].entries()) {
      const kb = `kb-filter-spill-${i}`
      const { store, points, dims } = await graphStore(t, kb, 71 + i, { segmentRows: 16, ...extra })
      // The segment the last rows went to stays in memory, full or not.
      assert.equal((await store.stats(kb))!.onDiskRows, Math.floor((2000 - 1) / 16) * 16)
      const exact = i < 2 ? 1 : undefined
      const pdf = await assertFiltered(store, kb, points, (p) => p.payload.doc_type === 'pdf', { docTypes: ['pdf'] }, 72, dims)
      const two = await assertFiltered(store, kb, points, (p) => p.payload.doc_id === 'doc3' || p.payload.doc_id === 'doc150', { docIds: ['doc3', 'doc150'] }, 73, dims)
      if (exact !== undefined) assert.deepEqual([pdf, two], [exact, exact])
      const late = typedPoints(kb, 40, 74, dims).map((p) => ({ ...p, payload: { ...p.payload, chunk_id: `late-${p.payload.chunk_id}`, doc_id: `late-${p.payload.doc_id}` } }))
      await store.upsert(kb, late)
      await assertFiltered(store, kb, [...points, ...late], (p) => p.payload.doc_type === 'pdf', { docTypes: ['pdf'] }, 75, dims)
    }
  })

  it('filters rows restored from a snapshot, whose filter columns are filled after the open', async (t) => {
    const dir = await tempDir(t)
    const kb = 'kb-filter-restart'
    let store = await open(dir)
    const points = typedPoints(kb, 300, 51, DIMS).map((p, i) => ({ ...p, payload: { ...p.payload, updated_at: new Date(Date.UTC(2024, 0, 1 + (i % 30))).toISOString() } }))
    await store.upsert(kb, points)
    await store.close()
    store = await open(dir)
    t.after(() => store.close())
    // The first filtered search after the restart names only values that snapshot rows hold.
    await assertFiltered(store, kb, points, (p) => p.payload.doc_type === 'rare', { docTypes: ['rare'] }, 50, DIMS)
    // A write after the restart: a row holding its payload object beside rows holding snapshot bytes.
    const extra = { ...points[0], payload: { ...points[0].payload, chunk_id: 'x:0', doc_id: 'x', doc_type: 'pdf', source: 'pdf/x', updated_at: '2024-01-20T00:00:00.000Z' } }
    await store.upsert(kb, [extra])
    const live = [...points, extra]
    const jan20 = Date.parse('2024-01-20T00:00:00Z')
    await assertFiltered(store, kb, live, (p) => p.payload.doc_type === 'pdf' && Date.parse(p.payload.updated_at) >= jan20, { docTypes: ['pdf'], updatedAfter: jan20 }, 52, DIMS)
    await assertFiltered(store, kb, live, (p) => p.payload.source.startsWith('md/doc1'), { sourcePrefix: 'md/doc1' }, 53, DIMS)
  })
})

describe('vector log records', () => {
  /** A record in a buffer of its own. */
  const encodeRecord = (record: WalRecordWriter): Buffer => {
    const buf = Buffer.allocUnsafe(record.size)
    record.write(buf, 0)
    return buf
  }

  it('writes a group of records into a reused buffer exactly as each alone, and reads them back', () => {
    const kb = 'kb-wal'
    // Payload JSON of 1 to 4 bytes past a multiple of 4 (the pad after it), non-ASCII text, and sparse vectors of 0 to 3 terms.
    const points = randomPoints(kb, 6, 211).map((p, i) => ({
      ...p,
      payload: { ...p.payload, text: `${'é'.repeat(i)}${'x'.repeat(i * 3)} ✓` },
      sparse: { indices: Uint32Array.from({ length: i % 4 }, (_, j) => j * 7 + i), values: Float32Array.from({ length: i % 4 }, (_, j) => j + 0.5) },
    }))
    const records = [upsertRecord(points.slice(0, 2), DIMS), deleteDocRecord('doc-é1'), upsertRecord(points.slice(2), DIMS), deleteDocRecord('d')]
    const size = records.reduce((n, r) => n + r.size, 0)
    // A buffer full of what an earlier group left: every byte of the new records must be written.
    const group = Buffer.alloc(size + 64, 0xa5)
    let at = 0
    for (const r of records) {
      r.write(group, at)
      at += r.size
    }
    const alone = Buffer.concat(records.map((r) => encodeRecord(r)))
    assert.equal(alone.length, size)
    assert.ok(group.subarray(0, size).equals(alone))
    // The same bytes from a zeroed buffer: nothing of the 0xa5 fill is left in them.
    const zeroed = Buffer.alloc(size)
    at = 0
    for (const r of records) {
      r.write(zeroed, at)
      at += r.size
    }
    assert.ok(zeroed.equals(alone))
    const { records: read, validBytes, torn } = readRecords(group.subarray(0, size))
    assert.equal(torn, false)
    assert.equal(validBytes, size)
    assert.equal(read.length, 4)
    assert.deepEqual(read.map((r) => r.type), [1, 2, 1, 2])
    assert.equal((read[1] as { docId: string }).docId, 'doc-é1')
    assert.equal((read[3] as { docId: string }).docId, 'd')
    const decoded = [...(read[0] as { points: VectorPoint[] }).points, ...(read[2] as { points: VectorPoint[] }).points]
    assert.equal(decoded.length, points.length)
    for (let i = 0; i < points.length; i++) {
      assert.deepEqual(decoded[i].payload, points[i].payload)
      assert.deepEqual([...decoded[i].dense], [...points[i].dense])
      assert.deepEqual([...decoded[i].sparse.indices], [...points[i].sparse.indices])
      assert.deepEqual([...decoded[i].sparse.values], [...points[i].sparse.values])
    }
    // A record cut short is the torn tail: the ones before it are read.
    const cut = readRecords(group.subarray(0, size - 1))
    assert.equal(cut.records.length, 3)
    assert.equal(cut.torn, true)
  })
})

describe('embedded vector store: kill -9', () => {
  it('keeps every acknowledged upsert when the process is killed mid-run', async (t) => {
    const dir = await tempDir(t)
    const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('./vectors-kill-child.ts', import.meta.url)), dir], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const acked: number[] = []
    const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()))
    const lines = createInterface({ input: child.stdout! })
    await new Promise<void>((resolve, reject) => {
      child.on('error', reject)
      child.on('exit', (code) => reject(new Error(`child exited early with ${code}`)))
      lines.on('line', (line) => {
        const m = /^acked (\d+)$/.exec(line)
        if (m === null) return
        acked.push(Number(m[1]))
        // Enough batches for several snapshots and a log on top of them; the kill lands mid-write.
        if (acked.length === 60) {
          child.kill('SIGKILL')
          resolve()
        }
      })
    })
    await exited
    assert.ok(acked.length >= 60)

    const store = await open(dir)
    t.after(() => store.close())
    const kb = 'kb-kill'
    const { killBatch } = await import('./vectors-kill-child.ts')
    const count = await store.count(kb)
    assert.ok(count >= acked.length * 20, `count ${count} below the ${acked.length * 20} acknowledged points`)
    for (const b of acked) {
      const batch = killBatch(b)
      const vectors = await store.docVectors(kb, batch[0].payload.doc_id)
      assert.equal(vectors.length, batch.length, `batch ${b} incomplete`)
      const probe = batch[b % batch.length]
      const { dense, sparse: hits } = await store.search(kb, { dense: probe.dense, sparse: probe.sparse, limit: 1 })
      assert.equal(dense[0].payload.chunk_id, probe.payload.chunk_id, `batch ${b} not searchable`)
      assert.ok(hits.length === 1)
    }
  })
})

describe('embedded vector store: query vectors that are views', () => {
  it('a query that is a view into a larger buffer finds its own row (exact-scan path)', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'quarry-vec-view-'))
    t.after(() => fs.rm(dir, { recursive: true, force: true }))
    const store = await createEmbeddedVectorStore({ dir, dimensions: DIMS })
    t.after(() => store.close())
    await store.ensureCollection('kb', DIMS)
    // Rows 0..7 point along different axes; the query is row 5, handed over as a view at an offset.
    await store.upsert('kb', Array.from({ length: 8 }, (_, i) => point('kb', 'd', i, axis(i))))
    const buffer = new Float32Array(8 * DIMS)
    for (let i = 0; i < 8; i++) buffer.set(axis(i), i * DIMS)
    const view = buffer.subarray(5 * DIMS, 6 * DIMS)
    const { dense } = await store.search('kb', { dense: view, limit: 1 })
    assert.equal(dense[0].payload.chunk_index, 5)
  })
})
