// The document text every chunk offset refers to: the pages joined with '\n\n'. A document of several pages is
// split page by page (each page on its own, as the older service does), so a chunk never spans two pages and its
// page_num / page_label say where all of its text is.
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

/**
 * Flat [start, end, ...] ranges of the whole document from `split(from, to)`, called once per page: a chunk, an
 * overlap or a parent never crosses a page end. One page is split as one text, which is what every format
 * without pages (txt, md, html, rst) gives, so those are chunked exactly as before.
 */
export function splitByPage(doc: DocumentText, split: (from: number, to: number, paged: boolean) => number[]): number[] {
  if (doc.pages.length <= 1) return split(0, doc.text.length, false)
  const out: number[] = []
  for (let i = 0; i < doc.pages.length; i++) {
    const from = doc.pageStarts[i]
    const ranges = split(from, from + doc.pages[i].text.length, true)
    for (let j = 0; j < ranges.length; j++) out.push(ranges[j])
  }
  return out
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
