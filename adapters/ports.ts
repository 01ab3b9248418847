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
  depth(topic: string): Promise<QueueDepth>
  /** Calls listener soon after a message is enqueued on topic (a hint; consumers still poll). */
  subscribe(topic: string, listener: () => void): () => void
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
}

/** Vectors: one collection per KB, a dense vector (cosine) and a sparse vector (IDF-weighted dot product) per chunk. */
export interface VectorStore {
  readonly name: 'embedded' | 'qdrant'
  ensureCollection(kbId: string, dimensions: number): Promise<void>
  dropCollection(kbId: string): Promise<boolean>
  hasCollection(kbId: string): Promise<boolean>
  /** Durable when it resolves. Points are keyed by payload.chunk_id; an upsert replaces. */
  upsert(kbId: string, points: readonly VectorPoint[]): Promise<void>
  deleteByDoc(kbId: string, docId: string): Promise<number>
  /** Dense and sparse candidate lists, each best first; an absent collection answers empty lists. */
  search(kbId: string, query: VectorQuery): Promise<{ dense: VectorHit[]; sparse: VectorHit[] }>
  /** Dense vectors of one document's chunks, in chunk order (dedup stage 3). */
  docVectors(kbId: string, docId: string): Promise<Float32Array[]>
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

export interface Adapters {
  sql: Sql
  objects: ObjectStore
  queue: Queue
  vectors: VectorStore
  embedder: Embedder
}
