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
import type { SparseVector } from '../ports.ts'
import type { RowSet } from './filter.ts'
import { TopK } from './top-k.ts'

interface Posting {
  rows: Uint32Array
  weights: Float32Array
  /** Entries used in rows/weights, dead ones included. */
  len: number
  /** Live points holding the term: n_t of the IDF. */
  df: number
}

/** The heap of the search under way (searches are synchronous, one at a time), reused: TopK.reset. */
const searchTop = new TopK(0)

export const idf = (n: number, df: number): number => Math.log((n - df + 0.5) / (df + 0.5) + 1)

/** The posting lists at one instant, by reference: entries past `lens` or of rows dead then are not part of it. */
export interface PostingsCapture {
  terms: Uint32Array
  rows: Uint32Array[]
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

/** Entries of a row block (4 MB with the values); a row with more terms gets a block of its own. */
const BLOCK_ENTRIES = 1 << 19
const FIRST_BLOCK_ENTRIES = 1 << 12

/** The terms of chosen rows at one instant: row i's are indices/values[block[i]] from start[i], len[i] of them. */
export interface SparseRowsCapture {
  indices: Uint32Array[]
  values: Float32Array[]
  block: Int32Array
  start: Uint32Array
  len: Uint32Array
}

/** Per-row term lists as a snapshot stores them: row i's at offsets[i]..offsets[i+1] of indices/values. */
export interface SparseRowsData {
  offsets: Uint32Array
  indices: Uint32Array
  values: Float32Array
}

export class SparseIndex {
  private readonly postings = new Map<number, Posting>()
  // The rows' own terms (see the top of this file): block -1 = none.
  private blockIndices: Uint32Array[] = []
  private blockValues: Float32Array[] = []
  /** Entries used in the last block. */
  private blockUsed = 0
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

  get size(): number {
    return this.liveCount
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
        p = { rows: new Uint32Array(4), weights: new Float32Array(4), len: 0, df: 0 }
        this.postings.set(term, p)
      } else if (p.len === p.rows.length) {
        const cap = p.len * 2
        const rows = new Uint32Array(cap)
        rows.set(p.rows)
        const weights = new Float32Array(cap)
        weights.set(p.weights)
        p.rows = rows
        p.weights = weights
      }
      p.rows[p.len] = row
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
    if (b < 0 || this.blockUsed + n > this.blockIndices[b].length) {
      // Doubling up to BLOCK_ENTRIES, so that a small collection holds small blocks.
      const size = Math.max(b < 0 ? FIRST_BLOCK_ENTRIES : Math.min(BLOCK_ENTRIES, 2 * this.blockIndices[b].length), n)
      this.blockIndices.push(new Uint32Array(size))
      this.blockValues.push(new Float32Array(size))
      this.blockUsed = 0
      b++
    }
    const at = this.blockUsed
    this.blockIndices[b].set(indices, at)
    this.blockValues[b].set(values, at)
    this.blockUsed = at + n
    this.rowBlock[row] = b
    this.rowStart[row] = at
    this.rowLen[row] = n
  }

  remove(row: number): void {
    if (row >= this.live.length || this.live[row] === 0) return
    const b = this.rowBlock[row]
    if (b >= 0) {
      const indices = this.blockIndices[b]
      const from = this.rowStart[row]
      const to = from + this.rowLen[row]
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
   * Rebuilds the index from a snapshot without touching a posting per entry: the lists arrive built and
   * become views of the snapshot's arrays (a list is copied out the first time it grows).
   */
  restore(rows: Uint32Array, vectors: SparseRowsData, postings: PostingsData, rowsEnd: number): void {
    if (this.liveCount !== 0) throw new Error('restore() needs an empty sparse index')
    this.ensureRows(rowsEnd)
    // The snapshot's arrays become a full block: rows added later start a new one.
    const b = this.blockIndices.length
    this.blockIndices.push(vectors.indices)
    this.blockValues.push(vectors.values)
    this.blockUsed = vectors.indices.length
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i]
      this.live[row] = 1
      this.rowBlock[row] = b
      this.rowStart[row] = vectors.offsets[i]
      this.rowLen[row] = vectors.offsets[i + 1] - vectors.offsets[i]
    }
    this.liveCount = rows.length
    const { terms, offsets } = postings
    for (let t = 0; t < terms.length; t++) {
      const from = offsets[t]
      const len = offsets[t + 1] - from
      this.postings.set(terms[t], { rows: postings.rows.subarray(from, from + len), weights: postings.weights.subarray(from, from + len), len, df: len })
    }
    this.totalEntries = postings.rows.length
    this.deadEntries = 0
  }

  /** A copy of a live row's terms (an absent or removed row has none). */
  rowVector(row: number): { indices: Uint32Array; values: Float32Array } {
    const b = row < this.live.length && this.live[row] === 1 ? this.rowBlock[row] : -1
    if (b < 0) return { indices: new Uint32Array(0), values: new Float32Array(0) }
    const from = this.rowStart[row]
    const to = from + this.rowLen[row]
    return { indices: this.blockIndices[b].slice(from, to), values: this.blockValues[b].slice(from, to) }
  }

  /**
   * The terms of `rows` (live), by reference: blocks are only appended to, and compact(), which replaces them, does
   * not change the arrays captured.
   */
  captureRows(rows: Int32Array): SparseRowsCapture {
    const n = rows.length
    const c: SparseRowsCapture = { indices: this.blockIndices.slice(), values: this.blockValues.slice(), block: new Int32Array(n), start: new Uint32Array(n), len: new Uint32Array(n) }
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
    const c: PostingsCapture = { terms: new Uint32Array(n), rows: new Array(n), weights: new Array(n), lens: new Uint32Array(n) }
    let i = 0
    for (const [term, p] of this.postings) {
      c.terms[i] = term
      c.rows[i] = p.rows
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
    for (const [term, p] of this.postings) {
      if (p.df === 0) {
        this.postings.delete(term)
        continue
      }
      if (p.df === p.len) continue
      let w = 0
      for (let r = 0; r < p.len; r++) {
        const row = p.rows[r]
        if (live[row] === 1) {
          p.rows[w] = row
          p.weights[w] = p.weights[r]
          w++
        }
      }
      p.len = w
      if (p.rows.length > 64 && w < p.rows.length / 4) {
        p.rows = p.rows.slice(0, Math.max(4, w * 2))
        p.weights = p.weights.slice(0, p.rows.length)
      }
    }
    this.totalEntries -= this.deadEntries
    this.deadEntries = 0
    this.packRows()
  }

  /** Copies the live rows' terms into new blocks, leaving out those of deleted rows. */
  private packRows(): void {
    const indices = this.blockIndices
    const values = this.blockValues
    this.blockIndices = []
    this.blockValues = []
    this.blockUsed = 0
    for (let row = 0; row < this.live.length; row++) {
      const b = this.rowBlock[row]
      if (b < 0) continue
      const from = this.rowStart[row]
      const to = from + this.rowLen[row]
      this.store(row, indices[b].subarray(from, to), values[b].subarray(from, to))
    }
  }

  /**
   * The k best live rows for the query (of the subset a filter keeps, when given), best first. Scores use the
   * IDF of all current live points, filtered or not, as Qdrant's do: a filter narrows the candidates, never
   * the statistics, so a chunk scores the same with and without one.
   */
  search(query: SparseVector, k: number, subset?: RowSet): { rows: Int32Array; scores: Float64Array } {
    const top = searchTop.reset(k)
    if (this.liveCount === 0 || k <= 0) return top.drain()
    if (subset !== undefined && this.subsetIsCheaper(query, subset.count)) return this.searchRows(query, subset, top)
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
      const { rows, weights, len } = p
      for (let j = 0; j < len; j++) {
        const row = rows[j]
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
  private subsetIsCheaper(query: SparseVector, rows: number): boolean {
    let postings = 0
    for (let i = 0; i < query.indices.length; i++) postings += this.postings.get(query.indices[i])?.len ?? 0
    const perRow = this.liveCount === 0 ? 0 : (this.totalEntries - this.deadEntries) / this.liveCount
    // A lookup in the query's term map costs a few posting entries.
    return rows * perRow * 4 < postings
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
      const b = this.rowBlock[row]
      if (b < 0) continue
      const indices = this.blockIndices[b]
      const values = this.blockValues[b]
      const from = this.rowStart[row]
      const to = from + this.rowLen[row]
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

/** `to` (a larger array) with `from` copied to its start. */
function grownTo<T extends Uint8Array | Uint32Array | Int32Array>(from: T, to: T): T {
  to.set(from)
  return to
}
