// Worker task, second half of an ingest: chunk the parsed pages, encode every chunk's sparse vector and,
// with the built-in embedder, its dense vector too: one thread crossing, typed arrays moved back.
import { AppError } from '../../kernel/errors.ts'
import { embedTexts } from '../../adapters/embedders/builtin.ts'
import { encodingTexts } from '../chunk/context.ts'
import { chunkDocument } from '../chunk/index.ts'
import { createSparseEncoder, packSparse, type SparseBatch, type SparseEncoder, type SparseEncoderOptions } from '../text/sparse.ts'
import type { ChunkedDocument, ChunkingOptions, PageText, TaskResult } from '../types.ts'

export interface SegmentRequest {
  pages: PageText[]
  options: ChunkingOptions
  kind?: 'text' | 'code'
  language?: string
  sparse?: Omit<SparseEncoderOptions, 'tokenizer'>
  /** Compute built-in dense vectors of this many dimensions here (0 = the caller embeds). */
  builtinDimensions: number
  /** The document title, put before every chunk but the first for encoding (compute/chunk/context.ts). */
  title?: string
}

export interface SegmentValue extends ChunkedDocument {
  sparse: SparseBatch
  /** Row i (i * dimensions) is chunk i's vector; empty when builtinDimensions is 0. */
  dense: Float32Array
}

const encoders = new Map<string, SparseEncoder>()

/** The work of this task, also run by the analyze task when it segments in the same call (analyze.task.ts). */
export function segmentPages(req: SegmentRequest): SegmentValue {
  const chunked = chunkDocument(req.pages, { ...req.options, kind: req.kind, language: req.language })
  const key = JSON.stringify(req.sparse ?? {})
  let enc = encoders.get(key)
  if (!enc) encoders.set(key, (enc = createSparseEncoder(req.sparse)))
  const texts = encodingTexts(chunked.chunks, req.title)
  const sparse = packSparse(texts.map((t) => enc.encodeDocument(t)))
  const dense = req.builtinDimensions > 0 ? embedTexts(texts, req.builtinDimensions) : new Float32Array(0)
  return { ...chunked, sparse, dense }
}

/** A failed segmentation as the task reports it. */
export function segmentFailure(err: unknown): { ok: false; code: string; message: string } {
  if (err instanceof AppError) return { ok: false, code: err.code, message: err.message }
  return { ok: false, code: 'CHUNK_FAILED', message: `chunking failed: ${err instanceof Error ? err.message : String(err)}` }
}

export default async function segment(req: SegmentRequest): Promise<TaskResult<SegmentValue>> {
  try {
    return { ok: true, value: segmentPages(req) }
  } catch (err) {
    return segmentFailure(err)
  }
}
