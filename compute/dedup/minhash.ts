// MinHash over word shingles, one-permutation (issue 17): each shingle is hashed into k bins, and each bin keeps
// its smallest value; empty bins are filled by rotation (Shrivastava & Li 2014). k permutations cost k hash
// evaluations per shingle; this costs two (two copies of each shingle, so that a short text leaves few bins
// empty: 230 shingles over 128 bins leave 16 % empty with one copy, 3 % with two), and estimates the Jaccard
// similarity as well (it is one-permutation MinHash of the set of (shingle, copy) pairs, whose Jaccard is the same).
//
// Scheme 2 (the values are stored in dedup_signatures and must never change):
// - a word hashes as FNV-1a over its UTF-16 code units (NFKC, lower case) finalised by fmix32(h ^ length)
//   (wordHash), which the tokeniser computes as it reads the word, without a string per word; a shingle of k
//   consecutive words folds its words' hashes with murmur rounds into x (fmix32). A text of fewer than k words
//   uses its single words;
// - copy 0 of a shingle is x, copy 1 is fmix32(x ^ COPY_SEED); a copy y (an fmix32 output: every bit mixed) goes
//   to bin floor(y * bins / 2^32), read from its top bits, with the value of its low VALUE_BITS bits, which the
//   bin does not read (VALUE_BITS = 31 - ceil(log2(bins)));
// - a stored value is MINHASH_MARK + t * 2^VALUE_BITS + value, where t is how many bins to the right the value
//   was borrowed from (0: the bin's own). Ordering by t first keeps the reading textScore relies on
//   (plugins/docs/dedup.ts): for two texts A and B, a lower value in bin i means A's shingle there is not in B,
//   borrowed or not (B's bins up to A's donor are empty, or the donor bin is the same);
// - MINHASH_MARK (bit 31) is set in every value: scheme 1 (128 universal-hash permutations mod 2^31 - 1) had
//   it clear in every value, so the schemes never share a value (a scheme-1 signature compares as disjoint,
//   never as similar) and isCurrentMinhash tells them apart.
// The signature of a text without words is all MINHASH_EMPTY (no value can take it) in both schemes.
import { fmix32, murmurRound } from '../text/hash.ts'
import { getDefaultTokenizer, normalizeForWords, type WordTokenizer } from '../text/tokenizer.ts'

export const MINHASH_EMPTY = 0xffffffff
/** Set in every value of a scheme-2 signature, clear in every value of a scheme-1 one. */
export const MINHASH_MARK = 0x80000000
/** Each shingle goes into COPIES bins (copy c > 0 rehashes x with COPY_SEED): see the scheme above. */
const COPIES = 2
const COPY_SEED = 0x68e31da4
const TWO32 = 4294967296

export interface MinHashOptions {
  /** Signature length: bins (default 128). */
  permutations?: number
  /** Words per shingle (default 3). */
  shingleSize?: number
  tokenizer?: WordTokenizer
}

/** Value bits per bin: the rest of the 31 bits below the mark holds the rotation distance t < bins. */
export function minhashValueBits(bins: number): number {
  return 31 - Math.ceil(Math.log2(bins))
}

/** True for a signature of the current scheme (or of an empty text), false for a scheme-1 one. */
export function isCurrentMinhash(sig: Uint32Array): boolean {
  for (let i = 0; i < sig.length; i++) if (sig[i] !== MINHASH_EMPTY) return sig[i] >= MINHASH_MARK
  return true
}

// Word hashes of the text being read: grown as needed, reused (a worker thread reads one text at a time).
let words = new Int32Array(4096)
let count = 0
const pushWord = (_start: number, _end: number, hash: number): void => {
  if (count === words.length) {
    const grown = new Int32Array(words.length * 2)
    grown.set(words)
    words = grown
  }
  words[count++] = hash
}

let shingleScratch: Uint32Array = new Uint32Array(4096)

/** Fills shingleScratch with the base hashes of the text's shingles; returns their count. */
function fillShingles(normalized: string, tokenizer: WordTokenizer, shingleSize: number): number {
  count = 0
  tokenizer.forEachSpan(normalized, pushWord)
  const n = count
  const k = n < shingleSize ? 1 : shingleSize
  const shingles = n === 0 ? 0 : n - k + 1
  if (shingleScratch.length < shingles) shingleScratch = new Uint32Array(Math.max(shingles, 2 * shingleScratch.length))
  const out = shingleScratch
  const hashes = words
  for (let i = 0; i < shingles; i++) {
    let h = k
    for (let j = 0; j < k; j++) h = murmurRound(h, hashes[i + j])
    out[i] = fmix32(h)
  }
  return shingles
}

/** Base hashes x of the shingles of a text already in normalizeForWords' form (repeats are kept). */
export function shingleHashesOfNormalized(normalized: string, tokenizer: WordTokenizer, shingleSize: number): Uint32Array {
  // filled first: filling may replace the scratch array with a larger one
  const n = fillShingles(normalized, tokenizer, shingleSize)
  return shingleScratch.slice(0, n)
}

/** Base hashes of the text's shingles. */
export function shingleHashes(text: string, tokenizer: WordTokenizer, shingleSize: number): Uint32Array {
  return shingleHashesOfNormalized(normalizeForWords(text), tokenizer, shingleSize)
}

export interface MinHasher {
  signature(text: string): Uint32Array
  /**
   * The signature of already computed shingle base hashes; with `positions` (one slot per bin), also the index
   * of the shingle that gave each value (the first, when a shingle repeats; 0 for an empty text).
   */
  signatureOf(shingles: Uint32Array, positions?: Uint32Array): Uint32Array
  /** signature(text) of a text already in normalizeForWords' form, with positions as signatureOf gives them. */
  signatureOfNormalized(normalized: string, positions?: Uint32Array): Uint32Array
}

export function createMinHasher(opts: MinHashOptions = {}): MinHasher {
  const bins = opts.permutations ?? 128
  const shingleSize = opts.shingleSize ?? 3
  if (!Number.isInteger(bins) || bins < 1 || bins > 65536) throw new RangeError(`minhash: permutations must be an integer from 1 to 65536, got ${bins}`)
  if (!Number.isInteger(shingleSize) || shingleSize < 1) throw new RangeError(`minhash: shingleSize must be a positive integer, got ${shingleSize}`)
  const tokenizer = opts.tokenizer ?? getDefaultTokenizer()
  const valueBits = minhashValueBits(bins)
  const valueMask = 2 ** valueBits - 1
  const step = 2 ** valueBits
  const toBin = bins / TWO32
  // with a power-of-two count, a bin is the top bits of the value: floor(y * bins / 2^32) = y >>> binShift
  const binShift = Number.isInteger(Math.log2(bins)) ? 32 - Math.log2(bins) : -1
  // per-bin minimum (step = empty) and the shingle that gave it; reused
  const best = new Float64Array(bins)
  const from = new Uint32Array(bins)

  function signatureOf(shingles: Uint32Array, positions?: Uint32Array): Uint32Array {
    const sig = new Uint32Array(bins).fill(MINHASH_EMPTY)
    positions?.fill(0)
    const n = shingles.length
    if (n === 0) return sig
    best.fill(step)
    for (let j = 0; j < n; j++) {
      let y = shingles[j]
      for (let c = 0; c < COPIES; c++) {
        if (c > 0) y = fmix32(y ^ COPY_SEED)
        const bin = binShift < 0 ? Math.floor(y * toBin) : binShift === 32 ? 0 : y >>> binShift
        const v = y & valueMask
        if (v < best[bin]) {
          best[bin] = v
          from[bin] = j
        }
      }
    }
    // Each empty bin takes the value of the first non-empty bin to its right (circularly), t bins away. Walking
    // right to left from a non-empty bin, the donor is known at each step.
    let last = 0
    while (best[last] === step) last++
    let donor = last
    let t = 0
    for (let s = 0; s < bins; s++) {
      const i = (last - s + bins) % bins
      if (best[i] !== step) {
        donor = i
        t = 0
      }
      // at most MINHASH_MARK + bins * step - 1 <= 2^32 - 1: the one value that could reach MINHASH_EMPTY moves down
      const value = MINHASH_MARK + t * step + best[donor]
      sig[i] = value === MINHASH_EMPTY ? MINHASH_EMPTY - 1 : value
      if (positions) positions[i] = from[donor]
      t++
    }
    return sig
  }

  return {
    signatureOf,
    signature: (text) => signatureOf(shingleHashes(text, tokenizer, shingleSize)),
    // the shingles stay in the scratch array (filled first: filling may replace it with a larger one), which
    // signatureOf reads before anything refills it
    signatureOfNormalized: (normalized, positions) => {
      const n = fillShingles(normalized, tokenizer, shingleSize)
      return signatureOf(shingleScratch.subarray(0, n), positions)
    },
  }
}

let defaultHasher: MinHasher | undefined
export function minhashSignature(text: string, opts?: MinHashOptions): Uint32Array {
  return (opts ? createMinHasher(opts) : (defaultHasher ??= createMinHasher())).signature(text)
}

/** Share of equal positions: an estimate of the Jaccard similarity of the two shingle sets. */
export function jaccardEstimate(a: Uint32Array, b: Uint32Array): number {
  if (a.length !== b.length) throw new RangeError(`jaccardEstimate: signatures of ${a.length} and ${b.length} values`)
  if (a.length === 0) return 0
  let same = 0
  for (let i = 0; i < a.length; i++) if (a[i] === b[i]) same++
  return same / a.length
}
