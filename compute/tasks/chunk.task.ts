// Worker task: chunk one parsed document (recursive, hierarchical, or code). The semantic strategy needs the
// embedder and runs in the main thread (compute/chunk/semantic.ts): asking for it here is an error.
import { AppError } from '../../kernel/errors.ts'
import { chunkDocument } from '../chunk/index.ts'
import type { ChunkedDocument, ChunkingOptions, PageText, TaskResult } from '../types.ts'

export interface ChunkRequest {
  pages: PageText[]
  options: ChunkingOptions
  /** 'code' for source files of the git connector. */
  kind?: 'text' | 'code'
  /** For code: extension ('py', '.ts') or language name. */
  language?: string
}

export type ChunkValue = ChunkedDocument

export default async function chunk(req: ChunkRequest): Promise<TaskResult<ChunkValue>> {
  try {
    return { ok: true, value: chunkDocument(req.pages, { ...req.options, kind: req.kind, language: req.language }) }
  } catch (err) {
    if (err instanceof AppError) return { ok: false, code: err.code, message: err.message }
    return { ok: false, code: 'CHUNK_FAILED', message: `chunking failed: ${err instanceof Error ? err.message : String(err)}` }
  }
}
