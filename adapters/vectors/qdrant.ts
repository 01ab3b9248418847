// The Qdrant driver (REST, @qdrant/js-client-rest). One collection per KB, named <prefix><kb_id>, with a
// named dense vector `dense` (cosine, embedding.vector_size) and a named sparse vector `sparse` whose
// query weights Qdrant multiplies by the collection's IDF (`modifier: idf`), plus payload indexes on the
// fields deletes, docVectors and search filters read (PAYLOAD_INDEXES). Point ids are UUIDs derived from
// chunk_id (Qdrant accepts only unsigned integers and UUIDs); the payload keeps chunk_id and the rest of
// ChunkPayload.
//
// search sends one request, POST /collections/{name}/points/query/batch, with a dense and a sparse query:
// the port hands both ranked lists to the caller, which fuses them itself (RRF per KB and across KBs), so
// a server-side fusion query (prefetch + fusion) would lose what the caller needs.
import { createHash } from 'node:crypto'
import { AppError, serviceUnavailable } from '../../kernel/errors.ts'
import type { ChunkPayload, VectorFilter, VectorHit, VectorPoint, VectorQuery, VectorStore } from '../ports.ts'
import { checkKbId, dimensionMismatch, invalidPoint, pointProblem } from './errors.ts'
import { checkFilter } from './filter.ts'

export interface QdrantVectorStoreOptions {
  host: string
  port: number
  /** true = HTTP, false = HTTPS. */
  insecure: boolean
  apiKey?: string
  /** Vector size of collections created implicitly (an upsert into a KB without ensureCollection). */
  dimensions: number
  /** Local timeout of reads (search, count, scroll), ms. Default 10 s. */
  timeoutMs?: number
  /** Local timeout of writes (collection changes, upsert and delete with wait=true), ms. Default 60 s. */
  writeTimeoutMs?: number
  /** Prepended to kb_id to name the collection (several deployments sharing one Qdrant). Default ''. */
  collectionPrefix?: string
  /**
   * The dense candidate list (hnsw_ef) a search with effort 1 gets: Qdrant's own default, the collection's
   * ef_construct, 100 unless configured otherwise. A search with effort < 1 sends hnsw_ef = this x effort (at
   * least the limit).
   */
  searchEf?: number
  /** Points per upsert request. Default 256. */
  batchSize?: number
}

type QdrantClient = import('@qdrant/js-client-rest').QdrantClient

export const DENSE = 'dense'
export const SPARSE = 'sparse'

/** A UUID (version 5 layout) from the chunk id: the same chunk always maps to the same point. */
export function pointId(chunkId: string): string {
  const h = createHash('sha1').update('quarry-chunk:').update(chunkId).digest()
  h[6] = (h[6] & 0x0f) | 0x50
  h[8] = (h[8] & 0x3f) | 0x80
  const x = h.subarray(0, 16).toString('hex')
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`
}

const docFilter = (docId: string) => ({ must: [{ key: 'doc_id', match: { value: docId } }] })

/**
 * Payload indexes every collection gets (missing ones are added to collections made before them): doc_id for
 * deletes and docVectors, the rest for search filters. Qdrant plans a filtered search with them (cardinality
 * estimate, then payload-aware HNSW links or an exact scan of a small filtered set), so a filter is applied
 * inside the search, not to its top `limit`. updated_at is an RFC 3339 string: a datetime index compares it
 * as a time.
 */
export const PAYLOAD_INDEXES = [
  { field_name: 'doc_id', field_schema: 'keyword' },
  { field_name: 'source_type', field_schema: 'keyword' },
  { field_name: 'doc_type', field_schema: 'keyword' },
  // `prefix: true` serves `match: {prefix}` (Qdrant 1.19; an older server refuses the index, and the error names it).
  { field_name: 'source', field_schema: { type: 'keyword', prefix: true } },
  { field_name: 'updated_at', field_schema: 'datetime' },
] as const

type IndexInfo = { data_type?: string; params?: { prefix?: boolean | null } | null }

/** Whether an existing payload index serves what `schema` asks for (a keyword index made without `prefix` does not serve prefix matches). */
function indexMatches(info: IndexInfo | undefined, schema: (typeof PAYLOAD_INDEXES)[number]['field_schema']): boolean {
  if (info === undefined) return false
  if (typeof schema === 'string') return info.data_type === schema
  return info.data_type === schema.type && info.params?.prefix === schema.prefix
}

/**
 * VectorQuery.filter as a Qdrant Filter: every condition under `must`; lists as `match.any`, the source prefix as
 * `match.prefix`, times as a datetime `range`.
 */
export function qdrantFilter(f: VectorFilter): { must: Record<string, unknown>[] } {
  const must: Record<string, unknown>[] = []
  if (f.docIds !== undefined) must.push({ key: 'doc_id', match: { any: [...f.docIds] } })
  if (f.sourceTypes !== undefined) must.push({ key: 'source_type', match: { any: [...f.sourceTypes] } })
  if (f.docTypes !== undefined) must.push({ key: 'doc_type', match: { any: [...f.docTypes] } })
  if (f.sourcePrefix !== undefined) must.push({ key: 'source', match: { prefix: f.sourcePrefix } })
  if (f.updatedAfter !== undefined || f.updatedBefore !== undefined) {
    const range: Record<string, string> = {}
    if (f.updatedAfter !== undefined) range.gte = new Date(f.updatedAfter).toISOString()
    if (f.updatedBefore !== undefined) range.lt = new Date(f.updatedBefore).toISOString()
    must.push({ key: 'updated_at', range })
  }
  return { must }
}

function statusOf(err: unknown): number | undefined {
  const s = (err as { status?: unknown } | null)?.status
  return typeof s === 'number' ? s : undefined
}

/** Qdrant's error text: ErrorResponse is {status: {error}, time}. */
function detailOf(err: unknown): string {
  const data = (err as { data?: { status?: { error?: string } } } | null)?.data
  return data?.status?.error ?? (err instanceof Error ? err.message : String(err))
}

export async function createQdrantVectorStore(options: QdrantVectorStoreOptions): Promise<VectorStore> {
  if (!options.host) throw new Error('createQdrantVectorStore: host is required')
  if (!Number.isInteger(options.dimensions) || options.dimensions < 1) throw new Error(`createQdrantVectorStore: dimensions must be a positive integer, got ${options.dimensions}`)
  const prefix = options.collectionPrefix ?? ''
  const searchEf = options.searchEf ?? 100
  const batchSize = options.batchSize ?? 256
  const { QdrantClient } = await import('@qdrant/js-client-rest')
  const make = (timeout: number): QdrantClient =>
    new QdrantClient({
      host: options.host,
      port: options.port,
      https: !options.insecure,
      apiKey: options.apiKey,
      timeout,
      // The check costs a request at construction and only logs; readiness calls ping() instead.
      checkCompatibility: false,
    })
  const reader = make(options.timeoutMs ?? 10_000)
  const writer = make(options.writeTimeoutMs ?? 60_000)
  const where = `${options.insecure ? 'http' : 'https'}://${options.host}:${options.port}`
  /** Collections known to exist with their vector size (skips a round trip per upsert). */
  const known = new Map<string, number>()
  let closed = false

  const nameOf = (kbId: string) => {
    checkKbId(kbId)
    return `${prefix}${kbId}`
  }

  /** Connection failures, timeouts, 5xx and 429 are the store being unavailable (503); other refusals are bugs (500). */
  const fail = (err: unknown, what: string): AppError => {
    if (err instanceof AppError) return err
    const status = statusOf(err)
    if (status !== undefined && status < 500 && status !== 429) {
      return new AppError('VECTOR_STORE_ERROR', 500, `Qdrant refused to ${what}: HTTP ${status}: ${detailOf(err)}`, { cause: err })
    }
    const name = (err as { name?: string } | null)?.name
    const reason = status !== undefined ? `HTTP ${status}: ${detailOf(err)}` : name === 'QdrantClientTimeoutError' ? 'timed out' : detailOf(err)
    return serviceUnavailable(`Qdrant at ${where} is unavailable (${what}): ${reason}`, err)
  }

  /** Runs a request; a 404 (collection absent) answers `absent` instead of an error. */
  const call = async <T, A>(what: string, fn: () => Promise<T>, absent: A): Promise<T | A> => {
    if (closed) throw serviceUnavailable('The Qdrant vector store is closed')
    try {
      return await fn()
    } catch (err) {
      if (statusOf(err) === 404) return absent
      throw fail(err, what)
    }
  }

  const ABSENT = Symbol('absent')

  /** The dense size of an existing collection, or null when it has none; throws when it was not made by us. */
  const describe = async (kbId: string, name: string): Promise<{ size: number; indexed: Record<string, IndexInfo> } | null> => {
    const info = await call(`read collection ${name}`, () => reader.getCollection(name), ABSENT)
    if (info === ABSENT) return null
    const vectors = info.config.params.vectors as Record<string, { size?: number } | undefined> | undefined
    const size = vectors?.[DENSE]?.size
    const sparse = (info.config.params.sparse_vectors as Record<string, unknown> | null | undefined)?.[SPARSE]
    if (typeof size !== 'number' || sparse === undefined) {
      throw new AppError('VECTOR_COLLECTION_INCOMPATIBLE', 500, `Qdrant collection '${name}' exists without the named vectors '${DENSE}' and '${SPARSE}'; delete it and re-index KB '${kbId}'`)
    }
    return { size, indexed: (info.payload_schema as Record<string, IndexInfo> | undefined) ?? {} }
  }

  /** Creates the collection unless it exists; `described` skips the read when the caller just made it. */
  const ensure = async (kbId: string, dims: number, described?: Awaited<ReturnType<typeof describe>>): Promise<void> => {
    const name = nameOf(kbId)
    const cached = known.get(name)
    if (cached !== undefined) {
      if (cached !== dims) throw dimensionMismatch(kbId, cached, dims)
      return
    }
    let current = described === undefined ? await describe(kbId, name) : described
    if (current === null) {
      try {
        await writer.createCollection(name, {
          vectors: { [DENSE]: { size: dims, distance: 'Cosine' } },
          sparse_vectors: { [SPARSE]: { modifier: 'idf' } },
        })
      } catch (err) {
        // Another process may have created it between our read and our create: then use theirs.
        const raced = statusOf(err) === 409 || statusOf(err) === 400 ? await describe(kbId, name) : null
        if (raced === null) throw fail(err, `create collection ${name}`)
      }
      current = await describe(kbId, name)
      if (current === null) throw serviceUnavailable(`Qdrant collection '${name}' vanished right after its creation`)
    }
    if (current.size !== dims) throw dimensionMismatch(kbId, current.size, dims)
    for (const index of PAYLOAD_INDEXES) {
      if (indexMatches(current.indexed[index.field_name], index.field_schema)) continue
      await call(`index ${index.field_name} of ${name}`, () => writer.createPayloadIndex(name, { ...index, wait: true }), null)
    }
    known.set(name, dims)
  }

  const toPoint = (p: VectorPoint) => ({
    id: pointId(p.payload.chunk_id),
    vector:
      p.sparse.indices.length > 0
        ? { [DENSE]: Array.from(p.dense), [SPARSE]: { indices: Array.from(p.sparse.indices), values: Array.from(p.sparse.values) } }
        : // A chunk without terms gets no sparse vector at all, which Qdrant accepts for a named vector.
          { [DENSE]: Array.from(p.dense) },
    payload: p.payload as unknown as Record<string, unknown>,
  })

  const toHit = (p: { score: number; payload?: Record<string, unknown> | null }): VectorHit => {
    const payload = (p.payload ?? {}) as unknown as ChunkPayload
    return { score: p.score, id: payload.chunk_id, payload }
  }

  return {
    name: 'qdrant',

    async ensureCollection(kbId, dims) {
      if (!Number.isInteger(dims) || dims < 1) throw new AppError('VECTOR_DIMENSION_MISMATCH', 500, `Invalid vector size ${String(dims)} for collection '${kbId}'`)
      await ensure(kbId, dims)
    },

    async dropCollection(kbId) {
      const name = nameOf(kbId)
      known.delete(name)
      const exists = await call(`check collection ${name}`, () => reader.collectionExists(name), { exists: false })
      if (!exists.exists) return false
      await call(`delete collection ${name}`, () => writer.deleteCollection(name), false)
      known.delete(name)
      return true
    },

    async hasCollection(kbId) {
      const name = nameOf(kbId)
      const r = await call(`check collection ${name}`, () => reader.collectionExists(name), { exists: false })
      return r.exists
    },

    async upsert(kbId, points) {
      if (points.length === 0) return
      const name = nameOf(kbId)
      const seen = new Set<number>()
      for (const p of points) {
        const problem = pointProblem(p, seen)
        if (problem !== null) throw invalidPoint(kbId, problem)
      }
      if (!known.has(name)) {
        // An existing collection keeps its own size (as in the embedded store); a new one gets the default.
        const current = await describe(kbId, name)
        await ensure(kbId, current?.size ?? options.dimensions, current)
      }
      const dims = known.get(name)!
      for (const p of points) if (p.dense.length !== dims) throw dimensionMismatch(kbId, dims, p.dense.length)
      for (let i = 0; i < points.length; i += batchSize) {
        const batch = points.slice(i, i + batchSize).map(toPoint)
        const r = await call(`upsert into ${name}`, () => writer.upsert(name, { wait: true, points: batch }), ABSENT)
        if (r === ABSENT) {
          // Dropped behind our back (another process): forget it so the next write creates it again.
          known.delete(name)
          throw new AppError('VECTOR_STORE_ERROR', 500, `Qdrant collection '${name}' does not exist`)
        }
      }
    },

    async deleteByDoc(kbId, docId) {
      const name = nameOf(kbId)
      const filter = docFilter(docId)
      const counted = await call(`count points of ${name}`, () => reader.count(name, { filter, exact: true }), { count: 0 })
      if (counted.count === 0) return 0
      await call(`delete points of ${name}`, () => writer.delete(name, { wait: true, filter }), null)
      return counted.count
    },

    async search(kbId, query: VectorQuery) {
      const name = nameOf(kbId)
      const limit = Math.floor(query.limit)
      const searches: { query: unknown; using: string; limit: number; filter?: unknown; with_payload: true; params?: { hnsw_ef: number } }[] = []
      const kinds: ('dense' | 'sparse')[] = []
      if (!(limit > 0)) return { dense: [], sparse: [] }
      // Checked before anything is sent; a filter that can match nothing costs no request.
      if (query.filter !== undefined && checkFilter(kbId, query.filter)) return { dense: [], sparse: [] }
      const filter = query.filter === undefined ? undefined : qdrantFilter(query.filter)
      if (query.dense !== undefined) {
        const dims = known.get(name)
        if (dims !== undefined && query.dense.length !== dims) throw dimensionMismatch(kbId, dims, query.dense.length)
        const effort = query.effort
        const search: (typeof searches)[number] = { query: Array.from(query.dense), using: DENSE, limit, ...(filter && { filter }), with_payload: true }
        if (effort !== undefined && effort > 0 && effort < 1) search.params = { hnsw_ef: Math.max(limit, Math.ceil(searchEf * effort)) }
        searches.push(search)
        kinds.push('dense')
      }
      if (query.sparse !== undefined && query.sparse.indices.length > 0) {
        searches.push({ query: { indices: Array.from(query.sparse.indices), values: Array.from(query.sparse.values) }, using: SPARSE, limit, ...(filter && { filter }), with_payload: true })
        kinds.push('sparse')
      }
      const out = { dense: [] as VectorHit[], sparse: [] as VectorHit[] }
      if (searches.length === 0) return out
      const results = await call(`search ${name}`, () => reader.queryBatch(name, { searches: searches as never }), [])
      results.forEach((r, i) => {
        out[kinds[i]] = r.points.map(toHit)
      })
      return out
    },

    async docVectors(kbId, docId) {
      const name = nameOf(kbId)
      const rows: { index: number; vector: Float32Array }[] = []
      let offset: string | number | null | undefined
      do {
        const page = await call(
          `scroll ${name}`,
          () => reader.scroll(name, { filter: docFilter(docId), limit: 256, offset: offset ?? undefined, with_payload: ['chunk_index'], with_vector: [DENSE] }),
          { points: [], next_page_offset: null },
        )
        for (const p of page.points) {
          const v = (p.vector as Record<string, unknown> | null | undefined)?.[DENSE]
          if (!Array.isArray(v)) continue
          rows.push({ index: Number((p.payload as { chunk_index?: number } | null | undefined)?.chunk_index ?? 0), vector: Float32Array.from(v as number[]) })
        }
        offset = page.next_page_offset as string | number | null | undefined
      } while (offset !== null && offset !== undefined)
      return rows.sort((a, b) => a.index - b.index).map((r) => r.vector)
    },

    async docPoints(kbId, docId) {
      const name = nameOf(kbId)
      const out: VectorPoint[] = []
      let offset: string | number | null | undefined
      do {
        const page = await call(
          `scroll ${name}`,
          () => reader.scroll(name, { filter: docFilter(docId), limit: 256, offset: offset ?? undefined, with_payload: true, with_vector: [DENSE, SPARSE] }),
          { points: [], next_page_offset: null },
        )
        for (const p of page.points) {
          const named = (p.vector ?? {}) as Record<string, unknown>
          const dense = named[DENSE]
          if (!Array.isArray(dense)) continue
          // A chunk without terms was stored without a sparse vector (toPoint).
          const sp = named[SPARSE] as { indices?: number[]; values?: number[] } | undefined
          out.push({
            dense: Float32Array.from(dense as number[]),
            sparse: { indices: Uint32Array.from(sp?.indices ?? []), values: Float32Array.from(sp?.values ?? []) },
            payload: (p.payload ?? {}) as unknown as ChunkPayload,
          })
        }
        offset = page.next_page_offset as string | number | null | undefined
      } while (offset !== null && offset !== undefined)
      return out.sort((a, b) => a.payload.chunk_index - b.payload.chunk_index)
    },

    async docChunkCounts(kbId) {
      // A scroll over the whole collection, doc_id only (no vectors): every Qdrant version answers it, where the
      // facet API (1.12+) would need the server to count exactly past its limit.
      const name = nameOf(kbId)
      const counts = new Map<string, number>()
      let offset: string | number | null | undefined
      do {
        const page = await call(
          `scroll ${name}`,
          () => reader.scroll(name, { limit: 1000, offset: offset ?? undefined, with_payload: ['doc_id'], with_vector: false }),
          { points: [], next_page_offset: null },
        )
        for (const p of page.points) {
          const docId = (p.payload as { doc_id?: unknown } | null | undefined)?.doc_id
          if (typeof docId === 'string') counts.set(docId, (counts.get(docId) ?? 0) + 1)
        }
        offset = page.next_page_offset as string | number | null | undefined
      } while (offset !== null && offset !== undefined)
      return counts
    },

    async count(kbId) {
      const name = nameOf(kbId)
      const r = await call(`count points of ${name}`, () => reader.count(name, { exact: true }), { count: 0 })
      return r.count
    },

    async ping() {
      if (closed) return false
      try {
        await reader.versionInfo()
        return true
      } catch {
        return false
      }
    },

    async close() {
      closed = true
      known.clear()
    },
  }
}
