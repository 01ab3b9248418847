// The document text every chunk offset refers to: the pages joined with '\n\n'.
import type { Chunk, PageText } from '../types.ts'

export const PAGE_SEPARATOR = '\n\n'

export interface DocumentText {
  text: string
  pages: readonly PageText[]
  /** Offset of each page's first character in `text`. */
  pageStarts: number[]
}

export function joinPages(pages: readonly PageText[]): DocumentText {
  const pageStarts: number[] = []
  let offset = 0
  for (let i = 0; i < pages.length; i++) {
    if (i > 0) offset += PAGE_SEPARATOR.length
    pageStarts.push(offset)
    offset += pages[i].text.length
  }
  return { text: pages.map((p) => p.text).join(PAGE_SEPARATOR), pages, pageStarts }
}

/** Index of the page holding `offset` (a separator belongs to the page before it). */
export function pageIndexAt(doc: DocumentText, offset: number): number {
  const starts = doc.pageStarts
  let lo = 0
  let hi = starts.length - 1
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1
    if (starts[mid] <= offset) lo = mid
    else hi = mid - 1
  }
  return lo
}

/** Builds chunks from flat [start, end, ...] ranges, numbered from `firstIndex`. */
export function toChunks(doc: DocumentText, ranges: readonly number[], level = 0, parents?: readonly (number | null)[], firstIndex = 0): Chunk[] {
  const out: Chunk[] = []
  for (let i = 0; i < ranges.length; i += 2) {
    const start = ranges[i]
    const end = ranges[i + 1]
    const page = doc.pages.length > 0 ? doc.pages[pageIndexAt(doc, start)] : undefined
    out.push({
      index: firstIndex + out.length,
      text: doc.text.slice(start, end),
      page_num: page?.page_num ?? 1,
      page_label: page?.page_label ?? '1',
      start,
      end,
      level,
      parent: parents ? parents[i >> 1] : null,
    })
  }
  return out
}
