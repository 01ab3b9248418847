// In-KB fusion reads no payload (results are built from the pooled few); ranks, scores and ties are those of
// the whole fused list, cut.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { ChunkPayload, VectorHit } from '../../adapters/ports.ts'
import { fuseInKb, poolByRank, poolByScore } from '../../plugins/search/fusion.ts'

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

  it('breaks equal scores by chunk_id and leaves out a list weighted 0', () => {
    const reads: string[] = []
    const counts = { candidates: 0 }
    const out = fuseInKb(hits(['y', 'x'], reads), hits(['x2', 'y2'], reads), 1, 60, Infinity, counts)
    assert.deepEqual(out.map((r) => r.hit.payload.chunk_id), ['y', 'x'])
    assert.equal(counts.candidates, 2)
    const tie = fuseInKb(hits(['q'], reads), hits(['p'], reads), 0.5, 60)
    assert.deepEqual(tie.map((r) => r.hit.payload.chunk_id), ['p', 'q'])
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
})
