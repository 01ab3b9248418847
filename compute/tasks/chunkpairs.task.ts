// Worker task: dedup stage 3's chunk comparison of a new document against one candidate (compute/dedup/chunks.ts),
// off the main thread and bounded in pairs.
import { chunkPairs, type ChunkPairs } from '../dedup/chunks.ts'
import type { TaskResult } from '../types.ts'

export interface ChunkPairsRequest {
  /** The new document's chunk vectors, `dims` each, back to back. */
  fresh: Float32Array
  /** The candidate's. */
  other: Float32Array
  dims: number
  matchThreshold: number
  maxPairs?: number
  /** The documents' chunk counts when `fresh` / `other` are a sample of their chunks (samplePairs). */
  counts?: { fresh: number; other: number }
}

export default async function chunkpairs(req: ChunkPairsRequest): Promise<TaskResult<ChunkPairs>> {
  if (!(req.dims > 0) || req.fresh.length % req.dims !== 0 || req.other.length % req.dims !== 0) {
    return { ok: false, code: 'DEDUP_VECTORS_INVALID', message: `chunk vectors are not rows of ${req.dims} dimensions` }
  }
  return { ok: true, value: chunkPairs(req.fresh, req.other, req.dims, req.matchThreshold, req.maxPairs, req.counts) }
}
