// Payloads of a collection's rows. Rows restored from a snapshot keep their payload as the JSON bytes of
// the snapshot's blob and are parsed only when a search returns them (a dozen parses per query instead
// of 100k at start, and bytes off the JS heap); rows written since hold the object. The ids and
// chunk_index every row needs (maps, deletes, docVectors) are kept apart, unparsed payload or not.
import type { ChunkPayload, VectorHit } from '../ports.ts'

class StoredHit implements VectorHit {
  private cached: ChunkPayload | undefined
  constructor(
    readonly score: number,
    readonly id: string,
    private readonly object: ChunkPayload | undefined,
    private readonly blob: Buffer | null,
    private readonly from: number,
    private readonly to: number,
  ) {}

  /** A fresh object (the caller may keep and change it), the same one on every read of this hit. */
  get payload(): ChunkPayload {
    this.cached ??= this.object !== undefined ? { ...this.object } : (JSON.parse(this.blob!.toString('utf8', this.from, this.to)) as ChunkPayload)
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

  set(row: number, payload: ChunkPayload): void {
    this.ensure(row + 1)
    this.objects[row] = payload
    this.blobEntry[row] = -1
    this.chunkIds[row] = payload.chunk_id
    this.docIds[row] = payload.doc_id
    this.chunkIndex[row] = payload.chunk_index
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
      this.chunkIds[row] = chunkIds[i]
      this.docIds[row] = docIds[i]
      this.chunkIndex[row] = chunkIndex[i]
    }
  }

  delete(row: number): void {
    this.objects[row] = undefined
    this.blobEntry[row] = -1
    this.chunkIds[row] = undefined
    this.docIds[row] = undefined
  }

  /**
   * A search hit on `row`. Its payload is read when first asked for: a hybrid search fetches 40 dense and 40
   * sparse candidates per KB and keeps top_k of them, so most hits are never parsed. The hit holds the bytes
   * or object of this moment, so a later write to the row does not change it.
   */
  hit(row: number, score: number): VectorHit {
    const entry = this.blobEntry[row]
    if (entry >= 0) return new StoredHit(score, this.chunkIds[row]!, undefined, this.blob, this.blobOffsets![entry], this.blobOffsets![entry + 1])
    return new StoredHit(score, this.chunkIds[row]!, this.objects[row], null, 0, 0)
  }

  /** What a snapshot writes: the object, or the JSON bytes it was restored from (never re-encoded). */
  raw(row: number): ChunkPayload | Uint8Array {
    const entry = this.blobEntry[row]
    if (entry >= 0) return this.blob!.subarray(this.blobOffsets![entry], this.blobOffsets![entry + 1])
    return this.objects[row]!
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
  }
}
