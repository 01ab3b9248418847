// Break levels: one byte per position of the document text, telling how good a place it is to end a chunk
// (lower is better, 0 = no break). The chunkers pick, inside a window, the furthest break of the best level,
// which is what a separator cascade with greedy merging computes, without splitting the text into pieces.

export const BREAK_PARAGRAPH = 1
export const BREAK_LINE = 2
export const BREAK_SENTENCE = 3
export const BREAK_CLAUSE = 4
export const BREAK_WORD = 5

export function isWs(c: number): boolean {
  if (c <= 32) return c === 32 || (c >= 9 && c <= 13)
  if (c < 0xa0) return false
  return c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 ||
    c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff
}

/** Closing quotes and brackets that may follow a sentence's final punctuation. */
export function isCloser(c: number): boolean {
  return c === 0x29 || c === 0x5d || c === 0x22 || c === 0x27 || c === 0x2019 || c === 0x201d || c === 0xbb ||
    c === 0x300d || c === 0x300f || c === 0x300b || c === 0x3009 || c === 0xff09
}

// Abbreviations whose period does not end a sentence (compared lower-cased).
const ABBREVIATIONS = new Set([
  'mr', 'mrs', 'ms', 'dr', 'prof', 'sr', 'jr', 'st', 'vs', 'etc', 'fig', 'figs', 'al', 'eq', 'eqs', 'no', 'vol',
  'pp', 'ca', 'cf', 'approx', 'inc', 'ltd', 'co', 'corp', 'dept', 'est', 'jan', 'feb', 'mar', 'apr', 'jun', 'jul',
  'aug', 'sep', 'sept', 'oct', 'nov', 'dec', 'e.g', 'i.e', 'u.s', 'u.k',
])

// Korean connective endings (last two syllables of a clause): a cut there keeps clauses whole. Keyed by the
// two UTF-16 code units so that the scan allocates nothing.
export const KOREAN_CONNECTIVES: readonly string[] = [
  '지만', '는데', '은데', '으며', '면서', '므로', '니까', '어서', '아서', '해서', '하고', '하며', '이며', '되며',
  '되고', '했고', '였고', '으나', '거나', '든지', '는지', '한데', '더니',
]
const CONNECTIVE_KEYS = new Set(KOREAN_CONNECTIVES.map((w) => w.charCodeAt(0) * 0x10000 + w.charCodeAt(1)))
// Last syllables of the connectives, to skip the set look-up for most words.
const CONNECTIVE_LAST = new Uint8Array(0xd7a4 - 0xac00)
for (const w of KOREAN_CONNECTIVES) CONNECTIVE_LAST[w.charCodeAt(1) - 0xac00] = 1

function isAbbreviation(text: string, dot: number): boolean {
  let w = dot
  while (w > 0 && w > dot - 8) {
    const c = text.charCodeAt(w - 1)
    if (isWs(c) || c === 0x28 || c === 0x22) break
    w--
  }
  if (w === dot || dot - w > 6) return false
  if (dot - w === 1) {
    const c = text.charCodeAt(w)
    return (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) // an initial: "J. Smith"
  }
  return ABBREVIATIONS.has(text.slice(w, dot).toLowerCase())
}

/** Level of a break at the start of a whitespace run at `p` (no newline in the run). */
export function levelBefore(text: string, p: number): number {
  let q = p
  while (q > 0 && isCloser(text.charCodeAt(q - 1))) q--
  if (q === 0) return BREAK_WORD
  const c = text.charCodeAt(q - 1)
  switch (c) {
    case 0x2e: // .
      return isAbbreviation(text, q - 1) ? BREAK_WORD : BREAK_SENTENCE
    case 0x21: case 0x3f: case 0x2026: case 0x3002: case 0xff01: case 0xff1f: case 0xff0e:
      return BREAK_SENTENCE
    case 0x3b: case 0x3a: case 0x2c: case 0xff0c: case 0xff1b: case 0xff1a: case 0x3001:
      return BREAK_CLAUSE
  }
  if (c >= 0xac00 && c <= 0xd7a3 && CONNECTIVE_LAST[c - 0xac00] === 1 && q >= 2 && CONNECTIVE_KEYS.has(text.charCodeAt(q - 2) * 0x10000 + c)) return BREAK_CLAUSE
  return BREAK_WORD
}

/** CJK punctuation ends a sentence or clause without a following space. */
export function cjkPunctuationLevel(c: number): number {
  if (c === 0x3002 || c === 0xff01 || c === 0xff1f) return BREAK_SENTENCE
  if (c === 0x3001 || c === 0xff0c || c === 0xff1b) return BREAK_CLAUSE
  return 0
}

/** Break levels of `text`: index i is the level of ending a chunk at i (before text[i]). */
export function textBreaks(text: string): Uint8Array {
  const n = text.length
  const breaks = new Uint8Array(n + 1)
  let i = 0
  while (i < n) {
    const c = text.charCodeAt(i)
    if (c > 32 && (c < 0x2000 ? c !== 0xa0 && c !== 0x1680 : c > 0x3002 && c < 0xfeff)) { i++; continue }
    if (isWs(c)) {
      const start = i
      let newlines = 0
      while (i < n) {
        const d = text.charCodeAt(i)
        if (!isWs(d)) break
        if (d === 10 || d === 0x2028 || d === 0x0b || d === 0x0c) newlines++
        else if (d === 13) { if (text.charCodeAt(i + 1) !== 10) newlines++ }
        else if (d === 0x2029) newlines += 2
        i++
      }
      if (start > 0 && i < n) breaks[start] = newlines >= 2 ? BREAK_PARAGRAPH : newlines === 1 ? BREAK_LINE : levelBefore(text, start)
      continue
    }
    const cjk = cjkPunctuationLevel(c)
    if (cjk !== 0) {
      let j = i + 1
      while (j < n && isCloser(text.charCodeAt(j))) j++
      if (j < n && !isWs(text.charCodeAt(j))) breaks[j] = cjk
      i = j
      continue
    }
    i++
  }
  return breaks
}

/** Where a chunk may end, asked window by window by the splitter (ranges.ts). */
export interface BreakFinder {
  /** The furthest position in [lo, hi] with the best level, or -1. */
  best(lo: number, hi: number): number
  /** The last paragraph break in [lo, hi), or -1. */
  lastParagraph(lo: number, hi: number): number
  isParagraph(p: number): boolean
}

/** A finder over a precomputed level array (any levels 1..255, lower is better). */
export function arrayFinder(breaks: Uint8Array): BreakFinder {
  return {
    best(lo, hi) {
      let best = 256
      let pos = -1
      for (let i = hi; i >= lo; i--) {
        const l = breaks[i]
        if (l !== 0 && l < best) {
          best = l
          pos = i
          if (l === 1) break
        }
      }
      return pos
    },
    lastParagraph(lo, hi) {
      for (let p = hi - 1; p >= lo; p--) if (breaks[p] === BREAK_PARAGRAPH) return p
      return -1
    },
    isParagraph: (p) => breaks[p] === BREAK_PARAGRAPH,
  }
}

/**
 * The same breaks as arrayFinder(textBreaks(text)), computed only inside the windows the splitter asks about:
 * newlines are found with the native indexOf, sentence and word breaks by a backward scan that stops at the
 * furthest sentence end. Texts with other line separators (lone CR, VT, FF, U+2028/9) use the array.
 */
export function textFinder(text: string): BreakFinder {
  // indexOf is a vectorised scan; the regex only runs when one of these characters is present at all
  const rare = text.indexOf('\r') >= 0 || text.indexOf('\v') >= 0 || text.indexOf('\f') >= 0 || text.indexOf('\u2028') >= 0 || text.indexOf('\u2029') >= 0
  if (rare && /[\v\f\u2028\u2029]|\r(?!\n)/.test(text)) return arrayFinder(textBreaks(text))
  const n = text.length
  const runStart = (x: number) => {
    while (x > 0 && isWs(text.charCodeAt(x - 1))) x--
    return x
  }
  /** End of the whitespace run at `r` (exclusive) and its newline count, packed as end * 4 + min(count, 2). */
  const runInfo = (r: number) => {
    let e = r
    let nl = 0
    while (e < n) {
      const c = text.charCodeAt(e)
      if (!isWs(c)) break
      if (c === 10) nl++
      e++
    }
    return e * 4 + (nl > 2 ? 2 : nl)
  }
  /** Level of the whitespace run starting at r, or 0 when it is no break (text start or end). */
  const runLevel = (r: number) => {
    const info = runInfo(r)
    const end = Math.floor(info / 4)
    if (r === 0 || end >= n) return 0
    const nl = info & 3
    return nl >= 2 ? BREAK_PARAGRAPH : nl === 1 ? BREAK_LINE : levelBefore(text, r)
  }
  return {
    best(lo, hi) {
      // Paragraph and line breaks: runs holding a newline that start inside the window.
      let para = -1
      let line = -1
      let x = text.indexOf('\n', lo)
      while (x >= 0 && x <= hi) {
        const r = runStart(x)
        const info = runInfo(x)
        const end = Math.floor(info / 4)
        if (r >= lo && r > 0 && end < n) {
          const l = runLevel(r)
          if (l === BREAK_PARAGRAPH) para = r
          else if (l === BREAK_LINE) line = r
        }
        x = text.indexOf('\n', end)
      }
      if (hi < n && isWs(text.charCodeAt(hi))) {
        // a run starting inside the window whose newlines all lie after it
        const r = runStart(hi)
        if (r >= lo) {
          const l = runLevel(r)
          if (l === BREAK_PARAGRAPH) para = r
          else if (l === BREAK_LINE && para < 0) line = Math.max(line, r)
        }
      }
      if (para >= 0) return para
      if (line >= 0) return line
      // Sentence, clause and word breaks, furthest first.
      let clause = -1
      let word = -1
      for (let p = hi; p >= lo && p > 0; p--) {
        const c = text.charCodeAt(p)
        if (p < n && isWs(c)) {
          if (isWs(text.charCodeAt(p - 1))) continue
          const l = runLevel(p)
          if (l === BREAK_SENTENCE) return p
          if (l === BREAK_CLAUSE) { if (clause < 0) clause = p }
          else if (l === BREAK_WORD && word < 0) word = p
          continue
        }
        if (p >= n || isCloser(c)) continue
        let q = p
        while (q > 0 && isCloser(text.charCodeAt(q - 1))) q--
        if (q === 0) continue
        const l = cjkPunctuationLevel(text.charCodeAt(q - 1))
        if (l === BREAK_SENTENCE) return p
        if (l === BREAK_CLAUSE && clause < 0) clause = p
      }
      return clause >= 0 ? clause : word
    },
    lastParagraph(lo, hi) {
      let x = hi - 1 >= 0 ? text.lastIndexOf('\n', hi - 1) : -1
      while (x >= lo) {
        const r = runStart(x)
        if (r < hi && r >= lo && runLevel(r) === BREAK_PARAGRAPH) return r
        if (r < lo) return -1
        x = r > 0 ? text.lastIndexOf('\n', r - 1) : -1
      }
      return -1
    },
    isParagraph: (p) => p > 0 && p < n && isWs(text.charCodeAt(p)) && !isWs(text.charCodeAt(p - 1)) && runLevel(p) === BREAK_PARAGRAPH,
  }
}
