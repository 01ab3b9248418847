// Recursive strategy: the separator cascade (paragraph, line, sentence, clause, word, character) with greedy
// merging up to chunk_size, computed as "furthest break of the best level in the window" (breaks.ts).
import type { Chunk } from '../types.ts'
import { textFinder, type BreakFinder } from './breaks.ts'
import { toChunks, type DocumentText } from './document.ts'
import { splitRanges } from './ranges.ts'

export interface RecursiveOptions {
  chunkSize: number
  chunkOverlap: number
  minChunkChars: number
}

/** Chunk ranges of `text` as flat [start, end, ...] offsets. */
export function recursiveRanges(text: string, o: RecursiveOptions, finder: BreakFinder = textFinder(text)): number[] {
  return splitRanges(text, finder, 0, text.length, { size: o.chunkSize, overlap: o.chunkOverlap, minChars: o.minChunkChars })
}

export function chunkRecursive(doc: DocumentText, o: RecursiveOptions): Chunk[] {
  return toChunks(doc, recursiveRanges(doc.text, o))
}
