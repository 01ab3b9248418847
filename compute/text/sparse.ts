// Sparse (lexical) vectors for hybrid search. The vector store multiplies query and document values by the
// term's IDF (Qdrant's `idf` modifier: score = sum over shared terms of idf * q * d), so the document side
// carries the BM25 term-frequency saturation and the query side carries 1 per distinct term: the product is
// the BM25 score, except that document length is normalised against a fixed `avgLen` instead of the
// collection's running average (a vector cannot be re-weighted after it is stored).
//
// Document length is counted in words: a word token (after stop words) is one, and the characters of Hangul,
// kana and Han, which the tokeniser reads as overlapping character bigrams, count one word per CHARS_PER_WORD
// characters. Counted in tokens, a Korean chunk (one bigram per character, some 320 for a chunk of 1,024
// characters) read as four times as long as an English chunk of the same size (some 70 words), against the
// same avgLen: every Korean chunk was normalised as a very long document.
//
// Token ids: MurmurHash3 x86_32, seed 0, of the token's UTF-8 bytes (see hash.ts): stable across processes
// and languages. Changing the tokeniser, the stemming or the stop words changes the ids: re-index after that.
import { murmur3Utf8 } from './hash.ts'
import { porterStem } from './porter.ts'
import { getDefaultTokenizer, inBigramScript, normalizeForWords, type WordTokenizer } from './tokenizer.ts'

export interface SparseVector {
  /** Token ids, strictly increasing. */
  indices: Uint32Array
  values: Float32Array
}

export interface SparseEncoderOptions {
  tokenizer?: WordTokenizer
  /** BM25 term-frequency saturation. */
  k1?: number
  /** BM25 length normalisation. */
  b?: number
  /**
   * Assumed average document length in words (after stop words; bigram-script characters / CHARS_PER_WORD). 100
   * fits the default chunk_size 1024 in English (about 150 words less stop words); measured on SciFact in
   * bench/sparse-quality.ts.
   */
  avgLen?: number
  /** Porter stemming of ASCII-letter tokens (default true). */
  stem?: boolean
  /** Drop the English stop words of STOP_WORDS (default true). */
  stopWords?: boolean
  /** Query values = term counts instead of 1 per distinct term (default false). */
  queryTf?: boolean
}

/** Lucene's English stop words (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET). */
export const STOP_WORDS: ReadonlySet<string> = new Set([
  'a', 'an', 'and', 'are', 'as', 'at', 'be', 'but', 'by', 'for', 'if', 'in', 'into', 'is', 'it', 'no', 'not',
  'of', 'on', 'or', 'such', 'that', 'the', 'their', 'then', 'there', 'these', 'they', 'this', 'to', 'was',
  'will', 'with',
])

export const SPARSE_DEFAULTS = { k1: 1.2, b: 0.75, avgLen: 100, stem: true, stopWords: true, queryTf: false } as const

/**
 * Characters of a bigram script (Hangul, kana, Han) that count as one word of document length: English prose has
 * about 8 non-space characters per word kept after stop words (SciFact chunks: 553 and 70 on average), so a chunk
 * of a given size has about the same length in either script.
 */
export const CHARS_PER_WORD = 8

/** The id of an already normalised token. */
export function tokenId(token: string): number {
  return murmur3Utf8(token, 0)
}

function isAsciiWord(t: string): boolean {
  for (let i = 0; i < t.length; i++) {
    const c = t.charCodeAt(i)
    if (c < 97 || c > 122) return false
  }
  return true
}

export interface SparseEncoder {
  encodeDocument(text: string): SparseVector
  encodeQuery(text: string): SparseVector
  /** The ids of the terms of `text` in order, repeats included (what both encoders count). */
  termIds(text: string): number[]
  /** The document length BM25 normalises with: words, and bigram-script characters / CHARS_PER_WORD. */
  length(text: string): number
}

export function createSparseEncoder(opts: SparseEncoderOptions = {}): SparseEncoder {
  const tokenizer = opts.tokenizer ?? getDefaultTokenizer()
  const k1 = opts.k1 ?? SPARSE_DEFAULTS.k1
  const b = opts.b ?? SPARSE_DEFAULTS.b
  const avgLen = opts.avgLen ?? SPARSE_DEFAULTS.avgLen
  const stem = opts.stem ?? SPARSE_DEFAULTS.stem
  const stop = opts.stopWords ?? SPARSE_DEFAULTS.stopWords
  const queryTf = opts.queryTf ?? SPARSE_DEFAULTS.queryTf
  if (!(k1 >= 0) || !(b >= 0 && b <= 1) || !(avgLen > 0)) throw new RangeError('sparse encoder: k1 >= 0, 0 <= b <= 1 and avgLen > 0 are required')
  const stemCache = new Map<string, number>()

  /** The term ids of `text` and its length (words, and bigram-script characters / CHARS_PER_WORD). */
  function read(text: string): { ids: number[]; length: number } {
    const ids: number[] = []
    const normalized = normalizeForWords(text)
    let words = 0
    let chars = 0
    // End of the bigram-script characters counted so far: a run's bigrams overlap by one character.
    let counted = 0
    tokenizer.forEachSpan(normalized, (start, end) => {
      const t = normalized.slice(start, end)
      if (stop && STOP_WORDS.has(t)) return
      let id = stemCache.get(t)
      if (id === undefined) {
        id = tokenId(stem && isAsciiWord(t) ? porterStem(t) : t)
        if (stemCache.size > 100_000) stemCache.clear()
        stemCache.set(t, id)
      }
      ids.push(id)
      if (inBigramScript(normalized, start)) {
        chars += end - Math.max(start, counted)
        counted = end
      } else {
        words++
      }
    })
    return { ids, length: words + chars / CHARS_PER_WORD }
  }

  const termIds = (text: string): number[] => read(text).ids

  function counts(ids: number[]): { indices: Uint32Array; tf: Uint32Array } {
    const sorted = Uint32Array.from(ids).sort()
    let distinct = 0
    for (let i = 0; i < sorted.length; i++) if (i === 0 || sorted[i] !== sorted[i - 1]) distinct++
    const indices = new Uint32Array(distinct)
    const tf = new Uint32Array(distinct)
    let d = -1
    for (let i = 0; i < sorted.length; i++) {
      if (i === 0 || sorted[i] !== sorted[i - 1]) indices[++d] = sorted[i]
      tf[d]++
    }
    return { indices, tf }
  }

  return {
    termIds,
    length: (text) => read(text).length,
    encodeDocument(text) {
      const { ids, length } = read(text)
      const { indices, tf } = counts(ids)
      const norm = k1 * (1 - b + (b * length) / avgLen)
      const values = new Float32Array(indices.length)
      for (let i = 0; i < tf.length; i++) values[i] = (tf[i] * (k1 + 1)) / (tf[i] + norm)
      return { indices, values }
    },
    encodeQuery(text) {
      const { indices, tf } = counts(termIds(text))
      const values = new Float32Array(indices.length)
      for (let i = 0; i < tf.length; i++) values[i] = queryTf ? tf[i] : 1
      return { indices, values }
    },
  }
}

let defaultEncoder: SparseEncoder | undefined
const encoderFor = (opts?: SparseEncoderOptions) => (opts ? createSparseEncoder(opts) : (defaultEncoder ??= createSparseEncoder()))

export function encodeDocument(text: string, opts?: SparseEncoderOptions): SparseVector {
  return encoderFor(opts).encodeDocument(text)
}

export function encodeQuery(text: string, opts?: SparseEncoderOptions): SparseVector {
  return encoderFor(opts).encodeQuery(text)
}

/** Many sparse vectors in three arrays (vector i is [offsets[i], offsets[i + 1])): cheap to move between threads. */
export interface SparseBatch {
  offsets: Uint32Array
  indices: Uint32Array
  values: Float32Array
}

export function packSparse(vectors: readonly SparseVector[]): SparseBatch {
  const offsets = new Uint32Array(vectors.length + 1)
  for (let i = 0; i < vectors.length; i++) offsets[i + 1] = offsets[i] + vectors[i].indices.length
  const total = offsets[vectors.length]
  const indices = new Uint32Array(total)
  const values = new Float32Array(total)
  vectors.forEach((v, i) => {
    indices.set(v.indices, offsets[i])
    values.set(v.values, offsets[i])
  })
  return { offsets, indices, values }
}

/** Vector i of a batch, as views (no copy). */
export function unpackSparse(batch: SparseBatch, i: number): SparseVector {
  const from = batch.offsets[i]
  const to = batch.offsets[i + 1]
  return { indices: batch.indices.subarray(from, to), values: batch.values.subarray(from, to) }
}
