// Dense search effort, one big graph against ten small ones: what an HNSW search costs and how much of the
// exact answer it finds, by candidate-list size (ef). This is the study behind VectorQuery.effort (a search
// over several KBs gives each its share of the chunks searched).
//
//   npx tsx bench/search/effort-study.ts [--chunks=100000] [--queries=300] [--ef=40,56,80,128,256] [--one-ef=80,128,256]
//                                        [--quantization=i8|f16|bf16|f32 (default i8)] [--connectivity=16] [--expansion-add=64]
//
// Texts are 400-800 characters of the generated corpus (12 chunks per document, documents dealt round-robin to
// 10 KBs), vectors from the built-in embedder at 1024 dimensions, graphs built as the embedded store builds
// them. For each query (2-5 words of one chunk, its "source"): ms per query (the ten searches summed for the
// split layout), recall@10 and @40 against an exact scan of the same graph's points, and source@10: whether
// the chunk the words came from is among the best 10 (for the split layout: of the ten lists merged by cosine).
import usearch from 'usearch'
import { embedTexts } from '../../adapters/embedders/builtin.ts'
import { createRng, text, vocabulary } from '../lib/corpus.ts'
import { defaultQuantization, quantizeI8 } from '../../adapters/vectors/dense-index.ts'

const arg = (name: string, fallback: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback
const numbers = (s: string) => s.split(',').map(Number)
const N = Number(arg('chunks', '100000'))
const Q = Number(arg('queries', '300'))
const SPLIT_EF = numbers(arg('ef', '40,56,80,128,256'))
const ONE_EF = numbers(arg('one-ef', '80,128,256'))
const QUANT = arg('quantization', defaultQuantization())
const M = Number(arg('connectivity', '16'))
const EF_ADD = Number(arg('expansion-add', '64'))
const D = 1024
const SPLITS = 10
const PER_DOC = 12
const K = 40

const rnd = createRng(7)
const vocab = vocabulary(20_000, 7)
const texts: string[] = []
let doc = ''
for (let i = 0; i < N; i++) {
  if (i % PER_DOC === 0) doc = text(rnd, vocab, PER_DOC * 600)
  const at = Math.floor(rnd() * (doc.length - 800))
  texts.push(doc.slice(at, at + 400 + Math.floor(rnd() * 400)))
}
const queries: string[] = []
const source: number[] = []
for (let i = 0; i < Q; i++) {
  source.push(Math.floor(rnd() * N))
  const words = texts[source[i]].toLowerCase().split(/\W+/).filter((w) => w.length > 3)
  queries.push(Array.from({ length: 2 + Math.floor(rnd() * 4) }, () => words[Math.floor(rnd() * words.length)]).join(' '))
}
const vecs = embedTexts(texts, D)
const qv = embedTexts(queries, D)
const cos = (i: number, q: number) => {
  let s = 0
  for (let j = 0; j < D; j++) s += vecs[i * D + j] * qv[q * D + j]
  return s
}
const members: number[][] = Array.from({ length: SPLITS }, () => [])
for (let i = 0; i < N; i++) members[Math.floor(i / PER_DOC) % SPLITS].push(i)
const matrix = (ids: number[]) => {
  const m = new Float32Array(ids.length * D)
  ids.forEach((id, j) => m.set(vecs.subarray(id * D, id * D + D), j * D))
  return m
}
const allIds = members.flat()
const allMatrix = matrix(allIds)
const partMatrices = members.map(matrix)

function exactTop(ids: number[], m: Float32Array): number[][] {
  const r = usearch.exactSearch(m, qv, D, K, 'cos' as never, 2) as unknown as { keys: BigUint64Array }
  return queries.map((_, q) => Array.from(r.keys.subarray(q * K, q * K + K), (k) => ids[Number(k)]))
}
const truthOne = exactTop(allIds, allMatrix)
const truthParts = members.map((ids, s) => exactTop(ids, partMatrices[s]))
const best10 = (ids: number[], q: number) => ids.map((i) => [cos(i, q), i] as const).sort((a, b) => b[0] - a[0]).slice(0, 10).map((x) => x[1])
const hasSource = (top: number[], q: number) => (top.slice(0, 10).includes(source[q]) ? 1 : 0)
const recall = (got: number[], want: number[], k: number) => {
  const w = new Set(want.slice(0, k))
  return got.slice(0, k).filter((x) => w.has(x)).length / k
}
const f = (x: number, d = 4) => x.toFixed(d)
console.log(`${N} chunks, ${Q} queries, ${QUANT}, M ${M}, ef_construction ${EF_ADD}`)
console.log(`exact scan source@10: one ${f(truthOne.reduce((a, t, q) => a + hasSource(t, q), 0) / Q)}, ten KBs merged ${f(queries.reduce((a, _, q) => a + hasSource(best10(truthParts.flatMap((t) => t[q]), q), q), 0) / Q)}`)

/** What the graph is given, as the embedded store gives it: each row scaled to i8 by its largest component for an i8 graph. */
const graphInput = (m: Float32Array): Float32Array | Int8Array => {
  if (QUANT !== 'i8') return m
  const out = new Int8Array(m.length)
  quantizeI8(m, D, out)
  return out
}
const build = (ids: number[], m: Float32Array) => {
  // As adapters/vectors/dense-index.ts: the graph's own ef at the minimum, each search sets it by the results asked.
  const index = new usearch.Index({ dimensions: D, metric: 'cos' as never, quantization: QUANT as never, connectivity: M, expansion_add: EF_ADD, expansion_search: 1, multi: false })
  index.add(BigUint64Array.from(ids.map(BigInt)), graphInput(m), 2)
  return index
}
const t0 = performance.now()
const one = build(allIds, allMatrix)
const parts = members.map((ids, s) => build(ids, partMatrices[s]))
console.log(`graphs built in ${Math.round((performance.now() - t0) / 1000)} s`)

console.log('| layout | ef | ms per query | recall@10 | recall@40 | source@10 |\n|---|---|---|---|---|---|')
for (const [layout, efs] of [['1 KB of all', ONE_EF], [`${SPLITS} KBs`, SPLIT_EF]] as const) {
  for (const ef of efs) {
    let ms = 0
    let r10 = 0
    let r40 = 0
    let src = 0
    for (let rep = 0; rep < 2; rep++) {
      for (let q = 0; q < Q; q++) {
        const v = graphInput(qv.slice(q * D, q * D + D))
        const t = performance.now()
        const lists = layout === '1 KB of all' ? [one.search(v, ef, 1)] : parts.map((p) => p.search(v, ef, 1))
        ms += performance.now() - t
        if (rep > 0) continue
        const got = lists.map((m) => Array.from(m.keys, Number))
        if (lists.length === 1) {
          r10 += recall(got[0], truthOne[q], 10)
          r40 += recall(got[0], truthOne[q], 40)
          src += hasSource(got[0], q)
        } else {
          got.forEach((g, s) => {
            r10 += recall(g, truthParts[s][q], 10) / SPLITS
            r40 += recall(g, truthParts[s][q], 40) / SPLITS
          })
          src += hasSource(best10(got.flat(), q), q)
        }
      }
    }
    console.log(`| ${layout} | ${ef} | ${f(ms / Q / 2, 2)} | ${f(r10 / Q)} | ${f(r40 / Q)} | ${f(src / Q)} |`)
  }
}
