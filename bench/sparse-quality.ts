// Retrieval quality of the sparse encoder on SciFact (BEIR test split): documents and queries encoded with
// compute/text/sparse.ts, scored exactly as the vector store's IDF modifier does
// (sum over shared terms of idf * q * d, idf = ln((N - n + 0.5) / (n + 0.5) + 1)), reported as nDCG@10.
// BM25 with Lucene-style settings is 0.665 on this set (BEIR paper).
//
//   npx tsx bench/sparse-quality.ts            the default encoder and a few variants
//   npx tsx bench/sparse-quality.ts --quick    the default encoder only
import { readQrels } from './eval/beir.ts'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { createSparseEncoder, SPARSE_DEFAULTS, type SparseEncoderOptions } from '../compute/text/sparse.ts'

const DIR = join(process.env.QUARRY_DATASETS ?? '/work/shared/datasets', 'scifact')

interface Dataset {
  docIds: string[]
  docs: string[]
  queryIds: string[]
  queries: string[]
  qrels: Map<string, Map<string, number>>
}

function readJsonl(path: string): Record<string, unknown>[] {
  return readFileSync(path, 'utf8').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as Record<string, unknown>)
}

function load(): Dataset | null {
  if (!existsSync(join(DIR, 'corpus.jsonl'))) return null
  const corpus = readJsonl(join(DIR, 'corpus.jsonl'))
  const qrels = readQrels(join(DIR, 'qrels', 'test.tsv'))
  const queries = readJsonl(join(DIR, 'queries.jsonl')).filter((q) => qrels.has(String(q._id)))
  return {
    docIds: corpus.map((d) => String(d._id)),
    docs: corpus.map((d) => `${String(d.title ?? '')} ${String(d.text ?? '')}`),
    queryIds: queries.map((q) => String(q._id)),
    queries: queries.map((q) => String(q.text)),
    qrels,
  }
}

function ndcg10(ranked: number[], ds: Dataset, q: number): number {
  const rel = ds.qrels.get(ds.queryIds[q])!
  let dcg = 0
  ranked.forEach((d, rank) => { dcg += (rel.get(ds.docIds[d]) ?? 0) / Math.log2(rank + 2) })
  const ideal = [...rel.values()].filter((r) => r > 0).sort((a, b) => b - a).slice(0, 10)
  const idcg = ideal.reduce((acc, r, rank) => acc + r / Math.log2(rank + 2), 0)
  return idcg > 0 ? dcg / idcg : 0
}

/** nDCG@10 of `opts`; `exactAvgLen` replaces the assumed avgLen by the corpus's own (classic BM25). */
export function evaluate(ds: Dataset, opts: SparseEncoderOptions, exactAvgLen = false): { ndcg10: number; avgLen: number } {
  let enc = createSparseEncoder(opts)
  const lengths = ds.docs.map((d) => enc.termIds(d).length)
  const avgLen = lengths.reduce((a, b) => a + b, 0) / lengths.length
  if (exactAvgLen) enc = createSparseEncoder({ ...opts, avgLen })
  const postings = new Map<number, { docs: number[]; values: number[] }>()
  ds.docs.forEach((text, d) => {
    const v = enc.encodeDocument(text)
    for (let i = 0; i < v.indices.length; i++) {
      let p = postings.get(v.indices[i])
      if (!p) postings.set(v.indices[i], (p = { docs: [], values: [] }))
      p.docs.push(d)
      p.values.push(v.values[i])
    }
  })
  const N = ds.docs.length
  const scores = new Float64Array(N)
  let total = 0
  for (let q = 0; q < ds.queries.length; q++) {
    scores.fill(0)
    const v = enc.encodeQuery(ds.queries[q])
    for (let i = 0; i < v.indices.length; i++) {
      const p = postings.get(v.indices[i])
      if (!p) continue
      const n = p.docs.length
      const idf = Math.log((N - n + 0.5) / (n + 0.5) + 1)
      for (let j = 0; j < p.docs.length; j++) scores[p.docs[j]] += idf * v.values[i] * p.values[j]
    }
    const ranked = [...scores.keys()].filter((d) => scores[d] > 0).sort((a, b) => scores[b] - scores[a] || a - b).slice(0, 10)
    total += ndcg10(ranked, ds, q)
  }
  return { ndcg10: total / ds.queries.length, avgLen }
}

export async function run(opts: { quick: boolean }): Promise<Record<string, unknown>> {
  const ds = load()
  if (!ds) return { skipped: `no SciFact at ${DIR}` }
  const variants: [string, SparseEncoderOptions, boolean][] = [['default', {}, false]]
  if (!opts.quick) {
    variants.push(
      ['default, exact avgLen', {}, true],
      ...[50, 150, 200, 300].map((a): [string, SparseEncoderOptions, boolean] => [`avgLen ${a}`, { avgLen: a }, false]),
      ['query tf', { queryTf: true }, false],
      ['no stemming', { stem: false }, false],
      ['no stop words', { stopWords: false }, false],
      ['no stemming, no stop words', { stem: false, stopWords: false }, false],
    )
  }
  const results: Record<string, number> = {}
  let corpusAvgLen = 0
  for (const [name, o, exact] of variants) {
    const r = evaluate(ds, o, exact)
    corpusAvgLen = r.avgLen
    results[name] = Number(r.ndcg10.toFixed(4))
    console.log(`${name.padEnd(28)} nDCG@10 ${r.ndcg10.toFixed(4)}`)
  }
  console.log(`SciFact: ${ds.docs.length} docs, ${ds.queries.length} test queries, corpus mean length ${corpusAvgLen.toFixed(1)} terms; assumed avgLen ${SPARSE_DEFAULTS.avgLen}; BM25 reference 0.665`)
  return { dataset: 'scifact', docs: ds.docs.length, queries: ds.queries.length, corpusAvgLen, ndcg10: results }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await run({ quick: process.argv.includes('--quick') })
}
