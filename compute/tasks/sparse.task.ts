// Worker task: sparse vectors for a batch of chunk texts (documents) or queries, packed in three typed
// arrays (see SparseBatch) so the reply moves three buffers instead of copying many small ones.
import { createSparseEncoder, packSparse, type SparseBatch, type SparseEncoder, type SparseEncoderOptions } from '../text/sparse.ts'
import type { TaskResult } from '../types.ts'

export interface SparseRequest {
  texts: string[]
  kind: 'document' | 'query'
  options?: Omit<SparseEncoderOptions, 'tokenizer'>
}

export type SparseValue = SparseBatch

const encoders = new Map<string, SparseEncoder>()

export default async function sparse(req: SparseRequest): Promise<TaskResult<SparseValue>> {
  try {
    const key = JSON.stringify(req.options ?? {})
    let enc = encoders.get(key)
    if (!enc) {
      enc = createSparseEncoder(req.options)
      encoders.set(key, enc)
    }
    const vectors = req.texts.map((t) => (req.kind === 'query' ? enc.encodeQuery(t) : enc.encodeDocument(t)))
    return { ok: true, value: packSparse(vectors) }
  } catch (err) {
    const code = err instanceof RangeError ? 'SPARSE_OPTIONS_INVALID' : 'SPARSE_FAILED'
    return { ok: false, code, message: `sparse encoding failed: ${err instanceof Error ? err.message : String(err)}` }
  }
}
