// The splitting engine shared by every strategy: ranges of one string, ending at the breaks a BreakFinder
// offers (see breaks.ts). Chunks are [start, end) offsets; text is sliced only when a Chunk is built.
import { isWs, type BreakFinder } from './breaks.ts'

export interface RangeOptions {
  /** Maximum chunk length in characters. */
  size: number
  /** Characters of the previous chunk repeated at the start of the next (word-aligned when possible). */
  overlap: number
  /** Chunks shorter than this are dropped, and breaks that would make one are not taken. */
  minChars: number
  /** Source code: chunks start at the beginning of a line, indentation included. */
  code?: boolean
  /**
   * A page of a paged document: a remainder shorter than minChars joins the chunk before it, or stands alone when
   * it is all the text there is, since it cannot join the next page's chunk and dropping it would lose a page's
   * text (a slide of a few words, the last line of a page).
   */
  keepRemainder?: boolean
}

/** Scripts written without spaces, where an overlap may start at any character (not a low surrogate). */
function isUnspacedScript(c: number): boolean {
  return (c >= 0x2e80 && c <= 0x9fff) || (c >= 0xf900 && c <= 0xfaff) || (c >= 0xff00 && c <= 0xffef) || (c >= 0xd800 && c <= 0xdbff)
}

/** Moves a cut left off the middle of a surrogate pair. */
function safeCut(text: string, p: number, floor: number): number {
  const c = text.charCodeAt(p - 1)
  return c >= 0xd800 && c <= 0xdbff && p - 1 > floor ? p - 1 : p
}

function skipWs(text: string, p: number, to: number): number {
  while (p < to && isWs(text.charCodeAt(p))) p++
  return p
}

function trimEnd(text: string, from: number, e: number): number {
  while (e > from && isWs(text.charCodeAt(e - 1))) e--
  return e
}

/** Back to the start of the line of `p`, keeping its indentation, but not before `floor`. */
function lineStart(text: string, p: number, floor: number): number {
  while (p > floor) {
    const c = text.charCodeAt(p - 1)
    if (c !== 32 && c !== 9) break
    p--
  }
  return p
}

/** Start of the overlap before `e`: word-aligned, inside the paragraph `e` cuts (never across a paragraph). */
function overlapStart(text: string, finder: BreakFinder, s: number, e: number, overlap: number): number {
  if (finder.isParagraph(e)) return -1
  let q = Math.max(e - overlap, s + 1)
  const para = finder.lastParagraph(q, e)
  if (para >= 0) q = para + 1
  for (let p = q; p < e; p++) {
    if (isWs(text.charCodeAt(p - 1)) && !isWs(text.charCodeAt(p))) return p
  }
  return isUnspacedScript(text.charCodeAt(q)) ? q : -1
}

/**
 * Splits text[from, to) into chunks no longer than `size`: each chunk ends at the furthest break of the best
 * level inside its window (at a character when there is none). Returns flat [start0, end0, start1, end1, ...];
 * chunks never start or end with whitespace (code chunks keep their first line's indentation).
 */
export function splitRanges(text: string, finder: BreakFinder, from: number, to: number, o: RangeOptions): number[] {
  const out: number[] = []
  const size = Math.max(1, o.size)
  const minChars = Math.max(0, o.minChars)
  const overlap = o.code ? 0 : Math.max(0, Math.min(o.overlap, size - 1))
  to = trimEnd(text, from, to)
  let s = skipWs(text, from, to)
  if (o.code) s = lineStart(text, s, from)
  let prevEnd = s
  while (s < to) {
    let e: number
    if (to - s <= size) {
      e = to
    } else {
      const hi = s + size
      let lo = Math.max(prevEnd + 1, s + Math.max(minChars, 1))
      if (lo > hi) lo = Math.min(hi, Math.max(prevEnd + 1, s + 1))
      e = finder.best(lo, hi)
      if (e < 0) e = safeCut(text, hi, Math.max(s, prevEnd))
    }
    const end = trimEnd(text, s, e)
    if (end - s >= minChars && end > s) out.push(s, end)
    else if (o.keepRemainder && end > s) {
      if (out.length > 0) out[out.length - 1] = end
      else out.push(s, end)
    }
    if (e >= to) break
    let next = skipWs(text, e, to)
    if (o.code) next = lineStart(text, next, e)
    if (overlap > 0) {
      const p = overlapStart(text, finder, s, e, overlap)
      if (p >= 0 && p < next) next = p
    }
    prevEnd = e
    s = next
  }
  return out
}
