// MinHash over word shingles. Each shingle gets one 32-bit base hash x (murmur rounds over its words'
// hashes); permutation i maps it with the universal family h_i(x) = (a_i * x + b_i) mod p, p = 2^31 - 1,
// computed exactly in doubles: x is split into 15- and 16-bit halves so every product stays below 2^53,
// and the Mersenne prime reduces with one shift-and-add. The parameters come from a fixed-seed generator:
// they are part of stored signatures and must never change.
//
// Shingles are k consecutive words (default k = 3); a text of fewer than k words uses its single words.
// The signature of a text without words is all 0xFFFFFFFF (no value h_i can take).
import { fmix32, murmur3Utf8, murmurRound } from '../text/hash.ts'
import { getDefaultTokenizer, type WordTokenizer } from '../text/tokenizer.ts'

export const MINHASH_PRIME = 2147483647 // 2^31 - 1
export const MINHASH_EMPTY = 0xffffffff
const TWO31 = 2147483648
const INV_TWO31 = 1 / TWO31 // exact: dividing by a power of two is a multiplication
const TWO16 = 65536

export interface MinHashOptions {
  /** Signature length (default 128). */
  permutations?: number
  /** Words per shingle (default 3). */
  shingleSize?: number
  tokenizer?: WordTokenizer
}

/** splitmix32: the fixed generator of the permutation parameters. */
function splitmix32(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x9e3779b9) >>> 0
    let z = s
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b)
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35)
    return (z ^ (z >>> 16)) >>> 0
  }
}

/** The (a_i, b_i) of the first `count` permutations: a in [1, p), b in [0, p). */
export function minhashParameters(count: number): { a: Float64Array; b: Float64Array } {
  const next = splitmix32(0x5eed1e55)
  const a = new Float64Array(count)
  const b = new Float64Array(count)
  for (let i = 0; i < count; i++) {
    a[i] = 1 + (next() % (MINHASH_PRIME - 1))
    b[i] = next() % MINHASH_PRIME
  }
  return { a, b }
}

/** (a * x + b) mod p for a, x, b in [0, p), exactly (the reference the fast loop inlines). */
export function universalHash(a: number, b: number, x: number): number {
  const t = ((a * TWO16) % MINHASH_PRIME) * (x >>> 16) + a * (x & 0xffff) + b // < 2^49
  let r = t - Math.floor(t * INV_TWO31) * MINHASH_PRIME
  if (r >= MINHASH_PRIME) r -= MINHASH_PRIME
  return r
}

/** Base hashes of the text's shingles (not deduplicated: min is idempotent). */
export function shingleHashes(text: string, tokenizer: WordTokenizer, shingleSize: number): Uint32Array {
  const words: number[] = []
  tokenizer.forEach(text, (t) => words.push(murmur3Utf8(t, 0)))
  const k = words.length < shingleSize ? 1 : shingleSize
  const count = words.length === 0 ? 0 : words.length - k + 1
  const out = new Uint32Array(count)
  for (let i = 0; i < count; i++) {
    let h = k
    for (let j = 0; j < k; j++) h = murmurRound(h, words[i + j])
    let x = fmix32(h)
    // into [0, p): 2^32 - 1 = 2p + 1
    if (x >= MINHASH_PRIME) x -= MINHASH_PRIME
    if (x >= MINHASH_PRIME) x -= MINHASH_PRIME
    out[i] = x
  }
  return out
}

export interface MinHasher {
  signature(text: string): Uint32Array
  /**
   * The signature of already computed shingle base hashes; with `positions` (one slot per permutation), also
   * the index of the shingle that gave each value (the first, when a shingle repeats; 0 for an empty text).
   */
  signatureOf(shingles: Uint32Array, positions?: Uint32Array): Uint32Array
}

export function createMinHasher(opts: MinHashOptions = {}): MinHasher {
  const permutations = opts.permutations ?? 128
  const shingleSize = opts.shingleSize ?? 3
  if (!Number.isInteger(permutations) || permutations < 1) throw new RangeError(`minhash: permutations must be a positive integer, got ${permutations}`)
  if (!Number.isInteger(shingleSize) || shingleSize < 1) throw new RangeError(`minhash: shingleSize must be a positive integer, got ${shingleSize}`)
  const tokenizer = opts.tokenizer ?? getDefaultTokenizer()
  const { a: A, b: B } = minhashParameters(permutations)
  const AS = A.map((a) => (a * TWO16) % MINHASH_PRIME) // a * 2^16 < 2^47: exact

  function signatureOf(shingles: Uint32Array, positions?: Uint32Array): Uint32Array {
    const sig = new Uint32Array(permutations).fill(MINHASH_EMPTY)
    positions?.fill(0)
    if (shingles.length === 0) return sig
    // split once into halves for the exact products below (repeated shingles are not removed: sorting
    // costs more than the permutations they would save)
    const n = shingles.length
    const xh = new Float64Array(n)
    const xl = new Float64Array(n)
    for (let j = 0; j < n; j++) {
      xh[j] = shingles[j] >>> 16
      xl[j] = shingles[j] & 0xffff
    }
    // Four permutations per pass over the shingles: independent chains the CPU overlaps. With x = xh*2^16 + xl
    // and a' = a*2^16 mod p, a*x + b = a'*xh + a*xl + b (mod p), a sum below 2^49, so exact in a double;
    // t mod p for t < 2^53 is t - q*p with q = floor(t / 2^31), which leaves a value below 2^31 + q.
    // (Math.floor compiles to one rounding instruction; `| 0` on these doubles measured twice as slow.)
    // locals: an exported module constant is re-read from its cell inside the loop
    const P = MINHASH_PRIME
    const INV = INV_TWO31
    let i = 0
    for (; i + 4 <= permutations; i += 4) {
      const a0 = A[i], a1 = A[i + 1], a2 = A[i + 2], a3 = A[i + 3]
      const s0 = AS[i], s1 = AS[i + 1], s2 = AS[i + 2], s3 = AS[i + 3]
      const b0 = B[i], b1 = B[i + 1], b2 = B[i + 2], b3 = B[i + 3]
      let m0 = P, m1 = P, m2 = P, m3 = P
      // where each minimum came from: a new minimum is rare after the first shingles, so this costs little
      let p0 = 0, p1 = 0, p2 = 0, p3 = 0
      for (let j = 0; j < n; j++) {
        const h = xh[j]
        const l = xl[j]
        const t0 = s0 * h + a0 * l + b0
        const t1 = s1 * h + a1 * l + b1
        const t2 = s2 * h + a2 * l + b2
        const t3 = s3 * h + a3 * l + b3
        let r0 = t0 - Math.floor(t0 * INV) * P
        let r1 = t1 - Math.floor(t1 * INV) * P
        let r2 = t2 - Math.floor(t2 * INV) * P
        let r3 = t3 - Math.floor(t3 * INV) * P
        if (r0 >= P) r0 -= P
        if (r1 >= P) r1 -= P
        if (r2 >= P) r2 -= P
        if (r3 >= P) r3 -= P
        if (r0 < m0) { m0 = r0; p0 = j }
        if (r1 < m1) { m1 = r1; p1 = j }
        if (r2 < m2) { m2 = r2; p2 = j }
        if (r3 < m3) { m3 = r3; p3 = j }
      }
      sig[i] = m0
      sig[i + 1] = m1
      sig[i + 2] = m2
      sig[i + 3] = m3
      if (positions) {
        positions[i] = p0
        positions[i + 1] = p1
        positions[i + 2] = p2
        positions[i + 3] = p3
      }
    }
    for (; i < permutations; i++) {
      const a = A[i], s = AS[i], b = B[i]
      let m = P
      let at = 0
      for (let j = 0; j < n; j++) {
        const t = s * xh[j] + a * xl[j] + b
        let r = t - Math.floor(t * INV) * P
        if (r >= P) r -= P
        if (r < m) { m = r; at = j }
      }
      sig[i] = m
      if (positions) positions[i] = at
    }
    return sig
  }

  return {
    signatureOf,
    signature: (text) => signatureOf(shingleHashes(text, tokenizer, shingleSize)),
  }
}

let defaultHasher: MinHasher | undefined
export function minhashSignature(text: string, opts?: MinHashOptions): Uint32Array {
  return (opts ? createMinHasher(opts) : (defaultHasher ??= createMinHasher())).signature(text)
}

/** Share of equal positions: an unbiased estimate of the Jaccard similarity of the two shingle sets. */
export function jaccardEstimate(a: Uint32Array, b: Uint32Array): number {
  if (a.length !== b.length) throw new RangeError(`jaccardEstimate: signatures of ${a.length} and ${b.length} values`)
  if (a.length === 0) return 0
  let same = 0
  for (let i = 0; i < a.length; i++) if (a[i] === b[i]) same++
  return same / a.length
}
