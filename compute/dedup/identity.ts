// The identity of a document, for dedup (issue 36): what tells a sibling written from one template (another fault
// code, product model, release, office, customer) from a revision of the same document.
//
// Documents of one template share most of their words, so every text signal (SimHash, MinHash, chunk vectors)
// calls them near-copies. What differs is a handful of identity-bearing tokens (codes, numbers, names, the title's
// distinguishing words) put into the same slots of the template. A revision keeps those tokens: its edits touch
// ordinary words or replace a passage. So the identity of a text is the list of its identity-bearing tokens with
// their two neighbours, and two texts are siblings when one puts other identity tokens into the same slots
// (`substitutions`: a token of the older text missing from the newer one, and a token of the newer text missing
// from the older one, between the same neighbours).
//
// Only hashes are kept (32-bit FNV-1a of the lower-cased token, as MinHash's words): a few hundred bytes per
// document, packed into one Uint32Array and stored beside the signatures.

/** A token: letters and digits, joined by inner `-`, `_`, `.` or `/` ("E-042", "1.2.0", "X200", "api/v2"). */
const TOKEN = /[\p{L}\p{N}]+(?:[-_./][\p{L}\p{N}]+)*/gu
const DIGIT = /\p{N}/u
const UPPER = /\p{Lu}/u
/** What ends a sentence or starts a line item: a capital after it is the sentence's, not a name's. */
const OPENERS = new Set(['.', '!', '?', ':', ';', '"', "'", '(', '[', '*', '•', '-', '#', '>', '|', '“', '‘', '\u2014', '\u2013'])
const TITLE_STOPWORDS = new Set(['the', 'and', 'for', 'with', 'from', 'into', 'der', 'die', 'das', 'les', 'des', 'von'])

export const IDENTITY_VERSION = 1
/** Identity-bearing occurrences kept per text (in text order): a slot is 3 words. */
export const MAX_SLOTS = 4096
/** Distinct identity types kept per text. */
export const MAX_TYPES = 8192
const MAX_TITLE = 64

export interface Identity {
  /** Tokens in the text. */
  words: number
  /** Sorted distinct hashes of every token that has a digit or a capital letter, or is a title word. */
  types: Uint32Array
  /** Hashes of the title's identity tokens (a digit, or a capital past the title's first word). */
  title: Uint32Array
  /** Triples (previous token, token, next token) of each identity-bearing occurrence; 0 = the text's edge. */
  slots: Uint32Array
}

function hashToken(s: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193)
  h ^= s.length
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  // never 0: 0 marks the edge of the text
  return (h >>> 0) || 1
}

/** Whether the token at `at` opens a sentence or a line (its capital says nothing). */
function sentenceInitial(text: string, at: number): boolean {
  for (let i = at - 1; i >= 0; i--) {
    const c = text[i]
    if (c === ' ' || c === '\t' || c === '\u00a0') continue
    return c === '\n' || c === '\r' || OPENERS.has(c)
  }
  return true
}

function titleTokens(title: string): { all: Set<string>; identity: string[] } {
  const all = new Set<string>()
  const identity: string[] = []
  let first = true
  // in an all-capitals title a capital says nothing; its digits still do
  const allCaps = title === title.toUpperCase()
  for (const m of title.normalize('NFKC').matchAll(TOKEN)) {
    const t = m[0]
    const lower = t.toLowerCase()
    // the token and its parts ("fault-e042": fault, e042): a file name's words are the title's words
    for (const w of new Set([lower, ...lower.split(/[-_./]/)])) if ((w.length >= 3 || DIGIT.test(w)) && !TITLE_STOPWORDS.has(w)) all.add(w)
    // a digit, or a capital that is not just the first letter of the title
    if (DIGIT.test(t) || (!allCaps && UPPER.test(t) && (!first || UPPER.test(t.slice(1))))) {
      if (!identity.includes(lower) && identity.length < MAX_TITLE) identity.push(lower)
    }
    first = false
  }
  return { all, identity }
}

/** The identity of a text and its (raw, not normalised) title. */
export function identityOf(text: string, title: string): Identity {
  const titled = titleTokens(title)
  const types = new Set<number>()
  const slots: number[] = []
  let prev = 0
  let pending = -1 // index in `slots` of the last slot, waiting for its next token
  let words = 0
  for (const m of text.normalize('NFKC').matchAll(TOKEN)) {
    const raw = m[0]
    const lower = raw.toLowerCase()
    const h = hashToken(lower)
    words++
    if (pending >= 0) {
      slots[pending + 2] = h
      pending = -1
    }
    const digit = DIGIT.test(raw)
    const capital = UPPER.test(raw)
    const titleWord = titled.all.has(lower)
    if (digit || capital || titleWord) {
      if (types.size < MAX_TYPES) types.add(h)
      // a capital counts when it is inside the token (ACME, iPhone) or the token does not open a sentence
      const bearing = digit || titleWord || (capital && (UPPER.test(raw.slice(1)) || !sentenceInitial(text, m.index)))
      if (bearing && slots.length < 3 * MAX_SLOTS) {
        slots.push(prev, h, 0)
        pending = slots.length - 3
      }
    }
    prev = h
  }
  return {
    words,
    types: Uint32Array.from([...types].sort((a, b) => a - b)),
    title: Uint32Array.from(titled.identity.map(hashToken)),
    slots: Uint32Array.from(slots),
  }
}

/** [version, words, types, title, slots (triples), ...types, ...title, ...slots] as bytes (stored). */
export function packIdentity(id: Identity): Uint8Array {
  const out = new Uint32Array(5 + id.types.length + id.title.length + id.slots.length)
  out.set([IDENTITY_VERSION, id.words, id.types.length, id.title.length, id.slots.length / 3])
  out.set(id.types, 5)
  out.set(id.title, 5 + id.types.length)
  out.set(id.slots, 5 + id.types.length + id.title.length)
  return new Uint8Array(out.buffer)
}

/** null: not an identity of this version (an older row, or damaged bytes). */
export function unpackIdentity(bytes: Uint8Array | null | undefined): Identity | null {
  if (!bytes || bytes.byteLength < 20 || bytes.byteLength % 4 !== 0) return null
  const a = new Uint32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength))
  const [version, words, nTypes, nTitle, nSlots] = a
  if (version !== IDENTITY_VERSION || a.length !== 5 + nTypes + nTitle + 3 * nSlots) return null
  return {
    words,
    types: a.subarray(5, 5 + nTypes),
    title: a.subarray(5 + nTypes, 5 + nTypes + nTitle),
    slots: a.subarray(5 + nTypes + nTitle),
  }
}

function has(sorted: Uint32Array, h: number): boolean {
  let lo = 0
  let hi = sorted.length - 1
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1
    const v = sorted[mid]
    if (v === h) return true
    if (v < h) lo = mid + 1
    else hi = mid - 1
  }
  return false
}

/** Substituted slots compared at most, each side. */
const MAX_COMPARED = 512

export interface IdentityDiff {
  /**
   * Slots of the older text whose identity token is missing from the newer text, where the newer text has an
   * identity token of its own (missing from the older one) between the same neighbours. A neighbour that is
   * itself substituted on both sides counts as the same ("Model X200 (12 kg)" / "Model Z350 (15 kg)").
   */
  substitutions: number
  /** The titles name different things: each has an identity token the other lacks. */
  titleSubstituted: boolean
  /** The shorter text's token count. */
  words: number
}

/** How the identity of `fresh` (the newer text) differs from that of `older`. */
export function identityDiff(fresh: Identity, older: Identity): IdentityDiff {
  const titleLost = [...older.title].some((h) => !fresh.title.includes(h))
  const titleGained = [...fresh.title].some((h) => !older.title.includes(h))
  const lost = (h: number) => !has(fresh.types, h)
  const gained = (h: number) => !has(older.types, h)
  // neighbours that are identity tokens substituted in turn: "Model X200 (12 kg)" / "Model Z350 (15 kg)"
  const substituted = (p: number, q: number) => p !== 0 && q !== 0 && has(older.types, p) && lost(p) && has(fresh.types, q) && gained(q)
  // the slots of each side whose token the other side lacks
  const mine: number[] = []
  for (let i = 0; i < fresh.slots.length && mine.length < 3 * MAX_COMPARED; i += 3) {
    if (gained(fresh.slots[i + 1])) mine.push(fresh.slots[i], fresh.slots[i + 1], fresh.slots[i + 2])
  }
  let substitutions = 0
  if (mine.length > 0) {
    const used = new Uint8Array(mine.length / 3)
    let compared = 0
    for (let i = 0; i < older.slots.length && compared < MAX_COMPARED; i += 3) {
      const [p, x, n] = [older.slots[i], older.slots[i + 1], older.slots[i + 2]]
      if (!lost(x)) continue
      compared++
      for (let k = 0; k < used.length; k++) {
        if (used[k]) continue
        const q = mine[3 * k]
        const m = mine[3 * k + 2]
        const prevOk = p === q || (substituted(p, q))
        const nextOk = n === m || (substituted(n, m))
        if (prevOk && nextOk) {
          used[k] = 1
          substitutions++
          break
        }
      }
    }
  }
  return { substitutions, titleSubstituted: titleLost && titleGained, words: Math.min(fresh.words, older.words) }
}
