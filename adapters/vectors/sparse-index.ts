// Inverted index for sparse vectors, scored like Qdrant's sparse vectors with `modifier: idf`:
//   score(q, d) = sum over shared terms t of idf(t) * q_t * d_t,  idf(t) = ln((N - n_t + 0.5) / (n_t + 0.5) + 1)
// with N the live points of the collection and n_t the live points holding t (Qdrant, "Indexing / IDF
// Modifier"). Postings are typed arrays; deleting a point only marks its row dead and decrements the
// document frequencies, so the postings keep dead entries until compact() drops them. The owner must
// compact before it reuses a dead row, or the stale entries would score for the new point.
//
// Each row's own terms (for deletes, snapshots and scoring a filter's rows) are packed back to back in blocks of
// typed arrays, with a block number, an offset and a length per row: held as a pair of typed arrays per row, the
// bookkeeping (two array objects, two buffers and their backing stores) took about twice the room of the data
// (issue 17). Blocks are only appended to; compact() packs the live rows into new blocks.
//
// With a spill file (SparseIndexOptions.spillPath, the collection's denseOnDisk), full blocks go to disk once the
// blocks hold a full block's worth of entries, and memory keeps only the block rows are appended to: a row's terms are
// read back with positioned reads where they are needed (a delete, a filtered search scoring its rows one by one,
// docPoints, a snapshot, compaction), while the posting lists, which every search walks, stay in memory. The file is
// scratch, like the dense index's: written once per block and never rewritten (compaction writes a new file), not
// fsync'd, rebuilt from the snapshot and the log at every open, removed at close.
import { closeSync, openSync, renameSync, rmSync } from 'node:fs'
import type { SparseVector } from '../ports.ts'
import { readAllSync, writeAllSync } from './files.ts'
import type { RowSet } from './filter.ts'
import { TopK, type TieOrder } from './top-k.ts'

interface Posting {
  /**
   * The entries' rows, each as the zigzag varint of its difference from the row before it (the first: from 0),
   * byteLen bytes of it used (encodeRows, decodeRows). Past ON_HEAP_POSTING entries or ON_HEAP_BYTES bytes of room
   * (grown here), weights and rows share one buffer, weights first; below that, two small arrays; after a restore,
   * views of one array of every list's rows and of the snapshot's weights, until the list grows.
   */
  bytes: Uint8Array
  byteLen: number
  /** The row of the last entry, which the next entry's difference is taken from. */
  last: number
  weights: Float32Array
  /** Entries used in bytes/weights, dead ones included. */
  len: number
  /** Live points holding the term: n_t of the IDF. */
  df: number
}

/** The heap of the search under way (searches are synchronous, one at a time), reused: TopK.reset. */
const searchTop = new TopK(0)

export const idf = (n: number, df: number): number => Math.log((n - df + 0.5) / (df + 0.5) + 1)

/**
 * The posting lists at one instant, by reference: each term's first lens[i] entries, their rows encoded in bytes[i]
 * (decodeRows); entries past `lens` or of rows dead then are not part of it.
 */
export interface PostingsCapture {
  terms: Uint32Array
  bytes: Uint8Array[]
  weights: Float32Array[]
  lens: Uint32Array
}

/** Posting lists as a snapshot stores them: term t's entries at offsets[t]..offsets[t+1] of rows/weights. */
export interface PostingsData {
  terms: Uint32Array
  offsets: Uint32Array
  rows: Uint32Array
  weights: Float32Array
}

/**
 * Rows an index may hold: below 2^30, the difference of two rows and its zigzag code stay within a 32-bit integer,
 * which the encoding's bitwise arithmetic needs. (A billion rows of a 1,024-dimension graph would take a terabyte.)
 */
export const MAX_ROWS = 2 ** 30

/** The zigzag code of a row difference d (|d| < MAX_ROWS): 0, -1, 1, -2, 2 ... -> 0, 1, 2, 3, 4 ... */
const zigzag = (d: number): number => ((d << 1) ^ (d >> 31)) >>> 0

/** Bytes of the varint of z (7 bits a byte, low bits first, the high bit set on every byte but the last). */
const varintBytes = (z: number): number => (z < 0x80 ? 1 : z < 0x4000 ? 2 : z < 0x200000 ? 3 : z < 0x10000000 ? 4 : 5)

/** Writes z's varint at `at` of out; returns where it ends. */
function writeVarint(out: Uint8Array, at: number, z: number): number {
  while (z >= 0x80) {
    out[at++] = (z & 0x7f) | 0x80
    z >>>= 7
  }
  out[at++] = z
  return at
}

/**
 * Rows as a posting list holds them: each row's difference from the one before (the first: from 0), zigzag coded
 * (rows are appended in the order points are added, which compaction's reuse of rows can break), as a varint: a
 * common term's rows take a byte each, a rare one's two or three (figures: adapters/vectors/README.md).
 */
export function encodeRows(rows: ArrayLike<number>): Uint8Array {
  let n = 0
  for (let j = 0, prev = 0; j < rows.length; prev = rows[j++]) n += varintBytes(zigzag(rows[j] - prev))
  const out = new Uint8Array(n)
  for (let j = 0, prev = 0, at = 0; j < rows.length; prev = rows[j++]) at = writeVarint(out, at, zigzag(rows[j] - prev))
  return out
}

/**
 * The first `len` rows of a list's bytes (encodeRows), written into `into` and returned; into a new array, twice as
 * long or len, when `into` holds fewer (a scratch array grown as lists need).
 */
export function decodeRows(bytes: Uint8Array, len: number, into: Uint32Array): Uint32Array {
  if (into.length < len) into = new Uint32Array(Math.max(len, 2 * into.length))
  let pos = 0
  let row = 0
  for (let j = 0; j < len; j++) {
    let b = bytes[pos++]
    let z = b & 0x7f
    for (let s = 7; b >= 0x80; s += 7) {
      b = bytes[pos++]
      z |= (b & 0x7f) << s
    }
    row += (z >>> 1) ^ -(z & 1)
    into[j] = row
  }
  return into
}

/**
 * A posting list's first room, and how it grows: doubling up to 64 entries, then by half; the rows' bytes grow with
 * the entries (growPosting). Past ON_HEAP_POSTING entries or ON_HEAP_BYTES bytes, the weights and the rows of a list
 * share one buffer: one ArrayBuffer, backing store and malloc'd block per term instead of two.
 */
const FIRST_POSTING = 4
const FIRST_POSTING_BYTES = 8
const grownCapacity = (len: number): number => (len < 64 ? len * 2 : len + (len >>> 1)) || FIRST_POSTING

/**
 * Sizes up to these stay two arrays of their own: V8 keeps a typed array of up to 64 bytes inside its object, on
 * the JavaScript heap, with no backing store to share (V8_TYPED_ARRAY_MAX_SIZE_IN_HEAP).
 */
const ON_HEAP_POSTING = 16
const ON_HEAP_BYTES = 64

/** Room for one more entry, whose row takes `need` bytes: the entries grow when full, the bytes in proportion (or by half when they ran out first). */
function growPosting(p: Posting, need: number): void {
  const cap = p.len === p.weights.length ? grownCapacity(p.len) : p.weights.length
  const byteCap = Math.max(p.byteLen + need, Math.ceil((p.byteLen * cap) / Math.max(1, p.len)), p.byteLen + (p.byteLen >>> 1))
  resizePosting(p, cap, byteCap)
}

/** Gives the list room for `cap` entries and `byteCap` bytes of rows (at least what it holds), in new arrays; its entries are copied over. */
function resizePosting(p: Posting, cap: number, byteCap: number): void {
  let weights: Float32Array
  let bytes: Uint8Array
  if (cap <= ON_HEAP_POSTING && byteCap <= ON_HEAP_BYTES) {
    weights = new Float32Array(cap)
    bytes = new Uint8Array(byteCap)
  } else {
    const buf = new ArrayBuffer(cap * 4 + byteCap)
    weights = new Float32Array(buf, 0, cap)
    bytes = new Uint8Array(buf, cap * 4, byteCap)
  }
  if (p.len > 0) {
    // A full array is copied whole, a small one entry by entry: a subarray of an array V8 keeps inside its object
    // would first give it a buffer of its own.
    if (p.len === p.weights.length) weights.set(p.weights)
    else if (p.len <= ON_HEAP_POSTING) for (let i = 0; i < p.len; i++) weights[i] = p.weights[i]
    else weights.set(p.weights.subarray(0, p.len))
    if (p.byteLen === p.bytes.length) bytes.set(p.bytes)
    else if (p.byteLen <= ON_HEAP_BYTES) for (let i = 0; i < p.byteLen; i++) bytes[i] = p.bytes[i]
    else bytes.set(p.bytes.subarray(0, p.byteLen))
  }
  p.weights = weights
  p.bytes = bytes
}

/** Entries of a row block (4 MB with the values); a row with more terms gets a block of its own. */
const BLOCK_ENTRIES = 1 << 19
const FIRST_BLOCK_ENTRIES = 1 << 12

/**
 * The terms of chosen rows at one instant: row i's are indices/values[block[i]] from start[i], len[i] of them; a
 * block that is null there is in the spill file, and read(block, field, from, into) fills `into` with its entries from
 * `from` on. Valid until the index is compacted or closed (the collection does neither while a snapshot reads its
 * capture).
 */
export interface SparseRowsCapture {
  indices: (Uint32Array | null)[]
  values: (Float32Array | null)[]
  block: Int32Array
  start: Uint32Array
  len: Uint32Array
  read(block: number, field: 'indices' | 'values', from: number, into: Uint32Array | Float32Array): void
}

export interface SparseIndexOptions {
  /** The spill file of full blocks (see the top of this file); without it every block stays in memory. */
  spillPath?: string
  /** Entries of a full block. Default 2^19 (4 MB with the values); tests use small ones. */
  blockEntries?: number
}

/** A row's terms where they are: a block's arrays (from..to), or the scratch arrays a spilled row was read into. */
interface RowTerms {
  indices: Uint32Array
  values: Float32Array
  from: number
  to: number
}

/** Per-row term lists as a snapshot stores them: row i's at offsets[i]..offsets[i+1] of indices/values. */
export interface SparseRowsData {
  offsets: Uint32Array
  indices: Uint32Array
  values: Float32Array
}

export class SparseIndex {
  private readonly postings = new Map<number, Posting>()
  // The rows' own terms (see the top of this file): block -1 = none. A spilled block's arrays are null.
  private blockIndices: (Uint32Array | null)[] = []
  private blockValues: (Float32Array | null)[] = []
  /** Entries used in each block (rows are appended to the last one). */
  private blockFill: number[] = []
  /** Where a spilled block's indices start in the spill file (its values follow them); -1: in memory. */
  private blockAt: number[] = []
  private readonly spillPath: string | undefined
  /** The file spilled blocks are written to: spillPath, or beside it while compaction copies the rows. */
  private spillTarget: string
  private readonly blockEntries: number
  private spillFd = -1
  private spillEnd = 0
  /** Entries of the blocks in the spill file. */
  private spilledEntries = 0
  /** Entries held in blocks, in memory or spilled (the spill starts once they reach blockEntries). */
  private storedEntries = 0
  /** Where a spilled row's terms are read into (grown as needed). */
  private readIndices = new Uint32Array(256)
  private readValues = new Float32Array(256)
  private readonly rowTerms: RowTerms = { indices: this.readIndices, values: this.readValues, from: 0, to: 0 }
  private rowBlock = new Int32Array(1024).fill(-1)
  private rowStart = new Uint32Array(1024)
  private rowLen = new Uint32Array(1024)
  private live = new Uint8Array(1024)
  private liveCount = 0
  private totalEntries = 0
  private deadEntries = 0
  // Search scratch, reused: accumulators stamped with a generation so nothing is cleared per query.
  private acc = new Float64Array(1024)
  private stamp = new Uint32Array(1024)
  private touched = new Int32Array(1024)
  private gen = 0

  constructor(opts: SparseIndexOptions = {}) {
    this.spillPath = opts.spillPath
    this.spillTarget = opts.spillPath ?? ''
    this.blockEntries = opts.blockEntries ?? BLOCK_ENTRIES
    if (!(Number.isInteger(this.blockEntries) && this.blockEntries >= 16)) throw new Error(`blockEntries must be an integer from 16, got ${this.blockEntries}`)
  }

  get size(): number {
    return this.liveCount
  }

  /** Entries of rows' terms held in the spill file, not in memory. */
  get onDiskEntries(): number {
    return this.spilledEntries
  }

  /** Share of posting entries that belong to deleted points. */
  get deadRatio(): number {
    return this.totalEntries === 0 ? 0 : this.deadEntries / this.totalEntries
  }

  get deadCount(): number {
    return this.deadEntries
  }

  get termCount(): number {
    return this.postings.size
  }

  /** The vector's terms are copied: the caller keeps it. */
  add(row: number, vector: SparseVector): void {
    if (row < this.live.length && this.live[row] === 1) throw new Error(`sparse row ${row} is already live`)
    this.ensureRows(row + 1)
    const { indices, values } = vector
    for (let i = 0; i < indices.length; i++) {
      const term = indices[i]
      let p = this.postings.get(term)
      if (p === undefined) {
        // Below ON_HEAP_POSTING and ON_HEAP_BYTES: two small arrays, as resizePosting makes them.
        p = { bytes: new Uint8Array(FIRST_POSTING_BYTES), byteLen: 0, last: 0, weights: new Float32Array(FIRST_POSTING), len: 0, df: 0 }
        this.postings.set(term, p)
      }
      const z = zigzag(row - p.last)
      const need = varintBytes(z)
      if (p.len === p.weights.length || p.byteLen + need > p.bytes.length) growPosting(p, need)
      p.byteLen = writeVarint(p.bytes, p.byteLen, z)
      p.last = row
      p.weights[p.len] = values[i]
      p.len++
      p.df++
    }
    this.totalEntries += indices.length
    this.store(row, indices, values)
    this.live[row] = 1
    this.liveCount++
  }

  /** Appends a row's terms to the last block (a new one when they do not fit). */
  private store(row: number, indices: ArrayLike<number>, values: ArrayLike<number>): void {
    const n = indices.length
    let b = this.blockIndices.length - 1
    // The last block is in memory, but for a restored snapshot's block that went to the spill file.
    const last = b < 0 ? null : this.blockIndices[b]
    if (last === null || this.blockFill[b] + n > last.length) {
      // Doubling up to blockEntries, so that a small collection holds small blocks.
      const size = Math.max(b < 0 ? Math.min(FIRST_BLOCK_ENTRIES, this.blockEntries) : last === null ? this.blockEntries : Math.min(this.blockEntries, 2 * last.length), n)
      this.blockIndices.push(new Uint32Array(size))
      this.blockValues.push(new Float32Array(size))
      this.blockFill.push(0)
      this.blockAt.push(-1)
      b++
      this.spillFull()
    }
    const at = this.blockFill[b]
    this.blockIndices[b]!.set(indices, at)
    this.blockValues[b]!.set(values, at)
    this.blockFill[b] = at + n
    this.storedEntries += n
    this.rowBlock[row] = b
    this.rowStart[row] = at
    this.rowLen[row] = n
  }

  remove(row: number): void {
    if (row >= this.live.length || this.live[row] === 0) return
    const b = this.rowBlock[row]
    if (b >= 0) {
      const { indices, from, to } = this.termsOf(row, false)
      for (let e = from; e < to; e++) {
        const p = this.postings.get(indices[e])
        if (p !== undefined) p.df--
      }
      this.deadEntries += to - from
    }
    // The entries stay in their block until compact() packs the live rows.
    this.rowBlock[row] = -1
    this.live[row] = 0
    this.liveCount--
  }

  /**
   * Rebuilds the index from a snapshot: the lists arrive built, their rows are encoded into one array, their weights
   * become views of the snapshot's array, and a list is copied out the first time it grows. The snapshot's rows are
   * not kept.
   */
  restore(rows: Uint32Array, vectors: SparseRowsData, postings: PostingsData, rowsEnd: number): void {
    if (this.liveCount !== 0) throw new Error('restore() needs an empty sparse index')
    this.ensureRows(rowsEnd)
    // The snapshot's arrays become a full block: rows added later start a new one. With a spill file, a large one
    // goes there now.
    const b = this.blockIndices.length
    this.blockIndices.push(vectors.indices)
    this.blockValues.push(vectors.values)
    this.blockFill.push(vectors.indices.length)
    this.blockAt.push(-1)
    this.storedEntries += vectors.indices.length
    if (this.spillPath !== undefined && this.storedEntries >= this.blockEntries) this.spillBlock(b)
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i]
      this.live[row] = 1
      this.rowBlock[row] = b
      this.rowStart[row] = vectors.offsets[i]
      this.rowLen[row] = vectors.offsets[i + 1] - vectors.offsets[i]
    }
    this.liveCount = rows.length
    const { terms, offsets } = postings
    const snapshotRows = postings.rows
    // One pass into room for two bytes an entry, grown where a list might not fit, then copied to its size: 4.2 M
    // entries in 13-17 ms warm (47 ms the first time), against 41-48 ms (104) sizing every list in a pass before.
    let room = new Uint8Array(Math.max(64, 2 * snapshotRows.length))
    const starts = new Uint32Array(terms.length + 1)
    let at = 0
    for (let t = 0; t < terms.length; t++) {
      const end = offsets[t + 1]
      const most = 5 * (end - offsets[t])
      if (room.length - at < most) {
        const grown = new Uint8Array(Math.max(2 * room.length, at + most))
        grown.set(room.subarray(0, at))
        room = grown
      }
      starts[t] = at
      let prev = 0
      for (let j = offsets[t]; j < end; j++) {
        // writeVarint(zigzag(row - prev)), inline: a call per entry took twice the time.
        const row = snapshotRows[j]
        const d = row - prev
        prev = row
        let z = ((d << 1) ^ (d >> 31)) >>> 0
        while (z >= 0x80) {
          room[at++] = (z & 0x7f) | 0x80
          z >>>= 7
        }
        room[at++] = z
      }
    }
    starts[terms.length] = at
    const encoded = room.slice(0, at)
    for (let t = 0; t < terms.length; t++) {
      const from = offsets[t]
      const len = offsets[t + 1] - from
      const bytes = encoded.subarray(starts[t], starts[t + 1])
      this.postings.set(terms[t], { bytes, byteLen: bytes.length, last: len > 0 ? snapshotRows[from + len - 1] : 0, weights: postings.weights.subarray(from, from + len), len, df: len })
    }
    this.totalEntries = postings.rows.length
    this.deadEntries = 0
  }

  /** A copy of a live row's terms (an absent or removed row has none). */
  rowVector(row: number): { indices: Uint32Array; values: Float32Array } {
    const b = row < this.live.length && this.live[row] === 1 ? this.rowBlock[row] : -1
    if (b < 0) return { indices: new Uint32Array(0), values: new Float32Array(0) }
    const { indices, values, from, to } = this.termsOf(row)
    return { indices: indices.slice(from, to), values: values.slice(from, to) }
  }

  /**
   * A live row's terms: views of its block, or (a spilled block) read into the index's scratch arrays, valid until
   * the next read. withValues false: the indices only.
   */
  private termsOf(row: number, withValues = true): RowTerms {
    const b = this.rowBlock[row]
    const from = this.rowStart[row]
    const len = this.rowLen[row]
    const t = this.rowTerms
    const indices = this.blockIndices[b]
    if (indices !== null) {
      t.indices = indices
      t.values = this.blockValues[b]!
      t.from = from
      t.to = from + len
      return t
    }
    if (this.readIndices.length < len) {
      let cap = this.readIndices.length
      while (cap < len) cap *= 2
      this.readIndices = new Uint32Array(cap)
      this.readValues = new Float32Array(cap)
    }
    readSpilled(this.spillFd, this.blockAt[b], this.blockFill[b], 'indices', from, this.readIndices.subarray(0, len))
    if (withValues) readSpilled(this.spillFd, this.blockAt[b], this.blockFill[b], 'values', from, this.readValues.subarray(0, len))
    t.indices = this.readIndices
    t.values = this.readValues
    t.from = 0
    t.to = len
    return t
  }

  /** Writes every block but the last to the spill file, once the blocks hold a full block's worth of entries. */
  private spillFull(): void {
    if (this.spillPath === undefined || this.storedEntries < this.blockEntries) return
    const last = this.blockIndices.length - 1
    for (let b = 0; b < last; b++) if (this.blockIndices[b] !== null) this.spillBlock(b)
  }

  /** Writes block b (its used entries: the indices, then the values) at the end of the spill file and drops it from memory. */
  private spillBlock(b: number): void {
    const fill = this.blockFill[b]
    if (this.spillFd < 0) this.spillFd = openSync(this.spillTarget, 'w+')
    const at = this.spillEnd
    writeAllSync(this.spillFd, bytesOf(this.blockIndices[b]!, fill), at)
    writeAllSync(this.spillFd, bytesOf(this.blockValues[b]!, fill), at + fill * 4)
    this.spillEnd = at + fill * 8
    this.blockAt[b] = at
    this.blockIndices[b] = null
    this.blockValues[b] = null
    this.spilledEntries += fill
  }

  /** Closes and removes the spill file (the index is not used after this). */
  close(): void {
    if (this.spillFd < 0) return
    closeSync(this.spillFd)
    this.spillFd = -1
    rmSync(this.spillTarget, { force: true })
  }

  /**
   * The terms of `rows` (live), by reference: blocks are only appended to, and compact(), which replaces them, does
   * not change the arrays captured.
   */
  captureRows(rows: Int32Array): SparseRowsCapture {
    const n = rows.length
    const fd = this.spillFd
    const at = this.blockAt.slice()
    const fill = this.blockFill.slice()
    const read = (block: number, field: 'indices' | 'values', from: number, into: Uint32Array | Float32Array): void =>
      readSpilled(fd, at[block], fill[block], field, from, into)
    const c: SparseRowsCapture = { indices: this.blockIndices.slice(), values: this.blockValues.slice(), block: new Int32Array(n), start: new Uint32Array(n), len: new Uint32Array(n), read }
    for (let i = 0; i < n; i++) {
      const row = rows[i]
      c.block[i] = this.rowBlock[row]
      c.start[i] = this.rowStart[row]
      c.len[i] = this.rowLen[row]
    }
    return c
  }

  capture(): PostingsCapture {
    const n = this.postings.size
    const c: PostingsCapture = { terms: new Uint32Array(n), bytes: new Array(n), weights: new Array(n), lens: new Uint32Array(n) }
    let i = 0
    for (const [term, p] of this.postings) {
      c.terms[i] = term
      c.bytes[i] = p.bytes
      c.weights[i] = p.weights
      c.lens[i] = p.len
      i++
    }
    return c
  }

  /** Drops the dead entries of every posting list (and the terms no live point holds). */
  compact(): void {
    if (this.deadEntries === 0) return
    const live = this.live
    /** A list's rows, decoded (grown to the longest list). */
    let rows: Uint32Array = new Uint32Array(256)
    for (const [term, p] of this.postings) {
      if (p.df === 0) {
        this.postings.delete(term)
        continue
      }
      if (p.df === p.len) continue
      // Decoded, then rewritten in place: the kept entries' differences (each the sum of those it replaces) take no
      // more bytes than the list held.
      rows = decodeRows(p.bytes, p.len, rows)
      const { bytes, weights } = p
      let w = 0
      let written = 0
      let kept = 0
      for (let r = 0; r < p.len; r++) {
        const row = rows[r]
        if (live[row] === 1) {
          written = writeVarint(bytes, written, zigzag(row - kept))
          kept = row
          weights[w] = weights[r]
          w++
        }
      }
      p.len = w
      p.byteLen = written
      p.last = kept
      // A list left half empty or less shrinks to the room growth would have given it.
      if (w <= p.weights.length / 2 || written <= p.bytes.length / 2) {
        const cap = Math.min(p.weights.length, Math.max(FIRST_POSTING, grownCapacity(w)))
        const byteCap = Math.min(p.bytes.length, Math.max(FIRST_POSTING_BYTES, Math.ceil((written * cap) / w)))
        if (cap < p.weights.length || byteCap < p.bytes.length) resizePosting(p, cap, byteCap)
      }
    }
    this.totalEntries -= this.deadEntries
    this.deadEntries = 0
    this.packRows()
  }

  /**
   * Copies the live rows' terms into new blocks, leaving out those of deleted rows, a block at a time (a spilled one
   * read whole, once). Blocks the copy spills go to a new file, renamed over the old one at the end.
   */
  private packRows(): void {
    const indices = this.blockIndices
    const values = this.blockValues
    const fill = this.blockFill
    const at = this.blockAt
    const oldFd = this.spillFd
    const blocks = indices.length
    // The live rows grouped by block (a counting sort): from[b]..from[b + 1] of `order`.
    const from = new Int32Array(blocks + 1)
    for (let row = 0; row < this.live.length; row++) if (this.rowBlock[row] >= 0) from[this.rowBlock[row] + 1]++
    for (let b = 0; b < blocks; b++) from[b + 1] += from[b]
    const order = new Int32Array(from[blocks])
    const next = from.slice(0, blocks)
    for (let row = 0; row < this.live.length; row++) if (this.rowBlock[row] >= 0) order[next[this.rowBlock[row]]++] = row
    this.blockIndices = []
    this.blockValues = []
    this.blockFill = []
    this.blockAt = []
    this.storedEntries = 0
    this.spilledEntries = 0
    this.spillFd = -1
    this.spillEnd = 0
    if (oldFd >= 0) this.spillTarget = `${this.spillPath}.pack`
    let readIndices = new Uint32Array(0)
    let readValues = new Float32Array(0)
    for (let b = 0; b < blocks; b++) {
      if (from[b] === from[b + 1]) continue
      let blockIndices = indices[b]
      let blockValues = values[b]
      if (blockIndices === null) {
        const n = fill[b]
        if (readIndices.length < n) {
          readIndices = new Uint32Array(n)
          readValues = new Float32Array(n)
        }
        readSpilled(oldFd, at[b], n, 'indices', 0, readIndices.subarray(0, n))
        readSpilled(oldFd, at[b], n, 'values', 0, readValues.subarray(0, n))
        blockIndices = readIndices
        blockValues = readValues
      }
      for (let i = from[b]; i < from[b + 1]; i++) {
        const row = order[i]
        const start = this.rowStart[row]
        const end = start + this.rowLen[row]
        this.store(row, blockIndices.subarray(start, end), blockValues!.subarray(start, end))
      }
    }
    if (oldFd >= 0) {
      closeSync(oldFd)
      if (this.spillFd >= 0) renameSync(this.spillTarget, this.spillPath!)
      else rmSync(this.spillPath!, { force: true })
      this.spillTarget = this.spillPath!
    }
  }

  /**
   * The k best live rows for the query (of the subset a filter keeps, when given), best first. Scores use the
   * IDF of all current live points, filtered or not, as Qdrant's do: a filter narrows the candidates, never
   * the statistics, so a chunk scores the same with and without one. Equal scores in `tie` order (TopK).
   */
  search(query: SparseVector, k: number, subset?: RowSet, tie: TieOrder | null = null): { rows: Int32Array; scores: Float64Array } {
    const top = searchTop.reset(k, tie)
    if (this.liveCount === 0 || k <= 0) return top.drain()
    if (subset !== undefined && this.subsetIsCheaper(query, subset)) return this.searchRows(query, subset, top)
    this.gen = (this.gen + 1) >>> 0
    if (this.gen === 0) {
      this.stamp.fill(0)
      this.gen = 1
    }
    const gen = this.gen
    const { acc, stamp } = this
    // The subset's mask holds live rows only, so it replaces the live flags.
    const live = subset?.mask ?? this.live
    let touched = this.touched
    let nTouched = 0
    const n = this.liveCount
    for (let i = 0; i < query.indices.length; i++) {
      const p = this.postings.get(query.indices[i])
      if (p === undefined || p.df === 0) continue
      const w = idf(n, p.df) * query.values[i]
      if (w === 0) continue
      // The rows decoded as in decodeRows, inline (into an array first, then walked: 1.29x the time of 4-byte rows,
      // against 1.10x so).
      const { bytes, weights, len } = p
      let pos = 0
      let row = 0
      for (let j = 0; j < len; j++) {
        let b = bytes[pos++]
        let z = b & 0x7f
        for (let s = 7; b >= 0x80; s += 7) {
          b = bytes[pos++]
          z |= (b & 0x7f) << s
        }
        row += (z >>> 1) ^ -(z & 1)
        if (live[row] !== 1) continue
        if (stamp[row] !== gen) {
          stamp[row] = gen
          acc[row] = w * weights[j]
          if (nTouched === touched.length) {
            const grown = new Int32Array(touched.length * 2)
            grown.set(touched)
            touched = this.touched = grown
          }
          touched[nTouched++] = row
        } else {
          acc[row] += w * weights[j]
        }
      }
    }
    for (let i = 0; i < nTouched; i++) {
      const row = touched[i]
      top.push(row, acc[row])
    }
    return top.drain()
  }

  /**
   * Whether scoring the subset's rows one by one (their own terms looked up in the query) touches fewer
   * entries than walking the query terms' posting lists: true for a selective filter and common query terms.
   */
  private subsetIsCheaper(query: SparseVector, subset: RowSet): boolean {
    let postings = 0
    for (let i = 0; i < query.indices.length; i++) postings += this.postings.get(query.indices[i])?.len ?? 0
    const perRow = this.liveCount === 0 ? 0 : (this.totalEntries - this.deadEntries) / this.liveCount
    // A lookup in the query's term map costs a few posting entries.
    let cost = subset.count * perRow * 4
    // A row whose terms are in the spill file costs two positioned reads.
    for (let r = 0; r < subset.count && cost < postings && this.spilledEntries > 0; r++) {
      if (this.blockIndices[this.rowBlock[subset.rows[r]]] === null) cost += SPILLED_ROW_COST
    }
    return cost < postings
  }

  private searchRows(query: SparseVector, subset: RowSet, top: TopK): { rows: Int32Array; scores: Float64Array } {
    const n = this.liveCount
    const weights = new Map<number, number>()
    for (let i = 0; i < query.indices.length; i++) {
      const p = this.postings.get(query.indices[i])
      if (p === undefined || p.df === 0) continue
      const w = idf(n, p.df) * query.values[i]
      // A term given twice counts twice, as on the posting-list path.
      if (w !== 0) weights.set(query.indices[i], (weights.get(query.indices[i]) ?? 0) + w)
    }
    if (weights.size === 0) return top.drain()
    for (let r = 0; r < subset.count; r++) {
      const row = subset.rows[r]
      if (this.rowBlock[row] < 0) continue
      const { indices, values, from, to } = this.termsOf(row)
      let score = 0
      let shared = false
      for (let e = from; e < to; e++) {
        const w = weights.get(indices[e])
        if (w === undefined) continue
        score += w * values[e]
        shared = true
      }
      // As on the posting-list path: a row is a candidate when it shares a term, whatever its score.
      if (shared) top.push(row, score)
    }
    return top.drain()
  }

  private ensureRows(n: number): void {
    if (n <= this.live.length) return
    if (n > MAX_ROWS) throw new Error(`a sparse index holds rows below ${MAX_ROWS}, got ${n - 1}`)
    let cap = this.live.length
    while (cap < n) cap *= 2
    this.live = grownTo(this.live, new Uint8Array(cap))
    this.acc = new Float64Array(cap)
    this.stamp = grownTo(this.stamp, new Uint32Array(cap))
    this.rowBlock = grownTo(this.rowBlock, new Int32Array(cap).fill(-1))
    this.rowStart = grownTo(this.rowStart, new Uint32Array(cap))
    this.rowLen = grownTo(this.rowLen, new Uint32Array(cap))
  }
}

/**
 * Fills `into` with entries from..from + into.length of a spilled block's indices or values: the block at `at` of the
 * file holds its `fill` indices, then as many values (spillBlock).
 */
function readSpilled(fd: number, at: number, fill: number, field: 'indices' | 'values', from: number, into: Uint32Array | Float32Array): void {
  readAllSync(fd, bytesOf(into, into.length), at + ((field === 'values' ? fill : 0) + from) * 4, 'sparse spill file')
}

/**
 * What reading a spilled row's terms (two positioned reads) costs, in posting entries walked, for the choice between
 * scoring a filter's rows one by one and walking the query's posting lists: a read of a few dozen bytes from the
 * OS's cache takes microseconds, a posting entry nanoseconds. bench/filter.bench.ts --quick (100k chunks of 8 terms,
 * AMD EPYC, 2 cores), hybrid top 40 under a 1 % filter: p99 8.2 ms and mean 3.0 ms when such rows were costed as in
 * memory, 2.0 and 1.5 ms with this (2.4 and 1.6 ms with every row in memory).
 */
const SPILLED_ROW_COST = 2000

/** The bytes of a typed array's first `length` entries (4 bytes each). */
function bytesOf(a: Uint32Array | Float32Array, length: number): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, length * 4)
}

/** `to` (a larger array) with `from` copied to its start. */
function grownTo<T extends Uint8Array | Uint32Array | Int32Array>(from: T, to: T): T {
  to.set(from)
  return to
}
