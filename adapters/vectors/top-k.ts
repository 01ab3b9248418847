// A bounded min-heap over (row, score): keeps the k best of a stream in O(n log k) without sorting
// everything. Typed arrays, so a search over 100k candidates allocates nothing per candidate.
// Equal scores are ordered by the caller's tie order when it gives one (the embedded store's: by what a chunk says,
// which its export and import keep, PayloadTable.tieOrder), else by row.

/** Negative when row a goes before row b among equal scores, positive when after; never 0 for two rows. */
export type TieOrder = (a: number, b: number) => number

export class TopK {
  private _k = 0
  private scores: Float64Array
  private rows: Int32Array
  private size = 0
  private tie: TieOrder | null = null

  constructor(k: number) {
    this._k = Math.max(0, Math.floor(k))
    this.scores = new Float64Array(this._k)
    this.rows = new Int32Array(this._k)
  }

  get k(): number {
    return this._k
  }

  /**
   * Empties the heap for a new stream keeping the k best, its arrays reused (grown when k is larger): a search that
   * keeps one TopK allocates only what drain() returns. Ten KBs searched at once are twenty heaps a query.
   */
  reset(k: number, tie: TieOrder | null = null): this {
    this._k = Math.max(0, Math.floor(k))
    this.tie = tie
    if (this.rows.length < this._k) {
      this.scores = new Float64Array(this._k)
      this.rows = new Int32Array(this._k)
    }
    this.size = 0
    return this
  }

  get length(): number {
    return this.size
  }

  /** The score a candidate must beat once the heap is full (-Infinity before). */
  get floor(): number {
    return this.size < this._k ? -Infinity : this.scores[0]
  }

  push(row: number, score: number): void {
    if (this._k === 0) return
    if (this.size < this._k) {
      let i = this.size++
      // Sift up.
      while (i > 0) {
        const parent = (i - 1) >> 1
        if (!this.less(score, row, this.scores[parent], this.rows[parent])) break
        this.scores[i] = this.scores[parent]
        this.rows[i] = this.rows[parent]
        i = parent
      }
      this.scores[i] = score
      this.rows[i] = row
      return
    }
    if (!this.less(this.scores[0], this.rows[0], score, row)) return
    this.siftDown(row, score)
  }

  /** Best first; ties in the tie order, or to the lower row (the older point) without one: deterministic either way. */
  drain(): { rows: Int32Array; scores: Float64Array } {
    const n = this.size
    const rows = new Int32Array(n)
    const scores = new Float64Array(n)
    for (let out = n - 1; out >= 0; out--) {
      rows[out] = this.rows[0]
      scores[out] = this.scores[0]
      const lastRow = this.rows[this.size - 1]
      const lastScore = this.scores[this.size - 1]
      this.size--
      if (this.size > 0) this.siftDown(lastRow, lastScore)
    }
    return { rows, scores }
  }

  /** Heap order: the root is the worst kept candidate (lowest score; on ties the last in the tie order). */
  private less(scoreA: number, rowA: number, scoreB: number, rowB: number): boolean {
    return scoreA < scoreB || (scoreA === scoreB && (this.tie === null ? rowA > rowB : this.tie(rowA, rowB) > 0))
  }

  private siftDown(row: number, score: number): void {
    let i = 0
    const n = this.size
    for (;;) {
      const l = 2 * i + 1
      if (l >= n) break
      const r = l + 1
      let c = l
      if (r < n && this.less(this.scores[r], this.rows[r], this.scores[l], this.rows[l])) c = r
      if (!this.less(this.scores[c], this.rows[c], score, row)) break
      this.scores[i] = this.scores[c]
      this.rows[i] = this.rows[c]
      i = c
    }
    this.scores[i] = score
    this.rows[i] = row
  }
}
