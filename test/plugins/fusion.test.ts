// In-KB fusion reads no payload (results are built from the pooled few); ranks, scores and ties are those of
// the whole fused list, cut.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { ChunkPayload, VectorHit } from '../../adapters/ports.ts'
import { FUSION_WEIGHT_FLOOR, fusionDepth, fuseInKb, poolByRank, poolByScore, storeLimit, type Ranked } from '../../plugins/search/fusion.ts'

function hits(ids: string[], reads: string[]): VectorHit[] {
  return ids.map((id, i) => ({
    score: 1 - i / 100,
    id,
    get payload(): ChunkPayload {
      reads.push(id)
      return { chunk_id: id, text: `text of ${id}` } as ChunkPayload
    },
  }))
}

describe('fuseInKb', () => {
  const dense = ['c', 'a', 'e', 'g', 'i', 'k']
  const sparse = ['a', 'b', 'c', 'd', 'f', 'h']

  it('cut to a limit: the same head as the whole list, and no payload read', () => {
    const readsAll: string[] = []
    const whole = fuseInKb(hits(dense, readsAll), hits(sparse, readsAll), 0.4, 3)
    assert.equal(whole.length, new Set([...dense, ...sparse]).size)
    const reads: string[] = []
    const counts = { candidates: 0 }
    const head = fuseInKb(hits(dense, reads), hits(sparse, reads), 0.4, 3, 3, counts)
    assert.deepEqual(readsAll, [], 'fusion reads no payload')
    assert.deepEqual(head.map((r) => r.hit.id), whole.slice(0, 3).map((r) => r.hit.id))
    assert.deepEqual(head.map((r) => r.score), whole.slice(0, 3).map((r) => r.score))
    assert.equal(counts.candidates, whole.length)
    assert.deepEqual(reads, [], 'fusion reads no payload')
    assert.deepEqual(head.map((r) => r.hit.payload.chunk_id), head.map((r) => r.hit.id))
    // 'a' and 'c' are in both lists: they lead; a = 0.4/5 + 0.6/4, c = 0.4/4 + 0.6/6.
    assert.deepEqual(head.slice(0, 2).map((r) => r.hit.payload.chunk_id), ['a', 'c'])
    assert.ok(Math.abs(head[0].score - (0.4 / 5 + 0.6 / 4)) < 1e-12)
  })

  it("by the store's numbers when every hit has one (the same fusion as by ids), by ids when a hit has none", () => {
    const keyOf = new Map([...new Set([...dense, ...sparse])].map((id, i) => [id, 100 + i]))
    const keyed = (ids: string[]) => hits(ids, []).map((h) => Object.assign(h, { key: keyOf.get(h.id)! }))
    const plain = fuseInKb(hits(dense, []), hits(sparse, []), 0.4, 3)
    const byKey = fuseInKb(keyed(dense), keyed(sparse), 0.4, 3)
    assert.deepEqual(byKey.map((r) => [r.hit.id, r.score]), plain.map((r) => [r.hit.id, r.score]))
    // Numbers decide: two hits with one number are one chunk (the store says so), whatever their ids.
    const renamed = keyed(sparse).map((h) => Object.assign(h, { id: `${h.id}-other` }))
    assert.equal(fuseInKb(keyed(dense), renamed, 0.4, 3).length, plain.length, 'matched by number')
    // One list without numbers: ids for both (a number never meets an id).
    const mixed = fuseInKb(keyed(dense), hits(sparse, []), 0.4, 3)
    assert.deepEqual(mixed.map((r) => [r.hit.id, r.score]), plain.map((r) => [r.hit.id, r.score]))
  })

  it('breaks equal scores by the order met (dense rank, then the sparse-only chunks by sparse rank), not by id, and leaves out a list weighted 0', () => {
    const reads: string[] = []
    const counts = { candidates: 0 }
    const out = fuseInKb(hits(['y', 'x'], reads), hits(['x2', 'y2'], reads), 1, 60, Infinity, counts)
    assert.deepEqual(out.map((r) => r.hit.payload.chunk_id), ['y', 'x'])
    assert.equal(counts.candidates, 2)
    // Only in the dense list at rank 1, only in the sparse list at rank 1: equal at alpha 0.5, the dense one first,
    // whatever the ids (an import gives its chunks new ones).
    for (const [d, sp] of [['q', 'p'], ['p', 'q']]) {
      const tie = fuseInKb(hits([d], reads), hits([sp], reads), 0.5, 60)
      assert.equal(tie[0].score, tie[1].score)
      assert.deepEqual(tie.map((r) => r.hit.payload.chunk_id), [d, sp])
    }
    // Symmetric ranks tie too (dense 1 + sparse 3 against dense 3 + sparse 1): the better dense rank first, cut or not.
    const dense = ['m', 'z', 'a']
    const sparse = ['a', 'z', 'm']
    for (const limit of [Infinity, 2]) {
      const sym = fuseInKb(hits(dense, reads), hits(sparse, reads), 0.5, 60, limit)
      assert.equal(sym[0].score, 0.5 / 61 + 0.5 / 63)
      assert.deepEqual(sym.slice(0, 2).map((r) => r.hit.id), ['m', 'a'])
    }
  })

  it('pooling across KBs reads no payload either, and orders by rank, then in-KB score, then KB order', () => {
    const reads: string[] = []
    const a = fuseInKb(hits(['a1', 'a2', 'a3'], reads), [], 1, 60)
    const b = fuseInKb(hits(['b1', 'b2'], reads), [], 1, 60)
    const counts = { pooled: -1 }
    const byRank = poolByRank([a, b], 60, 3, counts)
    assert.deepEqual(byRank.map((p) => p.hit.id), ['a1', 'b1', 'a2'])
    assert.equal(byRank[0].final, Math.round(1e6 / 61) / 1e6)
    assert.equal(counts.pooled, 5, 'the merged list before the top_k cut (meta.total_candidates)')
    const byScore = poolByScore([[{ hit: hits(['x'], reads)[0], score: 0.4 }], [{ hit: hits(['y'], reads)[0], score: 0.9 }, { hit: hits(['z'], reads)[0], score: 0.2 }]], 0.3, 1, counts)
    assert.deepEqual(byScore.map((p) => p.hit.id), ['y'])
    assert.equal(counts.pooled, 2, 'what passed min_score, before the top_k cut')
    assert.deepEqual(reads, [])
  })

  it('cut and pooled lists are the heads of the fully sorted ones, ties included, over many generated lists', () => {
    let seed = 7
    const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648
    // Few distinct ids and coarse scores, so that equal scores and ids in several KBs are common.
    const pick = (n: number) => [...new Set(Array.from({ length: n }, () => `c${Math.floor(rnd() * 30)}`))]
    const round6 = (x: number) => Math.round(x * 1e6) / 1e6
    for (let t = 0; t < 300; t++) {
      const [dense, sparse] = [hits(pick(Math.floor(rnd() * 40)), []), hits(pick(Math.floor(rnd() * 40)), [])]
      const alpha = [0, 0.2, 0.5, 1][t % 4]
      const whole = fuseInKb(dense, sparse, alpha, 3)
      // The oracle: every chunk with its score, in the order first met (the dense list's, then the sparse list's),
      // sorted by score with ties in that order.
      const met = new Map<string, number>()
      for (const [list, w] of [[dense, alpha], [sparse, 1 - alpha]] as const) {
        if (w > 0) list.forEach((h, i) => met.set(h.id, (met.get(h.id) ?? 0) + w / (3 + i + 1)))
      }
      const order = [...met.keys()]
      const sorted = [...met].map(([id, score]) => ({ id, score })).sort((a, b) => b.score - a.score || order.indexOf(a.id) - order.indexOf(b.id))
      assert.deepEqual(whole.map((r) => [r.hit.id, r.score]), sorted.map((r) => [r.id, r.score]))
      for (const limit of [1, 3, 10]) assert.deepEqual(fuseInKb(dense, sparse, alpha, 3, limit), whole.slice(0, limit))

      const lists = Array.from({ length: 1 + (t % 11) }, () => fuseInKb(hits(pick(12), []), hits(pick(12), []), alpha, 3, 10)
        .map((r) => ({ ...r, score: Math.round(r.score * 20) / 20 })))
      // Every third list went through auto-merge: its entries say whether each is a merged parent.
      if (t % 3 === 0) lists[0] = lists[0].map((r, i) => ({ ...r, merged: i % 2 === 0 }))
      const asPooled = ({ r, final }: { r: Ranked & { merged?: boolean }; final: number }) => ({ hit: r.hit, score: r.score, final, merged: r.merged === true })
      // The whole pooled list sorted, cut: the oracle for pooling by rank at several rrf_k and top_k (an rrf_k of
      // 2,000 rounds neighbouring ranks to one final score, so they pool as one group).
      for (const rrfK of [60, 2000]) {
        const byRank = lists.flatMap((list, kbOrder) => list.map((r, i) => ({ r, final: round6(1 / (rrfK + 1 + i)), kbOrder })))
          .sort((a, b) => b.final - a.final || b.r.score - a.r.score || a.kbOrder - b.kbOrder)
        for (const topK of [0, 1, 3, 10, 200]) {
          const counts = { pooled: -1 }
          assert.deepEqual(poolByRank(lists, rrfK, topK, counts), byRank.slice(0, topK).map(asPooled), `rrf_k ${rrfK}, top_k ${topK}`)
          assert.equal(counts.pooled, byRank.length)
        }
      }
      // Ties in KB order, then each list's own (the position in the flattened lists).
      const byScore = lists.flat().filter((r) => r.score >= 0.1).map((r, at) => ({ r, final: round6(r.score), at }))
        .sort((a, b) => b.final - a.final || a.at - b.at)
      assert.deepEqual(poolByScore(lists, 0.1, 10), byScore.slice(0, 10).map(asPooled))
    }
  })
})

describe('storeLimit', () => {
  it('fusionDepth: the deepest rank whose weight is at least the floor share of rank 1\'s', () => {
    for (const k of [1, 3, 10, 60]) {
      const depth = fusionDepth(k)
      const share = (rank: number) => (1 / (k + rank)) / (1 / (k + 1))
      assert.ok(share(depth) >= FUSION_WEIGHT_FLOOR - 1e-12, `k ${k}: rank ${depth} weighs enough`)
      assert.ok(share(depth + 1) < FUSION_WEIGHT_FLOOR, `k ${k}: rank ${depth + 1} does not`)
    }
    assert.equal(fusionDepth(3), 21)
    assert.ok(fusionDepth(60) > 40, 'the specification\'s k keeps every rank a search asks for')
  })

  it('hybrid asks 4 x top_k (at least 40) a list, a KB among several only the ranks fusion weighs; similarity top_k', () => {
    assert.equal(storeLimit('similarity', 7, 3, 0.1), 7)
    assert.equal(storeLimit('hybrid', 5, 3), 40)
    assert.equal(storeLimit('hybrid', 5, 3, 1), 40, 'the whole effort: one KB')
    assert.equal(storeLimit('hybrid', 5, 3, 0.1), 21)
    assert.equal(storeLimit('hybrid', 5, 60, 0.1), 40, 'k 60 weighs every rank asked')
    assert.equal(storeLimit('hybrid', 30, 3, 0.5), 30, 'never fewer than top_k')
  })
})
