// 32-bit hashes shared by the sparse encoder and the dedup signatures. They are part of stored data (token ids
// in the vector store, signatures in the database), so they must never change and never depend on the process:
// MurmurHash3 x86_32 of the UTF-8 bytes, the same function as Python's `mmh3.hash(s, seed, signed=False)`, and
// MinHash's word hash (FNV-1a of the UTF-16 code units).

const C1 = 0xcc9e2d51
const C2 = 0x1b873593

/** The MurmurHash3 finaliser: a bijective 32-bit mix. */
export function fmix32(h: number): number {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

/** One MurmurHash3 body round: folds the 32-bit block `k` into the state `h`. */
export function murmurRound(h: number, k: number): number {
  k = Math.imul(k, C1)
  k = (k << 15) | (k >>> 17)
  k = Math.imul(k, C2)
  h ^= k
  h = (h << 13) | (h >>> 19)
  return (Math.imul(h, 5) + 0xe6546b64) | 0
}

export const FNV_OFFSET = 0x811c9dc5
export const FNV_PRIME = 0x01000193

/**
 * The word hash of MinHash's shingles: FNV-1a over the UTF-16 code units of text[start, end), finalised by
 * fmix32(h ^ length). The tokeniser computes it while it reads a word (WordTokenizer.forEachSpan).
 */
export function wordHash(text: string, start: number, end: number): number {
  let h = FNV_OFFSET
  for (let i = start; i < end; i++) h = Math.imul(h ^ text.charCodeAt(i), FNV_PRIME)
  return fmix32(h ^ (end - start))
}

/**
 * MurmurHash3 x86_32 of the UTF-8 encoding of `s` (lone surrogates encode as U+FFFD, as TextEncoder does),
 * computed from the UTF-16 code units without allocating the bytes.
 */
export function murmur3Utf8(s: string, seed = 0): number {
  let h = seed | 0
  let block = 0
  let filled = 0 // bytes in `block`
  let length = 0
  const n = s.length
  for (let i = 0; i < n; i++) {
    let c = s.charCodeAt(i)
    if (c < 0x80) {
      block |= c << (filled << 3)
      if (++filled === 4) { h = murmurRound(h, block); block = 0; filled = 0 }
      length++
      continue
    }
    let bytes: number
    let count: number
    if (c < 0x800) {
      bytes = (0xc0 | (c >>> 6)) | ((0x80 | (c & 0x3f)) << 8)
      count = 2
    } else {
      if (c >= 0xd800 && c <= 0xdfff) {
        const next = i + 1 < n ? s.charCodeAt(i + 1) : 0
        if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
          c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00)
          i++
        } else {
          c = 0xfffd
        }
      }
      if (c < 0x10000) {
        bytes = (0xe0 | (c >>> 12)) | ((0x80 | ((c >>> 6) & 0x3f)) << 8) | ((0x80 | (c & 0x3f)) << 16)
        count = 3
      } else {
        bytes = (0xf0 | (c >>> 18)) | ((0x80 | ((c >>> 12) & 0x3f)) << 8) | ((0x80 | ((c >>> 6) & 0x3f)) << 16) | ((0x80 | (c & 0x3f)) << 24)
        count = 4
      }
    }
    for (let b = 0; b < count; b++) {
      block |= ((bytes >>> (b << 3)) & 0xff) << (filled << 3)
      if (++filled === 4) { h = murmurRound(h, block); block = 0; filled = 0 }
    }
    length += count
  }
  if (filled > 0) {
    let k = Math.imul(block, C1)
    k = (k << 15) | (k >>> 17)
    h ^= Math.imul(k, C2)
  }
  return fmix32(h ^ length)
}
