// One KB's collection in the embedded store: points in memory (dense arena + HNSW, sparse inverted
// index, payloads) and on disk under <dir>/<kb_id>/:
//
//   manifest.json          dimensions, graph parameters, the current snapshot
//   wal-<seq>.log          write-ahead log segments; those after the snapshot's seq are replayed at open
//   points-<seq>.bin       snapshot of the points (snapshot.ts)
//   hnsw-<seq>.usearch     the HNSW graph saved with the snapshot
//
// Writes go through one queue: every record waiting while an fsync runs is written and fsync'd by the
// next one (group commit), then applied in memory, then acknowledged. Snapshots are taken between two
// groups: the log is switched to a new segment and the state captured in the same tick, so the snapshot
// holds exactly the segments up to the old one; they are deleted once the snapshot and the manifest
// naming it are on disk. A crash at any point leaves either the old or the new snapshot, plus every log
// segment after it.
import { promises as fs } from 'node:fs'
import { join } from 'node:path'
import { serviceUnavailable } from '../../kernel/errors.ts'
import type { ChunkPayload, VectorHit, VectorPoint, VectorQuery } from '../ports.ts'
import { DenseIndex, GRAPH_FORMAT, type DenseIndexOptions, type HnswParams, type PrefetchedGraph, type Usearch } from './dense-index.ts'
import { PayloadTable } from './payloads.ts'
import { dimensionMismatch, invalidPoint, pointProblem } from './errors.ts'
import { checkFilter, selectRows, type RowSet } from './filter.ts'
import { exists, fsyncDir, fsyncFile, writeFileAtomic } from './files.ts'
import { readSnapshot, writeSnapshot, type SnapshotCapture } from './snapshot.ts'
import { SparseIndex } from './sparse-index.ts'
import { deleteDocRecord, readRecords, RECORD_UPSERT, upsertRecord, WalFile, type DecodedPoint, type WalRecordWriter } from './wal.ts'

export interface CollectionOptions extends DenseIndexOptions {
  /** A snapshot is taken once the log since the last one reaches max(this, half the last snapshot's size). */
  snapshotMinBytes: number
  /** After this long without writes (and with the graph built), a non-empty log is folded into a snapshot. */
  snapshotIdleMs: number
  /**
   * Largest graph (DenseIndex.graphBytes) written by a snapshot that the log's size called for while the graph
   * trails the writes. Above it, the snapshot keeps the graph file of the one before (the rows it holds stay
   * valid; the others are inserted again after a restart), and the whole graph is written once it has caught
   * up (the idle snapshot) or on close. usearch writes the graph synchronously: 70k rows of 1,024 dimensions in
   * f16 took 125-264 ms, the longest stall of the event loop in a 5,000-document ingest.
   */
  snapshotGraphMaxBytes: number
  /**
   * Full arena segments go to SPILL_FILE in the collection's folder instead of staying in memory (DenseIndex), and
   * full blocks of the sparse rows' own terms to SPARSE_SPILL_FILE (SparseIndex).
   */
  denseOnDisk: boolean
  /** Entries of a full block of the sparse rows' own terms (SparseIndexOptions.blockEntries); tests set small ones. */
  sparseBlockEntries?: number
}

interface Manifest {
  format: 1
  kb_id: string
  dimensions: number
  graph: GraphParams
  snapshot: { seq: number; points: string; graph: string | null; graphRows: number } | null
}

/** What the snapshot's graph file was built with; format: GRAPH_FORMAT (absent in manifests written before it, format 1). */
type GraphParams = Pick<HnswParams, 'quantization' | 'connectivity' | 'expansionAdd'> & { format?: number }

const graphParams = (opts: HnswParams): GraphParams =>
  ({ quantization: opts.quantization, connectivity: opts.connectivity, expansionAdd: opts.expansionAdd, format: GRAPH_FORMAT })

type Settle = { resolve: (v: unknown) => void; reject: (e: unknown) => void }
type Op =
  | ({ kind: 'upsert'; record: WalRecordWriter; points: readonly VectorPoint[] } & Settle)
  | ({ kind: 'delete'; record: WalRecordWriter; docId: string } & Settle)
  | ({ kind: 'snapshot'; record: null } & Settle)

const MANIFEST = 'manifest.json'
/** The dense index's spill file: scratch, rebuilt at every open. */
const SPILL_FILE = 'dense.f32'
/** The payload table's spill file (the rows of the dense index's spilled segments): scratch too. */
const PAYLOAD_SPILL_FILE = 'payloads.jsonl'
/** The sparse index's spill file (full blocks of the rows' own terms): scratch too. */
const SPARSE_SPILL_FILE = 'sparse.bin'
/**
 * Largest buffer the write loop keeps for its groups' log records (a larger group gets one of its own). A bulk
 * ingest's group is a few documents: about 85 KB each at 1,024 dimensions and 14 chunks.
 */
const WAL_BUFFER_MAX = 2 * 2 ** 20
const walName = (seq: number) => `wal-${String(seq).padStart(10, '0')}.log`
const WAL_RE = /^wal-(\d+)\.log$/

export class Collection {
  readonly kbId: string
  readonly dir: string
  readonly dims: number
  private readonly opts: CollectionOptions
  private manifest: Manifest
  private readonly dense: DenseIndex
  private readonly sparse: SparseIndex
  private readonly payloads: PayloadTable
  private readonly chunkRow = new Map<string, number>()
  private readonly docRows = new Map<string, Set<number>>()
  /** Rows free for reuse (no stale index entry points at them). */
  private free: number[] = []
  /** Rows deleted since the last purge: the sparse postings and the graph queue may still name them. */
  private dying: number[] = []
  private nextRow = 0
  // Persistence.
  private wal!: WalFile
  private walSeq = 0
  private walBytes = 0
  /**
   * The snapshot's graph lacked rows of its points (its file missing, written with other graph parameters,
   * or written part-built): those rows are inserted again, and the next snapshot saves the graph even if no
   * write came, so that later starts do not rebuild it once more.
   */
  private graphToSave = false
  /** DenseIndex.graphRebuilds when the last snapshot wrote the graph: a graph rebuilt since is saved by the next one. */
  private rebuildsSaved = 0
  /** The graph file the dense index's saved rows describe (DenseIndex.isInSavedGraph): loaded or last written. */
  private savedGraphFile: string | null = null
  private lastSnapshotBytes = 0
  private ops: Op[] = []
  /** True from the start of the write loop to the instant it sees an empty queue (set and cleared synchronously). */
  private looping = false
  private loopDone: Promise<void> = Promise.resolve()
  /** Where flushGroup writes a group's log records; dropped when the write loop ends. */
  private walBuffer: Buffer | null = null
  private snapshotTask: Promise<void> | null = null
  private idleTimer: NodeJS.Timeout | undefined
  private closed = false
  private readonly scratchSeen = new Set<number>()
  /** Reused by filtered searches (they run synchronously, one at a time). */
  private scratchRows: RowSet | undefined

  private constructor(kbId: string, dir: string, dims: number, usearch: Usearch, opts: CollectionOptions, manifest: Manifest) {
    this.kbId = kbId
    this.dir = dir
    this.dims = dims
    this.opts = opts
    this.manifest = manifest
    this.dense = new DenseIndex(usearch, { ...opts, dimensions: dims, spillPath: opts.denseOnDisk ? join(dir, SPILL_FILE) : undefined })
    this.payloads = new PayloadTable(opts.denseOnDisk ? join(dir, PAYLOAD_SPILL_FILE) : undefined)
    this.sparse = new SparseIndex({ spillPath: opts.denseOnDisk ? join(dir, SPARSE_SPILL_FILE) : undefined, blockEntries: opts.sparseBlockEntries })
  }

  static async create(kbId: string, dir: string, dims: number, usearch: Usearch, opts: CollectionOptions): Promise<Collection> {
    // Only called when the folder holds no manifest: whatever is left there (an interrupted drop or
    // creation) must not be replayed into the new collection.
    await fs.rm(dir, { recursive: true, force: true })
    await fs.mkdir(dir, { recursive: true })
    const manifest: Manifest = {
      format: 1,
      kb_id: kbId,
      dimensions: dims,
      graph: graphParams(opts),
      snapshot: null,
    }
    const c = new Collection(kbId, dir, dims, usearch, opts, manifest)
    c.walSeq = 1
    c.wal = await WalFile.open(join(dir, walName(1)))
    // The manifest is written last: a folder without one is an unfinished creation and is ignored.
    await writeFileAtomic(dir, join(dir, MANIFEST), JSON.stringify(manifest))
    await fsyncDir(join(dir, '..'))
    return c
  }

  /** Reads the manifest only (dimensions check before a full open). Null when the folder is no collection. */
  static async readManifest(dir: string): Promise<Manifest | null> {
    try {
      return JSON.parse(await fs.readFile(join(dir, MANIFEST), 'utf8')) as Manifest
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
      throw err
    }
  }

  static async open(kbId: string, dir: string, usearch: Usearch, opts: CollectionOptions): Promise<Collection | null> {
    const manifest = await Collection.readManifest(dir)
    if (manifest === null) return null
    const c = new Collection(kbId, dir, manifest.dimensions, usearch, opts, manifest)
    await c.load()
    return c
  }

  // ---- reads ----------------------------------------------------------------------------------------

  get count(): number {
    return this.dense.liveCount
  }

  search(query: VectorQuery): { dense: VectorHit[]; sparse: VectorHit[] } {
    const k = Math.floor(query.limit)
    const out = { dense: [] as VectorHit[], sparse: [] as VectorHit[] }
    if (!(k > 0)) return out
    if (query.dense !== undefined && query.dense.length !== this.dims) throw dimensionMismatch(this.kbId, this.dims, query.dense.length)
    let subset: RowSet | undefined
    if (query.filter !== undefined) {
      if (checkFilter(this.kbId, query.filter)) return out
      const view = { rowsEnd: this.dense.rowsEnd, live: this.dense.liveFlags, docRows: this.docRows, payloads: this.payloads }
      subset = this.scratchRows = selectRows(query.filter, view, this.scratchRows)
      if (subset.count === 0) return out
    }
    if (query.dense !== undefined) {
      const r = this.dense.search(query.dense, k, query.effort, subset, query.rankOnly === true, this.payloads.tieOrder)
      out.dense = this.hits(r.rows, r.scores)
    }
    if (query.sparse !== undefined && query.sparse.indices.length > 0) {
      const r = this.sparse.search(query.sparse, k, subset, this.payloads.tieOrder)
      out.sparse = this.hits(r.rows, r.scores)
    }
    return out
  }

  /** Whether an unfiltered dense search searches the graph now (prefetch shares that work; an exact scan it does not). */
  get searchesGraph(): boolean {
    return this.dense.searchesGraph
  }

  /**
   * Several searches answered together, the first step: the graph searched for the unfiltered dense ones of `queries`
   * in one native call over `threads` threads (DenseIndex.prefetchGraph; `quantized` as it says), each query's result
   * in its place (null: none). Then searchPrefetched answers each as search() answers it alone. Throws when the batch
   * fails as a whole.
   */
  prefetch(queries: readonly VectorQuery[], threads: number, quantized: Map<Float32Array, Int8Array>): (PrefetchedGraph | null)[] {
    return this.dense.prefetchGraph(queries.map((q) => (q.dense !== undefined && q.filter === undefined ? { q: q.dense, k: q.limit, effort: q.effort } : null)), threads, quantized)
  }

  /** search(query) with `pre` (from prefetch, for this query) as its graph search; its error, if it fails, returned. */
  searchPrefetched(query: VectorQuery, pre: PrefetchedGraph | null): { dense: VectorHit[]; sparse: VectorHit[] } | Error {
    this.dense.usePrefetched(pre)
    try {
      return this.search(query)
    } catch (err) {
      return err instanceof Error ? err : new Error(String(err))
    } finally {
      this.dense.usePrefetched(null)
    }
  }

  /**
   * Exact scores of `dense` for hits of an earlier search of this collection (VectorStore.rescore): by their rows
   * (VectorHit.key), or the chunk's row now where it was written again since (a new row); NaN for a chunk deleted.
   */
  rescore(dense: Float32Array, hits: readonly { id: string; key?: number }[]): Float64Array {
    if (dense.length !== this.dims) throw dimensionMismatch(this.kbId, this.dims, dense.length)
    const chunkIds = this.payloads.chunkIds
    const rows = hits.map((h) => (h.key !== undefined && chunkIds[h.key] === h.id ? h.key : this.chunkRow.get(h.id) ?? -1))
    return this.dense.exactScores(dense, rows)
  }

  private hits(rows: Int32Array, scores: Float64Array): VectorHit[] {
    const hits: VectorHit[] = new Array(rows.length)
    // Fresh payload objects, read lazily: callers decorate results, and the stored payload must not change.
    for (let i = 0; i < rows.length; i++) hits[i] = this.payloads.hit(rows[i], scores[i])
    return hits
  }

  docVectors(docId: string): Float32Array[] {
    const rows = this.docRows.get(docId)
    if (rows === undefined) return []
    const index = this.payloads.chunkIndex
    return [...rows].sort((a, b) => index[a] - index[b]).map((row) => this.dense.vector(row))
  }

  /**
   * docVectors without holding the event loop (dedup stage 3 reads a candidate of any size while the service
   * serves): the rows are read into one matrix `sliceRows` at a time, with a turn of the event loop between slices
   * (a 5 MB document's 7,351 rows took 57-208 ms in one piece). The vectors are views of that matrix, back to back,
   * so packRows(…, true) hands it to the compute pool without a copy. A document whose rows change meanwhile is
   * read again (twice at most, then as it stands).
   */
  async docVectorsSliced(docId: string, sliceRows = 256): Promise<Float32Array[]> {
    for (let attempt = 0; ; attempt++) {
      const set = this.docRows.get(docId)
      if (set === undefined || set.size === 0) return []
      const index = this.payloads.chunkIndex
      const rows = Int32Array.from([...set].sort((a, b) => index[a] - index[b]))
      const d = this.dense.dims
      const flat = new Float32Array(rows.length * d)
      let changed = false
      for (let i = 0; i < rows.length; i += sliceRows) {
        if (i > 0) {
          await new Promise<void>((resolve) => setImmediate(resolve))
          if (this.closed) throw serviceUnavailable(`Vector collection '${this.kbId}' is closed`)
          if (this.docRows.get(docId) !== set || set.size !== rows.length) {
            changed = true
            break
          }
        }
        this.dense.readRows(rows.subarray(i, i + sliceRows), flat.subarray(i * d))
      }
      if (!changed) return Array.from(rows, (_, i) => flat.subarray(i * d, (i + 1) * d))
      if (attempt >= 2) return this.docVectors(docId)
    }
  }

  /** A document's points as written (dense, sparse, payload), in chunk order. */
  docPoints(docId: string): VectorPoint[] {
    const rows = this.docRows.get(docId)
    if (rows === undefined) return []
    const index = this.payloads.chunkIndex
    return [...rows].sort((a, b) => index[a] - index[b]).map((row) => ({
      dense: this.dense.vector(row),
      sparse: this.sparse.rowVector(row),
      payload: this.payloads.hit(row, 0).payload,
    }))
  }

  /** Live points per document (the writes applied so far). */
  docChunkCounts(): Map<string, number> {
    const counts = new Map<string, number>()
    for (const [docId, rows] of this.docRows) if (rows.size > 0) counts.set(docId, rows.size)
    return counts
  }

  whenIndexed(): Promise<void> {
    return this.dense.whenIndexed()
  }

  stats() {
    return {
      points: this.dense.liveCount,
      inGraph: this.dense.graphCount,
      pending: this.dense.pendingCount,
      rows: this.dense.rowsEnd,
      terms: this.sparse.termCount,
      walBytes: this.walBytes,
      snapshotBytes: this.lastSnapshotBytes,
      snapshotSeq: this.manifest.snapshot?.seq ?? 0,
      graphFailure: this.dense.failure === undefined ? null : String(this.dense.failure),
      onDiskRows: this.dense.spilledRows,
      payloadsOnDisk: this.payloads.onDisk,
      sparseOnDiskEntries: this.sparse.onDiskEntries,
      batchedSearches: this.dense.batchedSearches,
      graphChurn: this.dense.graphChurn,
      graphRebuilds: this.dense.graphRebuilds,
    }
  }

  // ---- writes ---------------------------------------------------------------------------------------

  upsert(points: readonly VectorPoint[]): Promise<void> {
    if (this.closed) return Promise.reject(serviceUnavailable(`Vector collection '${this.kbId}' is closed`))
    if (points.length === 0) return Promise.resolve()
    for (const p of points) {
      const problem = pointProblem(p, this.scratchSeen)
      if (problem !== null) return Promise.reject(invalidPoint(this.kbId, problem))
      if (p.dense.length !== this.dims) return Promise.reject(dimensionMismatch(this.kbId, this.dims, p.dense.length))
    }
    // The payloads are turned into the log record's JSON now; the arrays are written to the log, then copied into
    // the indexes once it is on disk, so the caller must not change them before the promise settles.
    const record = upsertRecord(points, this.dims)
    return new Promise<unknown>((resolve, reject) => this.push({ kind: 'upsert', record, points, resolve, reject })).then(() => undefined)
  }

  deleteByDoc(docId: string): Promise<number> {
    if (this.closed) return Promise.reject(serviceUnavailable(`Vector collection '${this.kbId}' is closed`))
    // Nothing to delete and nothing queued that could add it: no log record, no fsync.
    if (!this.docRows.has(docId) && this.ops.length === 0 && !this.looping) return Promise.resolve(0)
    return new Promise<unknown>((resolve, reject) => this.push({ kind: 'delete', record: deleteDocRecord(docId), docId, resolve, reject })) as Promise<number>
  }

  /** Takes a snapshot now (after the writes already queued) and resolves once it is on disk. */
  async snapshot(): Promise<void> {
    if (this.closed) return
    await new Promise<unknown>((resolve, reject) => this.push({ kind: 'snapshot', record: null, resolve, reject }))
  }

  private push(op: Op): void {
    this.ops.push(op)
    // The flag is cleared in the loop's own `finally`, in the same tick it finds the queue empty: a write
    // pushed after that starts a new loop, one pushed before is taken by the running loop.
    if (!this.looping) {
      this.looping = true
      this.loopDone = this.flushLoop()
    }
  }

  private async flushLoop(): Promise<void> {
    // No await between the last queue check and the `finally`: see push().
    try {
      while (this.ops.length > 0) await this.flushGroup(this.ops.splice(0))
    } finally {
      this.looping = false
      // Kept through a burst of writes only.
      this.walBuffer = null
    }
  }

  private async flushGroup(group: Op[]): Promise<void> {
    let size = 0
    for (const o of group) if (o.record !== null) size += o.record.size
    if (size > 0) {
      // The group's records written one after another into one buffer: the one this loop reuses while writes keep
      // coming, unless the group is larger (WAL_BUFFER_MAX). A failure to allocate or encode fails the group's writes
      // as a failed log write does.
      let data: Buffer
      try {
        if (size > WAL_BUFFER_MAX) data = Buffer.allocUnsafe(size)
        else {
          if (this.walBuffer === null || this.walBuffer.length < size) this.walBuffer = Buffer.allocUnsafe(Math.min(WAL_BUFFER_MAX, Math.max(size, 2 * (this.walBuffer?.length ?? 0))))
          data = this.walBuffer.subarray(0, size)
        }
        let at = 0
        for (const o of group) {
          if (o.record === null) continue
          o.record.write(data, at)
          at += o.record.size
        }
        await this.wal.append(data)
      } catch (err) {
        const e = serviceUnavailable(`Vector collection '${this.kbId}': write-ahead log write failed`, err)
        for (const o of group) o.reject(e)
        return
      }
      this.walBytes += data.length
    }
    const wantSnapshot: Op[] = []
    for (const o of group) {
      try {
        if (o.kind === 'upsert') {
          this.applyUpsert(o.points, true)
          o.resolve(o.points.length)
        } else if (o.kind === 'delete') {
          o.resolve(this.applyDelete(o.docId))
        } else {
          wantSnapshot.push(o)
        }
      } catch (err) {
        // Unreachable unless memory runs out: points are validated before they are logged.
        this.opts.log?.warn({ err, kb_id: this.kbId }, 'vector write logged but not applied; a restart replays it')
        o.reject(err)
      }
    }
    this.purgeIfWorthIt()
    if (wantSnapshot.length > 0 || this.snapshotDue()) {
      try {
        const { task } = await this.startSnapshot(wantSnapshot.length > 0)
        // Resolving with the task makes an explicit snapshot() wait until the files are on disk.
        for (const o of wantSnapshot) o.resolve(task)
      } catch (err) {
        for (const o of wantSnapshot) o.reject(err)
        this.opts.log?.warn({ err, kb_id: this.kbId }, 'vector snapshot failed')
      }
    }
    this.armIdleSnapshot()
  }

  private applyUpsert(points: readonly (VectorPoint | DecodedPoint)[], copy: boolean): void {
    for (const p of points) {
      const id = p.payload.chunk_id
      const old = this.chunkRow.get(id)
      if (old !== undefined) this.removeRow(old)
      const row = this.free.length > 0 ? this.free.pop()! : this.nextRow++
      const payload: ChunkPayload = copy ? { ...p.payload } : p.payload
      this.dense.set(row, p.dense)
      // Copied into the index's blocks: nothing here keeps the point's arrays (or a log record they view).
      this.sparse.add(row, p.sparse)
      this.payloads.set(row, payload)
      this.chunkRow.set(id, row)
      let rows = this.docRows.get(payload.doc_id)
      if (rows === undefined) this.docRows.set(payload.doc_id, (rows = new Set()))
      rows.add(row)
    }
    // Payloads follow the dense rows to disk, segment by segment.
    if (this.dense.spilledRows > this.payloads.spilledUpTo) this.payloads.spillRows(this.dense.spilledRows)
  }

  private applyDelete(docId: string): number {
    const rows = this.docRows.get(docId)
    if (rows === undefined) return 0
    const n = rows.size
    for (const row of [...rows]) this.removeRow(row)
    this.docRows.delete(docId)
    return n
  }

  private removeRow(row: number): void {
    const chunkId = this.payloads.chunkIds[row]!
    const docId = this.payloads.docIds[row]!
    this.dense.remove(row)
    this.sparse.remove(row)
    this.chunkRow.delete(chunkId)
    const rows = this.docRows.get(docId)
    if (rows !== undefined) {
      rows.delete(row)
      if (rows.size === 0) this.docRows.delete(docId)
    }
    this.payloads.delete(row)
    this.dying.push(row)
  }

  /** Hands deleted rows back for reuse once enough piled up; cleans the indexes that still name them. */
  private purgeIfWorthIt(): void {
    if (this.dying.length === 0 || this.snapshotTask !== null) return
    if (this.sparse.deadRatio < 0.25 && this.dying.length < Math.max(1024, this.dense.liveCount / 4)) return
    this.sparse.compact()
    this.dense.compactQueue()
    // A snapshot being written may still read a dying row's arena slot: handled by the guard above.
    for (const row of this.dying) this.free.push(row)
    this.dying = []
  }

  // ---- snapshots ------------------------------------------------------------------------------------

  private snapshotDue(): boolean {
    if (this.snapshotTask !== null || this.walBytes === 0) return false
    return this.walBytes >= Math.max(this.opts.snapshotMinBytes, this.lastSnapshotBytes / 2)
  }

  /** Whether the files lack something the memory holds: logged writes, or a graph rebuilt since the snapshot. */
  private unsaved(): boolean {
    return this.walBytes > 0 || this.graphToSave || this.dense.graphRebuilds !== this.rebuildsSaved
  }

  private armIdleSnapshot(): void {
    if (this.idleTimer !== undefined) clearTimeout(this.idleTimer)
    this.idleTimer = undefined
    if (this.closed || !this.unsaved() || !(this.opts.snapshotIdleMs > 0)) return
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined
      if (this.closed || !this.unsaved() || this.snapshotTask !== null) return
      // Wait for the graph (and a rebuild under way): a snapshot taken now would make the next start rebuild those
      // rows again, or keep the churned graph.
      if (this.dense.pendingCount > 0 || this.dense.graphRebuilding) return void this.dense.whenIndexed().then(() => this.armIdleSnapshot())
      this.snapshot().catch((err: unknown) => this.opts.log?.warn({ err, kb_id: this.kbId }, 'idle vector snapshot failed'))
    }, this.opts.snapshotIdleMs)
    this.idleTimer.unref()
  }

  /**
   * Runs inside the write loop: switches the log, captures the state, and returns the task writing it
   * (this.snapshotTask is the same task with its failure logged, so it never rejects unobserved).
   */
  private async startSnapshot(asked: boolean): Promise<{ task: Promise<void> }> {
    while (this.snapshotTask !== null) await this.snapshotTask
    if (!this.unsaved() && this.manifest.snapshot !== null) return { task: Promise.resolve() }
    const seq = this.walSeq
    const next = await WalFile.open(join(this.dir, walName(seq + 1)))
    await fsyncDir(this.dir)
    const old = this.wal
    this.wal = next
    this.walSeq = seq + 1
    await old.close()
    const coveredBytes = this.walBytes
    // From here to the end of the capture nothing awaits: the graph and the flags are taken at one instant.
    const graphTmp = join(this.dir, `hnsw-${seq}.usearch.tmp`)
    const graphComplete = this.dense.pendingCount === 0
    // The graph is written unless the snapshot is due to the log's size alone while the graph trails the writes
    // (a bulk ingest) and is too big to write without a long stall: the earlier snapshot's graph file is then
    // kept, with the rows it holds that have not changed since.
    const previous = this.manifest.snapshot
    const keep = !asked && !graphComplete && previous !== null && previous.graph !== null && previous.graph === this.savedGraphFile &&
      this.dense.graphBytes > this.opts.snapshotGraphMaxBytes
    const graph = keep
      ? { file: previous!.graph!, rows: previous!.graphRows, kept: true }
      : this.dense.saveGraph(graphTmp) ? { file: graphTmp, rows: this.dense.graphCount, kept: false } : null
    if (!keep) this.rebuildsSaved = this.dense.graphRebuilds
    const capture = this.capture(keep)
    // keep implies the graph trails: a graph written whole is one written while it was complete.
    const task = this.finishSnapshot(seq, capture, graph, coveredBytes, graphComplete)
    this.snapshotTask = task
      .catch((err: unknown) => this.opts.log?.warn({ err, kb_id: this.kbId }, 'vector snapshot failed; the log keeps every write'))
      .finally(() => {
        this.snapshotTask = null
      })
    // Wrapped: an async function returning the bare promise would make the write loop wait for the files.
    return { task }
  }

  /** The state to write; keptGraph: rows are in the graph when the graph file last written holds them. */
  private capture(keptGraph: boolean): SnapshotCapture {
    const n = this.dense.liveCount
    const live = new Int32Array(n)
    const inGraph = new Uint8Array(n)
    const chunkIndex = new Int32Array(n)
    const chunkIds: string[] = new Array(n)
    const docIds: string[] = new Array(n)
    const payloads: SnapshotCapture['payloads'] = new Array(n)
    let i = 0
    for (let row = 0; row < this.dense.rowsEnd; row++) {
      if (!this.dense.isLive(row)) continue
      live[i] = row
      inGraph[i] = (keptGraph ? this.dense.isInSavedGraph(row) : this.dense.isInGraph(row)) ? 1 : 0
      chunkIndex[i] = this.payloads.chunkIndex[row]
      chunkIds[i] = this.payloads.chunkIds[row]!
      docIds[i] = this.payloads.docIds[row]!
      payloads[i] = this.payloads.raw(row)
      i++
    }
    return {
      dims: this.dims,
      rowsEnd: this.dense.rowsEnd,
      rows: live,
      inGraph,
      norms: this.dense.norms,
      dense: this.dense.arenaSource(),
      sparse: this.sparse.captureRows(live),
      postings: this.sparse.capture(),
      chunkIds,
      docIds,
      chunkIndex,
      payloads,
      readPayloads: (at, into) => this.payloads.readRecordsInto(at, into),
    }
  }

  /**
   * graph: the temp file just written (renamed to hnsw-<seq>.usearch here), or (kept) the earlier snapshot's
   * file as it is, with the rows it holds; null when the graph is empty. graphWhole: the graph written holds
   * every row.
   */
  private async finishSnapshot(seq: number, capture: SnapshotCapture, graph: { file: string; rows: number; kept: boolean } | null, coveredBytes: number, graphWhole: boolean): Promise<void> {
    const pointsName = `points-${seq}.bin`
    const graphTmp = graph !== null && !graph.kept ? graph.file : null
    const graphName = graph === null ? null : graph.kept ? graph.file : `hnsw-${seq}.usearch`
    const graphRows = graph?.rows ?? 0
    try {
      const size = await writeSnapshot(join(this.dir, `${pointsName}.tmp`), capture)
      await fs.rename(join(this.dir, `${pointsName}.tmp`), join(this.dir, pointsName))
      if (graphTmp !== null && graphName !== null) {
        await fsyncFile(graphTmp)
        await fs.rename(graphTmp, join(this.dir, graphName))
      }
      await fsyncDir(this.dir)
      const previous = this.manifest.snapshot
      const manifest: Manifest = { ...this.manifest, snapshot: { seq, points: pointsName, graph: graphName, graphRows } }
      await writeFileAtomic(this.dir, join(this.dir, MANIFEST), JSON.stringify(manifest))
      this.manifest = manifest
      if (graph === null || !graph.kept) {
        this.dense.commitSavedGraph()
        this.savedGraphFile = graphName
      }
      this.walBytes -= coveredBytes
      // A kept graph file lacks the rows added since it was written: the next snapshot writes the graph.
      this.graphToSave = !graphWhole
      this.lastSnapshotBytes = size
      if (previous !== null) {
        await fs.rm(join(this.dir, previous.points), { force: true })
        if (previous.graph !== null && previous.graph !== graphName) await fs.rm(join(this.dir, previous.graph), { force: true })
      }
      await this.removeSegmentsUpTo(seq)
      this.opts.log?.info?.({ kb_id: this.kbId, seq, points: capture.rows.length, bytes: size }, 'vector snapshot written')
    } catch (err) {
      this.dense.dropSavedGraph()
      await fs.rm(join(this.dir, `${pointsName}.tmp`), { force: true }).catch(() => {})
      if (graphTmp !== null) await fs.rm(graphTmp, { force: true }).catch(() => {})
      throw err
    }
  }

  private async removeSegmentsUpTo(seq: number): Promise<void> {
    for (const name of await fs.readdir(this.dir)) {
      const m = WAL_RE.exec(name)
      if (m !== null && Number(m[1]) <= seq) await fs.rm(join(this.dir, name), { force: true })
    }
  }

  // ---- open -----------------------------------------------------------------------------------------

  private async load(): Promise<void> {
    const snap = this.manifest.snapshot
    const names = await fs.readdir(this.dir)
    // Leftovers of an interrupted snapshot, or files an earlier snapshot made obsolete.
    for (const name of names) {
      const m = WAL_RE.exec(name)
      const stale =
        name.endsWith('.tmp') ||
        name === SPILL_FILE ||
        name === PAYLOAD_SPILL_FILE ||
        name === SPARSE_SPILL_FILE ||
        name === `${SPARSE_SPILL_FILE}.pack` ||
        (m !== null && snap !== null && Number(m[1]) <= snap.seq) ||
        (/^(points|hnsw)-\d+\./.test(name) && name !== snap?.points && name !== snap?.graph)
      if (stale) await fs.rm(join(this.dir, name), { force: true })
    }
    if (snap !== null) {
      const data = await readSnapshot(join(this.dir, snap.points), this.dims, (rowsEnd) => this.dense.arenaParts(rowsEnd))
      const g = this.manifest.graph
      const sameParams = g.quantization === this.opts.quantization && g.connectivity === this.opts.connectivity && g.expansionAdd === this.opts.expansionAdd &&
        (g.format ?? 1) === GRAPH_FORMAT
      const graphLoaded = snap.graph !== null && sameParams && this.dense.loadGraph(join(this.dir, snap.graph), snap.graphRows)
      if (snap.graph !== null && !graphLoaded) {
        this.opts.log?.warn({ kb_id: this.kbId, sameParams }, 'vector graph not loaded: rebuilding it in the background')
      }
      for (let i = 0; i < data.rows.length; i++) this.dense.adopt(data.rows[i], data.norms[i], graphLoaded && data.inGraph[i] === 1)
      if (graphLoaded) {
        this.dense.dropStaleGraphRows()
        this.savedGraphFile = snap.graph
      }
      this.sparse.restore(data.rows, data.sparse, data.postings, data.rowsEnd)
      this.payloads.restore(data.rows, data.chunkIds, data.docIds, data.chunkIndex, data.payloadBlob, data.payloadOffsets, data.rowsEnd)
      this.payloads.fillColumnsSoon()
      for (let i = 0; i < data.rows.length; i++) {
        const row = data.rows[i]
        this.chunkRow.set(data.chunkIds[i], row)
        let rows = this.docRows.get(data.docIds[i])
        if (rows === undefined) this.docRows.set(data.docIds[i], (rows = new Set()))
        rows.add(row)
      }
      this.nextRow = data.rowsEnd
      for (let row = data.rowsEnd - 1; row >= 0; row--) if (!this.dense.isLive(row)) this.free.push(row)
      if (!sameParams) this.manifest = { ...this.manifest, graph: graphParams(this.opts) }
      this.graphToSave = this.dense.pendingCount > 0
      this.lastSnapshotBytes = (await fs.stat(join(this.dir, snap.points))).size
    }
    const segments = (await fs.readdir(this.dir))
      .map((name) => WAL_RE.exec(name))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => Number(m[1]))
      .sort((a, b) => a - b)
    for (let i = 0; i < segments.length; i++) {
      const path = join(this.dir, walName(segments[i]))
      const buf = await fs.readFile(path)
      const { records, validBytes, torn } = readRecords(buf)
      for (const r of records) {
        if (r.type === RECORD_UPSERT) this.applyUpsert(r.points, false)
        else this.applyDelete(r.docId)
      }
      this.purgeIfWorthIt()
      this.walBytes += validBytes
      if (torn) {
        // A write cut short by a crash; it was never acknowledged. Cut it off so appends follow intact records.
        this.opts.log?.warn({ kb_id: this.kbId, segment: walName(segments[i]), dropped_bytes: buf.length - validBytes }, 'vector log: dropped a torn record')
        await fs.truncate(path, validBytes)
      }
    }
    // The snapshot's rows were read into memory whole; the full segments go to the spill file now.
    this.dense.spill()
    this.payloads.spillRows(this.dense.spilledRows)
    this.walSeq = segments.length > 0 ? segments[segments.length - 1] : (snap?.seq ?? 0) + 1
    this.wal = await WalFile.open(join(this.dir, walName(this.walSeq)))
    if (segments.length === 0) await fsyncDir(this.dir)
    this.armIdleSnapshot()
  }

  // ---- lifecycle ------------------------------------------------------------------------------------

  /** Drains the queue, finishes a running snapshot, optionally folds the log into a new one, closes files. */
  async close(opts: { snapshot: boolean }): Promise<void> {
    if (this.closed) return
    if (opts.snapshot && this.unsaved()) await this.snapshot().catch((err: unknown) => this.opts.log?.warn({ err, kb_id: this.kbId }, 'vector snapshot at close failed'))
    this.closed = true
    if (this.idleTimer !== undefined) clearTimeout(this.idleTimer)
    while (this.looping) await this.loopDone
    await this.snapshotTask?.catch(() => {})
    this.dense.close()
    this.payloads.close()
    this.sparse.close()
    await this.wal.close()
  }

  /** Closes without a snapshot and removes the folder, manifest first, so a crash midway leaves no collection. */
  async drop(): Promise<void> {
    await this.close({ snapshot: false })
    await fs.rm(join(this.dir, MANIFEST), { force: true })
    await fsyncDir(this.dir)
    await fs.rm(this.dir, { recursive: true, force: true })
  }

  static exists(dir: string): Promise<boolean> {
    return exists(join(dir, MANIFEST))
  }
}
