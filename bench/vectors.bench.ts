// Embedded vector store at scale: one KB of N chunks (100k x 1024 by default) against exact brute force
// over a Float32Array of the same vectors, in the same run, queries alternating between the two.
//
//   npx tsx bench/vectors.bench.ts            100k chunks, 1024 dimensions (several minutes on 2 cores)
//   npx tsx bench/vectors.bench.ts --quick    20k chunks, 256 dimensions
//   options: --n=<chunks> --dims=<d> --dist=clustered|uniform --queries=<q>
//
// Phases: a child process builds the collection (90% of the points, a snapshot, then 10% more left in
// the write-ahead log, then exits without closing: the state a kill -9 leaves); a second child reopens
// it (crash restart: snapshot + log replay), waits for the graph and closes it cleanly; this process
// reopens it once more (clean restart), measures RSS, then times searches.
//
// Data: dense vectors are random unit vectors. `clustered` (default) draws them around topic and
// document centres, as chunk embeddings are (chunks of one document near each other, queries near a
// chunk); `uniform` draws them uniformly on the sphere, where every point is about equally far from
// every other and any graph index loses recall: reported as the worst case. Sparse vectors hold ~60
// distinct Zipf-distributed token ids with term-frequency weights, queries 8 Zipf tokens.
import { spawn } from 'node:child_process'
import { promises as fs } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { ChunkPayload, SparseVector, VectorPoint } from '../adapters/ports.ts'
import { createEmbeddedVectorStore, type EmbeddedVectorStoreOptions } from '../adapters/vectors/embedded.ts'
import { defaultQuantization, type Quantization } from '../adapters/vectors/dense-index.ts'
import { idf } from '../adapters/vectors/sparse-index.ts'
import { TopK } from '../adapters/vectors/top-k.ts'
import { mulberry32 as rng } from './lib/rng.ts'

export type Dist = 'clustered' | 'uniform'
export interface VectorsBenchOptions {
  quick: boolean
  n?: number
  dims?: number
  dist?: Dist
  queries?: number
}

const KB = 'bench'
export const VOCAB = 30_000
const TERMS_PER_CHUNK = 60
export const CHUNKS_PER_DOC = 20

// ---- deterministic data (bench/filter.bench.ts builds its collection from the same generators) ----------


function gaussians(r: () => number, out: Float32Array, scale = 1): void {
  for (let i = 0; i < out.length; i += 2) {
    const u = r() || 1e-12
    const v = r()
    const m = Math.sqrt(-2 * Math.log(u)) * scale
    out[i] = m * Math.cos(2 * Math.PI * v)
    if (i + 1 < out.length) out[i + 1] = m * Math.sin(2 * Math.PI * v)
  }
}

function normalize(v: Float32Array): Float32Array {
  let s = 0
  for (let i = 0; i < v.length; i++) s += v[i] * v[i]
  const inv = 1 / Math.sqrt(s)
  for (let i = 0; i < v.length; i++) v[i] *= inv
  return v
}

/** Row-major unit vectors: uniform on the sphere, or topic -> document -> chunk around centres. */
export function denseData(n: number, dims: number, dist: Dist, seed: number): Float32Array {
  const r = rng(seed)
  const out = new Float32Array(n * dims)
  const noise = new Float32Array(dims)
  const sigma = 1 / Math.sqrt(dims) // a noise vector of norm about 1
  if (dist === 'uniform') {
    for (let i = 0; i < n; i++) {
      const row = out.subarray(i * dims, (i + 1) * dims)
      gaussians(r, row)
      normalize(row)
    }
    return out
  }
  const topics = Array.from({ length: 64 }, () => {
    const t = new Float32Array(dims)
    gaussians(r, t)
    return normalize(t)
  })
  let doc = new Float32Array(dims)
  for (let i = 0; i < n; i++) {
    if (i % CHUNKS_PER_DOC === 0) {
      const topic = topics[Math.floor(r() * topics.length)]
      gaussians(r, noise, sigma)
      doc = new Float32Array(dims)
      for (let j = 0; j < dims; j++) doc[j] = topic[j] + 0.8 * noise[j]
      normalize(doc)
    }
    gaussians(r, noise, sigma)
    const row = out.subarray(i * dims, (i + 1) * dims)
    for (let j = 0; j < dims; j++) row[j] = doc[j] + 0.6 * noise[j]
    normalize(row)
  }
  return out
}

export function queryVectors(data: Float32Array, n: number, dims: number, dist: Dist, count: number, seed: number): Float32Array[] {
  const r = rng(seed)
  const noise = new Float32Array(dims)
  return Array.from({ length: count }, () => {
    const q = new Float32Array(dims)
    if (dist === 'uniform') {
      gaussians(r, q)
      return normalize(q)
    }
    // A question about one chunk: near it, not on it.
    const j = Math.floor(r() * n)
    gaussians(r, noise, 1 / Math.sqrt(dims))
    for (let i = 0; i < dims; i++) q[i] = data[j * dims + i] + 0.7 * noise[i]
    return normalize(q)
  })
}

export function zipfSampler(r: () => number, vocab: number, s = 1.0) {
  const cdf = new Float64Array(vocab)
  let acc = 0
  for (let i = 0; i < vocab; i++) cdf[i] = acc += 1 / Math.pow(i + 1, s)
  for (let i = 0; i < vocab; i++) cdf[i] /= acc
  return () => {
    const x = r()
    let lo = 0
    let hi = vocab - 1
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (cdf[mid] < x) lo = mid + 1
      else hi = mid
    }
    return lo
  }
}

export function sparseVector(r: () => number, zipf: () => number, terms: number, tf: boolean): SparseVector {
  const m = new Map<number, number>()
  let guard = 0
  while (m.size < terms && guard++ < terms * 50) {
    const t = zipf()
    m.set(t, (m.get(t) ?? 0) + (tf ? 1 : 0) || 1)
  }
  const entries = [...m].sort((a, b) => a[0] - b[0])
  return { indices: Uint32Array.from(entries.map((e) => e[0])), values: Float32Array.from(entries.map((e) => e[1])) }
}

export function sparseData(n: number, seed: number): SparseVector[] {
  const r = rng(seed)
  const zipf = zipfSampler(r, VOCAB)
  return Array.from({ length: n }, () => sparseVector(r, zipf, TERMS_PER_CHUNK, true))
}

const WORDS = 'the of and to in is for on with as by that this from are be at or an it was which data search index vector query document chunk service latency memory restart'.split(' ')

export function payloadOf(i: number, r: () => number): ChunkPayload {
  let text = ''
  while (text.length < 700) text += WORDS[Math.floor(r() * WORDS.length)] + ' '
  const doc = Math.floor(i / CHUNKS_PER_DOC)
  return {
    chunk_id: `d${doc}:${i % CHUNKS_PER_DOC}`,
    kb_id: KB,
    doc_id: `d${doc}`,
    chunk_index: i % CHUNKS_PER_DOC,
    title: `Document ${doc}`,
    source_type: 'file',
    source: `doc-${doc}.md`,
    doc_type: 'md',
    page_num: 1,
    page_label: '1',
    text,
    start: (i % CHUNKS_PER_DOC) * 700,
    end: (i % CHUNKS_PER_DOC) * 700 + text.length,
    parent_chunk_id: null,
    updated_at: '2024-05-01T00:00:00.000Z',
  }
}

interface Sizes {
  n: number
  dims: number
  dist: Dist
  seed: number
}

// ---- child phases ----------------------------------------------------------------------------------

const storeOptions = (dir: string, dims: number): EmbeddedVectorStoreOptions => ({ dir, dimensions: dims, snapshotIdleMs: 0 })

async function childBuild(dir: string, s: Sizes) {
  const t0 = performance.now()
  const dense = denseData(s.n, s.dims, s.dist, s.seed)
  const sparse = sparseData(s.n, s.seed + 1)
  const pr = rng(s.seed + 2)
  const genMs = performance.now() - t0
  const store = await createEmbeddedVectorStore(storeOptions(dir, s.dims))
  await store.ensureCollection(KB, s.dims)
  const firstPart = Math.floor(s.n * 0.9)
  const upsertRange = async (from: number, to: number) => {
    for (let i = from; i < to; i += 256) {
      const points: VectorPoint[] = []
      for (let j = i; j < Math.min(to, i + 256); j++) {
        points.push({ dense: dense.subarray(j * s.dims, (j + 1) * s.dims), sparse: sparse[j], payload: payloadOf(j, pr) })
      }
      await store.upsert(KB, points)
    }
  }
  const t1 = performance.now()
  await upsertRange(0, firstPart)
  const upsertMs = performance.now() - t1
  await store.whenIndexed(KB)
  const indexedMs = performance.now() - t1
  await store.snapshot(KB)
  const snapshotMs = performance.now() - t1 - indexedMs
  await upsertRange(firstPart, s.n)
  await store.whenIndexed(KB)
  const stats = await store.stats(KB)
  // Exit without close: the last 10% stay in the log only, as after a kill -9.
  return { gen_ms: Math.round(genMs), upsert_ms: Math.round(upsertMs), upsert_points_per_sec: Math.round(firstPart / (upsertMs / 1000)), graph_ready_ms: Math.round(indexedMs), snapshot_ms: Math.round(snapshotMs), wal_bytes: stats?.walBytes, snapshot_bytes: stats?.snapshotBytes }
}

async function childCrashReopen(dir: string, s: Sizes) {
  const t0 = performance.now()
  const store = await createEmbeddedVectorStore(storeOptions(dir, s.dims))
  const openMs = performance.now() - t0
  const count = await store.count(KB)
  const pending = (await store.stats(KB))?.pending
  await store.whenIndexed(KB)
  const graphMs = performance.now() - t0
  await store.close()
  return { reopen_ms: Math.round(openMs), count, pending_after_open: pending, graph_caught_up_ms: Math.round(graphMs) }
}

async function runChild(mode: string, dir: string, sizes: Sizes): Promise<Record<string, unknown>> {
  const script = fileURLToPath(import.meta.url)
  const child = spawn(process.execPath, ['--import', 'tsx', script, '--child', mode, dir, JSON.stringify(sizes)], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()))
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve))
  const line = out.split('\n').find((l) => l.startsWith('RESULT '))
  if (code !== 0 || line === undefined) throw new Error(`bench child ${mode} failed (exit ${code})`)
  return JSON.parse(line.slice(7)) as Record<string, unknown>
}

// ---- baselines -------------------------------------------------------------------------------------

/** The k rows of `data` nearest q by dot product (unit vectors: cosine); only `rows` when given (a filtered search's truth). */
export function exactDense(data: Float32Array, n: number, dims: number, q: Float32Array, k: number, rows?: ArrayLike<number>) {
  const top = new TopK(k)
  const m = rows === undefined ? n : rows.length
  for (let r = 0; r < m; r++) {
    const i = rows === undefined ? r : rows[r]
    const off = i * dims
    let s = 0
    for (let j = 0; j < dims; j++) s += q[j] * data[off + j]
    top.push(i, s)
  }
  return top.drain()
}

function exactSparse(sparse: SparseVector[], df: Map<number, number>, q: SparseVector, k: number) {
  const n = sparse.length
  const weights = new Map<number, number>()
  for (let i = 0; i < q.indices.length; i++) {
    const d = df.get(q.indices[i])
    if (d !== undefined) weights.set(q.indices[i], idf(n, d) * q.values[i])
  }
  const top = new TopK(k)
  for (let i = 0; i < n; i++) {
    const v = sparse[i]
    let s = 0
    let hit = false
    for (let j = 0; j < v.indices.length; j++) {
      const w = weights.get(v.indices[j])
      if (w !== undefined) {
        s += w * v.values[j]
        hit = true
      }
    }
    if (hit) top.push(i, s)
  }
  return top.drain()
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]
}
const ms = (x: number) => +x.toFixed(3)
const rowOf = (payload: ChunkPayload) => Number(payload.doc_id.slice(1)) * CHUNKS_PER_DOC + payload.chunk_index

// ---- side studies (small sizes, in this process) -----------------------------------------------------

/** Recall and latency of graph settings on a smaller collection, against exact search. */
async function graphStudy(label: string, n: number, dims: number, dist: Dist, extra: Partial<EmbeddedVectorStoreOptions>, queries: number) {
  const dir = await fs.mkdtemp(join(os.tmpdir(), 'quarry-vbench-'))
  try {
    const data = denseData(n, dims, dist, 11)
    const store = await createEmbeddedVectorStore({ ...storeOptions(dir, dims), snapshotOnClose: false, ...extra })
    await store.ensureCollection(KB, dims)
    const r = rng(12)
    for (let i = 0; i < n; i += 512) {
      const pts: VectorPoint[] = []
      for (let j = i; j < Math.min(n, i + 512); j++) pts.push({ dense: data.subarray(j * dims, (j + 1) * dims), sparse: { indices: new Uint32Array(0), values: new Float32Array(0) }, payload: payloadOf(j, r) })
      await store.upsert(KB, pts)
    }
    const t0 = performance.now()
    await store.whenIndexed(KB)
    const buildMs = performance.now() - t0
    const qs = queryVectors(data, n, dims, dist, queries + 20, 13)
    const lat: number[] = []
    let hits = 0
    for (let i = 0; i < qs.length; i++) {
      const t = performance.now()
      const { dense } = await store.search(KB, { dense: qs[i], limit: 10 })
      const dt = performance.now() - t
      if (i < 20) continue
      lat.push(dt)
      const truth = new Set(exactDense(data, n, dims, qs[i], 10).rows)
      for (const h of dense) if (truth.has(rowOf(h.payload))) hits++
    }
    await store.close()
    return { label, n, dims, dist, graph_build_ms: Math.round(buildMs), p50_ms: ms(pct(lat, 50)), p99_ms: ms(pct(lat, 99)), recall_at_10: +(hits / (lat.length * 10)).toFixed(4) }
  } finally {
    await fs.rm(dir, { recursive: true, force: true })
  }
}

/**
 * The same points in one KB or spread over `kbs` KBs; a query searches every KB as a multi-KB request does:
 * each KB with its share of the points as dense effort (plugins/search/service.ts).
 */
async function multiKbStudy(total: number, kbs: number, dims: number, dist: Dist, queries: number) {
  const dir = await fs.mkdtemp(join(os.tmpdir(), 'quarry-vbench-'))
  try {
    const data = denseData(total, dims, dist, 21)
    const sp = sparseData(total, 22)
    const store = await createEmbeddedVectorStore({ ...storeOptions(dir, dims), snapshotOnClose: false })
    const r = rng(23)
    const layouts = [
      { label: '1 KB', names: ['one'] },
      { label: `${kbs} KBs`, names: Array.from({ length: kbs }, (_, i) => `part${i}`) },
    ]
    for (const { names } of layouts) {
      const per = Math.ceil(total / names.length)
      for (let k = 0; k < names.length; k++) {
        await store.ensureCollection(names[k], dims)
        for (let i = k * per; i < Math.min(total, (k + 1) * per); i += 512) {
          const pts: VectorPoint[] = []
          for (let j = i; j < Math.min(total, (k + 1) * per, i + 512); j++) pts.push({ dense: data.subarray(j * dims, (j + 1) * dims), sparse: sp[j], payload: payloadOf(j, r) })
          await store.upsert(names[k], pts)
        }
      }
    }
    await store.whenIndexed()
    const qd = queryVectors(data, total, dims, dist, queries + 20, 24)
    const qr = rng(25)
    const zipf = zipfSampler(qr, VOCAB)
    const qs = Array.from({ length: queries + 20 }, () => sparseVector(qr, zipf, 8, false))
    const lat = layouts.map(() => [] as number[])
    for (let i = 0; i < qd.length; i++) {
      for (let l = 0; l < layouts.length; l++) {
        const li = i % 2 === 0 ? l : layouts.length - 1 - l
        const t = performance.now()
        const names = layouts[li].names
        await Promise.all(names.map((name) => store.search(name, { dense: qd[i], sparse: qs[i], limit: 10, effort: 1 / names.length })))
        if (i >= 20) lat[li].push(performance.now() - t)
      }
    }
    await store.close()
    const one = pct(lat[0], 50)
    const many = pct(lat[1], 50)
    return { total, dims, kbs, one_kb: { p50_ms: ms(one), p99_ms: ms(pct(lat[0], 99)) }, many_kbs: { p50_ms: ms(many), p99_ms: ms(pct(lat[1], 99)) }, ratio_p50: +(many / one).toFixed(2) }
  } finally {
    await fs.rm(dir, { recursive: true, force: true })
  }
}

// ---- main run ----------------------------------------------------------------------------------------

export async function run(opts: VectorsBenchOptions) {
  const sizes: Sizes = {
    n: opts.n ?? (opts.quick ? 20_000 : 100_000),
    dims: opts.dims ?? (opts.quick ? 256 : 1024),
    dist: opts.dist ?? 'clustered',
    seed: 7,
  }
  const queries = opts.queries ?? (opts.quick ? 100 : 200)
  const machine = { cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.cpus().length, node: process.version, load_avg_1m: +os.loadavg()[0].toFixed(2) }
  const result: Record<string, unknown> = { bench: 'vectors', machine, sizes: { ...sizes, queries, terms_per_chunk: TERMS_PER_CHUNK, vocab: VOCAB } }
  const dir = await fs.mkdtemp(join(os.tmpdir(), 'quarry-vbench-'))
  try {
    result.build = await runChild('build', dir, sizes)
    result.crash_restart = await runChild('crash-reopen', dir, sizes)

    const t0 = performance.now()
    const store = await createEmbeddedVectorStore(storeOptions(dir, sizes.dims))
    const reopenMs = performance.now() - t0
    const rss = process.memoryUsage()
    result.clean_restart = { reopen_ms: Math.round(reopenMs), count: await store.count(KB), stats: await store.stats(KB) }
    result.memory = { rss_mb: Math.round(rss.rss / 2 ** 20), heap_used_mb: Math.round(rss.heapUsed / 2 ** 20), external_mb: Math.round(rss.external / 2 ** 20), array_buffers_mb: Math.round(rss.arrayBuffers / 2 ** 20) }

    // The same data again, in plain arrays, for the baselines.
    const data = denseData(sizes.n, sizes.dims, sizes.dist, sizes.seed)
    const sparse = sparseData(sizes.n, sizes.seed + 1)
    const df = new Map<number, number>()
    for (const v of sparse) for (const t of v.indices) df.set(t, (df.get(t) ?? 0) + 1)
    const qDense = queryVectors(data, sizes.n, sizes.dims, sizes.dist, queries + 20, 99)
    const qr = rng(98)
    const zipf = zipfSampler(qr, VOCAB)
    const qSparse = Array.from({ length: queries + 20 }, () => sparseVector(qr, zipf, 8, false))

    const lat = { dense: [] as number[], denseExact: [] as number[], sparse: [] as number[], sparseExact: [] as number[], hybrid: [] as number[] }
    let recallHits = 0
    let sparseMismatch = 0
    for (let i = 0; i < qDense.length; i++) {
      const warm = i < 20
      // Alternate which side goes first, so neither always runs on a cache the other warmed.
      const oursFirst = i % 2 === 0
      let ours: Awaited<ReturnType<typeof store.search>> | undefined
      let exact: ReturnType<typeof exactDense> | undefined
      const runOurs = async () => {
        const t = performance.now()
        ours = await store.search(KB, { dense: qDense[i], limit: 10 })
        if (!warm) lat.dense.push(performance.now() - t)
      }
      const runExact = () => {
        const t = performance.now()
        exact = exactDense(data, sizes.n, sizes.dims, qDense[i], 10)
        if (!warm) lat.denseExact.push(performance.now() - t)
      }
      if (oursFirst) {
        await runOurs()
        runExact()
      } else {
        runExact()
        await runOurs()
      }
      if (!warm) {
        const truth = new Set(exact!.rows)
        for (const h of ours!.dense) if (truth.has(rowOf(h.payload))) recallHits++
      }

      let sOurs: Awaited<ReturnType<typeof store.search>> | undefined
      let sExact: ReturnType<typeof exactSparse> | undefined
      const runSOurs = async () => {
        const t = performance.now()
        sOurs = await store.search(KB, { sparse: qSparse[i], limit: 10 })
        if (!warm) lat.sparse.push(performance.now() - t)
      }
      const runSExact = () => {
        const t = performance.now()
        sExact = exactSparse(sparse, df, qSparse[i], 10)
        if (!warm) lat.sparseExact.push(performance.now() - t)
      }
      if (oursFirst) {
        await runSOurs()
        runSExact()
      } else {
        runSExact()
        await runSOurs()
      }
      for (let j = 0; j < sExact!.scores.length; j++) {
        if (Math.abs(sExact!.scores[j] - (sOurs!.sparse[j]?.score ?? NaN)) > 1e-3 * Math.max(1, sExact!.scores[j])) sparseMismatch++
      }
      const t = performance.now()
      await store.search(KB, { dense: qDense[i], sparse: qSparse[i], limit: 10 })
      if (!warm) lat.hybrid.push(performance.now() - t)
    }
    await store.close()
    const summary = (xs: number[]) => ({ p50_ms: ms(pct(xs, 50)), p99_ms: ms(pct(xs, 99)), mean_ms: ms(xs.reduce((a, b) => a + b, 0) / xs.length) })
    result.dense_top10 = {
      hnsw: summary(lat.dense),
      exact_bruteforce: summary(lat.denseExact),
      speedup_p50: +(pct(lat.denseExact, 50) / pct(lat.dense, 50)).toFixed(1),
      recall_at_10: +(recallHits / (lat.dense.length * 10)).toFixed(4),
    }
    result.sparse_top10 = {
      inverted_index: summary(lat.sparse),
      exact_bruteforce: summary(lat.sparseExact),
      speedup_p50: +(pct(lat.sparseExact, 50) / pct(lat.sparse, 50)).toFixed(1),
      score_mismatches: sparseMismatch,
    }
    result.hybrid_top10 = summary(lat.hybrid)
  } finally {
    await fs.rm(dir, { recursive: true, force: true })
  }

  // Side studies on smaller collections: graph scalar type, the exact-scan threshold, uniform data.
  const sn = opts.quick ? 3000 : 10_000
  const sq = opts.quick ? 60 : 150
  // The default (defaultQuantization) against the other types a store may ask for.
  const byDefault = defaultQuantization()
  const label = (q: Quantization) => `${q} graph${q === byDefault ? ' (the default)' : ''}`
  result.quantization = []
  for (const q of ['i8', 'f16', 'bf16', 'f32'] as const) {
    ;(result.quantization as unknown[]).push(await graphStudy(label(q), sn, sizes.dims, sizes.dist, { exactBudget: 0, quantization: q }, sq))
  }
  result.uniform_worst_case = await graphStudy(`${byDefault} graph, uniform data`, sn, sizes.dims, 'uniform', { exactBudget: 0 }, sq)
  result.multi_kb = await multiKbStudy(opts.quick ? 10_000 : 40_000, 10, sizes.dims, sizes.dist, sq)
  result.small_collections = []
  for (const n of opts.quick ? [1000, 4000] : [1000, 2000, 4000]) {
    ;(result.small_collections as unknown[]).push(
      await graphStudy(`exact scan`, n, sizes.dims, sizes.dist, { exactBudget: 2 ** 31 - 1 }, sq),
      await graphStudy(`HNSW graph`, n, sizes.dims, sizes.dist, { exactBudget: 0 }, sq),
    )
  }
  return result
}

function print(r: Record<string, unknown>): void {
  const j = (x: unknown) => JSON.stringify(x)
  console.log(`machine: ${j(r.machine)}`)
  console.log(`sizes: ${j(r.sizes)}`)
  console.log(`build (child, 90% then 10% in the log): ${j(r.build)}`)
  console.log(`restart after kill (snapshot + log replay): ${j(r.crash_restart)}`)
  console.log(`restart after clean close: ${j(r.clean_restart)}`)
  console.log(`memory after clean restart: ${j(r.memory)}`)
  console.log(`dense top-10: ${j(r.dense_top10)}`)
  console.log(`sparse top-10: ${j(r.sparse_top10)}`)
  console.log(`hybrid (dense + sparse in one call) top-10: ${j(r.hybrid_top10)}`)
  for (const q of r.quantization as unknown[]) console.log(`graph type: ${j(q)}`)
  console.log(`uniform data: ${j(r.uniform_worst_case)}`)
  console.log(`hybrid search over the same points in 1 KB vs 10 KBs: ${j(r.multi_kb)}`)
  for (const s of r.small_collections as unknown[]) console.log(`small collection: ${j(s)}`)
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const argv = process.argv.slice(2)
  if (argv[0] === '--child') {
    const [, mode, dir, sizesJson] = argv
    const sizes = JSON.parse(sizesJson) as Sizes
    const r = mode === 'build' ? await childBuild(dir, sizes) : await childCrashReopen(dir, sizes)
    process.stdout.write(`RESULT ${JSON.stringify(r)}\n`, () => process.exit(0))
  } else {
    const arg = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1]
    const r = await run({
      quick: argv.includes('--quick'),
      n: arg('n') ? Number(arg('n')) : undefined,
      dims: arg('dims') ? Number(arg('dims')) : undefined,
      dist: arg('dist') as Dist | undefined,
      queries: arg('queries') ? Number(arg('queries')) : undefined,
    })
    print(r)
    console.log(JSON.stringify(r))
  }
}
