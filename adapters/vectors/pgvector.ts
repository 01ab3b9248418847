// The pgvector driver: vectors in PostgreSQL (the `vector` extension, 0.8+), beside the metadata or in another
// database. One registry table names the collections; each KB gets two tables of its own, made when the KB's
// collection is created and dropped with it:
//
//   quarry_vector_collections (kb_id PK, id, dims, points, half_index)   one row per KB; `points` is kept in step
//                          with every write (the N of the sparse IDF, count())
//   quarry_vec_<id>        one row per chunk: pid, chunk_id (unique), the filter columns (doc_id, source_type,
//                          doc_type, source, updated_ms), the chunk's sparse term ids, the payload as JSON text,
//                          tie_key and `dense vector(dims)` (f32) under an HNSW index on dense::halfvec(dims) (cosine;
//                          half the size of one on the f32 vectors, the same recall; `halfIndex: false` for f32)
//   quarry_vec_<id>_terms  the sparse postings: (term, pid) primary key INCLUDE (weight), so both the document
//                          frequency of a query term and its postings are read by index-only scans
//
// Dense search is an HNSW index scan with `hnsw.iterative_scan = relaxed_order` (pgvector 0.8), re-ordered by exact
// distance: a WHERE clause (the filter) is applied inside the scan, which goes on until `limit` rows pass (or
// hnsw.max_scan_tuples); a filtered search that still comes back short is answered by an exact scan of the rows
// the filter keeps. Scores are the exact f32 cosines, computed from the table's vectors. Sparse search scores
// in SQL as the other drivers do, Qdrant's `modifier: idf`: sum over shared terms of idf(t) * q_t * d_t with
// idf = ln((N - n + 0.5) / (n + 0.5) + 1), N the collection's points and n those holding t (counted from the
// postings at query time, so IDF is always that of the whole collection, with or without a filter).
//
// Equal scores are ranked by tie_key, the embedded store's tie key (payloads.ts tieKeyOf: a hash of what the chunk
// says), then by chunk_id, so that both stores, and a KB and its import, rank tied chunks alike. A table made before the
// column has it added when a process first uses it, and its rows keyed in the background (they rank after keyed
// rows until then).
//
// Writes are transactions, durable when they resolve. An upsert batch takes a transaction-scoped advisory lock per
// chunk (sorted), so two writers of the same chunk serialise and neither leaves the other's postings behind (a new
// chunk has no row to lock yet); writers of different chunks run in parallel. Rows are locked in chunk_id order by
// upserts and deletes alike, so they never wait on each other in a cycle. pgvector is not a trusted extension: the
// driver runs CREATE EXTENSION IF NOT EXISTS vector at open, which needs a superuser the first time (or an operator
// who ran it).
import { createHash } from 'node:crypto'
import { AppError, serviceUnavailable } from '../../kernel/errors.ts'
import type { ChunkPayload, VectorFilter, VectorHit, VectorPoint, VectorQuery, VectorStore } from '../ports.ts'
import { checkKbId, dimensionMismatch, invalidPoint, pointProblem } from './errors.ts'
import { checkFilter } from './filter.ts'
import { tieKeyOf } from './payloads.ts'
import { rescoredRows } from './rescore.ts'

export interface PgvectorVectorStoreOptions {
  host: string
  port: number
  database: string
  user: string
  password: string
  /** Connections of the store's own pool (the metadata keeps its pool). Default 5. */
  poolSize?: number
  connectTimeoutSec?: number
  /** Vector size of collections created implicitly (an upsert into a KB without ensureCollection). */
  dimensions: number
  /**
   * hnsw.ef_search of a search with effort 1: the candidate list of the HNSW scan. Default 200 (pgvector's own is 40):
   * dense recall@10 against exact search 0.92 at 10k chunks of the search benchmark (built-in vectors, its hard case),
   * 0.82 at 100, 0.67 at 40; the embedded store's ef 256 gave 0.88 there. A search with effort < 1 gets this x effort.
   */
  efSearch?: number
  /**
   * HNSW index of new collections on dense::halfvec(dims) rather than on the f32 vectors: half the index (each
   * 1,024-dimension vector is 2 KB in the graph instead of 4 KB), the same recall (measured at ef 40-400), faster
   * scans; it ranks by half-precision distance and the score stays the exact f32 cosine. Default true; always above
   * 2,000 dimensions (pgvector's limit for `vector`). A collection keeps the index it was made with.
   */
  halfIndex?: boolean
  /** HNSW build parameters of new collections: links per node (m) and candidate list (ef_construction). Default 16 and 64, as the embedded store. */
  m?: number
  efConstruction?: number
  /** hnsw.max_scan_tuples: how far an iterative (filtered) scan may go before the exact fallback. Default 20,000 (pgvector's). */
  maxScanTuples?: number
  /** Points per statement of an upsert. Default 256. */
  batchSize?: number
}

/** pgvector's HNSW limits: `vector` up to 2,000 dimensions, `halfvec` up to 4,000. */
export const PGVECTOR_MAX_VECTOR_DIMS = 2000
export const PGVECTOR_MAX_INDEX_DIMS = 4000
/** The candidate list of a search with effort 1 (PgvectorVectorStoreOptions.efSearch). */
export const PGVECTOR_DEFAULT_EF_SEARCH = 200

const REGISTRY = 'quarry_vector_collections'
/** Advisory lock key (pg_advisory_xact_lock) serialising the creation of the registry and of collections. */
export const SCHEMA_LOCK = 0x71766563 // 'qvec'

interface Collection {
  id: number
  dims: number
  /** The HNSW index is on dense::halfvec(dims). */
  half: boolean
  /** The points table and its postings table. */
  table: string
  terms: string
}

const collectionOf = (id: number, dims: number, half: boolean): Collection => ({ id, dims, half, table: `quarry_vec_${id}`, terms: `quarry_vec_${id}_terms` })

/** Rows keyed per statement when a table made before tie_key is filled. */
const TIE_FILL_BATCH = 1000

/** A u32 term id as the int4 PostgreSQL stores (the same bits): ids are only compared, never read back. */
const termKey = (t: number) => t | 0

/** A Float32Array as pgvector's text form. */
const vectorText = (v: Float32Array): string => {
  let s = '['
  for (let i = 0; i < v.length; i++) s += (i === 0 ? '' : ',') + v[i]
  return `${s}]`
}

/** pgvector's text form back to f32 (it prints each f32 in its shortest exact form). */
const parseVector = (text: string): Float32Array => {
  const inner = text.slice(1, -1)
  return inner === '' ? new Float32Array(0) : Float32Array.from(inner.split(','), Number)
}

/** LIKE pattern of a literal prefix (LIKE is case-sensitive; `\` is the default escape). */
const likePrefix = (prefix: string) => `${prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`

/** A 64-bit advisory lock key per chunk of a collection, as a decimal string (int8). */
const chunkLockKey = (collection: number, chunkId: string): string =>
  createHash('sha1').update(`${collection}:`).update(chunkId).digest().readBigInt64BE(0).toString()

/** A hit whose payload is parsed from the row's JSON on first read (fusion reads only the payloads it keeps). */
function hitOf(score: number, id: string, json: string): VectorHit {
  let payload: ChunkPayload | undefined
  return {
    score,
    id,
    get payload() {
      return (payload ??= JSON.parse(json) as ChunkPayload)
    },
  }
}

/** The filter as SQL conditions on the points table (alias p), its values appended to params. */
function filterSql(f: VectorFilter, params: unknown[]): string {
  const where: string[] = []
  const add = (value: unknown) => {
    params.push(value)
    return `$${params.length}`
  }
  if (f.docIds !== undefined) where.push(`p.doc_id = ANY(${add([...f.docIds])}::text[])`)
  if (f.sourceTypes !== undefined) where.push(`p.source_type = ANY(${add([...f.sourceTypes])}::text[])`)
  if (f.docTypes !== undefined) where.push(`p.doc_type = ANY(${add([...f.docTypes])}::text[])`)
  if (f.sourcePrefix !== undefined) where.push(`p.source LIKE ${add(likePrefix(f.sourcePrefix))}::text`)
  // after <= updated_at < before; a payload without a date (NULL) passes neither bound.
  if (f.updatedAfter !== undefined) where.push(`p.updated_ms >= ${add(Math.ceil(f.updatedAfter))}::int8`)
  if (f.updatedBefore !== undefined) where.push(`p.updated_ms < ${add(Math.ceil(f.updatedBefore))}::int8`)
  return where.length === 0 ? 'TRUE' : where.join(' AND ')
}

const sqlState = (err: unknown): string | undefined => (err as { code?: unknown } | null)?.code as string | undefined
const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH', 'CONNECT_TIMEOUT', 'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', '57P01', '57P02', '57P03', '53300', '08000', '08001', '08003', '08006'])
/** undefined_table: a collection dropped by another process since this one cached it. */
const UNDEFINED_TABLE = '42P01'

/**
 * deadlock_detected. A collection's two tables are locked in both orders (a sparse search reads the postings, then the
 * points; writes and the drop take the points first), so a search or a write that meets a drop of its collection can
 * deadlock with it, and PostgreSQL cancels one of the two: the statement is run again (and finds the collection gone
 * when the drop won), and so is the drop.
 */
const DEADLOCK = '40P01'

/** How often a drop that lost a deadlock to a statement on its collection is tried again. */
const DROP_ATTEMPTS = 5

/**
 * Thrown inside the store when a cached collection's tables are gone, or a statement on them lost a deadlock to a
 * drop; never leaves it.
 */
class StaleCollection extends Error {}

export async function createPgvectorVectorStore(options: PgvectorVectorStoreOptions): Promise<VectorStore> {
  if (!options.host) throw new Error('createPgvectorVectorStore: host is required')
  if (!Number.isInteger(options.dimensions) || options.dimensions < 1) throw new Error(`createPgvectorVectorStore: dimensions must be a positive integer, got ${options.dimensions}`)
  const efSearch = options.efSearch ?? PGVECTOR_DEFAULT_EF_SEARCH
  const m = options.m ?? 16
  const efConstruction = options.efConstruction ?? 64
  const batchSize = options.batchSize ?? 256
  const where = `${options.host}:${options.port}/${options.database}`
  const { default: postgres } = await import('postgres')
  const client = postgres({
    host: options.host,
    port: options.port,
    database: options.database,
    username: options.user,
    password: options.password || undefined,
    max: options.poolSize ?? 5,
    connect_timeout: options.connectTimeoutSec ?? 30,
    idle_timeout: 60,
    onnotice: () => {},
    // Session settings of every connection: searches that keep the default candidate list need no SET.
    // JIT compilation would add tens of ms to a sparse aggregation or an exact scan the planner costs high.
    // enable_seqscan off: the planner does not count the out-of-line (TOAST) storage of vectors above ~500
    // dimensions, so a sequential scan of every vector looked cheaper than the HNSW index (pgvector's README,
    // "Troubleshooting"): at 10k points of 1024 dimensions it chose one, 108 ms a search instead of 8. Every query of
    // this pool has an index to take instead; a scan is still used where none applies.
    connection: {
      application_name: 'quarry-vectors',
      enable_seqscan: 'off',
      'hnsw.ef_search': String(efSearch),
      'hnsw.iterative_scan': 'relaxed_order',
      'hnsw.max_scan_tuples': String(options.maxScanTuples ?? 20_000),
      jit: 'off',
    },
    types: {
      // count(*) and the points counter: numbers, not strings.
      int8: { to: 20, from: [20], serialize: (v: unknown) => String(v), parse: (v: string) => Number(v) },
    },
  })
  let closed = false

  const fail = (err: unknown, what: string): Error => {
    if (err instanceof AppError) return err
    const code = sqlState(err)
    const message = err instanceof Error ? err.message : String(err)
    if (closed || (code !== undefined && CONNECTION_CODES.has(code))) return serviceUnavailable(`PostgreSQL vector store at ${where} is unavailable (${what}): ${message}`, err)
    return new AppError('VECTOR_STORE_ERROR', 500, `PostgreSQL vector store refused to ${what}: ${message}`, { cause: err })
  }

  /** Runs a statement; on a collection's tables (`onCollection`), a missing table means the collection went away. */
  const run = async <T>(what: string, fn: () => Promise<T>, onCollection = false): Promise<T> => {
    if (closed) throw serviceUnavailable('The PostgreSQL vector store is closed')
    try {
      return await fn()
    } catch (err) {
      if (onCollection && (sqlState(err) === UNDEFINED_TABLE || sqlState(err) === DEADLOCK)) throw new StaleCollection(what)
      throw fail(err, what)
    }
  }

  const q = <T = Record<string, unknown>>(text: string, params: readonly unknown[] = []) =>
    client.unsafe(text, params as never[]) as unknown as Promise<T[]>

  // ---- schema --------------------------------------------------------------------------------------------
  const open = async () => {
    try {
      await client.begin(async (tx) => {
        await tx.unsafe(`SELECT pg_advisory_xact_lock(${SCHEMA_LOCK})`)
        await tx.unsafe('CREATE EXTENSION IF NOT EXISTS vector')
        await tx.unsafe(`CREATE TABLE IF NOT EXISTS ${REGISTRY} (
          kb_id text PRIMARY KEY,
          id bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
          dims integer NOT NULL,
          points bigint NOT NULL DEFAULT 0,
          half_index boolean NOT NULL DEFAULT false,
          created_at timestamptz NOT NULL DEFAULT now())`)
        // Registries made before collections could have a halfvec index: theirs are on the f32 vectors.
        await tx.unsafe(`ALTER TABLE ${REGISTRY} ADD COLUMN IF NOT EXISTS half_index boolean NOT NULL DEFAULT false`)
      })
    } catch (err) {
      const code = sqlState(err)
      // 0A000 feature_not_supported / 58P01 undefined_file: not installed on the server; 42501: not allowed to create it.
      if (code === '0A000' || code === '58P01' || code === '42501') {
        throw new AppError('VECTOR_STORE_ERROR', 500,
          `vector_store pgvector needs the pgvector extension in database '${options.database}' at ${options.host}:${options.port}: ` +
          `${(err as Error).message}. Install pgvector 0.8 or later on the server (Debian bookworm has no package for PostgreSQL 15: ` +
          `shared/vendor/install-pgvector.sh builds it) and run CREATE EXTENSION vector as a superuser once.`, { cause: err })
      }
      throw err
    }
    const [v] = await q<{ v: string }>("SELECT extversion AS v FROM pg_extension WHERE extname = 'vector'")
    const [major, minor] = v.v.split('.').map(Number)
    if (major === 0 && minor < 8) {
      throw new AppError('VECTOR_STORE_ERROR', 500, `vector_store pgvector needs pgvector 0.8 or later (iterative index scans); database '${options.database}' has ${v.v}: ALTER EXTENSION vector UPDATE`)
    }
  }
  try {
    await run('open', open)
  } catch (err) {
    await client.end({ timeout: 1 }).catch(() => {})
    throw err
  }

  /** Collections known to exist (positive answers only: another process may create a KB at any time). */
  const known = new Map<string, Collection>()

  const lookup = async (kbId: string): Promise<Collection | null> => {
    const rows = await run(`read collection ${kbId}`, () => q<{ id: number; dims: number; half_index: boolean }>(`SELECT id, dims, half_index FROM ${REGISTRY} WHERE kb_id = $1`, [kbId]))
    if (rows.length === 0) {
      known.delete(kbId)
      return null
    }
    const c = collectionOf(Number(rows[0].id), rows[0].dims, rows[0].half_index)
    known.set(kbId, c)
    return c
  }

  const indexExpr = (c: Collection) => (c.half ? `(dense::halfvec(${c.dims}))` : 'dense')
  const queryExpr = (c: Collection, param: string) => (c.half ? `${param}::halfvec(${c.dims})` : `${param}::vector(${c.dims})`)

  const create = async (kbId: string, dims: number): Promise<Collection> => {
    if (dims > PGVECTOR_MAX_INDEX_DIMS) {
      throw new AppError('VECTOR_DIMENSION_MISMATCH', 500, `Vector collection '${kbId}': pgvector indexes at most ${PGVECTOR_MAX_INDEX_DIMS} dimensions (halfvec), ${dims} were asked; use vector_store embedded or qdrant for this model`)
    }
    return run(`create collection ${kbId}`, () =>
      client.begin(async (tx) => {
        await tx.unsafe(`SELECT pg_advisory_xact_lock(${SCHEMA_LOCK})`)
        const existing = await tx.unsafe(`SELECT id, dims, half_index FROM ${REGISTRY} WHERE kb_id = $1`, [kbId])
        if (existing.length > 0) return collectionOf(Number(existing[0].id), existing[0].dims as number, existing[0].half_index as boolean)
        const half = (options.halfIndex ?? true) || dims > PGVECTOR_MAX_VECTOR_DIMS
        const [row] = await tx.unsafe(`INSERT INTO ${REGISTRY} (kb_id, dims, half_index) VALUES ($1, $2, $3) RETURNING id`, [kbId, dims, half])
        const c = collectionOf(Number(row.id), dims, half)
        keyed.add(c.id)
        await tx.unsafe(`CREATE TABLE ${c.table} (
          pid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          chunk_id text NOT NULL UNIQUE,
          doc_id text NOT NULL,
          chunk_index integer NOT NULL,
          source_type text NOT NULL,
          doc_type text NOT NULL,
          source text NOT NULL,
          updated_ms bigint,
          terms integer[] NOT NULL,
          payload text NOT NULL,
          tie_key bigint,
          dense vector(${dims}) NOT NULL)`)
        const opclass = half ? 'halfvec_cosine_ops' : 'vector_cosine_ops'
        await tx.unsafe(`CREATE INDEX ${c.table}_hnsw ON ${c.table} USING hnsw (${indexExpr(c)} ${opclass}) WITH (m = ${m}, ef_construction = ${efConstruction})`)
        await tx.unsafe(`CREATE INDEX ${c.table}_doc ON ${c.table} (doc_id)`)
        await tx.unsafe(`CREATE INDEX ${c.table}_source_type ON ${c.table} (source_type)`)
        await tx.unsafe(`CREATE INDEX ${c.table}_doc_type ON ${c.table} (doc_type)`)
        await tx.unsafe(`CREATE INDEX ${c.table}_source ON ${c.table} (source text_pattern_ops)`)
        await tx.unsafe(`CREATE INDEX ${c.table}_updated ON ${c.table} (updated_ms)`)
        await tx.unsafe(`CREATE TABLE ${c.terms} (term integer NOT NULL, pid bigint NOT NULL, weight real NOT NULL, PRIMARY KEY (term, pid) INCLUDE (weight))`)
        return c
      }) as Promise<Collection>)
  }

  /** Collections whose points table this process has seen with tie_key (and whose unkeyed rows it has set keying). */
  const keyed = new Set<number>()
  /** Background fills of tie_key under way (tableTieKeys), awaited by close(). */
  const filling = new Set<Promise<void>>()

  /**
   * Keys a table's rows that have no tie_key yet (written before the column existed, or by a process of an older
   * release), a batch at a time. Rows a writer holds are skipped: its write sets their keys.
   */
  const fillTieKeys = async (c: Collection): Promise<void> => {
    while (!closed) {
      const n = await client.begin(async (tx) => {
        const rows = await tx.unsafe(`SELECT pid, payload FROM ${c.table} WHERE tie_key IS NULL LIMIT ${TIE_FILL_BATCH} FOR UPDATE SKIP LOCKED`)
        if (rows.length === 0) return 0
        const pids = rows.map((r) => String(r.pid))
        const keys = rows.map((r) => String(tieKeyOf(JSON.parse(r.payload as string) as ChunkPayload)))
        await tx.unsafe(`UPDATE ${c.table} p SET tie_key = u.k FROM unnest($1::int8[], $2::int8[]) AS u(pid, k) WHERE p.pid = u.pid`, [pids, keys])
        return rows.length
      }) as number
      if (n === 0) return
    }
  }

  /**
   * Once per process and collection: adds tie_key to a points table made before it (under the schema lock, as a
   * drop takes it), and starts keying the rows that lack one. A failed fill is tried again at the next use.
   */
  const tableTieKeys = async (c: Collection): Promise<void> => {
    if (keyed.has(c.id)) return
    await run(`add tie_key to ${c.table}`, () => client.begin(async (tx) => {
      await tx.unsafe(`SELECT pg_advisory_xact_lock(${SCHEMA_LOCK})`)
      const [found] = await tx.unsafe(`SELECT to_regclass($1) IS NOT NULL AS table,
          EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'tie_key' AND NOT attisdropped) AS column`, [c.table])
      // Dropped since it was read: the caller's statement finds it gone.
      if (found.table && !found.column) await tx.unsafe(`ALTER TABLE ${c.table} ADD COLUMN IF NOT EXISTS tie_key bigint`)
    }), true)
    keyed.add(c.id)
    const fill = fillTieKeys(c).catch(() => {
      keyed.delete(c.id)
    })
    filling.add(fill)
    void fill.finally(() => filling.delete(fill))
  }

  /**
   * The KB's collection: cached (unless `fresh`), read, or (with createDims) created; null when absent and not to be
   * created.
   */
  const resolve = async (kbId: string, createDims: number | null, fresh = false): Promise<Collection | null> => {
    checkKbId(kbId)
    const c = (fresh ? undefined : known.get(kbId)) ?? (await lookup(kbId))
    if (c !== null || createDims === null) return c
    const made = await create(kbId, createDims)
    known.set(kbId, made)
    return made
  }

  /**
   * Runs fn on the KB's collection; when its tables are gone (dropped by another process since it was cached) or fn
   * lost a deadlock to a drop, waits for any drop under way to commit, reads the registry again and runs fn once more
   * on what is there now (`absent` when nothing is).
   */
  const withCollection = async <T, A>(kbId: string, createDims: number | null, absent: A, fn: (c: Collection) => Promise<T>): Promise<T | A> => {
    for (let attempt = 0; ; attempt++) {
      // The retry reads the registry itself: a concurrent call's lookup that read it before the drop committed may have
      // put the dropped collection back in the cache after this call took it out (CI, 2026-12-03: "dropped twice").
      const c = await resolve(kbId, createDims, attempt > 0)
      if (c === null) return absent
      try {
        await tableTieKeys(c)
        return await fn(c)
      } catch (err) {
        if (!(err instanceof StaleCollection)) throw err
        known.delete(kbId)
        if (attempt > 0) throw new AppError('VECTOR_STORE_ERROR', 500, `Vector collection '${kbId}' was dropped (or its drop deadlocked with this) twice while being used (${err.message})`)
        // A drop that won a deadlock against fn has not committed yet: its KB is still in the registry (as read by
        // anyone else) and its tables are locked. Wait for it (it holds the schema lock) before reading the registry.
        await run(`wait for a drop of ${kbId}`, () => client.begin((tx) => tx.unsafe(`SELECT pg_advisory_xact_lock_shared(${SCHEMA_LOCK})`)))
      }
    }
  }

  // ---- writes ----------------------------------------------------------------------------------------------
  const upsertBatch = (c: Collection, points: readonly VectorPoint[]) => {
    const chunkIds: string[] = []
    const docIds: string[] = []
    const indexes: number[] = []
    const sourceTypes: string[] = []
    const docTypes: string[] = []
    const sources: string[] = []
    const updated: (string | null)[] = []
    const terms: string[] = []
    const payloads: string[] = []
    const tieKeys: string[] = []
    const dense: string[] = []
    const postChunk: number[] = []
    const postTerm: number[] = []
    const postWeight: number[] = []
    points.forEach((p, i) => {
      const pl = p.payload
      chunkIds.push(pl.chunk_id)
      docIds.push(pl.doc_id)
      indexes.push(Number.isInteger(pl.chunk_index) ? pl.chunk_index : 0)
      sourceTypes.push(String(pl.source_type ?? ''))
      docTypes.push(String(pl.doc_type ?? ''))
      sources.push(String(pl.source ?? ''))
      const ms = typeof pl.updated_at === 'string' ? Date.parse(pl.updated_at) : Number.NaN
      updated.push(Number.isFinite(ms) ? String(ms) : null)
      const ids = Array.from(p.sparse.indices, termKey)
      terms.push(`{${ids.join(',')}}`)
      payloads.push(JSON.stringify(pl))
      tieKeys.push(String(tieKeyOf(pl)))
      dense.push(vectorText(p.dense))
      for (let k = 0; k < ids.length; k++) {
        postChunk.push(i + 1)
        postTerm.push(ids[k])
        postWeight.push(p.sparse.values[k])
      }
    })
    const locks = chunkIds.map((id) => chunkLockKey(c.id, id)).sort()
    return client.begin((tx) => [
      // Writers of the same chunk take turns (sorted: no deadlock); the statements below then see the last writer's rows.
      tx.unsafe('SELECT count(pg_advisory_xact_lock(k)) FROM unnest($1::int8[]) AS k', [locks]),
      // The points being replaced, locked in chunk_id order (as deleteByDoc locks them), and their postings removed.
      tx.unsafe(`WITH old AS (SELECT p.pid, p.terms FROM ${c.table} p WHERE p.chunk_id = ANY($1::text[]) ORDER BY p.chunk_id FOR UPDATE)
        DELETE FROM ${c.terms} t USING (SELECT pid, unnest(terms) AS term FROM old) o WHERE t.term = o.term AND t.pid = o.pid`, [chunkIds]),
      tx.unsafe(`WITH u AS (
          SELECT * FROM unnest($1::text[], $2::text[], $3::int4[], $4::text[], $5::text[], $6::text[], $7::int8[], $8::text[], $9::text[], $15::int8[], $10::text[])
            WITH ORDINALITY AS u(chunk_id, doc_id, chunk_index, source_type, doc_type, source, updated_ms, terms, payload, tie_key, dense, n)),
        up AS (
          INSERT INTO ${c.table} AS p (chunk_id, doc_id, chunk_index, source_type, doc_type, source, updated_ms, terms, payload, tie_key, dense)
          SELECT chunk_id, doc_id, chunk_index, source_type, doc_type, source, updated_ms, terms::int4[], payload, tie_key, dense::vector(${c.dims}) FROM u ORDER BY chunk_id
          ON CONFLICT (chunk_id) DO UPDATE SET doc_id = EXCLUDED.doc_id, chunk_index = EXCLUDED.chunk_index, source_type = EXCLUDED.source_type,
            doc_type = EXCLUDED.doc_type, source = EXCLUDED.source, updated_ms = EXCLUDED.updated_ms, terms = EXCLUDED.terms,
            payload = EXCLUDED.payload, tie_key = EXCLUDED.tie_key, dense = EXCLUDED.dense
          RETURNING p.pid, p.chunk_id, (p.xmax = 0) AS inserted),
        post AS (
          INSERT INTO ${c.terms} (term, pid, weight)
          SELECT s.term, up.pid, s.weight FROM unnest($11::int4[], $12::int4[], $13::float4[]) AS s(n, term, weight)
            JOIN u ON u.n = s.n JOIN up ON up.chunk_id = u.chunk_id),
        counted AS (
          UPDATE ${REGISTRY} SET points = points + (SELECT count(*) FROM up WHERE inserted) WHERE id = $14)
        SELECT count(*) AS n FROM up`,
      [chunkIds, docIds, indexes, sourceTypes, docTypes, sources, updated, terms, payloads, dense, postChunk, postTerm, postWeight, c.id, tieKeys]),
    ])
  }

  // ---- reads -----------------------------------------------------------------------------------------------
  type Row = { score: number; chunk_id: string; payload: string }
  const toHits = (rows: readonly Row[]) => rows.map((r) => hitOf(Number(r.score), r.chunk_id, r.payload))

  const denseSearch = async (c: Collection, vector: Float32Array, limit: number, effort: number | undefined, filter: VectorFilter | undefined, rankOnly: boolean): Promise<VectorHit[]> => {
    // The index orders the scan by halfvec distance (and only roughly under an iterative scan): two rows a hair apart
    // at the border can come out of it in the wrong order, so a search with exact scores takes more candidates than
    // `limit` (rescoredRows, as the embedded store rescores its quantized graph's) and cuts the list by the exact f32
    // distance. A rankOnly search (hybrid fusion reads ranks only) takes `limit`, as the embedded store does. Either
    // takes the rows that tie with its last candidate too (WITH TIES), so that equal distances at the cut are ranked
    // among themselves by tie_key.
    const fetch = rankOnly ? limit : rescoredRows(limit, effort)
    const params: unknown[] = [vectorText(vector), limit, fetch]
    const cond = filter === undefined ? 'TRUE' : filterSql(filter, params)
    const dist = `${indexExpr(c)} <=> ${queryExpr(c, '$1')}`
    const text = `WITH h AS MATERIALIZED (
        SELECT p.chunk_id, p.payload, p.tie_key, p.dense <=> $1::vector(${c.dims}) AS d FROM ${c.table} p WHERE ${cond} ORDER BY ${dist} FETCH FIRST $3 ROWS WITH TIES)
      SELECT 1 - d AS score, chunk_id, payload FROM h ORDER BY d + 0, tie_key, chunk_id LIMIT $2`
    const ef = effort !== undefined && effort > 0 && effort < 1 ? Math.min(1000, Math.max(fetch, Math.ceil(efSearch * effort))) : efSearch
    let rows: Row[]
    if (ef === efSearch) {
      rows = await run(`search ${c.table}`, () => q<Row>(text, params), true)
    } else {
      // The session keeps the default list; this query's own lasts for its transaction.
      const results = await run(`search ${c.table}`, () => client.begin((tx) => [
        tx.unsafe(`SELECT set_config('hnsw.ef_search', $1, true)`, [String(ef)]),
        tx.unsafe(text, params as never[]),
      ]), true)
      rows = results[1] as unknown as Row[]
    }
    if (rows.length < limit && filter !== undefined) {
      // The iterative scan stopped at hnsw.max_scan_tuples before `limit` rows passed the filter (or fewer pass at
      // all): rank the rows the filter keeps exactly. `+ 0` keeps the planner off the HNSW index.
      const exact: unknown[] = [params[0], limit]
      const kept = filterSql(filter, exact)
      rows = await run(`search ${c.table}`, () => q<Row>(
        `SELECT 1 - (p.dense <=> $1::vector(${c.dims})) AS score, p.chunk_id, p.payload FROM ${c.table} p WHERE ${kept}
         ORDER BY (p.dense <=> $1::vector(${c.dims})) + 0, p.tie_key, p.chunk_id LIMIT $2`, exact), true)
    }
    return toHits(rows)
  }

  const sparseSearch = async (c: Collection, query: { indices: Uint32Array; values: Float32Array }, limit: number, filter: VectorFilter | undefined): Promise<VectorHit[]> => {
    const params: unknown[] = [Array.from(query.indices, termKey), Array.from(query.values), c.id, limit]
    // Each query term weighted by its IDF over the whole collection; terms no point holds drop out.
    const weighted = `q AS (SELECT term, w FROM unnest($1::int4[], $2::float8[]) AS q(term, w)),
      qi AS (
        SELECT q.term, q.w * ln((r.points - d.n + 0.5) / (d.n + 0.5) + 1) AS qw
        FROM q CROSS JOIN (SELECT points::float8 AS points FROM ${REGISTRY} WHERE id = $3) r
          CROSS JOIN LATERAL (SELECT count(*)::float8 AS n FROM ${c.terms} t WHERE t.term = q.term) d
        WHERE d.n > 0)`
    // Equal scores by tie_key: unfiltered, the best `limit` are taken with the points that tie with the last (WITH TIES),
    // so that equal scores at the cut are ranked among themselves.
    const text = filter === undefined
      ? `WITH ${weighted},
          s AS (SELECT t.pid, sum(qi.qw * t.weight) AS score FROM qi JOIN ${c.terms} t ON t.term = qi.term GROUP BY t.pid ORDER BY score DESC FETCH FIRST $4 ROWS WITH TIES)
        SELECT s.score, p.chunk_id, p.payload FROM s JOIN ${c.table} p ON p.pid = s.pid ORDER BY s.score DESC, p.tie_key, p.chunk_id LIMIT $4`
      : `WITH ${weighted},
          s AS (SELECT t.pid, sum(qi.qw * t.weight) AS score FROM qi JOIN ${c.terms} t ON t.term = qi.term GROUP BY t.pid)
        SELECT s.score, p.chunk_id, p.payload FROM s JOIN ${c.table} p ON p.pid = s.pid WHERE ${filterSql(filter, params)} ORDER BY s.score DESC, p.tie_key, p.chunk_id LIMIT $4`
    return toHits(await run(`search ${c.terms}`, () => q<Row>(text, params), true))
  }

  return {
    name: 'pgvector',

    async ensureCollection(kbId, dims) {
      if (!Number.isInteger(dims) || dims < 1) throw new AppError('VECTOR_DIMENSION_MISMATCH', 500, `Invalid vector size ${String(dims)} for collection '${kbId}'`)
      const c = await resolve(kbId, dims)
      if (c!.dims !== dims) throw dimensionMismatch(kbId, c!.dims, dims)
    },

    async dropCollection(kbId) {
      checkKbId(kbId)
      known.delete(kbId)
      for (let attempt = 1; ; attempt++) {
        try {
          return await run(`drop collection ${kbId}`, () =>
            client.begin(async (tx) => {
              await tx.unsafe(`SELECT pg_advisory_xact_lock(${SCHEMA_LOCK})`)
              const rows = await tx.unsafe(`DELETE FROM ${REGISTRY} WHERE kb_id = $1 RETURNING id`, [kbId])
              if (rows.length === 0) return false
              const c = collectionOf(Number(rows[0].id), 0, false)
              await tx.unsafe(`DROP TABLE IF EXISTS ${c.table}, ${c.terms}`)
              return true
            }) as Promise<boolean>)
        } catch (err) {
          // The transaction was rolled back whole: the collection is still there, and the drop starts again.
          if (attempt === DROP_ATTEMPTS || sqlState((err as Error).cause) !== DEADLOCK) throw err
        }
      }
    },

    async hasCollection(kbId) {
      checkKbId(kbId)
      return (await lookup(kbId)) !== null
    },

    async upsert(kbId, points) {
      if (points.length === 0) return
      const seen = new Set<number>()
      for (const p of points) {
        const problem = pointProblem(p, seen)
        if (problem !== null) throw invalidPoint(kbId, problem)
      }
      // The last of several points with one chunk_id wins, as in the other drivers (one statement may not touch a row twice).
      const last = new Map<string, VectorPoint>()
      for (const p of points) {
        last.delete(p.payload.chunk_id)
        last.set(p.payload.chunk_id, p)
      }
      const unique = [...last.values()]
      await withCollection(kbId, options.dimensions, undefined, async (c) => {
        for (const p of unique) if (p.dense.length !== c.dims) throw dimensionMismatch(kbId, c.dims, p.dense.length)
        for (let i = 0; i < unique.length; i += batchSize) await run(`upsert into ${c.table}`, () => upsertBatch(c, unique.slice(i, i + batchSize)), true)
      })
    },

    async deleteByDoc(kbId, docId) {
      return withCollection(kbId, null, 0, async (c) => {
        // Two statements: the rows are locked first (in chunk_id order, waiting for a writer of them to commit), and the
        // delete then runs on a snapshot taken after that wait, so it sees, and removes, the postings that writer left.
        const results = await run(`delete from ${c.table}`, () => client.begin((tx) => [
          tx.unsafe(`SELECT count(*) FROM (SELECT pid FROM ${c.table} WHERE doc_id = $1 ORDER BY chunk_id FOR UPDATE) AS locked`, [docId]),
          tx.unsafe(`WITH gone AS (DELETE FROM ${c.table} WHERE doc_id = $1 RETURNING pid, terms),
              post AS (DELETE FROM ${c.terms} t USING (SELECT pid, unnest(terms) AS term FROM gone) o WHERE t.term = o.term AND t.pid = o.pid),
              counted AS (UPDATE ${REGISTRY} SET points = points - (SELECT count(*) FROM gone) WHERE id = $2)
            SELECT count(*) AS n FROM gone`, [docId, c.id]),
        ]), true)
        const row = (results[1] as unknown as { n: number }[])[0]
        return Number(row.n)
      })
    },

    async search(kbId, query: VectorQuery) {
      const limit = Math.floor(query.limit)
      const empty = { dense: [] as VectorHit[], sparse: [] as VectorHit[] }
      if (!(limit > 0)) return empty
      if (query.filter !== undefined && checkFilter(kbId, query.filter)) return empty
      return withCollection(kbId, null, empty, async (c) => {
        if (query.dense !== undefined && query.dense.length !== c.dims) throw dimensionMismatch(kbId, c.dims, query.dense.length)
        const wantSparse = query.sparse !== undefined && query.sparse.indices.length > 0
        const [dense, sparse] = await Promise.all([
          query.dense === undefined ? [] : denseSearch(c, query.dense, limit, query.effort, query.filter, query.rankOnly === true),
          wantSparse ? sparseSearch(c, query.sparse!, limit, query.filter) : [],
        ])
        return { dense, sparse }
      })
    },

    async docVectors(kbId, docId) {
      return withCollection(kbId, null, [] as Float32Array[], async (c) => {
        const rows = await run(`read ${c.table}`, () => q<{ v: string }>(`SELECT dense::text AS v FROM ${c.table} WHERE doc_id = $1 ORDER BY chunk_index, chunk_id`, [docId]), true)
        return rows.map((r) => parseVector(r.v))
      })
    },

    async docPoints(kbId, docId) {
      return withCollection(kbId, null, [] as VectorPoint[], async (c) => {
        // The terms in the row's order with their weights from the postings (the row keeps the ids only).
        const rows = await run(`read ${c.table}`, () => q<{ payload: string; v: string; terms: number[]; weights: number[] }>(
          `SELECT p.payload, p.dense::text AS v, p.terms,
             ARRAY(SELECT t.weight FROM unnest(p.terms) WITH ORDINALITY AS o(term, n) JOIN ${c.terms} t ON t.term = o.term AND t.pid = p.pid ORDER BY o.n) AS weights
           FROM ${c.table} p WHERE p.doc_id = $1 ORDER BY p.chunk_index, p.chunk_id`, [docId]), true)
        return rows.map((r) => ({
          dense: parseVector(r.v),
          // int4 back to the u32 term id it holds the bits of (termKey).
          sparse: { indices: Uint32Array.from(r.terms, (t) => t >>> 0), values: Float32Array.from(r.weights, Number) },
          payload: JSON.parse(r.payload) as ChunkPayload,
        }))
      })
    },

    async docChunkCounts(kbId) {
      return withCollection(kbId, null, new Map<string, number>(), async (c) => {
        const rows = await run(`count ${c.table}`, () => q<{ doc_id: string; n: number }>(`SELECT doc_id, count(*) AS n FROM ${c.table} GROUP BY doc_id`), true)
        return new Map(rows.map((r) => [r.doc_id, Number(r.n)]))
      })
    },

    async count(kbId) {
      checkKbId(kbId)
      const rows = await run(`count ${kbId}`, () => q<{ points: number }>(`SELECT points FROM ${REGISTRY} WHERE kb_id = $1`, [kbId]))
      return rows.length === 0 ? 0 : Number(rows[0].points)
    },

    async ping() {
      if (closed) return false
      try {
        await client.unsafe('SELECT 1')
        return true
      } catch {
        return false
      }
    },

    async close() {
      if (closed) return
      closed = true
      known.clear()
      // A fill stops after its batch under way (it checks `closed`).
      await Promise.allSettled([...filling])
      await client.end({ timeout: 5 })
    },
  }
}
