// Payloads of a collection's rows. Rows restored from a snapshot keep their payload as the JSON bytes of
// the snapshot's blob and are parsed only when a search returns them (a dozen parses per query instead
// of 100k at start, and bytes off the JS heap); rows written since hold the object. The ids and
// chunk_index every row needs (maps, deletes, docVectors) are kept apart, unparsed payload or not.
// The fields a search filter reads (source_type, doc_type, source, updated_at) are columns beside them: filled on
// write, and for snapshot rows in the background after the start (one parse per row, once; a filtered search
// that comes first finishes the job), so that opening a collection stays a handful of large reads.
//
// With a spill file (the collection's dense vectors on disk, DenseIndex), payloads go to disk as well, as JSON
// records read back when a hit's payload is asked for: the rows of each arena segment the dense index spills, once,
// and the snapshot's blob once its filter columns are filled. A row written again later holds its object in memory
// until the next open (records are never rewritten), so the file grows by at most one record per row per open.
// Like the dense spill file it is scratch: rebuilt at every open, removed at close.
import { closeSync, openSync, rmSync } from 'node:fs'
import { murmur3Utf8 } from '../../compute/text/hash.ts'
import { serviceUnavailable } from '../../kernel/errors.ts'
import type { ChunkPayload, VectorHit } from '../ports.ts'
import { readAllSync, writeAllSync } from './files.ts'

/** Bytes of a snapshot's payload blob written to the spill file per turn of the event loop. */
const BLOB_SLICE = 4 << 20

/** A payload record in the spill file: what a snapshot capture holds for a row whose payload is on disk. */
export class PayloadRef {
  constructor(
    readonly at: number,
    readonly length: number,
  ) {}
}

class StoredHit implements VectorHit {
  private cached: ChunkPayload | undefined
  constructor(
    readonly score: number,
    readonly id: string,
    /** The row (VectorHit.key): the same in the dense and sparse lists of one search. */
    readonly key: number,
    private readonly object: ChunkPayload | undefined,
    private readonly blob: Buffer | PayloadTable | null,
    private readonly from: number,
    private readonly to: number,
  ) {}

  /** A fresh object (the caller may keep and change it), the same one on every read of this hit. */
  get payload(): ChunkPayload {
    if (this.cached === undefined) {
      if (this.object !== undefined) this.cached = { ...this.object }
      else {
        // Spill records are never overwritten: the bytes read later are those of the moment of the hit.
        const bytes = this.blob instanceof PayloadTable ? this.blob.readRecord(this.from, this.to - this.from) : this.blob!.subarray(this.from, this.to)
        this.cached = JSON.parse(bytes.toString('utf8')) as ChunkPayload
      }
    }
    return this.cached
  }
}

export class PayloadTable {
  private objects: (ChunkPayload | undefined)[] = []
  chunkIds: (string | undefined)[] = []
  docIds: (string | undefined)[] = []
  chunkIndex = new Int32Array(1024)
  private blob: Buffer | null = null
  private blobOffsets: Float64Array | null = null
  /** Row -> entry of blobOffsets, -1 when the row holds an object (or nothing). */
  private blobEntry = new Int32Array(1024).fill(-1)
  // Filter columns: source_type, doc_type and source as codes of interned strings (0: absent or not a string),
  // updated_at as epoch ms (NaN: absent or not a date, which no time condition matches, as in Qdrant).
  private sourceTypeCol = new Int32Array(1024)
  private docTypeCol = new Int32Array(1024)
  private sourceCol = new Int32Array(1024)
  private updatedCol = new Float64Array(1024)
  /** Row -> its key in tieOrder, made with the filter columns; NaN for a snapshot row the fill has not reached yet. */
  private tieKeys = new Float64Array(1024).fill(NaN)
  /** Never shrinks: a value stays interned after its last row is deleted (one string per distinct value ever written). */
  private readonly codes = new Map<string, number>()
  /** Snapshot rows from this row on may have their filter columns unfilled (blobEntry.length: none). */
  private columnsFrom = Number.MAX_SAFE_INTEGER
  private filling: NodeJS.Immediate | undefined
  private blobSpill: NodeJS.Immediate | undefined
  // The spill file: row -> record offset (-1: none) and length.
  private readonly spillPath: string | undefined
  private fd = -1
  private fileEnd = 0
  private fileAt = new Float64Array(1024).fill(-1)
  private fileLen = new Int32Array(1024)
  /** Rows below this were offered to spillRows (the dense index's spilled segments). */
  spilledUpTo = 0

  constructor(spillPath?: string) {
    this.spillPath = spillPath
  }

  set(row: number, payload: ChunkPayload): void {
    this.ensure(row + 1)
    this.objects[row] = payload
    this.blobEntry[row] = -1
    this.fileAt[row] = -1
    this.chunkIds[row] = payload.chunk_id
    this.docIds[row] = payload.doc_id
    this.chunkIndex[row] = payload.chunk_index
    this.fillColumns(row, payload)
  }

  /**
   * The order of rows whose scores tie in a search (TopK): by a 52-bit hash of what the chunk says (text, title,
   * source, chunk_index, page_num), which a KB's export and import keep whatever ids and rows the import gives its
   * chunks, then by row. Before, ties went to the older row, so a KB and its import could rank two tied chunks the
   * other way round. Keys are made with the filter columns (on write; for a snapshot's rows in the background after
   * the start), so a search whose candidates tie by the thousand (one common term) reads no payload for them; a row
   * the background has not reached yet is keyed from its payload the first time it ties.
   */
  readonly tieOrder = (a: number, b: number): number => {
    const ka = this.tieKey(a)
    const kb = this.tieKey(b)
    return ka < kb ? -1 : ka > kb ? 1 : a - b
  }

  private tieKey(row: number): number {
    const key = this.tieKeys[row]
    return Number.isNaN(key) ? (this.tieKeys[row] = tieKeyOf(this.hit(row, 0).payload)) : key
  }

  /** The code of a source_type, doc_type or source value; undefined when no row was ever written with it. */
  codeOf(value: string): number | undefined {
    // Snapshot rows intern their values when their columns are filled.
    this.columns()
    return this.codes.get(value)
  }

  /** Codes of the interned strings starting with prefix (one per distinct value, not per row). */
  codesWithPrefix(prefix: string): number[] {
    this.columns()
    const out: number[] = []
    for (const [value, code] of this.codes) if (value.startsWith(prefix)) out.push(code)
    return out
  }

  /** The filter columns, complete for every live row (snapshot rows not reached by fillColumnsSoon are parsed now). */
  columns(): { sourceType: Int32Array; docType: Int32Array; source: Int32Array; updatedMs: Float64Array } {
    this.fillSnapshotColumns(Number.MAX_SAFE_INTEGER)
    return { sourceType: this.sourceTypeCol, docType: this.docTypeCol, source: this.sourceCol, updatedMs: this.updatedCol }
  }

  /**
   * Fills the snapshot rows' filter columns in the background, in slices of about 8 ms, so that the first filtered
   * search after a start does not parse every payload (100k rows: 0.4-1.3 s) while a client waits.
   */
  fillColumnsSoon(): void {
    if (this.filling !== undefined || this.columnsFrom >= this.blobEntry.length) return
    this.filling = setImmediate(() => {
      this.filling = undefined
      this.fillSnapshotColumns(2000)
      this.fillColumnsSoon()
    })
  }

  stop(): void {
    if (this.filling !== undefined) clearImmediate(this.filling)
    this.filling = undefined
    if (this.blobSpill !== undefined) clearImmediate(this.blobSpill)
    this.blobSpill = undefined
  }

  /** Stops, then closes and removes the spill file (the table is not used after this). */
  close(): void {
    this.stop()
    if (this.fd >= 0) {
      closeSync(this.fd)
      this.fd = -1
      rmSync(this.spillPath!, { force: true })
    }
  }

  /** Rows whose payload is in the spill file. */
  get onDisk(): number {
    let n = 0
    for (let row = 0; row < this.chunkIds.length; row++) if (this.fileAt[row] >= 0 && this.objects[row] === undefined) n++
    return n
  }

  /**
   * Writes the payload objects of rows spilledUpTo..end to the spill file in one write and drops them from memory;
   * rows below spilledUpTo that are written again keep their object. No-op without a spill file.
   */
  spillRows(end: number): void {
    if (this.spillPath === undefined || end <= this.spilledUpTo) return
    const parts: Buffer[] = []
    const rows: number[] = []
    for (let row = this.spilledUpTo; row < end; row++) {
      const o = this.objects[row]
      if (o === undefined) continue
      parts.push(Buffer.from(JSON.stringify(o), 'utf8'))
      rows.push(row)
    }
    this.spilledUpTo = end
    if (rows.length === 0) return
    let at = this.append(Buffer.concat(parts))
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i]
      this.fileAt[row] = at
      this.fileLen[row] = parts[i].length
      this.objects[row] = undefined
      at += parts[i].length
    }
  }

  /**
   * Moves the snapshot's blob to the spill file once the filter columns no longer need it, BLOB_SLICE bytes per turn
   * of the event loop (69 MB in one write had held it 16-212 ms, the kernel throttling dirty pages); the rows read
   * the blob in memory until the last slice is written.
   */
  private spillBlob(): void {
    if (this.spillPath === undefined || this.blob === null || this.columnsFrom !== Number.MAX_SAFE_INTEGER || this.blobSpill !== undefined) return
    const blob = this.blob
    const base = this.reserve(blob.length)
    let done = 0
    const step = () => {
      this.blobSpill = undefined
      // Closed meanwhile.
      if (this.fd < 0) return
      const end = Math.min(blob.length, done + BLOB_SLICE)
      writeAllSync(this.fd, blob.subarray(done, end), base + done)
      done = end
      if (done < blob.length) {
        this.blobSpill = setImmediate(step)
        return
      }
      const offsets = this.blobOffsets!
      for (let row = 0; row < this.blobEntry.length; row++) {
        const entry = this.blobEntry[row]
        if (entry < 0) continue
        this.fileAt[row] = base + offsets[entry]
        this.fileLen[row] = offsets[entry + 1] - offsets[entry]
        this.blobEntry[row] = -1
      }
      this.blob = null
      this.blobOffsets = null
    }
    this.blobSpill = setImmediate(step)
  }

  /** Room for `length` bytes at the end of the spill file (opened on first use); returns where. */
  private reserve(length: number): number {
    if (this.fd < 0) this.fd = openSync(this.spillPath!, 'w+')
    const at = this.fileEnd
    this.fileEnd += length
    return at
  }

  private append(bytes: Uint8Array): number {
    const at = this.reserve(bytes.length)
    writeAllSync(this.fd, bytes, at)
    return at
  }

  /** The bytes of a spill record. */
  readRecord(at: number, length: number): Buffer {
    // A hit read after its collection closed (a search racing the KB's deletion or the shutdown).
    if (this.fd < 0) throw serviceUnavailable('The vector collection of this hit is closed')
    const out = Buffer.allocUnsafe(length)
    readAllSync(this.fd, out, at, 'vector payload file')
    return out
  }

  /** Bytes of the spill file from `at` into `into` (a snapshot's run of records that follow one another there). */
  readRecordsInto(at: number, into: Uint8Array): void {
    if (this.fd < 0) throw serviceUnavailable('The vector collection is closed')
    readAllSync(this.fd, into, at, 'vector payload file')
  }

  private fillSnapshotColumns(maxRows: number): void {
    const end = Math.min(this.blobEntry.length, this.columnsFrom + maxRows)
    for (let row = this.columnsFrom; row < end; row++) {
      const entry = this.blobEntry[row]
      if (entry >= 0) this.fillColumns(row, JSON.parse(this.blob!.toString('utf8', this.blobOffsets![entry], this.blobOffsets![entry + 1])) as ChunkPayload)
    }
    this.columnsFrom = end >= this.blobEntry.length ? Number.MAX_SAFE_INTEGER : end
    this.spillBlob()
  }

  private fillColumns(row: number, payload: ChunkPayload): void {
    this.sourceTypeCol[row] = this.intern(payload.source_type)
    this.docTypeCol[row] = this.intern(payload.doc_type)
    this.sourceCol[row] = this.intern(payload.source)
    this.updatedCol[row] = typeof payload.updated_at === 'string' ? Date.parse(payload.updated_at) : NaN
    this.tieKeys[row] = tieKeyOf(payload)
  }

  private intern(value: unknown): number {
    if (typeof value !== 'string') return 0
    let code = this.codes.get(value)
    if (code === undefined) this.codes.set(value, (code = this.codes.size + 1))
    return code
  }

  /** Rows of a snapshot: ids in the clear, payloads left as JSON in `blob` (entry i spans offsets[i]..offsets[i+1]). */
  restore(rows: Uint32Array, chunkIds: string[], docIds: string[], chunkIndex: Int32Array, blob: Buffer, offsets: Float64Array, rowsEnd: number): void {
    this.ensure(rowsEnd)
    this.blob = blob
    this.blobOffsets = offsets
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i]
      this.objects[row] = undefined
      this.blobEntry[row] = i
      this.fileAt[row] = -1
      this.chunkIds[row] = chunkIds[i]
      this.docIds[row] = docIds[i]
      this.chunkIndex[row] = chunkIndex[i]
      this.tieKeys[row] = NaN
    }
    this.columnsFrom = rows.length > 0 ? 0 : Number.MAX_SAFE_INTEGER
  }

  delete(row: number): void {
    this.objects[row] = undefined
    this.blobEntry[row] = -1
    this.fileAt[row] = -1
    this.chunkIds[row] = undefined
    this.docIds[row] = undefined
    this.tieKeys[row] = NaN
  }

  /**
   * A search hit on `row`. Its payload is read when first asked for: a hybrid search fetches 40 dense and 40
   * sparse candidates per KB and keeps top_k of them, so most hits are never parsed. The hit holds the bytes
   * or object of this moment, so a later write to the row does not change it.
   */
  hit(row: number, score: number): VectorHit {
    const entry = this.blobEntry[row]
    if (entry >= 0) return new StoredHit(score, this.chunkIds[row]!, row, undefined, this.blob, this.blobOffsets![entry], this.blobOffsets![entry + 1])
    const object = this.objects[row]
    if (object === undefined && this.fileAt[row] >= 0) return new StoredHit(score, this.chunkIds[row]!, row, undefined, this, this.fileAt[row], this.fileAt[row] + this.fileLen[row])
    return new StoredHit(score, this.chunkIds[row]!, row, object, null, 0, 0)
  }

  /**
   * What a snapshot writes: the object, the JSON bytes it was restored from (never re-encoded), or where its
   * record is in the spill file (read with readRecordsInto while the snapshot is written; records never change).
   */
  raw(row: number): ChunkPayload | Uint8Array | PayloadRef {
    const entry = this.blobEntry[row]
    if (entry >= 0) return this.blob!.subarray(this.blobOffsets![entry], this.blobOffsets![entry + 1])
    const object = this.objects[row]
    if (object === undefined && this.fileAt[row] >= 0) return new PayloadRef(this.fileAt[row], this.fileLen[row])
    return object!
  }

  private ensure(n: number): void {
    if (n <= this.chunkIndex.length) return
    let cap = this.chunkIndex.length
    while (cap < n) cap *= 2
    const ci = new Int32Array(cap)
    ci.set(this.chunkIndex)
    this.chunkIndex = ci
    const be = new Int32Array(cap).fill(-1)
    be.set(this.blobEntry)
    this.blobEntry = be
    const fa = new Float64Array(cap).fill(-1)
    fa.set(this.fileAt)
    this.fileAt = fa
    const fl = new Int32Array(cap)
    fl.set(this.fileLen)
    this.fileLen = fl
    const grow = <T extends Int32Array | Float64Array>(a: T, b: T): T => {
      b.set(a)
      return b
    }
    this.sourceTypeCol = grow(this.sourceTypeCol, new Int32Array(cap))
    this.docTypeCol = grow(this.docTypeCol, new Int32Array(cap))
    this.sourceCol = grow(this.sourceCol, new Int32Array(cap))
    this.updatedCol = grow(this.updatedCol, new Float64Array(cap))
    this.tieKeys = grow(this.tieKeys, new Float64Array(cap).fill(NaN))
  }
}

/**
 * What PayloadTable.tieOrder compares: what the chunk says, the same in a KB and in its import, hashed to an integer
 * below 2^52 (two MurmurHash3 of the text, seeds 0 and 1, the sparse encoder's hash). The pgvector driver keeps the
 * same key in a column, so that both stores rank tied chunks alike.
 */
export const tieKeyOf = (p: ChunkPayload): number => {
  const text = `${p.text}\u0000${p.title}\u0000${p.source}\u0000${p.chunk_index}\u0000${p.page_num}`
  return murmur3Utf8(text, 0) * 0x100000 + (murmur3Utf8(text, 1) >>> 12)
}
