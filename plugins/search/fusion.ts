// Ranking arithmetic of spec 4.10, as pure functions.
import type { ChunkPayload, VectorHit } from '../../adapters/ports.ts'

/** A chunk in a ranked list: its id at hand, its payload read when a result is built from it. */
export interface RankedHit {
  readonly id: string
  readonly payload: ChunkPayload
}

export interface Ranked {
  hit: RankedHit
  /** In-KB score: weighted reciprocal rank (hybrid) or cosine (similarity). */
  score: number
}

/** k of the in-KB fusion: retrieval.hybrid.kb_rrf_k, where 0 means rrf_k. */
export const inKbFusionK = (hybrid: { rrf_k: number; kb_rrf_k?: number }): number => hybrid.kb_rrf_k || hybrid.rrf_k

/** The weight, relative to rank 1's, below which a rank's fusion weight no longer earns its fetch (fusionDepth). */
export const FUSION_WEIGHT_FLOOR = 1 / 6

/**
 * The ranks of a list worth fetching for fusion with k: those whose weight 1/(k + rank) is at least
 * FUSION_WEIGHT_FLOOR of rank 1's 1/(k + 1), that is rank <= (k + 1) / FUSION_WEIGHT_FLOOR - k. With k 60 (the
 * specification's) that is 306: every rank a search asks for. With the built-in embedder's k of 3 it is 21
 * (rank 22 weighs 4/25 of rank 1).
 */
export const fusionDepth = (k: number): number => Math.floor((k + 1) / FUSION_WEIGHT_FLOOR - k)

/**
 * The hits of each list a KB's search asks the store for (VectorQuery.limit). Hybrid fusion needs deeper lists
 * than top_k: a chunk ranked 12th by both lists can beat one ranked 1st by one. A KB searched among several
 * (effort < 1) gets a short dense candidate list, so the number of ranks asked, not the effort, sets its graph
 * cost: only the ranks fusion weighs enough are asked (fusionDepth), and at least top_k (what one list alone
 * returns, alpha 0 or 1).
 */
export function storeLimit(mode: 'hybrid' | 'similarity', topK: number, fusionK: number, effort?: number): number {
  if (mode !== 'hybrid') return topK
  const limit = Math.max(topK * 4, 40)
  if (effort === undefined || effort >= 1) return limit
  return Math.max(topK, Math.min(limit, fusionDepth(fusionK)))
}

/**
 * Hybrid inside one KB: reciprocal rank fusion of the dense and sparse lists with alpha weighting the two
 * (1.0 = dense only, 0.0 = sparse only): alpha / (k + dense rank) + (1 - alpha) / (k + sparse rank).
 * Best first; ties in the order the chunks were met, the dense list's first (by dense rank), then the chunks only the
 * sparse list has (by sparse rank): an order a KB's import keeps, where chunk ids are new (plugins/transfer/import.ts)
 * and the stores rank tied chunks by what they say (adapters/vectors/payloads.ts tieOrder). Only the first `limit`
 * are returned. No payload is read.
 * `counts.candidates` receives the number of distinct chunks fused (before the limit).
 */
export function fuseInKb(dense: readonly VectorHit[], sparse: readonly VectorHit[], alpha: number, k: number, limit = Infinity, counts?: { candidates: number }): Ranked[] {
  const byId = new Map<string | number, Fused>()
  // By the store's numbers for the chunks when every hit has one (VectorHit.key): the same chunk has the same number
  // in both lists, and a number is its own hash. At 100k chunks, hashing the ids was about 55 us of a search's 3 ms.
  const keyed = allKeyed(dense) && allKeyed(sparse)
  addRanks(byId, dense, alpha, k, keyed)
  addRanks(byId, sparse, 1 - alpha, k, keyed)
  if (counts) counts.candidates = byId.size
  if (!(limit < byId.size && limit >= 1 && Number.isInteger(limit))) {
    // Map order is insertion order, and the sort is stable: ties stay in the order met.
    const fused = [...byId.values()].sort(fusedBefore)
    return fused.length > limit ? fused.slice(0, limit) : fused
  }
  // Only the first `limit` of about 80 are kept (top_k of 2 x 40): insertion into a short sorted list instead of a
  // full sort. An entry goes after those of its score already there (met before it), so the list is the head of the
  // stable full sort.
  const head: Ranked[] = []
  for (const r of byId.values()) {
    if (head.length === limit && fusedBefore(r, head[limit - 1]) >= 0) continue
    let i = head.length === limit ? limit - 1 : head.length
    while (i > 0 && fusedBefore(r, head[i - 1]) < 0) {
      head[i] = head[i - 1]
      i--
    }
    head[i] = r
  }
  return head
}

// Module-level rather than closures: a search over ten KBs fuses ten times per request.
function addRanks(byId: Map<string | number, Fused>, hits: readonly VectorHit[], weight: number, k: number, keyed: boolean): void {
  if (weight <= 0) return
  for (let i = 0; i < hits.length; i++) {
    const hit = hits[i]
    const key = keyed ? hit.key! : hit.id
    const r = byId.get(key)
    const s = weight / (k + i + 1)
    if (r) r.score += s
    else byId.set(key, { hit, score: s })
  }
}

function allKeyed(hits: readonly VectorHit[]): boolean {
  for (let i = 0; i < hits.length; i++) if (typeof hits[i].key !== 'number') return false
  return true
}

type Fused = { hit: VectorHit; score: number }

/** Best first; 0 for equal scores (the stable sort and the insertion above keep the order met). */
const fusedBefore = (a: Ranked, b: Ranked): number => b.score - a.score

export interface Pooled extends Ranked {
  /** The final score shown to clients. */
  final: number
  /** A parent chunk in place of its children (auto-merge, MergeItem.merged); false for a list that was not merged. */
  merged: boolean
}

/** An entry of a KB's list as pooling takes it: merged when auto-merge put a parent in place of its children. */
type ListEntry = Ranked & { merged?: boolean }

/** A list entry kept as a result: a new object of one shape, its fields named (a spread of the entry cost 1 us each). */
const pooled = (r: ListEntry, final: number): Pooled => ({ hit: r.hit, score: r.score, final, merged: r.merged === true })

const round6 = (x: number) => Math.round(x * 1e6) / 1e6

/**
 * Hybrid across KBs: each KB's list (already cut to top_k) fused again by rank: the final score is the sum
 * over KBs of 1 / (rrf_k + rank in that KB), rounded to 6 decimals. Equal scores keep the in-KB score order,
 * then the order of kb_ids in the request. `counts.pooled` receives the length of the pooled list before the cut.
 *
 * The final score depends on the rank alone, so the pooled list is the lists' rank-1 entries, then their rank-2
 * entries, and so on, each group in score and KB order: only the groups the top_k reach are read and sorted (ten
 * KBs cut to 10: the ten rank-1 entries, instead of sorting all 100). Ranks whose rounded scores are equal
 * (deep ranks with a large rrf_k) form one group.
 */
export function poolByRank(lists: readonly ListEntry[][], rrfK: number, topK: number, counts?: { pooled: number }): Pooled[] {
  let longest = 0
  let total = 0
  for (const list of lists) {
    total += list.length
    if (list.length > longest) longest = list.length
  }
  if (counts) counts.pooled = total
  const out: Pooled[] = []
  const group: { r: ListEntry; kbOrder: number }[] = []
  let groupFinal = NaN
  const flush = () => {
    group.sort((a, b) => b.r.score - a.r.score || a.kbOrder - b.kbOrder)
    for (let g = 0; g < group.length && out.length < topK; g++) out.push(pooled(group[g].r, groupFinal))
    group.length = 0
  }
  for (let i = 0; i < longest; i++) {
    const final = round6(1 / (rrfK + i + 1))
    if (final !== groupFinal) {
      flush()
      if (out.length >= topK) break
      groupFinal = final
    }
    for (let kbOrder = 0; kbOrder < lists.length; kbOrder++) {
      const list = lists[kbOrder]
      if (i < list.length) group.push({ r: list[i], kbOrder })
    }
  }
  flush()
  return out
}

/**
 * Similarity across KBs: min_score applied per KB first (0.0 = no filter), then pooled by cosine, best first; equal
 * (rounded) scores in KB order, then in each KB's order (the store's, which its import keeps), as the stable sort leaves
 * them. `counts.pooled` receives how many passed min_score, before the top_k cut.
 */
export function poolByScore(lists: readonly ListEntry[][], minScore: number, topK: number, counts?: { pooled: number }): Pooled[] {
  // As in poolByRank: entries of one shape sorted, results copied for the topK kept only.
  const out: { r: ListEntry; final: number }[] = []
  for (const list of lists) for (const r of list) if (minScore <= 0 || r.score >= minScore) out.push({ r, final: round6(r.score) })
  if (counts) counts.pooled = out.length
  out.sort((a, b) => b.final - a.final)
  return out.slice(0, topK).map((e) => pooled(e.r, e.final))
}
