// Ranking metrics as BEIR computes them (pytrec_eval): linear gain, log2 discount, averaged over every judged
// query (a query with no result scores 0). Rankings are lists of corpus ids, best first, already one entry per
// document (see firstPerDocument).

/** Relevance judgements of one query: corpus id -> grade (0 = judged not relevant). */
export type Judgements = ReadonlyMap<string, number>

/**
 * Keeps each document's best rank: chunks of one document come back several times, and document-level
 * metrics count a document once, where its best chunk ranked.
 */
export function firstPerDocument(ids: Iterable<string>): string[] {
  const seen = new Set<string>()
  const out: string[] = []
  for (const id of ids) {
    if (seen.has(id)) continue
    seen.add(id)
    out.push(id)
  }
  return out
}

export function ndcgAt(ranked: readonly string[], rel: Judgements, k: number): number {
  let dcg = 0
  const n = Math.min(k, ranked.length)
  for (let i = 0; i < n; i++) dcg += (rel.get(ranked[i]) ?? 0) / Math.log2(i + 2)
  const ideal = [...rel.values()].filter((g) => g > 0).sort((a, b) => b - a).slice(0, k)
  let idcg = 0
  ideal.forEach((g, i) => (idcg += g / Math.log2(i + 2)))
  return idcg > 0 ? dcg / idcg : 0
}

export function recallAt(ranked: readonly string[], rel: Judgements, k: number): number {
  let relevant = 0
  for (const g of rel.values()) if (g > 0) relevant++
  if (relevant === 0) return 0
  let found = 0
  const n = Math.min(k, ranked.length)
  for (let i = 0; i < n; i++) if ((rel.get(ranked[i]) ?? 0) > 0) found++
  return found / relevant
}

export function mrrAt(ranked: readonly string[], rel: Judgements, k: number): number {
  const n = Math.min(k, ranked.length)
  for (let i = 0; i < n; i++) if ((rel.get(ranked[i]) ?? 0) > 0) return 1 / (i + 1)
  return 0
}

export interface Scores {
  ndcg_at_10: number
  recall_at_100: number
  mrr_at_10: number
  queries: number
}

/**
 * Mean nDCG@10, recall@100 and MRR@10 over the judged queries of `qrels`; `runs` maps a query id to its
 * document ranking (a judged query missing from runs counts as an empty ranking).
 */
export function score(runs: ReadonlyMap<string, readonly string[]>, qrels: ReadonlyMap<string, Judgements>): Scores {
  let ndcg = 0
  let recall = 0
  let mrr = 0
  let queries = 0
  for (const [qid, rel] of qrels) {
    if (![...rel.values()].some((g) => g > 0)) continue
    const ranked = runs.get(qid) ?? []
    ndcg += ndcgAt(ranked, rel, 10)
    recall += recallAt(ranked, rel, 100)
    mrr += mrrAt(ranked, rel, 10)
    queries++
  }
  const mean = (x: number) => (queries > 0 ? x / queries : 0)
  return { ndcg_at_10: mean(ndcg), recall_at_100: mean(recall), mrr_at_10: mean(mrr), queries }
}
