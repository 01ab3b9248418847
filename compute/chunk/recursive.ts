// Recursive strategy: the separator cascade (paragraph, line, sentence, clause, word, character) with greedy
// merging up to chunk_size, computed as "furthest break of the best level in the window" (breaks.ts).
import type { Chunk } from '../types.ts'
import { textFinder, type BreakFinder } from './breaks.ts'
import { splitByPage, toChunks, type DocumentText } from './document.ts'
import { splitRanges } from './ranges.ts'

export interface RecursiveOptions {
  chunkSize: number
  chunkOverlap: number
  minChunkChars: number
  /** A page of a paged document (see RangeOptions.keepRemainder). */
  keepRemainder?: boolean
}

/** Chunk ranges of text[from, to) as flat [start, end, ...] offsets. */
export function recursiveRanges(text: string, o: RecursiveOptions, finder: BreakFinder = textFinder(text), from = 0, to = text.length): number[] {
  return splitRanges(text, finder, from, to, { size: o.chunkSize, overlap: o.chunkOverlap, minChars: o.minChunkChars, keepRemainder: o.keepRemainder })
}

export function chunkRecursive(doc: DocumentText, o: RecursiveOptions): Chunk[] {
  const finder = textFinder(doc.text)
  return toChunks(doc, splitByPage(doc, (from, to, paged) => recursiveRanges(doc.text, { ...o, keepRemainder: paged }, finder, from, to)))
}
