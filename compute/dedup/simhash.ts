// SimHash over the distinct character n-grams (code points) of the normalised text. Signatures are Uint32Array
// lanes, most significant first (lanes[0] holds bits 63..32 of a 64-bit simhash); BigInt appears only where
// band keys are cut from the hex form.
//
// Every distinct n-gram counts once (binary features). Weighted by counts, the few hundred n-grams every text
// of a language repeats ("the", "ion", "ed ") set every bit of a long document, so two long texts of one
// domain converged to the same signature whatever they said (issue 12: 12 of 40 disjoint 30-abstract
// documents came out "identical"). With binary features a bit is decided by the whole vocabulary of n-grams,
// most of which two different texts do not share, and the expected distance follows the share of n-grams
// they do not have in common.
//
// Each n-gram gets one 32-bit hash h: a rolling polynomial over its code points (one multiply per character)
// finalised by fmix32; lane j of its bit vector is fmix32(h ^ LANE_SEEDS[j]) (lane 0 is h itself), so a
// 64-bit signature costs one n-gram hash, not two. Repeats are dropped with an open-addressing set of those
// hashes (a collision of two n-grams' 32-bit hashes merges them: harmless at these sizes).
import { fmix32 } from '../text/hash.ts'
import { normalizeForWords } from '../text/tokenizer.ts'

export interface SimHashOptions {
  /** Character n-gram size (default 3). */
  ngram?: number
  /** Signature bits: a multiple of 32 (default 64). */
  bits?: number
}

const LANE_SEEDS = [0x00000000, 0x9e3779b9, 0x85ebca6b, 0xc2b2ae35, 0x27d4eb2f, 0x165667b1, 0xd3a2646c, 0xfd7046c5]

// Scratch arrays reused from one text to the next (a worker thread reads one text at a time): typed arrays of
// this size have backing stores outside the heap, and allocating them per text made a tenth of the time GC.
let tableScratch: Int32Array = new Int32Array(1024)
const histScratch = new Int32Array(8 * 1024)
let windowScratch: Int32Array = new Int32Array(64)

/** What `\s` matches, and U+0085 (none above U+3000 but U+FEFF: the loop tests that range before calling). */
function isWhitespace(c: number): boolean {
  if (c <= 32) return c === 32 || (c >= 9 && c <= 13)
  return c === 0x85 || c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 ||
    c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff
}

const ROLL = 0x01000193 // odd multiplier of the rolling n-gram hash

/** Rehashes a RollSet table (see simhashOfNormalized) into one twice its size. */
function grown(old: Int32Array, shift: number): Int32Array {
  const table = new Int32Array(old.length * 2)
  const mask = table.length - 1
  for (let k = 0; k < old.length; k++) {
    const v = old[k]
    if (v === 0) continue
    let i = Math.imul(v, FIB) >>> shift
    while (table[i] !== 0) i = (i + 1) & mask
    table[i] = v
  }
  return table
}

const FIB = 0x9e3779b1

/** SimHash of `text` as Uint32 lanes, most significant first. */
export function simhash(text: string, opts: SimHashOptions = {}): Uint32Array {
  return simhashOfNormalized(normalizeForWords(text), opts)
}

/**
 * SimHash of a text already in normalizeForWords' form (NFKC, lower case). The n-grams are read from the code
 * points of the text with whitespace runs as one space, trimmed (normalizeForDedup's text, plus U+0085), in one
 * pass over the string: no array of code points, no regex.
 */
export function simhashOfNormalized(text: string, opts: SimHashOptions = {}): Uint32Array {
  const ngram = opts.ngram ?? 3
  const bits = opts.bits ?? 64
  if (!Number.isInteger(ngram) || ngram < 1) throw new RangeError(`simhash: ngram must be a positive integer, got ${ngram}`)
  if (!Number.isInteger(bits) || bits % 32 !== 0 || bits < 32 || bits > 32 * LANE_SEEDS.length) throw new RangeError(`simhash: bits must be a multiple of 32 from 32 to ${32 * LANE_SEEDS.length}, got ${bits}`)
  const lanes = bits / 32
  const len = text.length
  // Per 32-bit lane, four 256-entry histograms count the distinct n-grams with each byte value (small enough
  // to stay in L1); bits are read from them once at the end instead of 32 updates per n-gram.
  const hist = histScratch
  hist.fill(0, 0, lanes * 1024)
  // The set of the rolling hashes seen so far: linear probing in a power-of-two table of about one slot per
  // character (at most 65,536 to start: natural text has far fewer distinct n-grams than positions, so most
  // lookups find a repeat at the first slot), grown by doubling past half full. The rolling hash is not mixed
  // (its low bits follow the characters' low bits): a Fibonacci multiply picks the slot from its top bits. For
  // a fixed width the n-gram hash fmix32(roll ^ width) is a bijection of roll, so distinct rolls are distinct
  // n-grams and only the new ones are mixed. 0 marks an empty slot; the roll 0 has a flag of its own.
  let shift = 22
  while (shift > 16 && 1 << (32 - shift) < len) shift--
  const size = 1 << (32 - shift)
  if (tableScratch.length < size) tableScratch = new Int32Array(size)
  else tableScratch.fill(0, 0, size)
  let table: Int32Array = tableScratch.length === size ? tableScratch : tableScratch.subarray(0, size)
  let mask = table.length - 1
  let zero = false
  let features = 0
  // the last n-gram's code points, in a ring of a power of two at least ngram long
  let ringSize = 1
  while (ringSize < ngram) ringSize *= 2
  if (windowScratch.length < ringSize) windowScratch = new Int32Array(ringSize)
  const window = windowScratch
  // zeros before the first code point: dropping a 0 from the roll changes nothing, so the first n-gram needs no
  // case of its own
  window.fill(0, 0, ringSize)
  const ringMask = ringSize - 1
  // ROLL^(ngram-1), to drop the code point leaving the window
  let top = 1
  for (let k = 1; k < ngram; k++) top = Math.imul(top, ROLL)
  let roll = 0
  let n = 0 // code points read
  for (let i = 0; i < len; i++) {
    let c = text.charCodeAt(i)
    if ((c <= 32 || (c >= 0x85 && (c <= 0x3000 || c === 0xfeff))) && isWhitespace(c)) {
      // a whitespace run reads as one space, none at the start or the end
      let end = i + 1
      while (end < len && isWhitespace(text.charCodeAt(end))) end++
      i = end - 1
      if (n === 0 || end === len) continue
      c = 32
    } else if (c >= 0xd800 && c <= 0xdbff && i + 1 < len) {
      const d = text.charCodeAt(i + 1)
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00)
        i++
      }
    }
    roll = (Math.imul(roll - Math.imul(window[(n - ngram) & ringMask], top), ROLL) + c) | 0
    window[n & ringMask] = c
    n++
    if (n < ngram) continue
    if (roll === 0) {
      if (zero) continue
      zero = true
    } else {
      let at = Math.imul(roll, FIB) >>> shift
      let x = table[at]
      while (x !== 0 && x !== roll) {
        at = (at + 1) & mask
        x = table[at]
      }
      if (x === roll) continue
      table[at] = roll
      if ((features + 1) * 2 > mask) {
        table = grown(table, --shift)
        mask = table.length - 1
      }
    }
    features++
    count(hist, fmix32(roll ^ ngram), lanes)
  }
  // a text shorter than one n-gram is one feature of its own width
  if (n > 0 && n < ngram) {
    features = 1
    count(hist, fmix32(roll ^ n), lanes)
  }
  if (table.length > tableScratch.length) tableScratch = table
  const out = new Uint32Array(lanes)
  const ones = new Float64Array(8)
  for (let j = 0; j < lanes; j++) {
    let lane = 0
    for (let k = 0; k < 4; k++) {
      ones.fill(0)
      const base = j * 1024 + k * 256
      for (let x = 0; x < 256; x++) {
        const c = hist[base + x]
        if (c === 0) continue
        for (let t = 0; t < 8; t++) if ((x >>> (7 - t)) & 1) ones[t] += c
      }
      // bit set when the n-grams with it outnumber those without it
      for (let t = 0; t < 8; t++) if (2 * ones[t] > features) lane |= 1 << (31 - (k * 8 + t))
    }
    out[j] = lane >>> 0
  }
  return out
}

/** Counts a new n-gram of hash h in the byte histograms of every lane (lane j > 0 reads fmix32(h ^ LANE_SEEDS[j])). */
function count(hist: Int32Array, h: number, lanes: number): void {
  hist[h >>> 24]++
  hist[256 + ((h >>> 16) & 255)]++
  hist[512 + ((h >>> 8) & 255)]++
  hist[768 + (h & 255)]++
  for (let j = 1; j < lanes; j++) {
    const v = fmix32(h ^ LANE_SEEDS[j])
    const base = j * 1024
    hist[base + (v >>> 24)]++
    hist[base + 256 + ((v >>> 16) & 255)]++
    hist[base + 512 + ((v >>> 8) & 255)]++
    hist[base + 768 + (v & 255)]++
  }
}

export function simhashToHex(lanes: Uint32Array): string {
  let s = ''
  for (let j = 0; j < lanes.length; j++) s += lanes[j].toString(16).padStart(8, '0')
  return s
}

export function simhashFromHex(hex: string): Uint32Array {
  if (hex.length % 8 !== 0 || !/^[0-9a-f]*$/i.test(hex)) throw new RangeError(`simhash: not a hex signature: ${hex}`)
  const out = new Uint32Array(hex.length / 8)
  for (let j = 0; j < out.length; j++) out[j] = parseInt(hex.slice(j * 8, j * 8 + 8), 16)
  return out
}

function popcount32(v: number): number {
  v -= (v >>> 1) & 0x55555555
  v = (v & 0x33333333) + ((v >>> 2) & 0x33333333)
  return (Math.imul((v + (v >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24)
}

/** Number of differing bits between two signatures of the same width (lanes or hex). */
export function hammingDistance(a: Uint32Array | string, b: Uint32Array | string): number {
  const x = typeof a === 'string' ? simhashFromHex(a) : a
  const y = typeof b === 'string' ? simhashFromHex(b) : b
  if (x.length !== y.length) throw new RangeError(`hammingDistance: signatures of ${x.length * 32} and ${y.length * 32} bits`)
  let d = 0
  for (let j = 0; j < x.length; j++) d += popcount32((x[j] ^ y[j]) >>> 0)
  return d
}

/**
 * LSH band keys: the signature cut into `numBands` equal bands, most significant first, each as
 * `b{i}:{hex}` (hex zero-padded to the band's width). Two signatures share a key when one band is equal,
 * which by pigeonhole holds whenever their Hamming distance is below numBands.
 */
export function lshBands(signature: Uint32Array | string, numBands = 4): string[] {
  const hex = typeof signature === 'string' ? signature.toLowerCase() : simhashToHex(signature)
  const bits = hex.length * 4
  if (!Number.isInteger(numBands) || numBands < 1 || bits % numBands !== 0) throw new RangeError(`lshBands: ${bits} bits do not split into ${numBands} equal bands`)
  const width = bits / numBands
  const keys: string[] = []
  if (width % 4 === 0) {
    const digits = width / 4
    for (let i = 0; i < numBands; i++) keys.push(`b${i}:${hex.slice(i * digits, (i + 1) * digits)}`)
    return keys
  }
  const value = BigInt('0x' + hex)
  const mask = (1n << BigInt(width)) - 1n
  const digits = Math.ceil(width / 4)
  for (let i = 0; i < numBands; i++) {
    const band = (value >> BigInt(bits - (i + 1) * width)) & mask
    keys.push(`b${i}:${band.toString(16).padStart(digits, '0')}`)
  }
  return keys
}
