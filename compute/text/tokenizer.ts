// Word tokeniser shared by the sparse encoder and MinHash. Korean morphological analysis cannot run offline
// (no analyser ships a model), so scripts written without spaces between words (Hangul runs too: Korean
// attaches particles to nouns) become overlapping character bigrams; a real analyser can replace this one
// behind the WordTokenizer interface.
import { readFileSync } from 'node:fs'
import { fmix32, FNV_OFFSET, FNV_PRIME, wordHash } from './hash.ts'

export interface WordTokenizer {
  /** Calls `emit` for every token of `text`, in order. Tokens are NFKC-normalised and lower-cased. */
  forEach(text: string, emit: (token: string) => void): void
  /**
   * The same tokens as [start, end) spans of `normalized` (normalizeForWords' output), without a string per
   * token, each with its wordHash (compute/text/hash.ts), computed as the token is read: for callers that only
   * hash them (MinHash).
   */
  forEachSpan(normalized: string, emit: (start: number, end: number, hash: number) => void): void
  tokens(text: string): string[]
}

export interface WordTokenizerOptions {
  /** Words kept whole (longest match first) before bigramming, e.g. a user dictionary's entries. */
  userWords?: readonly string[]
}

const SEP = 1
const WORD = 2
const BIGRAM = 3

// Lazily filled class of every BMP code unit (0 = not computed yet): one regex test per distinct character.
const classes = new Uint8Array(0x10000)
const LETTER = /[\p{L}\p{N}\p{M}]/u

function isBigramScript(cp: number): boolean {
  return (cp >= 0xac00 && cp <= 0xd7a3) || // Hangul syllables
    (cp >= 0x1100 && cp <= 0x11ff) || (cp >= 0x3130 && cp <= 0x318f) || // Hangul jamo
    (cp >= 0xa960 && cp <= 0xa97f) || (cp >= 0xd7b0 && cp <= 0xd7ff) ||
    (cp >= 0x3040 && cp <= 0x30ff) || (cp >= 0x31f0 && cp <= 0x31ff) || // kana
    (cp >= 0x3400 && cp <= 0x4dbf) || (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0xf900 && cp <= 0xfaff) || // Han
    (cp >= 0x20000 && cp <= 0x3ffff)
}

function classifyCodePoint(cp: number): number {
  if (isBigramScript(cp)) return BIGRAM
  return LETTER.test(String.fromCodePoint(cp)) ? WORD : SEP
}

for (let c = 0; c < 0x80; c++) {
  classes[c] = (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) ? WORD : SEP
}

/** Class of the code point starting at `i` (WORD, BIGRAM or SEP); `text[i]` must not be a low surrogate. */
function classAt(text: string, i: number): number {
  const c = text.charCodeAt(i)
  if (c < 0xd800 || c > 0xdfff) {
    const k = classes[c]
    if (k !== 0) return k
    return (classes[c] = classifyCodePoint(c))
  }
  const cp = text.codePointAt(i)!
  return cp > 0xffff ? classifyCodePoint(cp) : SEP
}

/**
 * Whether the character at `i` of normalised text belongs to a script read as character bigrams (Hangul, kana,
 * Han): a token starting there is made of such characters, not a word.
 */
export function inBigramScript(text: string, i: number): boolean {
  return i < text.length && classAt(text, i) === BIGRAM
}

/** Prefix tree over UTF-16 code units; node 0 is the root. */
interface Trie {
  next: Map<number, number>[]
  terminal: boolean[]
}

function buildTrie(words: readonly string[]): Trie | null {
  const trie: Trie = { next: [new Map()], terminal: [false] }
  let count = 0
  for (const raw of words) {
    const w = raw.normalize('NFKC').toLowerCase().trim()
    if (w === '') continue
    let node = 0
    for (let i = 0; i < w.length; i++) {
      const c = w.charCodeAt(i)
      let child = trie.next[node].get(c)
      if (child === undefined) {
        child = trie.next.length
        trie.next.push(new Map())
        trie.terminal.push(false)
        trie.next[node].set(c, child)
      }
      node = child
    }
    trie.terminal[node] = true
    count++
  }
  return count === 0 ? null : trie
}

/** End of the longest dictionary word starting at `i`, or -1. */
function longestMatch(trie: Trie, text: string, i: number): number {
  let node = 0
  let best = -1
  for (let j = i; j < text.length; j++) {
    const child = trie.next[node].get(text.charCodeAt(j))
    if (child === undefined) break
    node = child
    if (trie.terminal[node]) best = j + 1
  }
  return best
}

/**
 * Emits the tokens of a run of bigram-script characters text[start, end): its overlapping bigrams over code
 * points (the run may hold astral Han characters), or the run itself if it is one character.
 */
function emitBigrams(text: string, start: number, end: number, emit: (start: number, end: number, hash: number) => void): void {
  let a = start
  let b = a + (text.charCodeAt(a) >= 0xd800 && text.charCodeAt(a) <= 0xdbff ? 2 : 1)
  if (b >= end) {
    emit(start, end, wordHash(text, start, end))
    return
  }
  while (b < end) {
    const second = text.charCodeAt(b)
    const c = b + (second >= 0xd800 && second <= 0xdbff ? 2 : 1)
    // two BMP characters: wordHash written out
    emit(a, c, c - a === 2 ? fmix32(Math.imul(Math.imul(FNV_OFFSET ^ text.charCodeAt(a), FNV_PRIME) ^ second, FNV_PRIME) ^ 2) : wordHash(text, a, c))
    a = b
    b = c
  }
}

/** The form tokens are read from: NFKC, lower case. */
export function normalizeForWords(text: string): string {
  return text.normalize('NFKC').toLowerCase()
}

export function createWordTokenizer(opts: WordTokenizerOptions = {}): WordTokenizer {
  const trie = opts.userWords ? buildTrie(opts.userWords) : null

  function forEach(input: string, emit: (token: string) => void): void {
    const text = normalizeForWords(input)
    forEachSpan(text, (start, end) => emit(text.slice(start, end)))
  }

  function forEachSpan(text: string, emit: (start: number, end: number, hash: number) => void): void {
    const n = text.length
    let run = -1 // start of the pending bigram-script run (a local, not a closure's: read at every character)
    let i = 0
    while (i < n) {
      const cls = classAt(text, i)
      if (cls === SEP) {
        if (run >= 0) { emitBigrams(text, run, i, emit); run = -1 }
        i++
        continue
      }
      if (trie !== null && (cls === BIGRAM || i === 0 || classAt(text, i - 1) !== WORD) && trie.next[0].has(text.charCodeAt(i))) {
        const end = longestMatch(trie, text, i)
        // a dictionary word ending inside a word (`app` in `apple`) is no match
        if (end > 0 && !(end < n && classAt(text, end - 1) === WORD && classAt(text, end) === WORD)) {
          if (run >= 0) { emitBigrams(text, run, i, emit); run = -1 }
          emit(i, end, wordHash(text, i, end))
          i = end
          continue
        }
      }
      if (cls === WORD) {
        if (run >= 0) { emitBigrams(text, run, i, emit); run = -1 }
        // wordHash, read along
        let h = Math.imul(FNV_OFFSET ^ text.charCodeAt(i), FNV_PRIME)
        let j = i + 1
        while (j < n) {
          const c = text.charCodeAt(j)
          if (c < 0x80) {
            if (classes[c] !== WORD) break
          } else if (!(c >= 0xdc00 && c <= 0xdfff) && classAt(text, j) !== WORD) break
          h = Math.imul(h ^ c, FNV_PRIME)
          j++
        }
        emit(i, j, fmix32(h ^ (j - i)))
        i = j
        continue
      }
      if (run < 0) run = i
      let c = text.charCodeAt(i)
      i += c >= 0xd800 && c <= 0xdbff ? 2 : 1
      if (trie === null) {
        // without a dictionary no token starts inside the run: it is read to its end here
        while (i < n && (c = text.charCodeAt(i)) >= 0x80 && classAt(text, i) === BIGRAM) i += c >= 0xd800 && c <= 0xdbff ? 2 : 1
      }
    }
    if (run >= 0) emitBigrams(text, run, n, emit)
  }

  return {
    forEach,
    forEachSpan,
    tokens(text) {
      const out: string[] = []
      forEach(text, (t) => out.push(t))
      return out
    },
  }
}

/** Reads a user dictionary: one word per line; blank lines and lines starting with '#' are skipped. */
export function loadUserWords(path: string): string[] {
  return readFileSync(path, 'utf8').split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'))
}

let defaultTokenizer: WordTokenizer | undefined
/** The tokeniser without a user dictionary. */
export function getDefaultTokenizer(): WordTokenizer {
  return (defaultTokenizer ??= createWordTokenizer())
}

const byPath = new Map<string, WordTokenizer>()
/** A tokeniser for `dedup.minhash.user_words_path` (empty = none), cached per path for the worker's lifetime. */
export function tokenizerForUserWords(path: string | undefined): WordTokenizer {
  if (!path) return getDefaultTokenizer()
  let t = byPath.get(path)
  if (!t) {
    t = createWordTokenizer({ userWords: loadUserWords(path) })
    byPath.set(path, t)
  }
  return t
}
