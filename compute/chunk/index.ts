// Chunking entry point for the pool task and the pipeline. Sizes are in characters; offsets refer to the
// document text (pages joined with '\n\n'), so chunk.text === docText.slice(chunk.start, chunk.end). Every
// strategy splits each page on its own: a chunk (and a hierarchical parent) lies inside one page, whose
// page_num and page_label it carries; overlap never reaches back into the page before. No text of a page is
// lost to min_chunk_chars: a page shorter than that is a chunk of its own, and a page's last piece shorter than
// that joins the chunk before it (which may then exceed chunk_size by less than min_chunk_chars).
import { AppError } from '../../kernel/errors.ts'
import type { ChunkedDocument, ChunkingOptions, PageText } from '../types.ts'
import { chunkCode } from './code.ts'
import { joinPages } from './document.ts'
import { chunkHierarchical } from './hierarchical.ts'
import { chunkRecursive } from './recursive.ts'

export { chunkSemantic, type EmbedFunction, type SemanticOptions } from './semantic.ts'
export { joinPages, PAGE_SEPARATOR, type DocumentText } from './document.ts'
export { languageFor, LANGUAGES } from './code.ts'

export const CHUNK_SIZE_MIN = 64
export const CHUNK_SIZE_MAX = 8192
export const CODE_MAX_CHARS_MIN = 64
export const CODE_MAX_CHARS_MAX = 32768
/** chunk_overlap may be at most this share of the smallest chunk_size. */
export const MAX_OVERLAP_SHARE = 0.15

export const CHUNKING_DEFAULTS: Readonly<ChunkingOptions> = Object.freeze({
  strategy: 'recursive',
  chunk_size: 1024,
  chunk_overlap: 128,
  min_chunk_chars: 30,
  semantic_threshold: 0.8,
  code_max_chars: 1500,
})

export interface ChunkDocumentOptions extends ChunkingOptions {
  /** 'code': source files of the git connector, split with the code splitter and code_max_chars. */
  kind?: 'text' | 'code'
  /** For code: the file extension ('py', '.ts') or language name. */
  language?: string
}

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v)

/** One message per problem with the chunking settings; empty when they are valid. */
export function checkChunkingOptions(opts: Partial<ChunkingOptions>): string[] {
  const problems: string[] = []
  const strategy = opts.strategy
  if (strategy !== 'recursive' && strategy !== 'semantic' && strategy !== 'hierarchical') {
    problems.push(`strategy must be 'recursive', 'semantic' or 'hierarchical', got ${JSON.stringify(strategy)}`)
  }
  const size = opts.chunk_size
  const inRange = (v: unknown) => isInt(v) && v >= CHUNK_SIZE_MIN && v <= CHUNK_SIZE_MAX
  let smallest: number | undefined
  if (strategy === 'hierarchical') {
    if (!Array.isArray(size)) problems.push(`chunk_size must be a list of at least 2 sizes for strategy 'hierarchical', got ${JSON.stringify(size)}`)
    else if (size.length < 2) problems.push(`chunk_size must list at least 2 sizes for strategy 'hierarchical', got ${size.length}`)
    else {
      size.forEach((v, i) => {
        if (!inRange(v)) problems.push(`chunk_size[${i}] must be an integer from ${CHUNK_SIZE_MIN} to ${CHUNK_SIZE_MAX}, got ${JSON.stringify(v)}`)
        else if (i > 0 && inRange(size[i - 1]) && v >= size[i - 1]) problems.push(`chunk_size must be strictly descending: chunk_size[${i}] = ${v} is not below chunk_size[${i - 1}] = ${size[i - 1]}`)
      })
      if (size.every(inRange)) smallest = Math.min(...size)
    }
  } else if (Array.isArray(size)) {
    problems.push(`chunk_size must be a single integer for strategy '${String(strategy)}' (a list is for 'hierarchical'), got ${JSON.stringify(size)}`)
  } else if (!inRange(size)) {
    problems.push(`chunk_size must be an integer from ${CHUNK_SIZE_MIN} to ${CHUNK_SIZE_MAX}, got ${JSON.stringify(size)}`)
  } else smallest = size
  const overlap = opts.chunk_overlap
  if (!isInt(overlap) || overlap < 0) problems.push(`chunk_overlap must be an integer of at least 0, got ${JSON.stringify(overlap)}`)
  else if (smallest !== undefined && overlap > MAX_OVERLAP_SHARE * smallest) {
    problems.push(`chunk_overlap ${overlap} is above 15% of the smallest chunk_size ${smallest} (at most ${Math.floor(MAX_OVERLAP_SHARE * smallest)})`)
  }
  const minChars = opts.min_chunk_chars
  if (!isInt(minChars) || minChars < 0) problems.push(`min_chunk_chars must be an integer of at least 0, got ${JSON.stringify(minChars)}`)
  else if (smallest !== undefined && minChars >= smallest) problems.push(`min_chunk_chars ${minChars} must be below the smallest chunk_size ${smallest}`)
  const threshold = opts.semantic_threshold
  if (typeof threshold !== 'number' || !(threshold >= 0 && threshold <= 1)) problems.push(`semantic_threshold must be a number from 0 to 1, got ${JSON.stringify(threshold)}`)
  const code = opts.code_max_chars
  if (!isInt(code) || code < CODE_MAX_CHARS_MIN || code > CODE_MAX_CHARS_MAX) problems.push(`code_max_chars must be an integer from ${CODE_MAX_CHARS_MIN} to ${CODE_MAX_CHARS_MAX}, got ${JSON.stringify(code)}`)
  return problems
}

/**
 * Chunks a document with the recursive or hierarchical strategy, or the code splitter for `kind: 'code'`.
 * The semantic strategy needs the embedder: call chunkSemantic in the main thread instead.
 */
export function chunkDocument(pages: readonly PageText[], opts: ChunkDocumentOptions): ChunkedDocument {
  const problems = checkChunkingOptions(opts)
  if (problems.length > 0) throw new AppError('CHUNKING_OPTIONS_INVALID', 422, `Invalid chunking settings: ${problems.join('; ')}`)
  const doc = joinPages(pages)
  if (opts.kind === 'code') {
    return { chunks: chunkCode(doc, { maxChars: opts.code_max_chars, minChars: opts.min_chunk_chars, language: opts.language }), parents: [] }
  }
  const size = opts.chunk_size
  switch (opts.strategy) {
    case 'recursive':
      return { chunks: chunkRecursive(doc, { chunkSize: size as number, chunkOverlap: opts.chunk_overlap, minChunkChars: opts.min_chunk_chars }), parents: [] }
    case 'hierarchical':
      return chunkHierarchical(doc, { sizes: size as number[], chunkOverlap: opts.chunk_overlap, minChunkChars: opts.min_chunk_chars })
    case 'semantic':
      throw new AppError('CHUNKING_NEEDS_EMBEDDER', 500, "The semantic chunking strategy runs in the main thread: call chunkSemantic(pages, options, embed)")
  }
}
