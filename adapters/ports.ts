// The storage ports. Plugins depend on these interfaces only; drivers are chosen in adapters/index.ts.
import type { Readable } from 'node:stream'

/** Metadata: one PostgreSQL dialect, spoken by PGlite (embedded) and PostgreSQL (services). */
export interface SqlRunner {
  /** Positional parameters ($1, $2, ...). Rows come back as plain objects. */
  query<T = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<T[]>
}

export interface Sql extends SqlRunner {
  readonly name: 'pglite' | 'postgres'
  /** Runs fn in one transaction; a throw rolls it back and rethrows. */
  transaction<R>(fn: (tx: SqlRunner) => Promise<R>): Promise<R>
  ping(): Promise<boolean>
  close(): Promise<void>
}

export interface ObjectInfo {
  size: number
  etag: string
  contentType?: string
}

/** Objects: original files. Keys are `/`-separated; `kb_id/` is the prefix of one KB. */
export interface ObjectStore {
  readonly name: 'local' | 's3'
  put(key: string, body: Uint8Array | Readable, opts?: { size?: number; contentType?: string }): Promise<ObjectInfo>
  /** Throws AppError OBJECT_NOT_FOUND (404) when the key is absent. */
  get(key: string): Promise<Readable>
  head(key: string): Promise<ObjectInfo | null>
  /** Returns how many of the keys existed and were removed. */
  delete(keys: readonly string[]): Promise<number>
  /** Removes every object under the prefix; returns how many. */
  deletePrefix(prefix: string): Promise<number>
  list(prefix: string): AsyncIterable<string>
  ping(): Promise<boolean>
  close(): Promise<void>
}

export interface QueueMessage<T = unknown> {
  id: string
  /** What the message is about (a doc_id); removeByKey drops every waiting message with this key. */
  key: string
  payload: T
  /** How many times this message has been handed out before (0 on first delivery). */
  attempts: number
}

export interface QueueDepth {
  ready: number
  delayed: number
  inflight: number
}

/**
 * Queue: at-least-once delivery with a delay queue. A reserved message that is neither acked nor deferred
 * before its lease ends is delivered again, so a crashed consumer loses nothing; so is everything queued
 * before a restart of the service.
 */
export interface Queue {
  readonly name: 'embedded' | 'redis'
  enqueue<T>(topic: string, key: string, payload: T, opts?: { delayMs?: number }): Promise<string>
  /** Hands out up to max ready messages (due delayed ones included), leased for leaseMs. */
  reserve<T = unknown>(topic: string, max: number, leaseMs: number): Promise<QueueMessage<T>[]>
  ack(topic: string, id: string): Promise<void>
  /** Puts a reserved message back on the delay queue, due after delayMs. */
  defer(topic: string, id: string, delayMs: number): Promise<void>
  /** Removes ready and delayed messages with this key; returns how many. */
  removeByKey(topic: string, key: string): Promise<number>
  /**
   * Which of `keys` some message of the topic carries, ready, delayed or in flight (one pass over the topic). A
   * caller that wrote a row and then crashed before its enqueue finds the key missing here.
   */
  present(topic: string, keys: readonly string[]): Promise<Set<string>>
  depth(topic: string): Promise<QueueDepth>
  /** Calls listener soon after a message is enqueued on topic (a hint; consumers still poll). */
  subscribe(topic: string, listener: () => void): () => void
  /**
   * Calls listener when the queue may have lost messages: its server came back as another instance (a Redis restarted
   * without persistence). Consumers then look for documents whose events are gone. Absent on a queue that cannot.
   */
  onLoss?(listener: () => void): () => void
  ping(): Promise<boolean>
  close(): Promise<void>
}

export interface SparseVector {
  indices: Uint32Array
  values: Float32Array
}

/** What search returns for a chunk without a metadata round trip. */
export interface ChunkPayload {
  chunk_id: string
  kb_id: string
  doc_id: string
  chunk_index: number
  title: string
  source_type: string
  source: string
  doc_type: string
  page_num: number
  page_label: string
  text: string
  start: number
  end: number
  parent_chunk_id: string | null
  updated_at: string
}

export interface VectorPoint {
  dense: Float32Array
  sparse: SparseVector
  payload: ChunkPayload
}

export interface VectorHit {
  score: number
  /** The chunk_id, readable without the payload: fusion keys on it and reads payloads only for what it keeps. */
  id: string
  /**
   * A number for the chunk, the same in the dense and the sparse list of one search of one KB (the embedded store's
   * row): fusion matches the two lists by it when every hit has one, instead of hashing the ids, strings that a
   * search over 100k chunks mostly finds out of the CPU's caches. Absent from stores that have none.
   */
  readonly key?: number
  /** May be materialised on first read (the embedded store parses it from its snapshot then). */
  readonly payload: ChunkPayload
}

export interface VectorQuery {
  dense?: Float32Array
  sparse?: SparseVector
  limit: number
  /**
   * Share of the collection's dense search effort (the HNSW candidate list, ef) this query may spend,
   * 0 < effort <= 1; default 1. A search over several KBs gives each KB its share of the chunks searched,
   * so it costs about what one collection of their combined size costs, however many KBs it names.
   */
  effort?: number
  /** Only points matching this are ranked (inside the index, before the limit cut): a filtered search still fills `limit`. */
  filter?: VectorFilter
  /**
   * The dense hits are wanted for their order only (hybrid fusion reads ranks, not scores; similarity over several
   * KBs rescores the best of them afterwards, VectorStore.rescore): the store may rank them by its index's own
   * distances, which may be quantized, instead of recomputing each exact score. Their scores are then approximate.
   * Default false: every dense score is exact.
   */
  rankOnly?: boolean
}

/**
 * Conditions on the payload, all of which a point must meet; an absent field places no condition, an empty list
 * matches nothing. Lists match any of their values. Times are epoch milliseconds compared with the payload's
 * updated_at: after <= updated_at < before (so adjacent windows neither overlap nor leave a gap).
 */
export interface VectorFilter {
  docIds?: readonly string[]
  sourceTypes?: readonly string[]
  docTypes?: readonly string[]
  /** The payload's source starts with this (case-sensitive, character by character). */
  sourcePrefix?: string
  updatedAfter?: number
  updatedBefore?: number
}

/** Vectors: one collection per KB, a dense vector (cosine) and a sparse vector (IDF-weighted dot product) per chunk. */
export interface VectorStore {
  readonly name: 'embedded' | 'qdrant' | 'pgvector'
  ensureCollection(kbId: string, dimensions: number): Promise<void>
  dropCollection(kbId: string): Promise<boolean>
  hasCollection(kbId: string): Promise<boolean>
  /** Durable when it resolves. Points are keyed by payload.chunk_id; an upsert replaces. */
  upsert(kbId: string, points: readonly VectorPoint[]): Promise<void>
  deleteByDoc(kbId: string, docId: string): Promise<number>
  /** Dense and sparse candidate lists, each best first; an absent collection answers empty lists. */
  search(kbId: string, query: VectorQuery): Promise<{ dense: VectorHit[]; sparse: VectorHit[] }>
  /**
   * Exact dense scores for hits of an earlier rank-only search of this KB, in their order: what a search that is not
   * rank-only scores them. NaN for a hit whose chunk has left the KB since; all NaN for an absent collection. Only a
   * store whose rank-only scores are approximate has it (similarity over several KBs searches rank-only, then
   * rescores the best of all KBs' candidates: plugins/search/service.ts rescoreAcrossKbs).
   */
  rescore?(kbId: string, dense: Float32Array, hits: readonly VectorHit[]): Promise<Float64Array>
  /** Dense vectors of one document's chunks, in chunk order (dedup stage 3). */
  docVectors(kbId: string, docId: string): Promise<Float32Array[]>
  /**
   * Every point of one document, dense, sparse and payload as stored, in chunk order; an absent collection or
   * document answers []. KB export and migration (plugins/transfer) copy them without embedding anything again.
   */
  docPoints(kbId: string, docId: string): Promise<VectorPoint[]>
  /**
   * How many points each document has in the KB's collection, keyed by doc_id (documents with none are absent); an
   * absent collection answers an empty map. Start-up reconciliation and `quarry check` compare it with the metadata.
   */
  docChunkCounts(kbId: string): Promise<Map<string, number>>
  count(kbId: string): Promise<number>
  ping(): Promise<boolean>
  close(): Promise<void>
}

/** Embeddings: texts to L2-normalised vectors of `dimensions` length. */
export interface Embedder {
  /** provider.name: builtin, local, hosted or another name. */
  readonly name: string
  readonly model: string
  readonly dimensions: number
  embed(texts: readonly string[], opts?: { signal?: AbortSignal }): Promise<Float32Array[]>
  ping(): Promise<boolean>
  close(): Promise<void>
}

/**
 * Search answers cached under the versions of the searched KBs' indexes: Redis with the services (shared by every
 * instance), in process with the embedded engines. Every write to a KB's vectors bumps its version (the vector
 * store is wrapped where drivers are chosen, adapters/index.ts), so an answer computed before a write is never
 * read after it; nothing has to delete entries for that.
 */
export interface SearchCache {
  readonly name: 'memory' | 'redis'
  /**
   * The KBs' versions and the answer cached under `key` at those versions, in one round trip. `versions` is null
   * when a KB has no version yet (never written or searched with results since the store began): not cacheable.
   */
  lookup(key: string, kbIds: readonly string[]): Promise<{ versions: string[] | null; value: string | null }>
  /**
   * lookup() answered at once, by a cache held in this process (absent from one behind a network): a hit then
   * needs no promise turn, and the kernel answers it inside uWS's data callback (plugins/search/cache.ts).
   */
  lookupNow?(key: string, kbIds: readonly string[]): { versions: string[] | null; value: string | null }
  /** Keeps `value` for `key` at `versions` (as looked up), for the entry lifetime, within the entry bound. */
  store(key: string, kbIds: readonly string[], versions: readonly string[], value: string): Promise<void>
  /** Gives each KB that has no version one, so that its answers can be cached from then on. */
  init(kbIds: readonly string[]): Promise<void>
  /** The KB's index changed: what was cached at its current version is never read again. Call after the write. */
  bump(kbId: string): Promise<void>
  /** Removes the cached answers that include this KB (every answer when omitted); returns how many. */
  clear(kbId?: string): Promise<number>
  close(): Promise<void>
}

/**
 * Random secrets created once and then shared by every instance: in Redis with the services (every API instance
 * shares it), in a file under data_dir with the embedded engines (one process owns data_dir). The MCP endpoint
 * signs its session ids with one, so that any instance accepts a session another one opened.
 */
export interface SharedSecrets {
  readonly name: 'redis' | 'file'
  /** 32 random bytes under this name, created by whoever asks first; `fresh` reads the store again. */
  get(name: string, opts?: { fresh?: boolean }): Promise<Buffer>
  close(): Promise<void>
}

export interface Adapters {
  sql: Sql
  objects: ObjectStore
  queue: Queue
  /** Wrapped so that every write bumps the KB's version in searchCache. */
  vectors: VectorStore
  embedder: Embedder
  searchCache: SearchCache
  secrets: SharedSecrets
}
