// Filtered search in the embedded vector store (VectorQuery.filter): one KB of 100k chunks, searched
// without a filter and with filters keeping 1%, 10% and 50% of it, queries alternating between them.
// Target (issue 16): a filter keeping 1% costs at most 2x an unfiltered search, and still returns its
// limit of hits (what a filter applied after the top-k cut would not).
//
//   npx tsx bench/filter.bench.ts            100k chunks, 1024 dimensions
//   npx tsx bench/filter.bench.ts --quick    100k chunks, 256 dimensions
//   options: --n=<chunks> --dims=<d> --queries=<q>
//
// Searches are what the search service sends one KB: hybrid (dense + sparse, 40 each) and similarity
// (dense, top 10). Recall@10 of the filtered dense list is measured against brute force over the rows the
// filter keeps. A side study reopens the same collection with the filter's two dense paths forced (exact
// scan of the kept rows, or the graph with a widened candidate list) at several shares: where they cross
// sets the default of `filterGraphCost`.
import { promises as fs } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { ChunkPayload, VectorFilter, VectorPoint } from '../adapters/ports.ts'
import { createEmbeddedVectorStore, type EmbeddedVectorStore, type EmbeddedVectorStoreOptions } from '../adapters/vectors/embedded.ts'
import { machine, percentile, round } from './lib/machine.ts'
import { progress } from './lib/progress.ts'
import { mulberry32 as rng } from './lib/rng.ts'
import { CHUNKS_PER_DOC, denseData, exactDense, payloadOf, queryVectors, sparseData, sparseVector, VOCAB, zipfSampler } from './vectors.bench.ts'

export interface FilterBenchOptions {
  quick: boolean
  n?: number
  dims?: number
  queries?: number
}

const KB = 'filter'
const DAY = 86_400_000
const EPOCH = Date.UTC(2024, 0, 1)

/**
 * Document d: doc_type 'rare' for one document in 100, source_type 'web' for one in 10, source under 'a/' or
 * 'b/' by parity, updated on day d % 100. So each filter below keeps a known share of the chunks.
 */
function filteredPayloadOf(i: number, r: () => number): ChunkPayload {
  const doc = Math.floor(i / CHUNKS_PER_DOC)
  return {
    ...payloadOf(i, r),
    kb_id: KB,
    source_type: doc % 10 === 3 ? 'web' : 'file',
    source: `${doc % 2 === 0 ? 'a' : 'b'}/doc-${doc}.md`,
    doc_type: doc % 100 === 7 ? 'rare' : 'md',
    updated_at: new Date(EPOCH + (doc % 100) * DAY + (i % CHUNKS_PER_DOC) * 1000).toISOString(),
  }
}

/** Each scenario's filter and which rows it keeps (for the brute-force truth). */
const SCENARIOS: { name: string; share: number; filter: VectorFilter | undefined; keeps: (p: ChunkPayload) => boolean }[] = [
  { name: 'none', share: 1, filter: undefined, keeps: () => true },
  { name: '1% doc_type', share: 0.01, filter: { docTypes: ['rare'] }, keeps: (p) => p.doc_type === 'rare' },
  { name: '1% updated window', share: 0.01, filter: { updatedAfter: EPOCH + 42 * DAY, updatedBefore: EPOCH + 43 * DAY }, keeps: (p) => p.updated_at.startsWith('2024-02-12') },
  { name: '10% source_type', share: 0.1, filter: { sourceTypes: ['web'] }, keeps: (p) => p.source_type === 'web' },
  { name: '50% source_prefix', share: 0.5, filter: { sourcePrefix: 'b/' }, keeps: (p) => p.source.startsWith('b/') },
]

const storeOptions = (dir: string, dims: number, extra: Partial<EmbeddedVectorStoreOptions> = {}): EmbeddedVectorStoreOptions =>
  ({ dir, dimensions: dims, snapshotIdleMs: 0, snapshotOnClose: false, ...extra })

interface Data {
  dense: Float32Array
  payloads: ChunkPayload[]
  qDense: Float32Array[]
  qSparse: ReturnType<typeof sparseVector>[]
}

async function build(dir: string, n: number, dims: number, queries: number): Promise<Data & { build_ms: number }> {
  const dense = denseData(n, dims, 'clustered', 7)
  const sparse = sparseData(n, 8)
  const pr = rng(9)
  const payloads = Array.from({ length: n }, (_, i) => filteredPayloadOf(i, pr))
  const t0 = performance.now()
  const store = await createEmbeddedVectorStore(storeOptions(dir, dims))
  await store.ensureCollection(KB, dims)
  const bar = progress('filter bench: building the KB', n, { unit: 'chunks' })
  for (let i = 0; i < n; i += 256) {
    const points: VectorPoint[] = []
    for (let j = i; j < Math.min(n, i + 256); j++) points.push({ dense: dense.subarray(j * dims, (j + 1) * dims), sparse: sparse[j], payload: payloads[j] })
    await store.upsert(KB, points)
    bar.tick(points.length)
  }
  bar.done()
  await store.whenIndexed(KB)
  await store.snapshot(KB)
  await store.close()
  const qr = rng(98)
  const zipf = zipfSampler(qr, VOCAB)
  return {
    dense,
    payloads,
    qDense: queryVectors(dense, n, dims, 'clustered', queries + 20, 99),
    qSparse: Array.from({ length: queries + 20 }, () => sparseVector(qr, zipf, 8, false)),
    build_ms: Math.round(performance.now() - t0),
  }
}

const summary = (xs: number[]) => ({ p50_ms: round(percentile(xs, 50), 3), p99_ms: round(percentile(xs, 99), 3), mean_ms: round(xs.reduce((a, b) => a + b, 0) / xs.length, 3) })

/** Every scenario on every query, the scenario order rotated per query; the first 20 queries warm up. */
async function measure(store: EmbeddedVectorStore, d: Data, n: number, dims: number) {
  const keptRows = SCENARIOS.map((s) => Int32Array.from(d.payloads.flatMap((p, i) => (s.keeps(p) ? [i] : []))))
  const lat = SCENARIOS.map(() => ({ hybrid: [] as number[], similarity: [] as number[] }))
  const recall = SCENARIOS.map(() => ({ hits: 0, asked: 0 }))
  const short = SCENARIOS.map(() => 0)
  // The first search with a filter on restored rows reads their payloads once: done here, outside the timings.
  const first = performance.now()
  await store.search(KB, { dense: d.qDense[0], limit: 10, filter: SCENARIOS[1].filter })
  const firstFilterMs = performance.now() - first
  for (let q = 0; q < d.qDense.length; q++) {
    const warm = q < 20
    for (let k = 0; k < SCENARIOS.length; k++) {
      const si = (k + q) % SCENARIOS.length
      const filter = SCENARIOS[si].filter
      let t = performance.now()
      const hybrid = await store.search(KB, { dense: d.qDense[q], sparse: d.qSparse[q], limit: 40, filter })
      if (!warm) lat[si].hybrid.push(performance.now() - t)
      t = performance.now()
      const sim = await store.search(KB, { dense: d.qDense[q], limit: 10, filter })
      if (!warm) lat[si].similarity.push(performance.now() - t)
      if (warm) continue
      if (hybrid.dense.length < Math.min(40, keptRows[si].length) || sim.dense.length < Math.min(10, keptRows[si].length)) short[si]++
      const truth = new Set(exactDense(d.dense, n, dims, d.qDense[q], 10, keptRows[si]).rows)
      for (const h of sim.dense) {
        const [doc, idx] = h.id.slice(1).split(':').map(Number)
        if (truth.has(doc * CHUNKS_PER_DOC + idx)) recall[si].hits++
      }
      recall[si].asked += truth.size
    }
  }
  const scenarios: Record<string, unknown> = {}
  SCENARIOS.forEach((s, i) => {
    scenarios[s.name] = {
      kept_chunks: keptRows[i].length,
      hybrid_40: summary(lat[i].hybrid),
      similarity_10: summary(lat[i].similarity),
      dense_recall_at_10: round(recall[i].hits / recall[i].asked, 4),
      queries_short_of_limit: short[i],
    }
  })
  return { first_filtered_search_ms: round(firstFilterMs, 1), scenarios }
}

/** Dense top-40 at each share with the exact scan forced, then with the graph forced: where the two cross. */
async function crossover(dir: string, d: Data, dims: number, queries: number) {
  const shares = [
    { name: '1%', filter: SCENARIOS[1].filter! },
    { name: '10%', filter: SCENARIOS[3].filter! },
    { name: '50%', filter: SCENARIOS[4].filter! },
  ]
  const out: Record<string, Record<string, unknown>> = {}
  const paths = [
    ['exact scan of the kept rows', { filterScanBudget: 0, filterGraphCost: 2 ** 31 - 1 }],
    ['graph, widened candidate list', { filterScanBudget: 0, filterGraphCost: 0 }],
  ] as const
  for (const [path, extra] of paths) {
    const store = await createEmbeddedVectorStore(storeOptions(dir, dims, extra))
    await store.search(KB, { dense: d.qDense[0], limit: 40, filter: shares[0].filter })
    for (const s of shares) {
      const lat: number[] = []
      for (let q = 0; q < Math.min(queries, 60) + 10; q++) {
        const t = performance.now()
        await store.search(KB, { dense: d.qDense[q], limit: 40, filter: s.filter })
        if (q >= 10) lat.push(performance.now() - t)
      }
      ;(out[s.name] ??= {})[path] = summary(lat)
    }
    await store.close()
  }
  return out
}

export async function run(opts: FilterBenchOptions) {
  const n = opts.n ?? 100_000
  const dims = opts.dims ?? (opts.quick ? 256 : 1024)
  const queries = opts.queries ?? (opts.quick ? 100 : 200)
  const result: Record<string, unknown> = { bench: 'filter', machine: machine(), sizes: { n, dims, queries, chunks_per_doc: CHUNKS_PER_DOC } }
  const dir = await fs.mkdtemp(join(os.tmpdir(), 'quarry-fbench-'))
  try {
    const data = await build(dir, n, dims, queries)
    result.build_ms = data.build_ms
    const store = await createEmbeddedVectorStore(storeOptions(dir, dims))
    try {
      Object.assign(result, await measure(store, data, n, dims))
    } finally {
      await store.close()
    }
    const sc = result.scenarios as Record<string, { hybrid_40: { p50_ms: number }; similarity_10: { p50_ms: number } }>
    const none = sc.none
    const onePct = sc['1% doc_type']
    result.target = {
      filtered_over_unfiltered_max: 2,
      hybrid_1pct_over_none: round(onePct.hybrid_40.p50_ms / none.hybrid_40.p50_ms, 3),
      similarity_1pct_over_none: round(onePct.similarity_10.p50_ms / none.similarity_10.p50_ms, 3),
    }
    result.crossover = await crossover(dir, data, dims, queries)
  } finally {
    await fs.rm(dir, { recursive: true, force: true })
  }
  result.machine_after = { load_average: os.loadavg().map((x) => round(x)) }
  return result
}

function print(r: Record<string, unknown>): void {
  const j = (x: unknown) => JSON.stringify(x)
  console.log(`machine: ${j(r.machine)}`)
  console.log(`sizes: ${j(r.sizes)}; built in ${String(r.build_ms)} ms; first filtered search after the restart ${String(r.first_filtered_search_ms)} ms`)
  for (const [name, s] of Object.entries(r.scenarios as Record<string, unknown>)) console.log(`filter ${name}: ${j(s)}`)
  console.log(`target (p50 filtered 1% / unfiltered, at most 2): ${j(r.target)}`)
  for (const [share, s] of Object.entries(r.crossover as Record<string, unknown>)) console.log(`dense top-40 at ${share}: ${j(s)}`)
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const argv = process.argv.slice(2)
  const arg = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1]
  const r = await run({
    quick: argv.includes('--quick'),
    n: arg('n') ? Number(arg('n')) : undefined,
    dims: arg('dims') ? Number(arg('dims')) : undefined,
    queries: arg('queries') ? Number(arg('queries')) : undefined,
  })
  print(r)
  console.log(JSON.stringify(r))
}
