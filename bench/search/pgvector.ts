// pgvector beside the embedded store (issue 39): the search benchmark's KB `one` (the same generated chunks, built-in
// dense vectors and sparse vectors) written into a PostgreSQL database through the pgvector driver, then the same
// queries asked of both stores, called directly (the index work, without the service's fusion and HTTP):
//   - latency at one caller: p50 and p99 per case, the two stores in turn on every query;
//   - throughput: `connections` callers in a closed loop for `seconds` per store and case (QPS, p50);
//   - recall@10 of a dense top-10 against exact search (every point scored: a sequential scan in PostgreSQL of the
//     same vectors), for both stores; and whether the sparse top-10s agree (both drivers score sparse exactly).
// Cases: `similarity` (dense top_k) and `hybrid` (dense ranks + sparse, the deeper lists the service's fusion asks for).
//
// Needs PostgreSQL with pgvector (TEST_POSTGRES_URL, as the services tests; the temporary database is dropped after);
// without it the section reports itself skipped. Called by bench/search.bench.ts with its store and queries; alone:
//   npx tsx bench/search/pgvector.ts [--chunks=10000] [--seconds=5] [--connections=16] [--data=<dir>] [--ef=200] [--f32-index] [--json]
// builds (or reuses, with --data) the search benchmark's data and opens its embedded store in this process.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import postgres from 'postgres'
import type { Embedder, SparseVector, VectorPoint, VectorQuery, VectorStore } from '../../adapters/ports.ts'
import { embedTexts } from '../../adapters/embedders/builtin.ts'
import { createPgvectorVectorStore, PGVECTOR_DEFAULT_EF_SEARCH } from '../../adapters/vectors/pgvector.ts'
import { encodeDocument, encodeQuery } from '../../compute/text/sparse.ts'
import { createTempDatabase } from '../../test/helpers/pg.ts'
import { machine, median, percentile, round } from '../lib/machine.ts'
import { progress } from '../lib/progress.ts'
import { buildSearchData, generateChunks, readSearchData } from './build-data.ts'

export interface PgvectorBesideOptions {
  /** The embedded store holding the search benchmark's KB (its data, already indexed). */
  embedded: VectorStore
  embedder: Embedder
  /** The KB both stores are searched in (`one`): its chunks are generated again for pgvector. */
  kbId: string
  chunks: number
  dimensions: number
  splits: number
  seed: number
  queries: readonly string[]
  topK: number
  /** What the search service asks a KB for in hybrid mode (storeLimit). */
  hybridLimit: number
  seconds: number
  connections: number
  /** Queries per store and case at one caller (each store asked each query once per round, 3 rounds). */
  lowQueries: number
  /** Queries whose dense top-10 is compared with exact search. */
  recallQueries: number
  /** PostgreSQL URL; default TEST_POSTGRES_URL. */
  postgresUrl?: string
  /** The driver's candidate list (hnsw.ef_search) and index precision; default the driver's (200, halfvec). */
  efSearch?: number
  halfIndex?: boolean
}

type CaseName = 'similarity' | 'hybrid'
const CASES: CaseName[] = ['similarity', 'hybrid']

interface Encoded {
  dense: Float32Array
  sparse: SparseVector
}

function queryOf(c: CaseName, q: Encoded, o: PgvectorBesideOptions): VectorQuery {
  return c === 'similarity' ? { dense: q.dense, limit: o.topK } : { dense: q.dense, sparse: q.sparse, limit: o.hybridLimit, rankOnly: true }
}

const checkHits = (what: string, r: { dense: unknown[]; sparse: unknown[] }) => {
  if (r.dense.length === 0) throw new Error(`${what}: the search returned no dense hits`)
}

/** `connections` callers, each sending its next query when the last one is answered, for `seconds`. */
async function closedLoop(store: VectorStore, kb: string, c: CaseName, encoded: readonly Encoded[], o: PgvectorBesideOptions, offset: number) {
  const latencies: number[] = []
  let next = offset
  const t0 = performance.now()
  const until = t0 + o.seconds * 1000
  await Promise.all(Array.from({ length: o.connections }, async () => {
    while (performance.now() < until) {
      const q = encoded[next++ % encoded.length]
      const s = performance.now()
      checkHits(`${store.name} ${c}`, await store.search(kb, queryOf(c, q, o)))
      latencies.push(performance.now() - s)
    }
  }))
  const elapsed = performance.now() - t0
  return { qps: round(latencies.length / (elapsed / 1000), 1), p50_ms: round(percentile(latencies, 50), 3), p99_ms: round(percentile(latencies, 99), 3), requests: latencies.length }
}

export async function pgvectorBeside(o: PgvectorBesideOptions) {
  const url = o.postgresUrl ?? process.env.TEST_POSTGRES_URL
  if (!url) return { skipped: 'pgvector runs on PostgreSQL with the pgvector extension: set TEST_POSTGRES_URL' }
  const db = await createTempDatabase(url)
  let store: VectorStore | undefined
  let admin: postgres.Sql | undefined
  try {
    store = await createPgvectorVectorStore({
      host: db.host, port: db.port, database: db.database, user: db.user, password: db.password,
      dimensions: o.dimensions, poolSize: o.connections, efSearch: o.efSearch, halfIndex: o.halfIndex,
    })
    admin = postgres({ host: db.host, port: db.port, database: db.database, username: db.user, password: db.password || undefined, max: 1, onnotice: () => {}, connection: { jit: 'off' } })

    // ---- build: the KB's chunks again, upserted as the pipeline does (batches of 256 in one call each), two at a time.
    process.stderr.write('search bench: pgvector: writing the KB into PostgreSQL\n')
    await store.ensureCollection(o.kbId, o.dimensions)
    const bar = progress('pgvector upserts', o.chunks, { unit: 'points' })
    const tb = performance.now()
    let written = 0
    let inFlight: Promise<void>[] = []
    for (const batch of generateChunks(o.chunks, o.splits, o.seed)) {
      const texts = batch.map((b) => b.payload.text)
      const dense = embedTexts(texts, o.dimensions)
      const points: VectorPoint[] = batch.map((b, i) => ({
        dense: dense.slice(i * o.dimensions, (i + 1) * o.dimensions), sparse: encodeDocument(texts[i]), payload: { ...b.payload, kb_id: o.kbId },
      }))
      for (let i = 0; i < points.length; i += 256) {
        const part = points.slice(i, i + 256)
        inFlight.push(store.upsert(o.kbId, part).then(() => bar.set((written += part.length))))
        if (inFlight.length >= 2) {
          await Promise.all(inFlight)
          inFlight = []
        }
      }
    }
    await Promise.all(inFlight)
    bar.done()
    const upsertMs = performance.now() - tb
    const count = await store.count(o.kbId)
    if (count !== o.chunks) throw new Error(`pgvector KB ${o.kbId} holds ${count} points, expected ${o.chunks}`)
    // What autovacuum does within a minute of a bulk load: visibility maps (index-only scans of the postings) and
    // planner statistics. Done here so that the figures are not of a table autovacuum has not reached yet.
    const [{ id }] = await admin<{ id: number }[]>`SELECT id::int FROM quarry_vector_collections WHERE kb_id = ${o.kbId}`
    const table = `quarry_vec_${id}`
    const tv = performance.now()
    await admin.unsafe(`VACUUM ANALYZE ${table}`)
    await admin.unsafe(`VACUUM ANALYZE ${table}_terms`)
    const vacuumMs = performance.now() - tv
    const [sizes] = await admin.unsafe(`SELECT pg_total_relation_size('${table}')::int8 AS points, pg_relation_size('${table}_hnsw')::int8 AS hnsw,
      pg_total_relation_size('${table}_terms')::int8 AS postings, (SELECT count(*) FROM ${table}_terms)::int8 AS postings_rows`)
    const mb = (x: unknown) => Math.round(Number(x) / 2 ** 20)

    // ---- queries, encoded once for both stores.
    const vectors = await o.embedder.embed(o.queries)
    const encoded: Encoded[] = o.queries.map((q, i) => ({ dense: vectors[i], sparse: encodeQuery(q) }))
    const stores = { embedded: o.embedded, pgvector: store }
    const names = ['embedded', 'pgvector'] as const

    // ---- warm-up: every store and case.
    process.stderr.write('search bench: pgvector: warm-up\n')
    for (const c of CASES) for (let i = 0; i < 30; i++) for (const n of names) await stores[n].search(o.kbId, queryOf(c, encoded[(i * 37) % encoded.length], o))

    // ---- one caller: the two stores in turn on every query (the order alternating), three rounds.
    process.stderr.write('search bench: pgvector: one caller\n')
    const low = Object.fromEntries(names.map((n) => [n, Object.fromEntries(CASES.map((c) => [c, [] as number[]]))])) as Record<(typeof names)[number], Record<CaseName, number[]>>
    for (let r = 0; r < 3; r++) {
      for (let i = 0; i < o.lowQueries; i++) {
        const q = encoded[(r * o.lowQueries + i * 13) % encoded.length]
        for (const c of CASES) {
          const order = (i + r) % 2 === 0 ? names : ([...names].reverse() as unknown as typeof names)
          for (const n of order) {
            const s = performance.now()
            checkHits(`${n} ${c}`, await stores[n].search(o.kbId, queryOf(c, q, o)))
            low[n][c].push(performance.now() - s)
          }
        }
      }
    }

    // ---- under load: one store and case at a time.
    process.stderr.write(`search bench: pgvector: ${o.connections} callers, ${o.seconds} s per store and case\n`)
    const load: Record<string, Record<string, Awaited<ReturnType<typeof closedLoop>>>> = { embedded: {}, pgvector: {} }
    for (const c of CASES) for (const n of names) load[n][c] = await closedLoop(stores[n], o.kbId, c, encoded, o, 101)

    // ---- recall@10 against exact search: every point scored by PostgreSQL (`+ 0` keeps the planner off the index).
    process.stderr.write('search bench: pgvector: recall against exact search\n')
    const recall = { embedded: [] as number[], pgvector: [] as number[] }
    let sparseSame = 0
    const rq = Math.min(o.recallQueries, encoded.length)
    for (let i = 0; i < rq; i++) {
      const q = encoded[(i * 7) % encoded.length]
      const text = `[${Array.from(q.dense).join(',')}]`
      const exact = await admin.unsafe(`SELECT chunk_id FROM ${table} ORDER BY (dense <=> $1::vector(${o.dimensions})) + 0 LIMIT 10`, [text])
      const truth = new Set(exact.map((r) => r.chunk_id as string))
      for (const n of names) {
        const { dense } = await stores[n].search(o.kbId, { dense: q.dense, limit: 10 })
        recall[n].push(dense.filter((h) => truth.has(h.id)).length / truth.size)
      }
      const [a, b] = await Promise.all(names.map((n) => stores[n].search(o.kbId, { sparse: q.sparse, limit: 10 })))
      const same = a.sparse.length === b.sparse.length && a.sparse.every((h, j) => Math.abs(h.score - b.sparse[j].score) < 1e-4 * Math.max(1, Math.abs(h.score)))
      if (same) sparseSame++
    }
    const mean = (xs: readonly number[]) => xs.reduce((s, x) => s + x, 0) / Math.max(1, xs.length)

    const stat = (xs: readonly number[]) => ({ p50_ms: round(median(xs), 3), p99_ms: round(percentile(xs, 99), 3) })
    return {
      sizes: { kb: o.kbId, chunks: o.chunks, dimensions: o.dimensions, top_k: o.topK, hybrid_limit: o.hybridLimit, connections: o.connections, seconds_per_case: o.seconds, one_caller_queries: 3 * o.lowQueries, recall_queries: rq },
      pgvector: {
        settings: { ef_search: o.efSearch ?? PGVECTOR_DEFAULT_EF_SEARCH, index: o.halfIndex === false ? 'vector (f32)' : 'halfvec', m: 16, ef_construction: 64, iterative_scan: 'relaxed_order' },
        build: {
          upsert_ms: Math.round(upsertMs), points_per_s: round(o.chunks / (upsertMs / 1000), 1), vacuum_analyze_ms: Math.round(vacuumMs),
          points_table_with_indexes_mb: mb(sizes.points), hnsw_index_mb: mb(sizes.hnsw), postings_mb: mb(sizes.postings), postings_rows: Number(sizes.postings_rows),
        },
      },
      one_caller: Object.fromEntries(names.map((n) => [n, Object.fromEntries(CASES.map((c) => [c, stat(low[n][c])]))])),
      load,
      recall_at_10: { embedded: round(mean(recall.embedded), 4), pgvector: round(mean(recall.pgvector), 4) },
      sparse_top10_same_scores: `${sparseSame}/${rq}`,
    }
  } finally {
    await store?.close().catch(() => {})
    await admin?.end().catch(() => {})
    await db.drop().catch(() => {})
  }
}

export type PgvectorBesideResult = Awaited<ReturnType<typeof pgvectorBeside>>

export function printPgvectorBeside(r: PgvectorBesideResult): void {
  console.log('\npgvector beside the embedded store (stores called directly, the same queries):')
  if ('skipped' in r) {
    console.log(`  skipped: ${r.skipped}`)
    return
  }
  const j = (x: unknown) => JSON.stringify(x)
  console.log(`  sizes: ${j(r.sizes)}`)
  console.log(`  pgvector build: ${j(r.pgvector.build)} (${j(r.pgvector.settings)})`)
  for (const c of CASES) {
    for (const n of ['embedded', 'pgvector'] as const) {
      const lo = r.one_caller[n][c]
      const l = r.load[n][c]
      console.log(`  ${c.padEnd(10)} ${n.padEnd(8)} 1 caller p50 ${lo.p50_ms.toFixed(3).padStart(8)} ms  p99 ${lo.p99_ms.toFixed(3).padStart(8)} ms | ${r.sizes.connections} callers ${String(l.qps).padStart(8)} QPS  p50 ${l.p50_ms.toFixed(2).padStart(7)} ms  p99 ${l.p99_ms.toFixed(2).padStart(7)} ms`)
    }
  }
  console.log(`  dense recall@10 against exact search: embedded ${r.recall_at_10.embedded}, pgvector ${r.recall_at_10.pgvector}; sparse top-10 with the same scores in both: ${r.sparse_top10_same_scores}`)
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const argv = process.argv.slice(2)
  const arg = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
  const num = (name: string, def: number) => (arg(name) === undefined ? def : Number(arg(name)))
  const chunks = num('chunks', 10_000)
  const dimensions = 1024
  const splits = 10
  const dataDir = arg('data') ?? mkdtempSync(join(tmpdir(), 'quarry-pgvector-bench-'))
  const keep = arg('data') !== undefined
  const dataOpts = { dataDir, chunks, dimensions, splits, queries: 1000 }
  const { createEmbeddedVectorStore } = await import('../../adapters/vectors/embedded.ts')
  const { createEmbedder } = await import('../../adapters/embedders/index.ts')
  const { inKbFusionK, storeLimit } = await import('../../plugins/search/fusion.ts')
  const { resolveSettings } = await import('../../kernel/config/load.ts')
  const data = (keep ? await readSearchData(dataOpts) : null) ?? (await buildSearchData(dataOpts))
  const embedded = await createEmbeddedVectorStore({ dir: join(dataDir, 'vectors'), dimensions })
  const embedder = await createEmbedder({ name: 'builtin', url: '', apiKey: '', model: '', dimensions }, {})
  try {
    await (embedded as { whenIndexed?(kb: string): Promise<void> }).whenIndexed?.('one')
    const topK = num('top-k', 10)
    const r = await pgvectorBeside({
      embedded, embedder, kbId: data.kbs.one, chunks, dimensions, splits, seed: data.seed, queries: data.queries, topK,
      hybridLimit: storeLimit('hybrid', topK, inKbFusionK(resolveSettings({}).settings.retrieval.hybrid)),
      seconds: num('seconds', 5), connections: num('connections', 16), lowQueries: num('low-queries', 100), recallQueries: num('recall-queries', 100),
      efSearch: arg('ef') === undefined ? undefined : Number(arg('ef')), halfIndex: argv.includes('--f32-index') ? false : undefined,
    })
    console.log(`machine: ${JSON.stringify(machine())}`)
    printPgvectorBeside(r)
    if (argv.includes('--json')) console.log(JSON.stringify(r))
  } finally {
    await embedded.close()
    await embedder.close()
    if (!keep) rmSync(dataDir, { recursive: true, force: true })
  }
}
