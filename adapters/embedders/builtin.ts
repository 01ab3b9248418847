// The offline embedder: hashed lexical features, so a fresh install can index and search with no model
// download and no server. It is a bag of words, stems, character n-grams (Latin scripts) and syllable
// n-grams (Hangul, CJK) projected into `dimensions` buckets with a signed hash and L2-normalised.
//
// Everything here is plain computation over module-level scratch buffers, so it can run unchanged inside
// a worker thread (each thread gets its own buffers). The vectors depend only on the text, the dimensions
// and FEATURES below: no locale, no randomness; Math.log is V8's own fdlibm port and the rest is integer or
// IEEE float arithmetic, so every machine computes the same bits.
// Any change to the features changes every vector, so it must come with a new model name (the stored
// vectors of a KB are only comparable with queries embedded by the same model: BUILTIN_MODEL, kept with the
// other providers' defaults in kernel/config/providers.ts.
import { BUILTIN_MODEL } from '../../kernel/config/providers.ts'
import type { Embedder } from '../ports.ts'

export { BUILTIN_MODEL }

/** Weights of the feature families. Exported for the quality bench's ablations; the embedder uses FEATURES. */
export interface HashFeatureParams {
  /** A content word after light stemming. */
  word: number
  /** Stop words (English function words); 0 drops them. */
  stopWord: number
  /** A token made only of digits (and inner `.`/`,`). */
  number: number
  /** Each character n-gram of `<word>` (boundary marks included), Latin and other alphabetic scripts. */
  ngram: number
  ngramMin: number
  ngramMax: number
  /** Two adjacent content words (stop words in between are skipped). */
  wordBigram: number
  /** Hangul/CJK: each syllable bigram of a run, each syllable, and the run itself. */
  syllableBigram: number
  syllable: number
  /** Hangul bigrams that are particles, endings or function words (습니, 니다, 에서, 하는...). */
  syllableStopBigram: number
  syllableRun: number
  /** Hangul run with a trailing particle or ending removed, when one is recognised. */
  syllableStem: number
  /** Apply the English suffix stemmer to ASCII words. */
  stem: boolean
  /** Term frequency weight is 1 + tfLog * ln(tf): 1 is the usual sublinear tf, 0 is binary. */
  tfLog: number
  /** Longer words are rarer (Zipf): word weight *= min(1, lengthPrior0 + lengthPrior1 * length); 1, 0 = off. */
  lengthPrior0: number
  lengthPrior1: number
}

export const FEATURES: Readonly<HashFeatureParams> = Object.freeze({
  word: 1,
  stopWord: 0,
  number: 0.7,
  ngram: 0.5,
  ngramMin: 3,
  ngramMax: 3,
  wordBigram: 0.25,
  syllableBigram: 1,
  syllable: 0.3,
  syllableStopBigram: 0.2,
  syllableRun: 0.6,
  syllableStem: 0.6,
  stem: true,
  tfLog: 1,
  lengthPrior0: 1,
  lengthPrior1: 0,
})

// ---------------------------------------------------------------------------------------------------------
// Character classes, one lookup per UTF-16 unit.

const SEP = 0
const ALPHA = 1 // letters of alphabetic scripts and digits: words + n-grams
const HANGUL = 2 // syllable blocks: syllable n-grams
const CJK = 3 // ideographs and kana: syllable n-grams
const SKIP = 4 // zero-width and soft hyphen: ignored inside a token

const CLASS = new Uint8Array(65536)
{
  const mark = (lo: number, hi: number, cls: number) => CLASS.fill(cls, lo, hi + 1)
  mark(0x30, 0x39, ALPHA)
  mark(0x41, 0x5a, ALPHA)
  mark(0x61, 0x7a, ALPHA)
  mark(0xc0, 0x1fff, ALPHA) // Latin extended, Greek, Cyrillic, Hebrew, Arabic, Indic, Thai, combining marks...
  CLASS[0xd7] = SEP // ×
  CLASS[0xf7] = SEP // ÷
  CLASS[0xad] = SKIP // soft hyphen
  mark(0x200b, 0x200d, SKIP)
  CLASS[0x2060] = SKIP
  CLASS[0xfeff] = SKIP
  mark(0x2c00, 0x2dff, ALPHA)
  mark(0x3040, 0x30ff, CJK)
  CLASS[0x30fb] = SEP // katakana middle dot
  mark(0x3131, 0x318e, ALPHA) // compatibility jamo (ㅋㅋ, ㄱ-ㅎ) behave like letters
  mark(0x3400, 0x4dbf, CJK)
  mark(0x4e00, 0x9fff, CJK)
  mark(0xa000, 0xabff, ALPHA)
  mark(0xac00, 0xd7a3, HANGUL)
  mark(0xf900, 0xfaff, CJK)
  mark(0xfb00, 0xfdff, ALPHA)
  mark(0xfe70, 0xfefc, ALPHA)
}

// ---------------------------------------------------------------------------------------------------------
// Hashing: FNV-1a over UTF-16 units gives a 32-bit feature id; murmur3's finaliser, with two different
// seeds, turns the id into a bucket and a sign that are independent of each other.

const FNV_OFFSET = 0x811c9dc5
const FNV_PRIME = 0x01000193

// Family seeds: the same string as a word and as an n-gram must be different features.
const SEED_WORD = 0x9e3779b1
const SEED_NUMBER = 0x7f4a7c15
const SEED_NGRAM = 0x85ebca6b
const SEED_BIGRAM = 0xc2b2ae35
const SEED_SYL = 0x27d4eb2f
const SEED_SYL2 = 0x165667b1
const SEED_RUN = 0xd3a2646c
const SEED_SYLSTEM = 0xfd7046c5
const SEED_BUCKET = 0x68e31da4
const SEED_SIGN = 0xb5297a4d
const BOUNDARY = 0x1f // stands for `<` and `>` around a word: a control unit never seen inside one

function fmix(h: number): number {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

function hashUnits(seed: number, buf: Uint16Array, from: number, to: number): number {
  let h = (FNV_OFFSET ^ seed) | 0
  for (let i = from; i < to; i++) h = Math.imul(h ^ buf[i], FNV_PRIME)
  return h
}

function hashString(seed: number, s: string): number {
  let h = (FNV_OFFSET ^ seed) | 0
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), FNV_PRIME)
  return h
}

// ---------------------------------------------------------------------------------------------------------
// Stop words: common English function words carry no topic. Matched by hash, so no string is built.

const STOP_WORDS = (
  'a an the and or but nor if then else of to in on at by for with from into onto upon about above below ' +
  'over under between among through during before after than as so such too very can could may might must ' +
  'shall should will would do does did done doing be is am are was were been being have has had having ' +
  'i me my we us our you your he him his she her it its they them their this that these those there here ' +
  'what which who whom whose when where why how all any both each few more most other some no not only ' +
  'own same also just s t via vs et al thus however'
).split(' ')
const STOP = new Set(STOP_WORDS.map((w) => hashString(SEED_WORD, w)))

// Korean syllable bigrams that belong to endings, particles and function words rather than to a topic:
// the Hangul counterpart of the stop words (a language fact, not a corpus statistic).
const KO_STOP_BIGRAMS = (
  '습니 니다 합니 입니 됩니 있습 없습 하는 하고 하여 하며 하기 하게 하지 했다 했습 한다 해야 해서 ' +
  '에서 으로 에게 부터 까지 이다 이며 이고 이나 이라 있는 있다 있으 없는 없다 되는 된다 되어 되었 되며 ' +
  '것이 것은 것을 것으 것도 등의 등을 등이 대한 대해 위한 위해 통해 따라 따른 관한 관련 같은 경우 ' +
  '이러 이런 그러 그리 또는 또한 그것 이것 때문 어떤 무엇 인가 인지 나요 까요 세요 주세 십시 하시 시오'
).split(' ')
const KO_STOP = new Set(KO_STOP_BIGRAMS.map((b) => hashString(SEED_SYL2 ^ SEED_SYL, b)))

// Korean particles and common endings that attach to the end of a word (eojeol); tried longest first.
const KO_SUFFIXES = [
  '으로부터', '에서부터', '에게서', '으로서', '으로써', '이라는', '에서는', '에서도', '에서의', '으로는', '으로의',
  '입니다', '합니다', '됩니다', '하는', '하고', '하여', '해서', '했다', '한다', '된다', '되는', '에서', '에게', '으로',
  '부터', '까지', '처럼', '보다', '라는', '이다', '에는', '에도', '에의', '과의', '와의', '로서', '로써', '이며', '하며',
  '은', '는', '이', '가', '을', '를', '의', '에', '로', '와', '과', '도', '만', '께', '한', '할', '된', '될', '인', '적',
]
  .sort((a, b) => b.length - a.length)
  .map((s) => Array.from(s, (c) => c.charCodeAt(0)))

// ---------------------------------------------------------------------------------------------------------
// English light stemmer, in place over ASCII lowercase units: plural -s, -ed, -ing, final -e and -y, so
// that inflected forms meet. Derivational suffixes are left to the character n-grams.

// The word sits at b[1 .. n] (b[0] is the boundary mark used by the n-grams), so the helpers index from 1.
const isVowel = (c: number) => c === 97 || c === 101 || c === 105 || c === 111 || c === 117
function endsWith(b: Uint16Array, n: number, suffix: string): boolean {
  if (n < suffix.length) return false
  for (let i = 0; i < suffix.length; i++) if (b[n + 1 - suffix.length + i] !== suffix.charCodeAt(i)) return false
  return true
}
function hasVowel(b: Uint16Array, n: number): boolean {
  for (let i = 1; i <= n; i++) if (isVowel(b[i]) || (i > 1 && b[i] === 121)) return true
  return false
}
function undouble(b: Uint16Array, n: number): number {
  const c = b[n]
  return n > 3 && c === b[n - 1] && !isVowel(c) && c !== 108 && c !== 115 && c !== 122 ? n - 1 : n
}

/** Stems the ASCII lowercase word at b[1 .. n] in place; returns its new length. */
export function stemAscii(b: Uint16Array, n: number): number {
  if (n <= 3) return n
  if (endsWith(b, n, 'sses')) n -= 2
  else if (endsWith(b, n, 'ies')) n -= 2
  else if (b[n] === 115) {
    const p = b[n - 1]
    if (p !== 115 && p !== 117 && p !== 105) n -= 1
  }
  if (endsWith(b, n, 'eed')) {
    if (n > 4) n -= 1
  } else if (endsWith(b, n, 'ed') && n - 2 >= 3 && hasVowel(b, n - 2)) n = undouble(b, n - 2)
  else if (endsWith(b, n, 'ing') && n - 3 >= 3 && hasVowel(b, n - 3)) n = undouble(b, n - 3)
  if (n > 3 && b[n] === 121 && !isVowel(b[n - 1])) b[n] = 105
  else if (n > 4 && b[n] === 101) n -= 1
  return n
}

// ---------------------------------------------------------------------------------------------------------
// The featuriser. Features of one text go into an open-addressing table (feature id -> weight, count)
// whose slots are stamped with a generation number, so nothing is cleared between texts.

export interface HashFeaturizer {
  /** Writes the normalised vector of text into out[offset .. offset+dimensions). */
  embedInto(text: string, dimensions: number, out: Float32Array, offset: number): void
}

export function createHashFeaturizer(params: Readonly<HashFeatureParams> = FEATURES): HashFeaturizer {
  const P = { ...params }
  let cap = 1 << 12
  let mask = cap - 1
  let keys = new Int32Array(cap)
  let stamp = new Uint32Array(cap)
  let weight = new Float32Array(cap)
  let count = new Float32Array(cap)
  let used = new Int32Array(cap)
  let size = 0
  let gen = 0
  let units = new Uint16Array(1024)
  const word = new Uint16Array(66)

  function grow(): void {
    const oldKeys = keys
    const oldWeight = weight
    const oldCount = count
    const oldUsed = used
    const n = size
    cap <<= 1
    mask = cap - 1
    keys = new Int32Array(cap)
    stamp = new Uint32Array(cap)
    weight = new Float32Array(cap)
    count = new Float32Array(cap)
    used = new Int32Array(cap)
    size = 0
    for (let i = 0; i < n; i++) {
      const s = oldUsed[i]
      let j = fmix(oldKeys[s]) & mask
      while (stamp[j] === gen) j = (j + 1) & mask
      stamp[j] = gen
      keys[j] = oldKeys[s]
      weight[j] = oldWeight[s]
      count[j] = oldCount[s]
      used[size++] = j
    }
  }

  function add(id: number, w: number): void {
    if (w === 0) return
    let j = fmix(id) & mask
    while (stamp[j] === gen) {
      if (keys[j] === id) {
        count[j] += 1
        return
      }
      j = (j + 1) & mask
    }
    stamp[j] = gen
    keys[j] = id
    weight[j] = w
    count[j] = 1
    used[size++] = j
    if (size * 2 > cap) grow()
  }

  let prevWord = 0 // id of the previous content word in this text, 0 = none (a run of other script resets it)

  function alphaToken(len: number, digitsOnly: boolean, ascii: boolean): void {
    if (digitsOnly) {
      add(hashUnits(SEED_NUMBER, word, 1, len + 1), P.number)
      prevWord = 0
      return
    }
    const raw = hashUnits(SEED_WORD, word, 1, len + 1)
    if (STOP.has(raw)) {
      add(raw, P.stopWord)
      return
    }
    // word[0] and word[len + 1] hold the boundary marks for the n-grams.
    let n = len
    if (P.stem && ascii) n = stemAscii(word, len)
    const id = n === len ? raw : hashUnits(SEED_WORD, word, 1, n + 1)
    add(id, P.lengthPrior1 === 0 ? P.word : P.word * Math.min(1, P.lengthPrior0 + P.lengthPrior1 * len))
    if (prevWord !== 0) add(fmix(Math.imul(prevWord, 31) ^ id ^ SEED_BIGRAM) | 0, P.wordBigram)
    prevWord = id
    if (P.ngram === 0) return
    word[n + 1] = BOUNDARY
    const end = n + 2
    const lo = P.ngramMin
    const hi = P.ngramMax
    for (let i = 0; i + lo <= end; i++) {
      let h = (FNV_OFFSET ^ SEED_NGRAM) | 0
      const stop = Math.min(end, i + hi)
      for (let k = i; k < stop; k++) {
        h = Math.imul(h ^ word[k], FNV_PRIME)
        if (k - i + 1 >= lo) add(h, P.ngram)
      }
    }
  }

  function syllableRun(from: number, to: number, seed: number): void {
    const n = to - from
    prevWord = 0
    for (let i = from; i < to; i++) {
      add(Math.imul((FNV_OFFSET ^ seed) ^ units[i], FNV_PRIME), P.syllable)
      if (i + 1 < to) {
        const h = hashUnits(SEED_SYL2 ^ seed, units, i, i + 2)
        add(h, KO_STOP.has(h) ? P.syllableStopBigram : P.syllableBigram)
      }
    }
    if (n > 2 || (n === 2 && P.syllableBigram === 0)) add(hashUnits(SEED_RUN, units, from, to), P.syllableRun)
    if (P.syllableStem !== 0 && seed === SEED_SYL && n >= 2) {
      for (const suffix of KO_SUFFIXES) {
        const m = suffix.length
        if (n - m < 1) continue
        let match = true
        for (let k = 0; k < m; k++) if (units[to - m + k] !== suffix[k]) { match = false; break }
        if (!match) continue
        // Noun + particle (인가를, 은행법에서는): the stripped form lets 인가를 and 인가는 meet.
        add(hashUnits(SEED_SYLSTEM, units, from, to - m), P.syllableStem)
        break
      }
    }
  }

  function collect(s: string): void {
    const L = s.length
    if (units.length < L + 1) units = new Uint16Array(Math.max(L + 1, units.length * 2))
    for (let i = 0; i < L; i++) units[i] = s.charCodeAt(i)
    units[L] = 0x20
    prevWord = 0
    let i = 0
    while (i < L) {
      const c = units[i]
      const cls = CLASS[c]
      if (cls === ALPHA) {
        // Gather the token into `word` (skipping soft hyphens), capped so that huge tokens stay cheap.
        let len = 0
        let digitsOnly = true
        let ascii = true
        while (i < L) {
          const u = units[i]
          const k = CLASS[u]
          if (k === ALPHA) {
            if (len < 64) word[1 + len++] = u
            if (u < 0x30 || u > 0x39) digitsOnly = false
            if (u > 0x7a) ascii = false
          } else if (k === SKIP) {
            // ignore
          } else if ((u === 0x2e || u === 0x2c) && digitsOnly && len > 0 && units[i + 1] >= 0x30 && units[i + 1] <= 0x39) {
            if (len < 64) word[1 + len++] = u // 0.05, 1,000
          } else break
          i++
        }
        word[0] = BOUNDARY
        alphaToken(len, digitsOnly, ascii)
      } else if (cls === HANGUL || cls === CJK) {
        const from = i
        while (i < L && CLASS[units[i]] === cls) i++
        syllableRun(from, i, cls === HANGUL ? SEED_SYL : SEED_SYL ^ 0x5bd1e995)
      } else i++
    }
  }

  return {
    embedInto(text, dimensions, out, offset) {
      out.fill(0, offset, offset + dimensions)
      gen = (gen + 1) >>> 0
      if (gen === 0) {
        stamp.fill(0)
        gen = 1
      }
      size = 0
      collect(text.normalize('NFKC').toLowerCase())
      let norm = 0
      for (let u = 0; u < size; u++) {
        const j = used[u]
        const id = keys[j]
        const c = count[j]
        const v = c === 1 ? weight[j] : weight[j] * (1 + P.tfLog * Math.log(c))
        const b = offset + (fmix(id ^ SEED_BUCKET) % dimensions)
        out[b] += (fmix(id ^ SEED_SIGN) & 1) === 0 ? v : -v
      }
      for (let d = offset; d < offset + dimensions; d++) norm += out[d] * out[d]
      if (norm > 0) {
        const inv = 1 / Math.sqrt(norm)
        for (let d = offset; d < offset + dimensions; d++) out[d] *= inv
      }
    },
  }
}

let shared: HashFeaturizer | undefined

function checkDimensions(dimensions: number): void {
  if (!Number.isInteger(dimensions) || dimensions < 1) throw new RangeError(`dimensions must be a positive integer, got ${dimensions}`)
}

/** The builtin vector of one text: L2-normalised (all zeros when the text has no features). */
export function embedText(text: string, dimensions: number): Float32Array {
  checkDimensions(dimensions)
  const out = new Float32Array(dimensions)
  ;(shared ??= createHashFeaturizer()).embedInto(text, dimensions, out, 0)
  return out
}

/**
 * The vectors of many texts in one buffer (row i at i*dimensions), so a worker thread can move it back in
 * one transfer. `out` is reused when given and large enough.
 */
export function embedTexts(texts: readonly string[], dimensions: number, out?: Float32Array): Float32Array {
  checkDimensions(dimensions)
  const need = texts.length * dimensions
  const buf = out && out.length >= need ? out : new Float32Array(need)
  const f = (shared ??= createHashFeaturizer())
  for (let i = 0; i < texts.length; i++) f.embedInto(texts[i], dimensions, buf, i * dimensions)
  return buf
}

export interface BuiltinEmbedderOptions {
  dimensions: number
  model?: string
}

export function createBuiltinEmbedder({ dimensions, model = BUILTIN_MODEL }: BuiltinEmbedderOptions): Embedder {
  checkDimensions(dimensions)
  return {
    name: 'builtin',
    model,
    dimensions,
    async embed(texts, opts) {
      opts?.signal?.throwIfAborted()
      // One array per text (not views of one buffer): a caller may keep, move or transfer each on its own.
      const f = (shared ??= createHashFeaturizer())
      return texts.map((text) => {
        const v = new Float32Array(dimensions)
        f.embedInto(text, dimensions, v, 0)
        return v
      })
    },
    async ping() {
      return true
    },
    async close() {},
  }
}
