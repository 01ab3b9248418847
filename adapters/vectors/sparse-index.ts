// Inverted index for sparse vectors, scored like Qdrant's sparse vectors with `modifier: idf`:
//   score(q, d) = sum over shared terms t of idf(t) * q_t * d_t,  idf(t) = ln((N - n_t + 0.5) / (n_t + 0.5) + 1)
// with N the live points of the collection and n_t the live points holding t (Qdrant, "Indexing / IDF
// Modifier"). Postings are typed arrays; deleting a point only marks its row dead and decrements the
// document frequencies, so the postings keep dead entries until compact() drops them. The owner must
// compact before it reuses a dead row, or the stale entries would score for the new point.
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

export class SparseIndex {
  private readonly postings = new Map<number, Posting>()
  private vectors: (SparseVector | undefined)[] = []
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

  vectorOf(row: number): SparseVector | undefined {
    return this.vectors[row]
  }

  /** The vector is kept by reference: the caller hands over ownership. */
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
    this.vectors[row] = vector
    this.live[row] = 1
    this.liveCount++
  }

  remove(row: number): void {
    if (row >= this.live.length || this.live[row] === 0) return
    const vector = this.vectors[row]
    if (vector !== undefined) {
      for (let i = 0; i < vector.indices.length; i++) {
        const p = this.postings.get(vector.indices[i])
        if (p !== undefined) p.df--
      }
      this.deadEntries += vector.indices.length
    }
    this.vectors[row] = undefined
    this.live[row] = 0
    this.liveCount--
  }

  /**
   * Rebuilds the index from a snapshot without touching a posting per entry: the lists arrive built and
   * become views of the snapshot's arrays (a list is copied out the first time it grows).
   */
  restore(rows: Uint32Array, vectors: SparseVector[], postings: PostingsData, rowsEnd: number): void {
    if (this.liveCount !== 0) throw new Error('restore() needs an empty sparse index')
    this.ensureRows(rowsEnd)
    for (let i = 0; i < rows.length; i++) {
      this.live[rows[i]] = 1
      this.vectors[rows[i]] = vectors[i]
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
  }

  /**
   * The k best live rows for the query (of the subset a filter keeps, when given), best first. Scores use the
   * IDF of all current live points, filtered or not, as Qdrant's do: a filter narrows the candidates, never
   * the statistics, so a chunk scores the same with and without one.
   */
  search(query: SparseVector, k: number, subset?: RowSet): { rows: Int32Array; scores: Float64Array } {
    const top = new TopK(k)
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
      const v = this.vectors[row]
      if (v === undefined) continue
      let score = 0
      let shared = false
      for (let i = 0; i < v.indices.length; i++) {
        const w = weights.get(v.indices[i])
        if (w === undefined) continue
        score += w * v.values[i]
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
    const live = new Uint8Array(cap)
    live.set(this.live)
    this.live = live
    const acc = new Float64Array(cap)
    this.acc = acc
    const stamp = new Uint32Array(cap)
    stamp.set(this.stamp)
    this.stamp = stamp
  }
}
