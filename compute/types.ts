// Types shared by the compute tasks and their callers. Everything here crosses the worker-thread boundary,
// so it is plain data (no classes); typed arrays are moved, not copied.

export type DocType = 'pdf' | 'docx' | 'txt' | 'md' | 'hwp' | 'hwpx' | 'html' | 'rst' | 'code'

/**
 * One page of parsed text. Formats without pages give one page: page_num 1, page_label '1'. A document of
 * several pages is chunked page by page (compute/chunk/document.ts), so every chunk lies on one page.
 */
export interface PageText {
  page_num: number
  page_label: string
  text: string
}

export interface ParsedDocument {
  title: string
  doc_type: DocType
  pages: PageText[]
}

export type HtmlExtractionPolicy = 'strict' | 'balanced' | 'lenient'

export interface ChunkingOptions {
  strategy: 'recursive' | 'semantic' | 'hierarchical'
  /** recursive/semantic: one size; hierarchical: descending sizes, the last is the leaf size. */
  chunk_size: number | number[]
  chunk_overlap: number
  min_chunk_chars: number
  semantic_threshold: number
  code_max_chars: number
}

export interface Chunk {
  /** Position among the chunks returned (leaves and parents are numbered separately, see level). */
  index: number
  text: string
  /** The page all of the chunk's text is on (a chunk never spans two pages). */
  page_num: number
  page_label: string
  /** Character offsets into the document text (pages joined with '\n\n'); start and end lie in one page. */
  start: number
  end: number
  /** hierarchical: 0 is the top level; the leaves are the last level. Others: always 0. */
  level: number
  /** hierarchical: index of the parent chunk in the `parents` list, or null for the top level. */
  parent: number | null
}

export interface ChunkedDocument {
  /** The searchable chunks (the leaf level for hierarchical). */
  chunks: Chunk[]
  /** hierarchical only: every non-leaf chunk, all levels, each knowing its parent. Empty otherwise. */
  parents: Chunk[]
}

/** Errors do not survive the thread boundary as classes: tasks return them as data. */
export type TaskResult<T> = { ok: true; value: T } | { ok: false; code: string; message: string }
