// How many candidates an approximate search rescores exactly, shared by the embedded store (its graph ranks by
// quantized distances) and the pgvector driver (its HNSW index ranks by halfvec distances, and an iterative scan
// returns them in relaxed order).

/**
 * Graph candidates a search with exact scores rescores: more than k, so that quantized distances cannot push a true
 * top-k row out at the border; max(2k, k + 10) at full effort. A KB searched among several (effort < 1, its share
 * of the chunks searched) gets that margin times its share: it holds about that share of the pooled top k, so its
 * border rows reach the results that much less often, and each rescored row is a 4 KB read of the spill file. Over
 * ten KBs of 10k chunks (search bench data, 200 queries) the merged top 10's recall@10 against an exact scan was
 * 0.5605 with 10 rows rescored per KB and with 20, and each KB's own 0.3679 against 0.3686.
 */
export function rescoredRows(k: number, effort = 1): number {
  const margin = Math.max(k, 10)
  return k + (effort > 0 && effort < 1 ? Math.ceil(margin * effort) : margin)
}
