// Builtin embedder: retrieval quality (dense only, exact cosine, nDCG@10) and throughput against a naive
// implementation of the same kind of features (strings for every n-gram, counted in a Map).
//
//   npx tsx bench/embed.bench.ts            full run (quality on SciFact and autorag-ko, throughput)
//   npx tsx bench/embed.bench.ts --quick    fewer docs and rounds
//   npx tsx bench/embed.bench.ts --ablate   also the quality of feature variants (what the weights were tuned on)
import { readQrels } from './eval/beir.ts'
import { readFileSync, existsSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { createHashFeaturizer, FEATURES, type HashFeatureParams } from '../adapters/embedders/builtin.ts'

const DATASETS = process.env.QUARRY_DATASETS ?? '/work/shared/datasets'
const DIMENSIONS = Number(process.env.EMBED_BENCH_DIMS ?? 1024)

interface Dataset {
  name: string
  docIds: string[]
  docs: string[]
  queryIds: string[]
  queries: string[]
  qrels: Map<string, Map<string, number>>
}

function readJsonl(path: string): Record<string, unknown>[] {
  return readFileSync(path, 'utf8').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as Record<string, unknown>)
}

export function loadDataset(name: string): Dataset | null {
  const dir = join(DATASETS, name)
  if (!existsSync(join(dir, 'corpus.jsonl'))) return null
  const corpus = readJsonl(join(dir, 'corpus.jsonl'))
  const qrels = readQrels(join(dir, 'qrels', 'test.tsv'))
  const queries = readJsonl(join(dir, 'queries.jsonl')).filter((q) => qrels.has(String(q._id)))
  return {
    name,
    docIds: corpus.map((d) => String(d._id)),
    docs: corpus.map((d) => `${String(d.title ?? '')}\n${String(d.text ?? '')}`.trim()),
    queryIds: queries.map((q) => String(q._id)),
    queries: queries.map((q) => String(q.text)),
    qrels,
  }
}

function embedAll(embed: (text: string, out: Float32Array, offset: number) => void, texts: readonly string[]): Float32Array {
  const out = new Float32Array(texts.length * DIMENSIONS)
  for (let i = 0; i < texts.length; i++) embed(texts[i], out, i * DIMENSIONS)
  return out
}

/** Mean nDCG@10 with exact cosine search (vectors are normalised, so a dot product). */
function ndcgAt10(ds: Dataset, docVecs: Float32Array, queryVecs: Float32Array): number {
  const n = ds.docs.length
  const scores = new Float32Array(n)
  let total = 0
  for (let q = 0; q < ds.queries.length; q++) {
    const qo = q * DIMENSIONS
    for (let d = 0; d < n; d++) {
      let s = 0
      const o = d * DIMENSIONS
      for (let k = 0; k < DIMENSIONS; k++) s += queryVecs[qo + k] * docVecs[o + k]
      scores[d] = s
    }
    const top: number[] = []
    for (let d = 0; d < n; d++) {
      if (top.length < 10 || scores[d] > scores[top[top.length - 1]]) {
        top.push(d)
        top.sort((a, b) => scores[b] - scores[a] || a - b)
        if (top.length > 10) top.pop()
      }
    }
    const rel = ds.qrels.get(ds.queryIds[q])!
    let dcg = 0
    top.forEach((d, rank) => { dcg += (rel.get(ds.docIds[d]) ?? 0) / Math.log2(rank + 2) })
    const ideal = [...rel.values()].filter((r) => r > 0).sort((a, b) => b - a).slice(0, 10)
    const idcg = ideal.reduce((acc, r, rank) => acc + r / Math.log2(rank + 2), 0)
    total += idcg > 0 ? dcg / idcg : 0
  }
  return total / ds.queries.length
}

export function quality(ds: Dataset, params: Readonly<HashFeatureParams>): number {
  const f = createHashFeaturizer(params)
  const embed = (t: string, out: Float32Array, o: number) => f.embedInto(t, DIMENSIONS, out, o)
  return ndcgAt10(ds, embedAll(embed, ds.docs), embedAll(embed, ds.queries))
}

// ---------------------------------------------------------------------------------------------------------
// The baseline: the obvious implementation of the same feature families (stop words, suffix stripping,
// word bigrams, trigrams of `<word>`, Hangul syllables and bigrams), allocating a string per feature.

const NAIVE_STOP = new Set('a an the and or of to in on at by for with from is are was were be been it this that as'.split(' '))

function fnv(s: string, seed: number): number {
  let h = 0x811c9dc5 ^ seed
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193)
  return h >>> 0
}

function naiveEmbed(text: string, dims: number): Float32Array {
  const counts = new Map<string, number>()
  const bump = (k: string) => counts.set(k, (counts.get(k) ?? 0) + 1)
  const tokens = text.normalize('NFKC').toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean)
  let prev = ''
  for (const tok of tokens) {
    if (NAIVE_STOP.has(tok)) continue
    if (/[\uac00-\ud7a3]/.test(tok)) {
      for (let i = 0; i < tok.length; i++) {
        bump('s:' + tok[i])
        if (i + 1 < tok.length) bump('s2:' + tok.slice(i, i + 2))
      }
      continue
    }
    const w = tok.replace(/(ing|ed|es|s)$/, '')
    bump('w:' + w)
    if (prev) bump('b:' + prev + ' ' + w)
    prev = w
    const marked = '<' + w + '>'
    for (let i = 0; i + 3 <= marked.length; i++) bump('g:' + marked.slice(i, i + 3))
  }
  const v = new Float32Array(dims)
  for (const [k, c] of counts) {
    const wt = (k.startsWith('g:') ? 0.5 : k.startsWith('b:') ? 0.25 : 1) * (1 + Math.log(c))
    v[fnv(k, 1) % dims] += (fnv(k, 2) & 1) === 0 ? wt : -wt
  }
  let norm = 0
  for (const x of v) norm += x * x
  if (norm > 0) for (let i = 0; i < dims; i++) v[i] /= Math.sqrt(norm)
  return v
}

// ---------------------------------------------------------------------------------------------------------

function throughput(docs: readonly string[], rounds: number) {
  const f = createHashFeaturizer()
  const out = new Float32Array(DIMENSIONS)
  const ours = () => { for (const d of docs) f.embedInto(d, DIMENSIONS, out, 0) }
  const naive = () => { for (const d of docs) naiveEmbed(d, DIMENSIONS) }
  ours(); naive() // warm-up
  let tOurs = 0
  let tNaive = 0
  for (let r = 0; r < rounds; r++) {
    let t = performance.now(); ours(); tOurs += performance.now() - t
    t = performance.now(); naive(); tNaive += performance.now() - t
  }
  const bytes = docs.reduce((a, d) => a + Buffer.byteLength(d), 0)
  const oursDocsPerSec = (docs.length * rounds) / (tOurs / 1000)
  const naiveDocsPerSec = (docs.length * rounds) / (tNaive / 1000)
  return {
    docs: docs.length,
    rounds,
    avg_doc_bytes: Math.round(bytes / docs.length),
    builtin_docs_per_sec: Math.round(oursDocsPerSec),
    builtin_mb_per_sec: +((bytes * rounds) / (tOurs / 1000) / 1e6).toFixed(2),
    naive_docs_per_sec: Math.round(naiveDocsPerSec),
    naive_mb_per_sec: +((bytes * rounds) / (tNaive / 1000) / 1e6).toFixed(2),
    speedup: +(oursDocsPerSec / naiveDocsPerSec).toFixed(2),
  }
}

// The variants tried while tuning FEATURES (each changes only what it names).
const ABLATIONS: [string, Partial<HashFeatureParams>][] = [
  ['words only (no n-grams, bigrams, stemming)', { ngram: 0, wordBigram: 0, stem: false }],
  ['words + stemming', { ngram: 0, wordBigram: 0 }],
  ['no character n-grams', { ngram: 0 }],
  ['no word bigrams', { wordBigram: 0 }],
  ['word bigrams 0.5', { wordBigram: 0.5 }],
  ['no stemming', { stem: false }],
  ['stop words kept (weight 1)', { stopWord: 1 }],
  ['n-grams 3-5 at 0.2', { ngramMax: 5, ngram: 0.2 }],
  ['n-grams 3-5 at 0.35', { ngramMax: 5, ngram: 0.35 }],
  ['n-grams 3-4 at 0.4', { ngramMax: 4, ngram: 0.4 }],
  ['n-grams 4 only at 0.5', { ngramMin: 4, ngramMax: 4 }],
  ['trigrams at 0.4', { ngram: 0.4 }],
  ['trigrams at 0.6', { ngram: 0.6 }],
  ['binary tf', { tfLog: 0 }],
  ['tf 1 + 2 ln(tf)', { tfLog: 2 }],
  ['word length prior 0.3 + 0.1 len', { lengthPrior0: 0.3, lengthPrior1: 0.1 }],
  ['numbers at 0.3', { number: 0.3 }],
  ['Korean: no stop bigrams (weight 1)', { syllableStopBigram: 1 }],
  ['Korean: no syllable unigrams', { syllable: 0 }],
  ['Korean: no particle stripping', { syllableStem: 0 }],
  ['Korean: no eojeol runs', { syllableRun: 0 }],
]

export async function run(opts: { quick: boolean; ablate?: boolean; quality?: boolean; docs?: number; rounds?: number }) {
  const machine = { cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.cpus().length, node: process.version }
  const result: Record<string, unknown> = { bench: 'embed', machine, dimensions: DIMENSIONS, features: FEATURES }
  const scifact = loadDataset('scifact')
  const korean = loadDataset('autorag-ko')
  if (!scifact) {
    result.error = `SciFact not found under ${DATASETS}`
    return result
  }
  const qualityOf = (params: Readonly<HashFeatureParams>) => ({
    scifact_ndcg10: +quality(scifact, params).toFixed(4),
    ...(korean ? { autorag_ko_ndcg10: +quality(korean, params).toFixed(4) } : {}),
  })
  result.sizes = {
    scifact: { docs: scifact.docs.length, queries: scifact.queries.length },
    ...(korean ? { autorag_ko: { docs: korean.docs.length, queries: korean.queries.length } } : {}),
  }
  if (opts.quality !== false) result.quality = qualityOf(FEATURES)
  if (opts.ablate) {
    result.ablations = ABLATIONS.map(([label, change]) => ({ label, ...qualityOf({ ...FEATURES, ...change }) }))
  }
  const sample = scifact.docs.slice(0, opts.docs ?? (opts.quick ? 500 : 2000))
  const rounds = opts.rounds ?? (opts.quick ? 2 : 5)
  result.throughput = throughput(sample, rounds)
  // Ingestion documents are 5-20 KB: eight abstracts joined make one of about 12 KB.
  const long: string[] = []
  for (let i = 0; i + 8 <= sample.length; i += 8) long.push(sample.slice(i, i + 8).join('\n\n'))
  result.throughput_12kb = throughput(long, rounds)
  return result
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const quick = process.argv.includes('--quick')
  const ablate = process.argv.includes('--ablate')
  const r = await run({ quick, ablate })
  console.log(`machine: ${JSON.stringify(r.machine)}  dimensions: ${DIMENSIONS}  sizes: ${JSON.stringify(r.sizes)}`)
  console.log(`quality (dense only, exact cosine): ${JSON.stringify(r.quality)}`)
  if (r.ablations) for (const a of r.ablations as Record<string, unknown>[]) console.log(`  ablation ${JSON.stringify(a)}`)
  for (const [label, t] of [['SciFact abstracts', r.throughput], ['12 KB documents', r.throughput_12kb]] as const) {
    if (!t) continue
    const x = t as ReturnType<typeof throughput>
    console.log(`throughput, ${label}: ${x.docs} docs (avg ${x.avg_doc_bytes} B) x ${x.rounds} rounds, one thread:`)
    console.log(`  builtin ${x.builtin_docs_per_sec} docs/s (${x.builtin_mb_per_sec} MB/s)  naive ${x.naive_docs_per_sec} docs/s (${x.naive_mb_per_sec} MB/s)  ratio ${x.speedup}x`)
  }
  console.log(JSON.stringify(r))
}
