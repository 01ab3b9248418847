// Dedup signatures of one document, as the dedup task computes them (the decision flow lives elsewhere).
import { normalizeForWords, tokenizerForUserWords, type WordTokenizer } from '../text/tokenizer.ts'
import { createMinHasher, type MinHasher } from './minhash.ts'
import { lshBands, simhashOfNormalized, simhashToHex } from './simhash.ts'

export { hammingDistance, lshBands, simhash, simhashFromHex, simhashToHex, type SimHashOptions } from './simhash.ts'
export { createMinHasher, isCurrentMinhash, jaccardEstimate, minhashSignature, minhashValueBits, MINHASH_EMPTY, MINHASH_MARK, type MinHashOptions, type MinHasher } from './minhash.ts'
export { titleSimilarity, titleTrigrams } from './title.ts'

/** The `dedup` settings the signatures depend on (spec 2.9). */
export interface DedupSignatureOptions {
  ngram?: number
  simhash_bits?: number
  num_bands?: number
  /** User dictionary for the word tokeniser; empty = none. */
  user_words_path?: string
  permutations?: number
  shingle_size?: number
}

export interface DedupSignatures {
  /** Hex, simhash_bits / 4 digits. */
  simhash: string
  /** `b{i}:{hex}` LSH keys. */
  bands: string[]
  minhash: Uint32Array
  /**
   * Per MinHash value, the word index of the shingle that gave it (its first word): where in the text each
   * sampled shingle lies, so stage 3 can tell scattered word edits from a replaced passage (plugins/docs/dedup.ts).
   */
  positions: Uint32Array
}

const hashers = new Map<string, MinHasher>()
function hasherFor(tokenizer: WordTokenizer, key: string, permutations: number, shingleSize: number): MinHasher {
  let h = hashers.get(key)
  if (!h) {
    h = createMinHasher({ tokenizer, permutations, shingleSize })
    hashers.set(key, h)
  }
  return h
}

export function dedupSignatures(text: string, opts: DedupSignatureOptions = {}): DedupSignatures {
  // normalised once for both signatures
  const normalized = normalizeForWords(text)
  const lanes = simhashOfNormalized(normalized, { ngram: opts.ngram ?? 3, bits: opts.simhash_bits ?? 64 })
  const permutations = opts.permutations ?? 128
  const shingleSize = opts.shingle_size ?? 3
  const path = opts.user_words_path ?? ''
  const tokenizer = tokenizerForUserWords(path)
  const hasher = hasherFor(tokenizer, `${path}\0${permutations}\0${shingleSize}`, permutations, shingleSize)
  const positions = new Uint32Array(permutations)
  const minhash = hasher.signatureOfNormalized(normalized, positions)
  return { simhash: simhashToHex(lanes), bands: lshBands(lanes, opts.num_bands ?? 4), minhash, positions }
}
