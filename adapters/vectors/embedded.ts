// The embedded vector store: one collection per KB under <dir>/<kb_id>/ (collection.ts), dense search by
// usearch HNSW with exact rescoring, sparse search by an IDF-weighted inverted index that scores like
// Qdrant's `modifier: idf`. Writes are durable when they resolve (write-ahead log, group commit);
// snapshots keep restarts short. One process owns the folder at a time (<dir>/LOCK, held by the OS: adapters/lock.ts).
import { promises as fs } from 'node:fs'
import { availableParallelism } from 'node:os'
import { join, resolve } from 'node:path'
import { AppError, serviceUnavailable } from '../../kernel/errors.ts'
import type { SparseVector, VectorHit, VectorPoint, VectorQuery, VectorStore } from '../ports.ts'
import { Collection, type CollectionOptions } from './collection.ts'
import { defaultQuantization, SEGMENT_ROWS, type PrefetchedGraph, type Quantization, type Usearch } from './dense-index.ts'
import { checkKbId, dimensionMismatch } from './errors.ts'
import { describeHolder, FolderLockedError, lockFolder } from '../lock.ts'

/** Whether two arrays hold the same bytes (memcmp). */
const sameBytes = (a: ArrayBufferView, b: ArrayBufferView): boolean =>
  a.byteLength === b.byteLength && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength))

export interface EmbeddedVectorStoreOptions {
  /** Root folder; one sub-folder per KB. Created when missing. */
  dir: string
  /** Vector size of collections created implicitly (an upsert into a KB without ensureCollection). */
  dimensions: number
  /**
   * Scalar type of the HNSW graph: memory and speed against recall (scores are exact f32 cosines, except the
   * graph's own for a rankOnly query). Default i8, each vector scaled by its own largest component
   * (defaultQuantization: a quarter of the memory of f32, and faster than f16 or bf16). A graph saved with
   * another type is rebuilt in the background when the store opens.
   */
  quantization?: Quantization
  /** HNSW links per node (M). Default 16. */
  connectivity?: number
  /** Candidate list while building the graph (ef_construction). Default 64 (SciFact, built-in vectors: dense nDCG@10 0.5193 at 64, 0.5190 at 128, built in 8.4 s instead of 13.6 s). */
  expansionAdd?: number
  /** Candidate list while searching (ef). Default 256 (SciFact with built-in vectors: ef 128 ranked 0.006 nDCG@10 below an exact scan, ef 256 ties it). */
  expansionSearch?: number
  /**
   * Up to rows x dimensions = this, a dense search scans every row exactly. Default 2^19 (512 rows of 1024,
   * 2048 of 256): above it the graph is faster (measured: 1000 x 1024, graph 0.37 ms, scan 0.51 ms).
   */
  exactBudget?: number
  /**
   * A filtered search always scans the rows the filter keeps exactly (gathered for usearch's SIMD scan) up to
   * rows x dimensions = this. Default 2^20 (1,024 rows of 1024, 4,096 of 256).
   */
  filterScanBudget?: number
  /**
   * Above that budget, a filtered search scans its rows when they are fewer than the graph's widened candidate
   * list (ef / share kept) times this, and searches the graph otherwise. Default 3: one graph candidate cost about
   * 3 rows scanned (bench/filter.bench.ts, 100k x 1024: 5.5-8.4 us per candidate, 1.3-2.8 us per row), which puts
   * the switch near 9,000 kept rows of 100k. 0: always the graph above the budget.
   */
  filterGraphCost?: number
  /**
   * Threads for background graph building. Default 1: with 2 threads usearch 2.26 left about 0.1-0.3% of
   * points unreachable (a point's own vector did not find it among the top 11; 0 misses with 1 thread).
   * Measured again with usearch 2.26.2 (bench/search/graph-threads.ts: 20,000 clustered points of 256
   * dimensions, i8 graph; 2026-11-30, Intel Xeon, 2 cores): 14 and 13 unreachable with 2 threads, 5 and 5 with 1
   * (1.3-1.4x the points/s for 17-31 % more CPU per point). Two threads only once writes pause would have let the
   * graph that trails a bulk ingest catch up sooner (2,000 documents ingested: 10.5 and 10.8 s against 14.0-18.9 s
   * in four runs), so that is left out too. usearch also refuses an add with more threads than the graph had when it
   * last grew ("Reserve capacity ahead of insertions!").
   */
  indexThreads?: number
  /** Longest the event loop is held by one slice of graph building, in ms. Default 8. */
  indexSliceMs?: number
  /**
   * Threads one batch of searches of a KB may use (searches that meet in a turn of the event loop: see search()).
   * Default the cores, at most 4 (availableParallelism).
   */
  searchThreads?: number
  /** Share of the event loop graph building takes while upserts keep arriving (DenseIndexOptions.busyShare). Default 0.25. */
  busyShare?: number
  /** Log size that triggers a snapshot (at least; it grows with the collection). Default 64 MiB. */
  snapshotMinBytes?: number
  /** Quiet time after which a non-empty log is folded into a snapshot, in ms; 0 turns it off. Default 30 s. */
  snapshotIdleMs?: number
  /**
   * Largest graph a snapshot writes while the graph trails the writes (CollectionOptions.snapshotGraphMaxBytes);
   * a larger one keeps the last graph file until the graph has caught up. Default 16 MiB: about 7,700 rows of
   * 1,024 dimensions in f16, some 13-28 ms to write at the rate measured for 70k rows (125-264 ms).
   */
  snapshotGraphMaxBytes?: number
  /**
   * Keep the f32 originals of full 4,096-row arena segments in a file in the collection's folder (`dense.f32`,
   * scratch) instead of in memory, reading them back for rescoring and scans; the graph keeps its f16/bf16 copy in
   * memory. Those rows' payloads (and a snapshot's, once read) go to `payloads.jsonl` beside it, read back for the
   * hits a search returns, and full blocks of the sparse rows' own terms go to `sparse.bin` (the posting lists stay in
   * memory). Default true. Collections at most exactBudget values are never spilled.
   */
  denseOnDisk?: boolean
  /** Rows per arena segment (a power of two from 16); the unit kept in memory or spilled. Default 4,096. */
  segmentRows?: number
  /**
   * Entries (terms) of a full block of the sparse rows' own terms, the unit spilled with denseOnDisk once the blocks
   * hold this many. Default 2^19 (4 MB with their values).
   */
  sparseBlockEntries?: number
  /** Fold the log into a snapshot on close, so the next start reads no log. Default true. */
  snapshotOnClose?: boolean
  /** Open every collection at start (true) or on first use (false). Default true: the first search stays fast. */
  preload?: boolean
  log?: CollectionOptions['log']
}

export interface CollectionStats {
  points: number
  inGraph: number
  pending: number
  rows: number
  terms: number
  walBytes: number
  snapshotBytes: number
  snapshotSeq: number
  /** Why graph building stopped (usearch refused an insertion); the rows are still found by exact scan. */
  graphFailure: string | null
  /** Rows whose f32 vector is read from the spill file (denseOnDisk), not held in memory. */
  onDiskRows: number
  /** Rows whose payload is read from the payload spill file (denseOnDisk). */
  payloadsOnDisk: number
  /** Entries of the sparse rows' own terms read from the sparse spill file (denseOnDisk), not held in memory. */
  sparseOnDiskEntries: number
  /** Searches since the collection opened whose graph search was made in a batch with others (see search()). */
  batchedSearches: number
  /** Rows removed from the graph since it was built, and graphs rebuilt since the collection opened (GRAPH_REBUILD_SHARE). */
  graphChurn: number
  graphRebuilds: number
}

export interface EmbeddedVectorStore extends VectorStore {
  readonly name: 'embedded'
  /** Resolves once every point of the KB (or of all open KBs) is in the HNSW graph and no graph is being rebuilt. */
  whenIndexed(kbId?: string): Promise<void>
  /** Writes a snapshot of the KB (or of all open KBs) now and truncates the log. */
  snapshot(kbId?: string): Promise<void>
  stats(kbId: string): Promise<CollectionStats | null>
  /** Its graph's scores are quantized (i8): a rank-only search's hits are worth rescoring. */
  rescore(kbId: string, dense: Float32Array, hits: readonly VectorHit[]): Promise<Float64Array>
}

/** Folders opened by this process: a second store on the same folder would corrupt it. */
const openDirs = new Set<string>()

function positiveInt(name: string, value: number | undefined, fallback: number, min = 1): number {
  const v = value ?? fallback
  if (!Number.isInteger(v) || v < min) throw new Error(`createEmbeddedVectorStore: ${name} must be an integer >= ${min}, got ${String(value)}`)
  return v
}

function powerOfTwo(name: string, value: number | undefined, fallback: number): number {
  const v = positiveInt(name, value, fallback, 16)
  if ((v & (v - 1)) !== 0) throw new Error(`createEmbeddedVectorStore: ${name} must be a power of two, got ${String(value)}`)
  return v
}

function nonNegative(name: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback
  if (!(Number.isFinite(v) && v >= 0)) throw new Error(`createEmbeddedVectorStore: ${name} must be a number >= 0, got ${String(value)}`)
  return v
}

function unitShare(value: number | undefined, fallback: number): number {
  const v = value ?? fallback
  if (!(v > 0 && v <= 1)) throw new Error(`createEmbeddedVectorStore: busyShare must be in (0, 1], got ${String(value)}`)
  return v
}

/** The graph's parameters unless a store is given others (bench/search/graph-threads.ts builds graphs with them). */
export const GRAPH_DEFAULTS = { connectivity: 16, expansionAdd: 64, expansionSearch: 256, indexSliceMs: 8 } as const

export async function createEmbeddedVectorStore(options: EmbeddedVectorStoreOptions): Promise<EmbeddedVectorStore> {
  const dir = resolve(options.dir)
  const dimensions = positiveInt('dimensions', options.dimensions, 0)
  const quantization = options.quantization ?? defaultQuantization()
  if (!['f32', 'f16', 'bf16', 'i8'].includes(quantization)) throw new Error(`createEmbeddedVectorStore: quantization must be f32, f16, bf16 or i8, got ${quantization}`)
  const collectionOpts: CollectionOptions = {
    dimensions,
    quantization,
    connectivity: positiveInt('connectivity', options.connectivity, GRAPH_DEFAULTS.connectivity, 2),
    expansionAdd: positiveInt('expansionAdd', options.expansionAdd, GRAPH_DEFAULTS.expansionAdd),
    expansionSearch: positiveInt('expansionSearch', options.expansionSearch, GRAPH_DEFAULTS.expansionSearch),
    exactBudget: positiveInt('exactBudget', options.exactBudget, 1 << 19, 0),
    filterScanBudget: positiveInt('filterScanBudget', options.filterScanBudget, 1 << 20, 0),
    filterGraphCost: nonNegative('filterGraphCost', options.filterGraphCost, 3),
    indexThreads: positiveInt('indexThreads', options.indexThreads, 1),
    searchThreads: positiveInt('searchThreads', options.searchThreads, Math.min(4, availableParallelism())),
    indexSliceMs: positiveInt('indexSliceMs', options.indexSliceMs, GRAPH_DEFAULTS.indexSliceMs),
    busyShare: unitShare(options.busyShare, 0.25),
    snapshotMinBytes: positiveInt('snapshotMinBytes', options.snapshotMinBytes, 64 << 20, 0),
    snapshotIdleMs: positiveInt('snapshotIdleMs', options.snapshotIdleMs, 30_000, 0),
    snapshotGraphMaxBytes: positiveInt('snapshotGraphMaxBytes', options.snapshotGraphMaxBytes, 16 << 20, 0),
    denseOnDisk: options.denseOnDisk ?? true,
    segmentRows: powerOfTwo('segmentRows', options.segmentRows, SEGMENT_ROWS),
    sparseBlockEntries: positiveInt('sparseBlockEntries', options.sparseBlockEntries, 1 << 19, 16),
    log: options.log,
  }
  const snapshotOnClose = options.snapshotOnClose ?? true

  if (openDirs.has(dir)) throw new AppError('VECTOR_STORE_LOCKED', 500, `Vector folder ${dir} is already open in this process`)
  openDirs.add(dir)
  let lock: Awaited<ReturnType<typeof lockFolder>>
  try {
    lock = await lockFolder(dir, {
      file: 'LOCK',
      refusal: (folder, _path, holder) => `Vector folder ${folder} is in use by another process (${describeHolder(holder)}); the embedded store serves one process (use Qdrant to share vectors)`,
    })
  } catch (err) {
    openDirs.delete(dir)
    if (err instanceof FolderLockedError) throw new AppError('VECTOR_STORE_LOCKED', 500, err.message)
    throw err
  }

  let usearch: Usearch
  try {
    usearch = (await import('usearch')).default
  } catch (err) {
    openDirs.delete(dir)
    lock.release()
    throw new AppError('VECTOR_STORE_UNAVAILABLE', 500, 'The usearch native module failed to load (embedded vector store)', { cause: err })
  }

  const collections = new Map<string, Collection>()
  // Opening, creating and dropping one KB's collection run one after another, never interleaved.
  const lifecycle = new Map<string, Promise<unknown>>()
  let closed = false

  const serial = <T>(kbId: string, fn: () => Promise<T>): Promise<T> => {
    const prev = lifecycle.get(kbId) ?? Promise.resolve()
    const next = prev.catch(() => {}).then(fn)
    lifecycle.set(kbId, next)
    void next.catch(() => {}).finally(() => {
      if (lifecycle.get(kbId) === next) lifecycle.delete(kbId)
    })
    return next
  }

  const assertOpen = () => {
    if (closed) throw serviceUnavailable('The embedded vector store is closed')
  }

  /** Inside a lifecycle step: the open collection, opened from disk, or created when `createDims` is given. */
  const resolveCollection = async (kbId: string, createDims: number | null): Promise<Collection | null> => {
    const open = collections.get(kbId)
    if (open !== undefined) return open
    const opened = await Collection.open(kbId, join(dir, kbId), usearch, collectionOpts)
    if (opened !== null) {
      collections.set(kbId, opened)
      return opened
    }
    if (createDims === null) return null
    const created = await Collection.create(kbId, join(dir, kbId), createDims, usearch, collectionOpts)
    collections.set(kbId, created)
    return created
  }

  /** The open collection, opened from disk on first use; null when the KB has none. */
  const get = async (kbId: string): Promise<Collection | null> => {
    assertOpen()
    checkKbId(kbId)
    const c = collections.get(kbId)
    if (c !== undefined) return c
    return serial(kbId, () => resolveCollection(kbId, null))
  }

  const ensure = async (kbId: string, dims: number): Promise<Collection> => {
    assertOpen()
    checkKbId(kbId)
    const c = collections.get(kbId) ?? (await serial(kbId, () => resolveCollection(kbId, dims)))!
    if (c.dims !== dims) throw dimensionMismatch(kbId, c.dims, dims)
    return c
  }

  /**
   * Hands a write to the KB's collection in call order: with the collection open and nothing else going
   * on for the KB, synchronously (the write is queued before this returns); otherwise as a step of the
   * KB's lifecycle chain, so a delete issued after an upsert never overtakes it while the collection is
   * being opened or created. The step only queues the write; it does not wait for it to be durable.
   */
  const write = <T>(kbId: string, createDims: number | null, absent: T, fn: (c: Collection) => Promise<T>): Promise<T> => {
    try {
      assertOpen()
      checkKbId(kbId)
    } catch (err) {
      return Promise.reject(err)
    }
    const c = collections.get(kbId)
    if (c !== undefined && !lifecycle.has(kbId)) return fn(c)
    let queued: Promise<T> = Promise.resolve(absent)
    return serial(kbId, async () => {
      const col = await resolveCollection(kbId, createDims)
      if (col !== null) {
        queued = fn(col)
        // Observed below, after the chain step: keep it from counting as unhandled meanwhile.
        queued.catch(() => {})
      }
    }).then(() => queued)
  }

  // Searches of one KB that meet in one turn of the event loop (concurrent requests) are answered together. The
  // first is answered at once, as a search alone always is; the others of that KB wait for the end of the turn's
  // I/O (setImmediate) and then search the graph in one native call over searchThreads threads
  // (Collection.prefetch): a search is synchronous and holds the event loop, so without this one core served them
  // all, one after another. Only unfiltered dense searches of a KB whose dense search is a graph search take part
  // (a filtered one, one without a dense vector, and any search of a KB small enough to scan are answered at once).
  // A request over several KBs hands each the same query: its searches that wait share one copy of it and one i8
  // copy for the graphs, and are finished one query after another (the dense index prepares a query once for a run
  // of searches with it: its norm, its copy).
  const searchThreads = collectionOpts.searchThreads ?? 1
  const searchedThisTurn = new Set<Collection>()
  interface WaitingSearch {
    query: VectorQuery
    resolve(r: { dense: VectorHit[]; sparse: VectorHit[] }): void
    reject(err: unknown): void
  }
  const waiting = new Map<Collection, WaitingSearch[]>()
  // The store's copies of the waiting queries, by the caller's arrays; a copy is reused only for the same bytes (a
  // caller may put another query in an array between two searches).
  const turnDense = new Map<Float32Array, Float32Array>()
  const turnSparse = new Map<SparseVector, SparseVector>()
  const copyDense = (q: Float32Array): Float32Array => {
    const c = turnDense.get(q)
    if (c !== undefined && sameBytes(c, q)) return c
    const copy = q.slice()
    turnDense.set(q, copy)
    return copy
  }
  const copySparse = (v: SparseVector): SparseVector => {
    const c = turnSparse.get(v)
    if (c !== undefined && sameBytes(c.indices, v.indices) && sameBytes(c.values, v.values)) return c
    const copy = { indices: v.indices.slice(), values: v.values.slice() }
    turnSparse.set(v, copy)
    return copy
  }
  let turnEnd: NodeJS.Immediate | null = null
  const endTurn = () => {
    turnEnd = null
    searchedThisTurn.clear()
    turnDense.clear()
    turnSparse.clear()
    const batches = [...waiting]
    waiting.clear()
    // The graphs searched, KB by KB; the i8 copies of the queries made once for all of them.
    const quantized = new Map<Float32Array, Int8Array>()
    const toFinish: { c: Collection; w: WaitingSearch; pre: PrefetchedGraph | null; order: number }[] = []
    const order = new Map<Float32Array, number>()
    for (const [c, batch] of batches) {
      // A KB dropped meanwhile has nothing to find, as a search of a KB without a collection; a closed store refuses.
      if (closed) {
        for (const w of batch) w.reject(serviceUnavailable('The embedded vector store is closed'))
        continue
      }
      if (collections.get(c.kbId) !== c) {
        for (const w of batch) w.resolve({ dense: [], sparse: [] })
        continue
      }
      let pre: (PrefetchedGraph | null)[]
      try {
        pre = c.prefetch(batch.map((w) => w.query), searchThreads, quantized)
      } catch (err) {
        // The batch's own error (memory): every search of it has it.
        for (const w of batch) w.reject(err)
        continue
      }
      for (const [i, w] of batch.entries()) {
        const q = w.query.dense!
        let o = order.get(q)
        if (o === undefined) order.set(q, (o = order.size))
        toFinish.push({ c, w, pre: pre[i], order: o })
      }
    }
    // One query after another (stable: KBs in their order within a query).
    toFinish.sort((a, b) => a.order - b.order)
    for (const { c, w, pre } of toFinish) {
      const r = c.searchPrefetched(w.query, pre)
      if (r instanceof Error) w.reject(r)
      else w.resolve(r)
    }
  }

  const each = async (kbId: string | undefined, fn: (c: Collection) => Promise<void>) => {
    if (kbId !== undefined) {
      const c = await get(kbId)
      if (c !== null) await fn(c)
      return
    }
    for (const c of [...collections.values()]) await fn(c)
  }

  const store: EmbeddedVectorStore = {
    name: 'embedded',

    async ensureCollection(kbId, dims) {
      if (!Number.isInteger(dims) || dims < 1) throw new AppError('VECTOR_DIMENSION_MISMATCH', 500, `Invalid vector size ${String(dims)} for collection '${kbId}'`)
      await ensure(kbId, dims)
    },

    async dropCollection(kbId) {
      assertOpen()
      checkKbId(kbId)
      return serial(kbId, async () => {
        const c = collections.get(kbId)
        collections.delete(kbId)
        if (c !== undefined) {
          await c.drop()
          return true
        }
        // Not open (lazy store): no need to load it to delete it. A folder left by a creation that never
        // finished is not a collection, but it goes too.
        const existed = await Collection.exists(join(dir, kbId))
        await fs.rm(join(dir, kbId), { recursive: true, force: true })
        return existed
      })
    },

    async hasCollection(kbId) {
      return (await get(kbId)) !== null
    },

    async upsert(kbId, points: readonly VectorPoint[]) {
      if (points.length === 0) return
      await write(kbId, dimensions, undefined, (c) => c.upsert(points))
    },

    deleteByDoc(kbId, docId) {
      return write(kbId, null, 0, (c) => c.deleteByDoc(docId))
    },

    async search(kbId, query: VectorQuery): Promise<{ dense: VectorHit[]; sparse: VectorHit[] }> {
      const c = collections.get(kbId) ?? (await get(kbId))
      if (c === null) return { dense: [], sparse: [] }
      if (searchThreads > 1 && query.dense !== undefined && query.filter === undefined && c.searchesGraph) {
        if (searchedThisTurn.has(c)) {
          return new Promise((resolve, reject) => {
            let batch = waiting.get(c)
            if (batch === undefined) waiting.set(c, (batch = []))
            // Read now, as a search answered at once reads it: the caller may reuse its arrays once this returns.
            batch.push({ query: { ...query, dense: copyDense(query.dense!), sparse: query.sparse && copySparse(query.sparse) }, resolve, reject })
          })
        }
        searchedThisTurn.add(c)
        turnEnd ??= setImmediate(endTurn)
      }
      return c.search(query)
    },

    async rescore(kbId, dense, hits) {
      assertOpen()
      const c = collections.get(kbId) ?? (await get(kbId))
      return c === null ? new Float64Array(hits.length).fill(NaN) : c.rescore(dense, hits)
    },

    async docVectors(kbId, docId) {
      const c = await get(kbId)
      return c === null ? [] : c.docVectorsSliced(docId)
    },

    async docPoints(kbId, docId) {
      const c = await get(kbId)
      return c === null ? [] : c.docPoints(docId)
    },

    async docChunkCounts(kbId) {
      const c = await get(kbId)
      return c === null ? new Map() : c.docChunkCounts()
    },

    async count(kbId) {
      const c = await get(kbId)
      return c === null ? 0 : c.count
    },

    async ping() {
      if (closed) return false
      try {
        await fs.access(dir)
        return true
      } catch {
        return false
      }
    },

    async close() {
      if (closed) return
      closed = true
      await Promise.allSettled([...lifecycle.values()])
      const results = await Promise.allSettled([...collections.values()].map((c) => c.close({ snapshot: snapshotOnClose })))
      collections.clear()
      openDirs.delete(dir)
      lock.release()
      const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')
      if (failed) throw failed.reason
    },

    async whenIndexed(kbId) {
      await each(kbId, (c) => c.whenIndexed())
    },

    async snapshot(kbId) {
      await each(kbId, (c) => c.snapshot())
    },

    async stats(kbId) {
      const c = await get(kbId)
      return c === null ? null : c.stats()
    },
  }

  if (options.preload ?? true) {
    try {
      for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
        if (entry.isDirectory() && /^[a-z0-9][a-z0-9_-]{0,62}$/.test(entry.name)) await get(entry.name)
      }
    } catch (err) {
      await store.close().catch(() => {})
      throw err
    }
  }
  return store
}
