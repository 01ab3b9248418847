// Errors both vector drivers raise, so callers see the same codes whichever driver runs.
import { AppError } from '../../kernel/errors.ts'

/** The collection exists with another vector size: the model or embedding.vector_size changed. */
export const dimensionMismatch = (kbId: string, existing: number, requested: number) =>
  new AppError(
    'VECTOR_DIMENSION_MISMATCH',
    500,
    `Vector collection '${kbId}' holds ${existing}-dimensional vectors but ${requested} were given; ` +
      'embedding.vector_size must match the collection (changing the model needs the collection deleted and everything re-indexed)',
  )

/** A point the store cannot take (a bug in the caller, not a user input): 500. */
export const invalidPoint = (kbId: string, message: string) =>
  new AppError('INVALID_VECTOR_POINT', 500, `Vector collection '${kbId}': ${message}`)

const KB_ID = /^[a-z0-9][a-z0-9_-]{0,62}$/

/** kb_id becomes a folder or collection name: refuse anything the KB layer would not have accepted. */
export function checkKbId(kbId: string): void {
  if (typeof kbId !== 'string' || !KB_ID.test(kbId)) {
    throw new AppError('INVALID_KB_ID', 422, `Invalid kb_id '${String(kbId)}': expected ${KB_ID.source}`)
  }
}

/** Validates a point (the vector size aside) before it is logged: after the log write nothing may fail. */
export function pointProblem(p: { dense: Float32Array; sparse: { indices: Uint32Array; values: Float32Array }; payload: { chunk_id: unknown; doc_id: unknown } }, seen: Set<number>): string | null {
  if (p === null || typeof p !== 'object') return 'a point is not an object'
  const payload = p.payload as { chunk_id?: unknown; doc_id?: unknown } | undefined
  if (!payload || typeof payload.chunk_id !== 'string' || payload.chunk_id === '') return 'payload.chunk_id must be a non-empty string'
  if (typeof payload.doc_id !== 'string') return `point ${payload.chunk_id}: payload.doc_id must be a string`
  if (!(p.dense instanceof Float32Array)) return `point ${payload.chunk_id}: dense must be a Float32Array`
  for (let i = 0; i < p.dense.length; i++) if (!Number.isFinite(p.dense[i])) return `point ${payload.chunk_id}: dense vector holds a non-finite value`
  const s = p.sparse
  if (!s || !(s.indices instanceof Uint32Array) || !(s.values instanceof Float32Array)) return `point ${payload.chunk_id}: sparse must be {indices: Uint32Array, values: Float32Array}`
  if (s.indices.length !== s.values.length) return `point ${payload.chunk_id}: sparse indices and values differ in length`
  seen.clear()
  for (let i = 0; i < s.indices.length; i++) {
    if (seen.has(s.indices[i])) return `point ${payload.chunk_id}: sparse index ${s.indices[i]} appears twice (indices must be unique)`
    seen.add(s.indices[i])
    if (!Number.isFinite(s.values[i])) return `point ${payload.chunk_id}: sparse vector holds a non-finite value`
  }
  return null
}

/** A search filter of the wrong shape (the search service validates user input first, so a caller bug): 500. */
export const invalidFilter = (kbId: string, message: string) =>
  new AppError('INVALID_VECTOR_FILTER', 500, `Vector collection '${kbId}': ${message}`)
