// Dense vectors of one collection: an f32 arena (row-major, one row per point) that answers exact
// scores and docVectors, plus a usearch HNSW graph over the same rows (keys = row numbers) that finds
// candidates fast. New rows are searchable at once by an exact scan of the rows not yet in the graph
// ("pending"); a background task moves them into the graph in slices of a few milliseconds, so neither
// an upsert nor a restart that replays the write-ahead log waits for graph construction.
//
// Every returned score is the exact f32 cosine recomputed from the arena, so the graph may quantize
// (i8 by default, see defaultQuantization: a quarter of the memory) without changing scores; only candidate
// recall depends on it. The one exception is a rankOnly search (hybrid fusion reads ranks only): its graph rows
// carry the graph's distances.
//
// The graph is usearch's native index called without its JavaScript wrapper (loadNativeIndex): the wrapper turns
// an Int8Array into a Float32Array, which the native index then casts back to i8 its own way, so an i8 graph held
// usearch's cast of our copies instead of the copies (quantizeI8).
//
// The arena is a list of segments of SEGMENT_ROWS rows: the first grows by 1.5x steps up to that size (a
// small KB holds a small array), later ones are allocated whole and never move. A single array grown by
// copying held the old and the new copy at once (at 100k x 1024 dims a 400 MB copy and a 600 MB array)
// and stopped the event loop for the copy (13-25 ms at 10k rows of 1,024).
//
// With a spill file (DenseIndexOptions.spillPath), every full segment but the one rows are appended to is written
// to that file and dropped from memory: the f32 originals then live on disk (in the OS's file cache while memory
// allows) and memory holds the graph's half-size copy, as Qdrant's on-disk original vectors do. Reads of a spilled
// row (rescoring, the scan of rows waiting for the graph, filtered scans, graph insertion) are positioned reads of
// that file, runs of consecutive rows in one read; a write to a spilled row (a reused row) goes to the file. The file
// is scratch: it is rebuilt from the snapshot and the log at every open, never fsync'd, and removed at close.
import { closeSync, existsSync, openSync, rmSync, read as readCb } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import type { RowSet } from './filter.ts'
import { createQueryDot } from './dot.ts'
import { readAllSync, writeAllSync } from './files.ts'
import { rescoredRows } from './rescore.ts'
import { TopK, type TieOrder } from './top-k.ts'

export type Usearch = typeof import('usearch').default
export type Quantization = 'f32' | 'f16' | 'bf16' | 'i8'

/**
 * The graph's scalar type unless a store is given another: i8, each vector scaled by its own largest component
 * (quantizeI8). A quarter of the memory of f32 and half that of f16 or bf16, and faster to build and to search on
 * both CPUs measured (usearch's i8 cosine; the AMD EPYC in an earlier graph study, 10k x 1024: build 1.85 against
 * 3.07 s, search 0.48 against 0.60 ms for bf16), with scores still exact f32 wherever they are returned (issue 17,
 * 2026-11-28, Intel Xeon with AVX-512 but no BF16):
 * - search bench, quick (10k chunks): hybrid over 1 KB 1.49 -> 1.12 ms p50 end to end, 767 -> 1,009 queries/s;
 * - 5,000 documents (70k chunks) ingested: the graph caught up in 28-30 s instead of 52 s;
 * - nDCG@10 against f16: SciFact dense 0.5199 -> 0.5205, hybrid 0.6814 -> 0.6821, similarity 0.5199 -> 0.5208;
 *   autorag-ko similarity and hybrid unchanged (0.8405, 0.9061), dense (rank-only: the graph's own order) 0.8405
 *   -> 0.8358.
 * Those figures had usearch's cast of the i8 copies in the graph (GRAPH_FORMAT 1). The copies themselves (format 2)
 * change the graph's own order, not what it finds (2026-11-29, AMD EPYC, 2 cores): bench/search/store-study.ts, 10k
 * chunks, graphs rebuilt from the arena, dense recall@10 against an exact scan: rank-only 1 KB 0.864 -> 0.892, 10 KBs
 * merged 0.862 -> 0.894; rescored 0.901 -> 0.894 and 0.894 -> 0.895; at 100k chunks 0.50 either way (ef-bound: ef 128
 * 0.38, 512 0.61); SciFact nDCG@10 dense 0.5193 -> 0.5173 and 0.5183 (two runs), similarity 0.5195 / 0.5191 -> 0.5192
 * / 0.5197, hybrid 0.6828 unchanged.
 * f16, bf16 and f32 remain for a store that asks for one.
 */
export function defaultQuantization(): Quantization {
  return 'i8'
}

/**
 * What a saved graph file holds, recorded in the collection's manifest: a file of another format is not loaded, and
 * the graph is rebuilt from the arena. 2: an i8 graph holds quantizeI8's copies as they are. 1 (before): usearch's
 * cast of them (each divided by its norm, times 127, truncated), which the JavaScript wrapper's conversion caused.
 */
export const GRAPH_FORMAT = 2

/** usearch's native index (the binding's CompiledIndex), the methods the dense index calls. */
interface NativeIndex {
  add(keys: BigUint64Array, vectors: Float32Array | Int8Array, threads: number): void
  /** keys and distances hold k entries per query, of which counts[i] are found. */
  search(queries: Float32Array | Int8Array, k: number, threads: number): [keys: BigUint64Array, distances: Float32Array, counts: BigUint64Array]
  size(): number
  /** Rows the graph holds room for (usearch grows it when an add would fill it). */
  capacity(): number
  save(path: string): void
  load(path: string): void
  contains(keys: BigUint64Array): boolean[]
  remove(keys: BigUint64Array): number[]
}
type NativeIndexClass = new (dimensions: number, metric: string, quantization: string, connectivity: number,
  expansionAdd: number, expansionSearch: number, multi: boolean) => NativeIndex

let nativeIndexClass: NativeIndexClass | undefined

/**
 * usearch's native index class, without the JavaScript wrapper around it. The wrapper converts every vector that is
 * not a Float32Array into one before the native call (normalizeVectors in usearch.js), and the native index then
 * casts those floats to its scalar type: for i8, x / |x| * 127, truncated (cast_to_i8_gt), about 3 bits per component
 * at 1,024 dimensions. Given an Int8Array itself, the native add and search use its values as they are (an i8 index
 * needs no cast), so an i8 graph holds the copies quantizeI8 makes and compares queries quantized the same way.
 * The binary is the one the wrapper loaded (resolved from usearch's own folder by the same loader, which require
 * caches), so both share one module.
 */
function loadNativeIndex(): NativeIndexClass {
  if (nativeIndexClass !== undefined) return nativeIndexClass
  const entry = createRequire(import.meta.url).resolve('usearch')
  // The package folder, found as the wrapper finds it (getBuildDir in usearch.js): the first one up with a build.
  let root = dirname(entry)
  while (!existsSync(join(root, 'prebuilds')) && !existsSync(join(root, 'build'))) {
    const up = dirname(root)
    if (up === root) throw new Error(`no native build of usearch above ${entry}`)
    root = up
  }
  const load = createRequire(entry)('node-gyp-build') as (dir: string) => { CompiledIndex: NativeIndexClass }
  nativeIndexClass = load(root).CompiledIndex
  return nativeIndexClass
}

export interface HnswParams {
  quantization: Quantization
  connectivity: number
  expansionAdd: number
  expansionSearch: number
}

export interface DenseIndexOptions extends HnswParams {
  dimensions: number
  /** Collections with rows x dimensions at most this are scanned exactly: as fast as the graph there, and exact. */
  exactBudget: number
  /**
   * A filtered search always scans the rows it keeps exactly (gathered for usearch's SIMD scan) when they hold
   * at most this many values (rows x dimensions).
   */
  filterScanBudget: number
  /**
   * Cost of one graph candidate in rows scanned: a filtered search above the budget scans its rows when they
   * are fewer than the graph's widened candidate list times this, and searches the graph otherwise. 0: always
   * the graph above the budget.
   */
  filterGraphCost: number
  /** Threads usearch may use for a slice of background insertions. */
  indexThreads: number
  /**
   * Threads a batch of searches may use at once (prefetchGraph). usearch gives each thread that searches at once a
   * context of its own, as many as the thread count of the add that last grew the graph (addToGraph). Default 1.
   */
  searchThreads?: number
  /** Target duration of one background slice: the longest the event loop is held by graph building. */
  indexSliceMs: number
  /** File for the full arena segments kept on disk instead of in memory (see the top of this file); none: all in memory. */
  spillPath?: string
  /** Rows per arena segment, a power of two from 16. Default SEGMENT_ROWS. */
  segmentRows?: number
  /**
   * Share of the thread's time graph building may take while points keep arriving (an upsert in the last
   * second): during a bulk ingest the graph trails behind and catches up at full speed once writes pause.
   * Rows not yet in the graph are found by an exact scan meanwhile, so they are searchable at once. 1 = no limit.
   */
  busyShare?: number
  /** The graph is rebuilt once the rows removed from it reach this share of its rows; default GRAPH_REBUILD_SHARE, Infinity: never. */
  rebuildShare?: number
  log?: { warn(obj: object, msg: string): void; info?(obj: object, msg: string): void }
}

/**
 * Rows a filtered search scans, copied into one matrix. Shared by every collection (searches are synchronous,
 * one at a time) and bounded by filterScanBudget, so many KBs do not each hold one.
 */
let gathered = new Float32Array(0)

/** The query of the search under way, against the rows it rescores; shared as `gathered` is. */
const queryDot = createQueryDot()

/**
 * The query of the last search, prepared once for every collection asked with it: a search over ten KBs hands each
 * KB's index the same vector, and its norm and its i8 copy for the graph cost as much each time (about 90,000
 * instructions at 1,024 dimensions, 8 % of a 10-KB hybrid search's store work) as a tenth of the graph search itself.
 * A query is recognised by its bytes (compared in full: a caller may reuse one array for another query), not by
 * the array.
 */
class PreparedQuery {
  private q = new Float32Array(0)
  /** q's bytes, compared with the next query's (memcmp: about 8 times faster than a loop over the floats). */
  private bytes = Buffer.alloc(0)
  private i8 = new Int8Array(0)
  private graphReady = false
  /** The query's Euclidean norm. */
  norm = 0

  /** Whether q has the bytes of the query prepared now. */
  holds(q: Float32Array): boolean {
    return this.bytes.equals(Buffer.from(q.buffer, q.byteOffset, q.byteLength))
  }

  /** Makes q the query of the search under way (its copy owns its buffer, as usearch's exactSearch needs). */
  use(q: Float32Array): Float32Array {
    if (!this.holds(q)) {
      if (this.q.length !== q.length) {
        this.q = new Float32Array(q.length)
        this.bytes = Buffer.from(this.q.buffer)
        this.i8 = new Int8Array(q.length)
      }
      this.q.set(q)
      let qq = 0
      for (let i = 0; i < q.length; i++) qq += q[i] * q[i]
      this.norm = Math.sqrt(qq)
      this.graphReady = false
    }
    queryDot.setQuery(this.q)
    return this.q
  }

  /** The query as an i8 graph is searched with (quantizeI8). */
  graphI8(): Int8Array {
    if (!this.graphReady) {
      quantizeI8(this.q, this.q.length, this.i8)
      this.graphReady = true
    }
    return this.i8
  }
}
const prepared = new PreparedQuery()

/** The heap of the search under way (searches are synchronous, one at a time), reused: TopK.reset. */
const searchTop = new TopK(0)
/** Candidates an exact scan asks usearch for beyond k (and the dead rows), so that ties at the cut reach the heap. */
const TIE_MARGIN = 16

/**
 * usearch's remove leaves the node in the graph and hands its slot to the next add, which puts the new vector there
 * while the nodes that linked to the old one keep their links: after many deletes and adds a search misses neighbours
 * that a graph built afresh from the same vectors finds. Once the rows removed from the graph since it was built reach
 * this share of the rows it holds (and at least GRAPH_REBUILD_MIN), a new graph is built from its rows in the
 * background slices that build the graph, and replaces it; a removal then costs at most 1 / share insertions more.
 * bench/search/graph-churn.ts (2026-12-02, AMD EPYC family 25, 2 cores; 2,000 vectors added and 60 % of the live ones
 * removed a round, recall@5 against an exact scan after each round):
 * - 256 dimensions, f32, ef 64, 20 rounds: 0.925 rebuilt at 0.5 against 0.873 never rebuilt (a graph built from the
 *   last round's vectors alone: 0.922), for 17.9 s of graph building against 10.8;
 * - the same with the default i8 graph, 10 rounds: 0.930 against 0.883, 4.4 s against 2.8;
 * - 8 dimensions, 400 a round, ef 256, 6 rounds: no miss in 100,200 against 27.
 */
export const GRAPH_REBUILD_SHARE = 0.5
/** Removals below which a graph is never rebuilt (a small graph's rebuild is cheap, but its searches hardly suffer). */
export const GRAPH_REBUILD_MIN = 64

/** Rows per arena segment (a power of two): 16 MB at 1,024 dimensions. */
export const SEGMENT_ROWS = 1 << 12
/** Rows of a spilled segment read at once by a scan (1 MB at 1,024 dimensions). */
const RUN_ROWS = 256
const readAsync = promisify(readCb)

/**
 * The i8 copies an i8 graph holds of the rows of `src` (d values each), written to the same places of `out`: each
 * row scaled so that its largest component is +-127, then rounded. Cosine does not depend on a vector's scale, so
 * every row may have its own. usearch's own cast from f32 divides by the norm instead (a 1,024-dimension unit
 * vector's components, about 0.03, become -10..10: three bits) and truncates. The graph is given these copies
 * through the native index (loadNativeIndex); through the JavaScript wrapper it held usearch's cast of them.
 */
export function quantizeI8(src: Float32Array, d: number, out: Int8Array): void {
  for (let from = 0; from + d <= src.length; from += d) {
    let max = 0
    for (let i = from; i < from + d; i++) {
      const a = Math.abs(src[i])
      if (a > max) max = a
    }
    if (!(max > 0) || !Number.isFinite(max)) {
      out.fill(0, from, from + d)
      continue
    }
    const scale = 127 / max
    for (let i = from; i < from + d; i++) out[i] = Math.round(src[i] * scale)
  }
}

/** One query's graph search made ahead, in a batch (DenseIndex.prefetchGraph). */
export interface PrefetchedGraph {
  query: Float32Array
  asked: number
  keys: BigUint64Array
  distances: Float32Array
}

export class DenseIndex {
  readonly dims: number
  private readonly usearch: Usearch
  private readonly opts: DenseIndexOptions
  private hnsw: NativeIndex
  private readonly segShift: number
  private readonly segRows: number
  private readonly segMask: number
  /** Row r lives in segments[r >>> segShift] at (r & segMask) * dims; null: in the spill file at r * dims * 4. */
  private segments: (Float32Array | null)[]
  private spillFd = -1
  /** Rows of spilled segments (read on demand), and a buffer for runs of them. */
  spilledRows = 0
  private runBuf = new Float32Array(0)
  norms: Float32Array
  private live: Uint8Array
  private inGraph: Uint8Array
  /**
   * 1 for each row held by the graph file of the last snapshot (loaded, or written by saveGraph and committed),
   * with the vector it has now: a snapshot that keeps that file instead of writing the graph names these rows
   * as in its graph. savingGraph: the same for a file being written, until commitSavedGraph or dropSavedGraph.
   */
  private inSavedGraph: Uint8Array
  private savingGraph: Uint8Array | null = null
  private waiting: Uint8Array
  /** Rows waiting for the graph, oldest first; entries whose row left the waiting state are skipped. */
  private queue: Int32Array
  private queueHead = 0
  private queueTail = 0
  private capacity: number
  rowsEnd = 0
  liveCount = 0
  graphCount = 0
  pendingCount = 0
  // Background graph building.
  private msPerVector = 1
  private timer: NodeJS.Immediate | NodeJS.Timeout | undefined
  private timerIsTimeout = false
  private lastWriteAt = -Infinity
  private lastSliceMs = 0
  private idleWaiters: (() => void)[] = []
  private stopped = false
  /** Set when usearch refused an insertion; graph building is then off and waiting rows are scanned. */
  failure: unknown
  /** Rows removed from the graph since it was built from empty: usearch reuses their slots (GRAPH_REBUILD_SHARE). */
  graphChurn = 0
  /** Graphs built to replace a churned one and put in its place. */
  graphRebuilds = 0
  /**
   * The graph being built to replace the searched one. rows[0..end): the rows to put in it, those the searched graph
   * held when it began in row order, then each row the searched graph takes meanwhile; next: how far it has come;
   * held: 1 for each row in it; added: rows in it; churn: the removals it has had. Slices of it take turns with slices
   * of waiting rows, which go on into the searched graph, so that new rows do not wait for the rebuild.
   */
  private rebuild: { graph: NativeIndex; rows: Int32Array; end: number; next: number; held: Uint8Array; added: number; churn: number; turn: boolean } | null = null
  /** Set when usearch refused an insertion into a rebuilt graph: the churned one stays, and none is built again. */
  private rebuildFailure: unknown
  private scratchKeys = new BigUint64Array(0)
  private scratchVectors = new Float32Array(0)
  /** The graph's own i8 copies of a slice's rows (quantization 'i8'). */
  private scratchI8 = new Int8Array(0)

  constructor(usearch: Usearch, opts: DenseIndexOptions, capacityRows = 256) {
    this.usearch = usearch
    this.opts = opts
    this.dims = opts.dimensions
    const segRows = opts.segmentRows ?? SEGMENT_ROWS
    if (!(Number.isInteger(segRows) && segRows >= 16 && (segRows & (segRows - 1)) === 0)) throw new Error(`segmentRows must be a power of two from 16, got ${segRows}`)
    this.segRows = segRows
    this.segShift = Math.log2(segRows)
    this.segMask = segRows - 1
    this.capacity = Math.min(segRows, Math.max(16, capacityRows))
    this.segments = [new Float32Array(this.capacity * this.dims)]
    this.norms = new Float32Array(this.capacity)
    this.live = new Uint8Array(this.capacity)
    this.inGraph = new Uint8Array(this.capacity)
    this.inSavedGraph = new Uint8Array(this.capacity)
    this.waiting = new Uint8Array(this.capacity)
    this.queue = new Int32Array(this.capacity)
    this.hnsw = this.newGraph()
  }

  /** What the graph is searched with: the query under way (prepared.use) itself, or its i8 copy for an i8 graph. */
  private graphQuery(q: Float32Array): Float32Array | Int8Array {
    return this.opts.quantization === 'i8' ? prepared.graphI8() : q
  }

  /**
   * The candidate list (ef) and the graph results asked of an unfiltered graph search for k results at this effort;
   * null when search() would not search the graph (nothing live, a collection small enough to scan, no graph yet).
   */
  private graphAsked(k: number, effort: number): number | null {
    if (this.liveCount === 0 || !(k > 0) || this.rowsEnd * this.dims <= this.opts.exactBudget || this.graphCount === 0) return null
    const ef = Math.max(k, Math.ceil(this.opts.expansionSearch * Math.min(1, effort > 0 ? effort : 1)))
    return Math.min(this.graphCount, ef)
  }

  /**
   * The graph searched for several queries in one native call, over `threads` threads (usearch splits a batch's
   * queries among them; each query's search is the one it would get alone: same candidates, same distances). Each
   * query whose search() would search the graph unfiltered gets its result, in the order given; the others null.
   * search() takes such a result in place of its own graph search when it is made the next one (usePrefetched).
   * quantized: i8 copies of queries already made (an i8 graph), by query array, added to here; for arrays no one
   * changes while it is kept (the store's own copies of the queries of a turn, which every KB of a request shares).
   */
  prefetchGraph(queries: readonly ({ q: Float32Array; k: number; effort?: number } | null)[], threads: number, quantized: Map<Float32Array, Int8Array>): (PrefetchedGraph | null)[] {
    const out: (PrefetchedGraph | null)[] = queries.map(() => null)
    const byAsked = new Map<number, number[]>()
    for (const [i, x] of queries.entries()) {
      const asked = x === null || x.q.length !== this.dims ? null : this.graphAsked(Math.floor(x.k), x.effort ?? 1)
      if (asked === null) continue
      let group = byAsked.get(asked)
      if (group === undefined) byAsked.set(asked, (group = []))
      group.push(i)
    }
    const d = this.dims
    // The queries as search() hands them to the graph (graphQuery): quantizeI8's copies for an i8 graph.
    const i8 = this.opts.quantization === 'i8'
    for (const [asked, group] of byAsked) {
      const batch = i8 ? new Int8Array(group.length * d) : new Float32Array(group.length * d)
      for (const [j, i] of group.entries()) {
        const q = queries[i]!.q
        if (!i8) (batch as Float32Array).set(q, j * d)
        else {
          let qi8 = quantized.get(q)
          if (qi8 === undefined) {
            qi8 = new Int8Array(d)
            quantizeI8(q, d, qi8)
            quantized.set(q, qi8)
          }
          ;(batch as Int8Array).set(qi8, j * d)
        }
      }
      let found: ReturnType<NativeIndex['search']>
      try {
        found = this.hnsw.search(batch, asked, Math.max(1, Math.min(threads, group.length)))
      } catch {
        // A graph without a search context per thread (addToGraph keeps them): each query searches on its own.
        continue
      }
      const [keys, distances, counts] = found
      for (const [j, i] of group.entries()) {
        const n = Number(counts[j])
        out[i] = { query: queries[i]!.q, asked, keys: keys.subarray(j * asked, j * asked + n), distances: distances.subarray(j * asked, j * asked + n) }
      }
    }
    return out
  }

  /** The result search() takes for its graph search, when made for its query and candidate list; cleared by search(). */
  private prefetched: PrefetchedGraph | null = null
  /** Searches that took their graph search from a batch (prefetchGraph). */
  batchedSearches = 0

  /** Whether an unfiltered search now searches the graph (not an exact scan): what a batch of searches shares. */
  get searchesGraph(): boolean {
    return this.graphAsked(1, 1) !== null
  }

  /** Makes `p` (from prefetchGraph) the graph result of the next search(), which uses it if it is for that search. */
  usePrefetched(p: PrefetchedGraph | null): void {
    this.prefetched = p
  }

  /** The graph's keys found for one query (a view of the native result: no copy). */
  private graphSearch(q: Float32Array | Int8Array, asked: number): { keys: BigUint64Array; distances: Float32Array } {
    const [keys, distances, counts] = this.hnsw.search(q, asked, 1)
    const found = Number(counts[0])
    return { keys: keys.subarray(0, found), distances: distances.subarray(0, found) }
  }

  private newGraph(): NativeIndex {
    const o = this.opts
    const NativeIndex = loadNativeIndex()
    // usearch explores max(expansion_search, results asked): the graph's own value is kept at the minimum (1) and
    // each search sets its candidate list (ef) by the number of results it asks for.
    return new NativeIndex(this.dims, 'cos', o.quantization, o.connectivity, o.expansionAdd, 1, false)
  }

  /** 1 for each live row (read-only for callers; replaced when the index grows). */
  get liveFlags(): Uint8Array {
    return this.live
  }

  isLive(row: number): boolean {
    return row < this.capacity && this.live[row] === 1
  }

  isInGraph(row: number): boolean {
    return row < this.capacity && this.inGraph[row] === 1
  }

  isInSavedGraph(row: number): boolean {
    return row < this.capacity && this.inSavedGraph[row] === 1
  }

  /** Bytes of the graph as saveGraph would write it, estimated: the scalars and the base layer's links. */
  get graphBytes(): number {
    const scalar = { f32: 4, f16: 2, bf16: 2, i8: 1 }[this.opts.quantization]
    return this.graphCount * (this.dims * scalar + 2 * this.opts.connectivity * 4)
  }

  /** Copies the vector into the arena and queues the row for the graph. */
  set(row: number, vector: Float32Array): void {
    if (this.isLive(row)) throw new Error(`dense row ${row} is already live`)
    this.ensureCapacity(row + 1)
    const d = this.dims
    const seg = this.segments[row >>> this.segShift]
    if (seg !== null) seg.set(vector, (row & this.segMask) * d)
    else this.writeSpilled(row, vector)
    let sq = 0
    for (let i = 0; i < d; i++) sq += vector[i] * vector[i]
    this.norms[row] = Math.sqrt(sq)
    this.live[row] = 1
    this.liveCount++
    if (row >= this.rowsEnd) {
      this.rowsEnd = row + 1
      // The row opened a segment: the one before it is full.
      if ((row & this.segMask) === 0) this.spill()
    }
    this.enqueue(row)
  }

  /** Loads rows restored from a snapshot: the arena is already filled, norms and flags come along. */
  adopt(row: number, norm: number, inGraph: boolean): void {
    this.live[row] = 1
    this.norms[row] = norm
    this.liveCount++
    if (row >= this.rowsEnd) this.rowsEnd = row + 1
    if (inGraph) {
      this.inGraph[row] = 1
      this.inSavedGraph[row] = 1
      this.graphCount++
    } else {
      this.enqueue(row)
    }
  }

  remove(row: number): void {
    if (!this.isLive(row)) return
    this.live[row] = 0
    this.liveCount--
    this.inSavedGraph[row] = 0
    if (this.savingGraph !== null && row < this.savingGraph.length) this.savingGraph[row] = 0
    if (this.inGraph[row] === 1) {
      const key = BigUint64Array.of(BigInt(row))
      this.hnsw.remove(key)
      this.inGraph[row] = 0
      this.graphCount--
      this.graphChurn++
      const r = this.rebuild
      if (r !== null && r.held[row] === 1) {
        r.graph.remove(key)
        r.held[row] = 0
        r.added--
        r.churn++
      }
      this.maybeRebuild()
    }
    if (this.waiting[row] === 1) {
      this.waiting[row] = 0
      this.pendingCount--
    }
  }

  vector(row: number): Float32Array {
    const out = new Float32Array(this.dims)
    this.copyRow(row, out, 0)
    return out
  }

  /** Copies a row into `into` at `at` (floats), from memory or from the spill file. */
  private copyRow(row: number, into: Float32Array, at: number): void {
    const d = this.dims
    const seg = this.segments[row >>> this.segShift]
    if (seg !== null) {
      const off = (row & this.segMask) * d
      into.set(seg.subarray(off, off + d), at)
    } else {
      this.readSpilled(row, 1, into, at)
    }
  }

  /** Copies `rows` into `into`, one after another (runs of consecutive spilled rows in one read). */
  readRows(rows: ArrayLike<number>, into: Float32Array): void {
    this.copyRows(rows, rows.length, into)
  }

  /** Copies rows[0..count) into `into`, one after another; runs of consecutive spilled rows are read at once. */
  private copyRows(rows: ArrayLike<number>, count: number, into: Float32Array): void {
    const d = this.dims
    for (let i = 0; i < count; ) {
      const row = rows[i]
      if (this.segments[row >>> this.segShift] !== null) {
        this.copyRow(row, into, i * d)
        i++
        continue
      }
      const j = this.runEnd(rows, i, count, count)
      this.readSpilled(row, j - i, into, i * d)
      i = j
    }
  }

  /**
   * End (exclusive) of the run of consecutive rows from rows[i] (a row of a spilled segment) that stay in its
   * segment: at most `limit` rows and not past `to`. One read fetches them all.
   */
  private runEnd(rows: ArrayLike<number>, i: number, to: number, limit: number): number {
    const segEnd = ((rows[i] >>> this.segShift) + 1) << this.segShift
    let j = i + 1
    while (j < to && j - i < limit && rows[j] === rows[j - 1] + 1 && rows[j] < segEnd) j++
    return j
  }

  // ---- the spill file -----------------------------------------------------------------------------

  /** Whether rows of full segments go to the spill file: one is set, and the collection is past the exact-scan size. */
  private get spills(): boolean {
    return this.opts.spillPath !== undefined && this.rowsEnd * this.dims > this.opts.exactBudget
  }

  /** Writes every full segment still in memory to the spill file and drops it from memory. */
  spill(): void {
    if (!this.spills) return
    const full = Math.floor(this.rowsEnd / this.segRows)
    for (let i = 0; i < full; i++) {
      const seg = this.segments[i]
      if (seg === null || seg.length !== this.segRows * this.dims) continue
      if (this.spillFd < 0) this.spillFd = openSync(this.opts.spillPath!, 'w+')
      writeAllSync(this.spillFd, new Uint8Array(seg.buffer, seg.byteOffset, seg.byteLength), i * this.segRows * this.dims * 4)
      this.segments[i] = null
      this.spilledRows += this.segRows
    }
  }

  private writeSpilled(row: number, vector: Float32Array): void {
    writeAllSync(this.spillFd, new Uint8Array(vector.buffer, vector.byteOffset, this.dims * 4), row * this.dims * 4)
  }

  /** Reads `count` consecutive spilled rows from `row` into `into` at `at` (floats). */
  private readSpilled(row: number, count: number, into: Float32Array, at: number): void {
    readAllSync(this.spillFd, new Uint8Array(into.buffer, into.byteOffset + at * 4, count * this.dims * 4), row * this.dims * 4, 'dense spill file')
  }

  /** Closes and removes the spill file (the index is not used after this). */
  close(): void {
    this.stop()
    if (this.spillFd >= 0) {
      closeSync(this.spillFd)
      this.spillFd = -1
      rmSync(this.opts.spillPath!, { force: true })
    }
  }

  /**
   * The first `rows` arena rows as byte views, in row order, segment by segment: what a snapshot is read
   * straight into (the arena is made that large first; nothing is spilled before the rows are adopted).
   */
  arenaParts(rows: number): Uint8Array[] {
    this.ensureCapacity(rows)
    const parts: Uint8Array[] = []
    for (let first = 0; first < rows; first += this.segRows) {
      const seg = this.segments[first >>> this.segShift]
      if (seg === null) throw new Error('arenaParts: a segment is spilled')
      parts.push(new Uint8Array(seg.buffer, seg.byteOffset, Math.min(this.segRows, rows - first) * this.dims * 4))
    }
    return parts
  }

  /**
   * The bytes of arena rows 0..rowsEnd in order, for a snapshot: views of the segments in memory now, and of the
   * spilled ones read from the file when the snapshot comes to them. Rows live now keep their bytes while the
   * snapshot is written (a row is reused only once no snapshot is being written: Collection.purgeIfWorthIt), and
   * the file stays open until close, which waits for the snapshot. A chunk read from the file is valid until the next
   * one is asked for.
   */
  arenaSource(): AsyncIterable<Uint8Array> {
    const rows = this.rowsEnd
    const d = this.dims
    const parts: (Uint8Array | { at: number; length: number })[] = []
    for (let first = 0; first < rows; first += this.segRows) {
      const length = Math.min(this.segRows, rows - first) * d * 4
      const seg = this.segments[first >>> this.segShift]
      parts.push(seg !== null ? new Uint8Array(seg.buffer, seg.byteOffset, length) : { at: first * d * 4, length })
    }
    const fd = this.spillFd
    return (async function* () {
      let buf: Uint8Array | undefined
      for (const part of parts) {
        if (part instanceof Uint8Array) {
          yield part
          continue
        }
        buf ??= new Uint8Array(Math.min(part.length, 1 << 20))
        for (let done = 0; done < part.length; ) {
          const want = Math.min(buf.length, part.length - done)
          let got = 0
          while (got < want) {
            const { bytesRead } = await readAsync(fd, buf, got, want - got, part.at + done + got)
            if (bytesRead === 0) throw new Error('dense spill file ends before the arena does')
            got += bytesRead
          }
          // The same buffer each time, valid until the next chunk is asked for (writeSnapshot writes it first): a copy
          // per chunk was the spilled arena's size in garbage (280 MB at 70k rows of 1,024) at every snapshot.
          yield buf.subarray(0, want)
          done += want
        }
      }
    })()
  }

  /**
   * Scores rows in the order given (for which `keep(row)` holds) against the search's query into top. Rows of
   * spilled segments are read in runs of up to RUN_ROWS consecutive rows, one read each.
   */
  private scoreRows(qNorm: number, rows: ArrayLike<number>, from: number, to: number, keep: (row: number) => boolean, top: TopK): void {
    const d = this.dims
    for (let i = from; i < to; i++) {
      const row = rows[i]
      if (!keep(row)) continue
      if (this.segments[row >>> this.segShift] !== null) {
        top.push(row, this.cosine(qNorm, row))
        continue
      }
      const j = this.runEnd(rows, i, to, RUN_ROWS)
      const span = j - i
      if (this.runBuf.length < span * d) this.runBuf = new Float32Array(RUN_ROWS * d)
      this.readSpilled(row, span, this.runBuf, 0)
      for (let m = i; m < j; m++) {
        const r = rows[m]
        if (!keep(r)) continue
        const denom = qNorm * this.norms[r]
        top.push(r, denom === 0 ? 0 : queryDot.dot(this.runBuf, (r - row) * d) / denom)
      }
      i = j - 1
    }
  }

  /**
   * The k live rows closest to q (of this index's dimensions: the collection checks) by cosine, best first,
   * with exact scores. The graph is searched with a candidate list of expansionSearch x effort (at least k).
   * rankOnly: the graph's rows are taken in the graph's own order with its (quantized) distances as scores,
   * not rescored; rows the graph does not hold yet are still scored exactly. Equal scores in `tie` order (TopK).
   */
  search(q: Float32Array, k: number, effort = 1, subset?: RowSet, rankOnly = false, tie: TieOrder | null = null): { rows: Int32Array; scores: Float64Array } {
    const pre = this.prefetched
    this.prefetched = null
    const top = searchTop.reset(k, tie)
    if (this.liveCount === 0 || k <= 0) return top.drain()
    const d = this.dims
    // A copy that owns its buffer: usearch 2.26 exactSearch ignores a query view's byteOffset.
    q = prepared.use(q)
    const qNorm = prepared.norm
    if (subset !== undefined) return this.searchSubset(q, qNorm, k, effort, subset, top)
    if (this.rowsEnd * d <= this.opts.exactBudget) {
      // Small collection: one SIMD pass over every row (segment by segment), dead ones included and filtered out after.
      const dead = this.rowsEnd - this.liveCount
      // Nothing is spilled at this size (DenseIndex.spills).
      for (let first = 0; first < this.rowsEnd; first += this.segRows) {
        const rows = Math.min(this.segRows, this.rowsEnd - first)
        const seg = this.segments[first >>> this.segShift]!.subarray(0, rows * d)
        // TIE_MARGIN more than k: rows that tie with the k-th are all offered to the heap, which orders ties by
        // `tie`; usearch would keep those of the lowest rows.
        const m = this.usearch.exactSearch(seg, q, d, Math.min(rows, k + dead + TIE_MARGIN), 'cos' as never, 1)
        const keys = (m as { keys: BigUint64Array }).keys
        for (let i = 0; i < keys.length; i++) {
          const row = first + Number(keys[i])
          if (this.live[row] === 1) top.push(row, this.cosine(qNorm, row))
        }
      }
      return top.drain()
    }
    const asked = this.graphAsked(k, effort)
    if (asked !== null) {
      // A result prefetched for this query (the same bytes: the caller's array may have changed since) and this list.
      const batched = pre !== null && pre.asked === asked && prepared.holds(pre.query)
      if (batched) this.batchedSearches++
      const m = batched ? pre : this.graphSearch(this.graphQuery(q), asked)
      const keys = m.keys
      const distances = m.distances
      if (rankOnly) {
        // Rescoring reads every candidate's f32 row: 4 KB at 1,024 dimensions, from all over the arena. Over ten
        // KBs that was 400 rows a query, which under load cost more than the ten graph searches' own distances.
        // Past the k-th live candidate only while the graph's score ties with it: the heap orders ties by `tie`.
        let kth = NaN
        for (let i = 0, taken = 0; i < keys.length; i++) {
          const row = Number(keys[i])
          if (this.live[row] !== 1) continue
          const score = 1 - distances[i]
          if (taken >= k && score !== kth) break
          top.push(row, score)
          if (++taken === k) kth = score
        }
      } else {
        // The candidates to rescore, and those past them whose graph distance ties with the last one (the graph's
        // order among ties is its own).
        const n = Math.min(asked, rescoredRows(k, effort), keys.length)
        const last = n > 0 ? distances[n - 1] : NaN
        for (let i = 0; i < keys.length && (i < n || distances[i] === last); i++) {
          const row = Number(keys[i])
          if (this.live[row] === 1) top.push(row, this.cosine(qNorm, row))
        }
      }
    }
    if (this.pendingCount > 0) {
      const waiting = this.waiting
      this.scoreRows(qNorm, this.queue, this.queueHead, this.queueTail, (row) => waiting[row] === 1, top)
    }
    return top.drain()
  }

  /**
   * The k best of the rows a filter keeps (all live). usearch's JavaScript binding takes no filter predicate,
   * so the rows are either scanned exactly or found in the graph with a candidate list widened by the inverse
   * of the share kept (a 10% filter asks 10x the candidates), widened again while fewer than k pass, up to the
   * whole graph; whichever reads fewer vectors. A graph search's cost grows with its list, so a small share is
   * far cheaper to scan (bench/filter.bench.ts, 100k x 1024, 1% kept: scan 1.3 ms, graph with ef 25,600 214 ms)
   * and a large one to search (50%: scan 67 ms, graph 4 ms). Rows not yet in the graph are scanned as usual.
   */
  private searchSubset(q: Float32Array, qNorm: number, k: number, effort: number, subset: RowSet, top: TopK): { rows: Int32Array; scores: Float64Array } {
    const { mask, rows, count } = subset
    if (count === 0) return top.drain()
    const d = this.dims
    const ef = Math.max(k, Math.ceil(this.opts.expansionSearch * Math.min(1, effort > 0 ? effort : 1)))
    let asked = Math.min(this.graphCount, Math.ceil(ef / (count / this.liveCount)))
    if (count * d <= Math.max(this.opts.filterScanBudget, this.opts.exactBudget) && count > k) {
      // Gathered into one matrix for usearch's SIMD scan: 1,000 rows of 256 in 0.17 ms, gather included, against
      // 0.6 ms for the JavaScript loop per row. Larger sets are read once by that loop instead: the copy would
      // double the memory traffic that bounds both (10,000 rows of 256: gather alone 13 ms, the loop 8 ms).
      if (gathered.length < count * d) gathered = new Float32Array(count * d)
      this.copyRows(rows, count, gathered)
      // q is the prepared copy (search), which owns its buffer. TIE_MARGIN more than k, as in the unfiltered scan: rows
      // that tie with the k-th are all offered to the heap, which orders ties by the store's tie order.
      const keys = (this.usearch.exactSearch(gathered.subarray(0, count * d), q, d, Math.min(count, k + TIE_MARGIN), 'cos' as never, 1) as { keys: BigUint64Array }).keys
      for (let i = 0; i < keys.length; i++) {
        const row = rows[Number(keys[i])]
        top.push(row, this.cosine(qNorm, row))
      }
      return top.drain()
    }
    if (count <= k || this.graphCount === 0 || count < asked * this.opts.filterGraphCost) {
      this.scoreRows(qNorm, rows, 0, count, () => true, top)
      return top.drain()
    }
    const rescored = Math.max(2 * k, k + 10)
    let kept: number[] = []
    const gq = this.graphQuery(q)
    for (;;) {
      const keys = this.graphSearch(gq, asked).keys
      kept = []
      for (let i = 0; i < keys.length && kept.length < rescored; i++) {
        const row = Number(keys[i])
        if (mask[row] === 1 && this.inGraph[row] === 1) kept.push(row)
      }
      if (kept.length >= k || asked >= this.graphCount) break
      asked = Math.min(this.graphCount, asked * 4)
    }
    for (const row of kept) top.push(row, this.cosine(qNorm, row))
    if (this.pendingCount > 0) {
      const waiting = this.waiting
      this.scoreRows(qNorm, this.queue, this.queueHead, this.queueTail, (row) => waiting[row] === 1 && mask[row] === 1, top)
    }
    return top.drain()
  }

  /**
   * The exact score (cosine) of q and each of `rows`, as an exact search scores them; NaN for a row not live. What a
   * rank-only search's hits are worth exactly (Collection.rescore).
   */
  exactScores(q: Float32Array, rows: readonly number[]): Float64Array {
    const out = new Float64Array(rows.length).fill(NaN)
    q = prepared.use(q)
    const qNorm = prepared.norm
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i]
      if (row >= 0 && row < this.rowsEnd && this.live[row] === 1) out[i] = this.cosine(qNorm, row)
    }
    return out
  }

  /** Cosine of the search's query (queryDot.setQuery) and a row; qNorm is the query's norm. */
  private cosine(qNorm: number, row: number): number {
    const denom = qNorm * this.norms[row]
    if (denom === 0) return 0
    const seg = this.segments[row >>> this.segShift]
    if (seg !== null) return queryDot.dot(seg, (row & this.segMask) * this.dims) / denom
    if (this.runBuf.length < this.dims) this.runBuf = new Float32Array(RUN_ROWS * this.dims)
    this.readSpilled(row, 1, this.runBuf, 0)
    return queryDot.dot(this.runBuf, 0) / denom
  }

  // ---- background graph building ------------------------------------------------------------------

  /** A graph is being built to replace the churned one (GRAPH_REBUILD_SHARE). */
  get graphRebuilding(): boolean {
    return this.rebuild !== null
  }

  /** Graph work is left: rows waiting for the graph, or a graph being rebuilt. */
  private get building(): boolean {
    return this.pendingCount > 0 || this.rebuild !== null
  }

  /** Resolves once no row waits for the graph and no graph is being rebuilt (or at once when none is). */
  whenIndexed(): Promise<void> {
    if (!this.building || this.stopped) return Promise.resolve()
    this.schedule()
    return new Promise((resolve) => this.idleWaiters.push(resolve))
  }

  stop(): void {
    this.stopped = true
    // Each clear function only for its own kind: clearImmediate on a Timeout corrupts Node's immediate queue.
    if (this.timer !== undefined) {
      if (this.timerIsTimeout) clearTimeout(this.timer as NodeJS.Timeout)
      else clearImmediate(this.timer as NodeJS.Immediate)
    }
    this.timer = undefined
    for (const w of this.idleWaiters.splice(0)) w()
  }

  schedule(): void {
    if (this.stopped || this.timer !== undefined || !this.building) return
    const run = () => {
      this.timer = undefined
      const started = performance.now()
      this.indexSlice()
      this.lastSliceMs = performance.now() - started
      if (this.building) this.schedule()
      else for (const w of this.idleWaiters.splice(0)) w()
    }
    const share = this.opts.busyShare ?? 1
    const busy = share < 1 && this.idleWaiters.length === 0 && performance.now() - this.lastWriteAt < 1000
    if (busy && this.lastSliceMs > 0) {
      // Rest long enough after the last slice that building takes `share` of the time.
      const t = setTimeout(run, Math.min(1000, (this.lastSliceMs * (1 - share)) / share))
      this.timer = t
      this.timerIsTimeout = true
    } else {
      this.timer = setImmediate(run)
      this.timerIsTimeout = false
    }
  }

  /**
   * Inserts as many waiting rows as fit in one slice, or while a graph is being rebuilt, every other slice (every one
   * while no row waits), as many of its rows; returns how many were inserted.
   */
  indexSlice(): number {
    const r = this.rebuild
    if (r !== null) {
      r.turn = !r.turn
      if (r.turn || this.pendingCount === 0) return this.rebuildSlice(r)
    }
    const batch = this.sliceRows()
    const d = this.dims
    let n = 0
    while (n < batch && this.queueHead < this.queueTail) {
      const row = this.queue[this.queueHead++]
      if (this.waiting[row] !== 1) continue
      this.scratchKeys[n] = BigInt(row)
      this.copyRow(row, this.scratchVectors, n * d)
      this.waiting[row] = 0
      this.inGraph[row] = 1
      n++
    }
    if (this.queueHead === this.queueTail) this.queueHead = this.queueTail = 0
    if (n === 0) return 0
    const vectors = this.scratchForGraph(n)
    const started = performance.now()
    const added = { rows: 0 }
    try {
      this.addToGraph(this.hnsw, this.scratchKeys.subarray(0, n), vectors, n, added)
    } catch (err) {
      // The rows of the adds that went through are in the graph; the others stay searchable by the exact scan of
      // waiting rows. Graph building stops for good.
      for (let i = added.rows; i < n; i++) {
        const row = Number(this.scratchKeys[i])
        this.inGraph[row] = 0
        this.waiting[row] = 1
      }
      this.compactQueue()
      for (let i = added.rows; i < n; i++) this.queue[this.queueTail++] = Number(this.scratchKeys[i])
      this.pendingCount -= added.rows
      this.graphCount += added.rows
      this.failure = err
      this.opts.log?.warn({ err }, 'vector graph insertion failed; new points are found by exact scan from now on')
      this.stop()
      return added.rows
    }
    this.measured(started, n)
    this.pendingCount -= n
    this.graphCount += n
    if (r !== null) {
      // The graph being rebuilt takes them too, in its turn.
      if (r.end + n > r.rows.length) {
        const grown = new Int32Array(Math.max(2 * r.rows.length, r.end + n))
        grown.set(r.rows.subarray(0, r.end))
        r.rows = grown
      }
      for (let i = 0; i < n; i++) r.rows[r.end++] = Number(this.scratchKeys[i])
    }
    return n
  }

  /** Rows one slice inserts, by the time a row took lately; the scratch arrays are made that large. */
  private sliceRows(): number {
    const batch = Math.max(1, Math.min(4096, Math.floor(this.opts.indexSliceMs / this.msPerVector)))
    if (this.scratchKeys.length < batch) {
      this.scratchKeys = new BigUint64Array(batch)
      this.scratchVectors = new Float32Array(batch * this.dims)
    }
    return batch
  }

  /** The first n scratch rows as the graph takes them: quantizeI8's copies for an i8 graph, else the rows. */
  private scratchForGraph(n: number): Float32Array | Int8Array {
    const d = this.dims
    const vectors = this.scratchVectors.subarray(0, n * d)
    if (this.opts.quantization !== 'i8') return vectors
    if (this.scratchI8.length < this.scratchVectors.length) this.scratchI8 = new Int8Array(this.scratchVectors.length)
    quantizeI8(vectors, d, this.scratchI8)
    return this.scratchI8.subarray(0, n * d)
  }

  /**
   * Takes the time n rows took to insert since `started` into the time per row, smoothed so that one slow slice (a
   * busy machine) does not collapse the next batch to one row.
   */
  private measured(started: number, n: number): void {
    this.msPerVector = this.msPerVector * 0.7 + Math.max(0.005, (performance.now() - started) / n) * 0.3
  }

  /**
   * Adds n rows to the graph with indexThreads threads, leaving it able to serve searchThreads searches at once;
   * `added.rows` counts the rows of the adds that went through (all n unless one throws).
   * usearch reserves room before an add that would fill the graph (size + rows >= capacity: to ceil2(size + rows),
   * which at a power of two is the same size) and gives the graph as many search contexts as that add has threads
   * (loading a graph gives it as many as the machine has cores). With indexThreads 1 a batch searched by two threads
   * failed ("Reserve capacity ahead of searches!"). So an add that reserves is made one row long with searchThreads
   * threads (a single row is inserted by one thread whatever the count), and the other rows are added with
   * indexThreads in adds that reserve nothing.
   */
  private addToGraph(graph: NativeIndex, keys: BigUint64Array, vectors: Float32Array | Int8Array, n: number, added: { rows: number }): void {
    const t = this.opts.indexThreads
    const wide = Math.max(t, this.opts.searchThreads ?? 1)
    if (wide === t) {
      graph.add(keys, vectors, t)
      added.rows = n
      return
    }
    const d = this.dims
    while (added.rows < n) {
      const i = added.rows
      // Rows an add takes without reserving.
      const room = graph.capacity() - graph.size() - 1
      const m = room >= n - i ? n - i : room > 0 ? room : 1
      graph.add(keys.subarray(i, i + m), vectors.subarray(i * d, (i + m) * d), room > 0 ? t : wide)
      added.rows += m
    }
  }

  /** Starts building a new graph from the graph's rows once its churn calls for it (GRAPH_REBUILD_SHARE). */
  private maybeRebuild(): void {
    if (this.rebuild !== null || this.stopped || this.failure !== undefined || this.rebuildFailure !== undefined) return
    if (this.graphChurn < Math.max(GRAPH_REBUILD_MIN, this.graphCount * (this.opts.rebuildShare ?? GRAPH_REBUILD_SHARE))) return
    const rows = new Int32Array(this.graphCount)
    let n = 0
    for (let row = 0; row < this.rowsEnd; row++) if (this.inGraph[row] === 1) rows[n++] = row
    this.rebuild = { graph: this.newGraph(), rows, end: n, next: 0, held: new Uint8Array(this.capacity), added: 0, churn: 0, turn: false }
    this.schedule()
  }

  /**
   * Adds the next rows of the graph being rebuilt: those in the searched graph and not yet in this one (a row removed
   * meanwhile is skipped; reused and taken by the searched graph, it comes again at the end of the list). Puts the new
   * graph in place once it has come to the end. Returns the rows added.
   */
  private rebuildSlice(r: NonNullable<DenseIndex['rebuild']>): number {
    const batch = this.sliceRows()
    const d = this.dims
    let n = 0
    while (n < batch && r.next < r.end) {
      const row = r.rows[r.next++]
      if (this.inGraph[row] !== 1 || r.held[row] === 1) continue
      // Marked at once: the list may name a row twice within one slice.
      r.held[row] = 1
      this.scratchKeys[n] = BigInt(row)
      this.copyRow(row, this.scratchVectors, n * d)
      n++
    }
    if (n > 0) {
      const vectors = this.scratchForGraph(n)
      const started = performance.now()
      const added = { rows: 0 }
      try {
        this.addToGraph(r.graph, this.scratchKeys.subarray(0, n), vectors, n, added)
      } catch (err) {
        // The searched graph stays as it is, churned but whole; no rebuild is tried again.
        this.rebuild = null
        this.rebuildFailure = err
        this.opts.log?.warn({ err }, 'rebuilding the vector graph failed; the graph in use is kept')
        return added.rows
      }
      this.measured(started, n)
      r.added += n
    }
    if (r.next === r.end) {
      this.rebuild = null
      if (r.added === this.graphCount) {
        this.hnsw = r.graph
        this.graphChurn = r.churn
        this.graphRebuilds++
      } else {
        this.rebuildFailure = new Error(`rebuilt graph holds ${r.added} rows, the graph in use ${this.graphCount}`)
        this.opts.log?.warn({ err: this.rebuildFailure }, 'rebuilding the vector graph failed; the graph in use is kept')
      }
    }
    return n
  }

  // ---- persistence of the graph -------------------------------------------------------------------

  /** Writes the graph (rows currently in it) to path; false when it is empty and nothing was written. */
  saveGraph(path: string): boolean {
    if (this.graphCount === 0) return false
    this.hnsw.save(path)
    this.savingGraph = this.inGraph.slice()
    return true
  }

  /** The snapshot is on disk with the file saveGraph wrote as its graph (none when saveGraph wrote none). */
  commitSavedGraph(): void {
    this.inSavedGraph.fill(0)
    if (this.savingGraph !== null) this.inSavedGraph.set(this.savingGraph)
    this.savingGraph = null
  }

  /** The snapshot failed: the file saveGraph wrote is not the snapshot's graph. */
  dropSavedGraph(): void {
    this.savingGraph = null
  }

  /** Loads a graph saved by saveGraph; false (graph left empty) when it does not hold exactly `expected` rows. */
  loadGraph(path: string, expected: number): boolean {
    const g = this.newGraph()
    try {
      g.load(path)
    } catch {
      return false
    }
    if (g.size() !== expected) return false
    this.hnsw = g
    this.rebuild = null
    this.graphChurn = 0
    return true
  }

  /**
   * After loadGraph and the rows' adopt calls: removes from the loaded graph the rows it holds that were not
   * adopted as in it. A snapshot may name a graph file written by an earlier one (see Collection.startSnapshot);
   * rows deleted since are still in that file, and a deleted row's number may hold another point by now.
   */
  dropStaleGraphRows(): number {
    // The graph holds exactly the rows adopted as in it: nothing to look for (every file a snapshot wrote).
    if (this.hnsw.size() === this.graphCount) return 0
    const stale: bigint[] = []
    const candidates: bigint[] = []
    for (let row = 0; row < this.rowsEnd; row++) if (this.inGraph[row] !== 1) candidates.push(BigInt(row))
    if (candidates.length === 0) return 0
    const held = this.hnsw.contains(BigUint64Array.from(candidates))
    for (let i = 0; i < candidates.length; i++) if (held[i]) stale.push(candidates[i])
    if (stale.length > 0) {
      this.hnsw.remove(BigUint64Array.from(stale))
      // A saved graph's own history of removals is not known: these at least.
      this.graphChurn += stale.length
      this.maybeRebuild()
    }
    return stale.length
  }

  /** Rewrites the waiting queue without stale entries; required before a dead row is handed out again. */
  compactQueue(): void {
    let w = 0
    for (let i = this.queueHead; i < this.queueTail; i++) {
      const row = this.queue[i]
      if (this.waiting[row] === 1) this.queue[w++] = row
    }
    this.queueHead = 0
    this.queueTail = w
  }

  private enqueue(row: number): void {
    if (this.queueTail === this.queue.length) {
      if (this.queueHead > 0) {
        this.queue.copyWithin(0, this.queueHead, this.queueTail)
        this.queueTail -= this.queueHead
        this.queueHead = 0
      }
      if (this.queueTail === this.queue.length) {
        const grown = new Int32Array(this.queue.length * 2)
        grown.set(this.queue)
        this.queue = grown
      }
    }
    this.queue[this.queueTail++] = row
    this.waiting[row] = 1
    this.pendingCount++
    this.lastWriteAt = performance.now()
    this.schedule()
  }

  private ensureCapacity(rows: number): void {
    if (rows <= this.capacity) return
    const d = this.dims
    let cap: number
    const segRows = this.segRows
    if (this.capacity < segRows) {
      // The first segment grows by 1.5x steps up to its full size (a copy of at most one segment's rows; it is
      // never spilled before it is full).
      cap = this.capacity
      while (cap < rows && cap < segRows) cap = Math.min(segRows, Math.ceil(cap * 1.5))
      const first = new Float32Array(cap * d)
      first.set(this.segments[0]!.subarray(0, Math.min(this.rowsEnd, this.capacity) * d))
      this.segments[0] = first
    }
    // Then whole segments, never moved; the per-row flags below are small and still grow by copying.
    while (this.segments.length * segRows < rows) this.segments.push(new Float32Array(segRows * d))
    const first = this.segments[0]
    cap = (first === null ? segRows : first.length / d) + (this.segments.length - 1) * segRows
    const grow8 = (a: Uint8Array) => {
      const b = new Uint8Array(cap)
      b.set(a)
      return b
    }
    const norms = new Float32Array(cap)
    norms.set(this.norms)
    this.norms = norms
    this.live = grow8(this.live)
    this.inGraph = grow8(this.inGraph)
    this.inSavedGraph = grow8(this.inSavedGraph)
    this.waiting = grow8(this.waiting)
    if (this.rebuild !== null) this.rebuild.held = grow8(this.rebuild.held)
    this.capacity = cap
  }
}
