// Ranking arithmetic of spec 4.10, as pure functions.
import type { ChunkPayload, VectorHit } from '../../adapters/ports.ts'

export interface Ranked {
  payload: ChunkPayload
  /** In-KB score: weighted reciprocal rank (hybrid) or cosine (similarity). */
  score: number
}

/** k of the in-KB fusion: retrieval.hybrid.kb_rrf_k, where 0 means rrf_k. */
export const inKbFusionK = (hybrid: { rrf_k: number; kb_rrf_k?: number }): number => hybrid.kb_rrf_k || hybrid.rrf_k

/**
 * Hybrid inside one KB: reciprocal rank fusion of the dense and sparse lists with alpha weighting the two
 * (1.0 = dense only, 0.0 = sparse only): alpha / (k + dense rank) + (1 - alpha) / (k + sparse rank).
 */
export function fuseInKb(dense: readonly VectorHit[], sparse: readonly VectorHit[], alpha: number, k: number): Ranked[] {
  const byId = new Map<string, Ranked>()
  const add = (hits: readonly VectorHit[], weight: number) => {
    if (weight <= 0) return
    hits.forEach((hit, i) => {
      const id = hit.payload.chunk_id
      const r = byId.get(id)
      const s = weight / (k + i + 1)
      if (r) r.score += s
      else byId.set(id, { payload: hit.payload, score: s })
    })
  }
  add(dense, alpha)
  add(sparse, 1 - alpha)
  return [...byId.values()].sort((a, b) => b.score - a.score || a.payload.chunk_id.localeCompare(b.payload.chunk_id))
}

export interface Pooled extends Ranked {
  /** The final score shown to clients. */
  final: number
}

const round6 = (x: number) => Math.round(x * 1e6) / 1e6

/**
 * Hybrid across KBs: each KB's list (already cut to top_k) fused again by rank: the final score is the sum
 * over KBs of 1 / (rrf_k + rank in that KB), rounded to 6 decimals. Equal scores keep the in-KB score order,
 * then the order of kb_ids in the request.
 */
export function poolByRank(lists: readonly Ranked[][], rrfK: number, topK: number): Pooled[] {
  const out: (Pooled & { kbOrder: number })[] = []
  lists.forEach((list, kbOrder) => list.forEach((r, i) => out.push({ ...r, final: round6(1 / (rrfK + i + 1)), kbOrder })))
  return out
    .sort((a, b) => b.final - a.final || b.score - a.score || a.kbOrder - b.kbOrder)
    .slice(0, topK)
}

/** Similarity across KBs: min_score applied per KB first (0.0 = no filter), then pooled by cosine, best first. */
export function poolByScore(lists: readonly Ranked[][], minScore: number, topK: number): Pooled[] {
  const out: Pooled[] = []
  for (const list of lists) for (const r of list) if (minScore <= 0 || r.score >= minScore) out.push({ ...r, final: round6(r.score) })
  return out.sort((a, b) => b.final - a.final || a.payload.chunk_id.localeCompare(b.payload.chunk_id)).slice(0, topK)
}
