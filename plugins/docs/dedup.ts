// The three-stage dedup decision of spec 2.9. Stage 1: SimHash Hamming distance; stage 2 (only when stage 1
// found nothing): MinHash Jaccard and title similarity; stage 3: embedding comparison of the chunks, for the
// candidates stages 1-2 passed on. Only documents in status `indexed` of the same KB are compared.
//
// A verdict of identical or similar hides a document from search, so no signal may call two different texts
// alike on its own (issue 12):
// - a stage-1 candidate must also share word shingles (MinHash Jaccard of the word 3-shingle sets): SimHash
//   over character n-grams sees what a text is made of, not what it says, and two long texts of one domain are
//   made of the same n-grams. Without shared shingles it is a collision and is dropped; an "identical" needs
//   IDENTICAL_MIN_JACCARD, otherwise stage 3 decides;
// - stage 3 counts how much of the new document has a near-copy in the candidate, measured against the
//   background likeness of the two documents' unrelated passages (chunkScore), so vectors that merely share
//   vocabulary (the built-in embedder's hashed lexical features, or a neural model's topic) do not add up;
// - where the chunk vectors confirm a match, identical and similar are told apart by the text itself
//   (textScore: the MinHash values sample the new text's shingles, and say which are missing from the
//   candidate and where): a chunk vector cannot tell a sentence replaced from a chunk boundary moved by a
//   sentence, so chunk scores alone called edited copies similar and short revised documents identical. A
//   stage-1 "identical" is checked the same way before the document is skipped;
// - identical content under another title is the "title changed" verdict of the older service: the new
//   document is indexed and the older one becomes outdated.
import type { Sql, SqlRunner } from '../../adapters/ports.ts'
import { chunkPairs as chunkPairsFlat, packRows, type ChunkPairs } from '../../compute/dedup/chunks.ts'
import { identityDiff, unpackIdentity, type Identity } from '../../compute/dedup/identity.ts'
import { MINHASH_EMPTY, simhashFromHex, titleSimilarity } from '../../compute/dedup/index.ts'
import type { KbSettings } from '../../kernel/config/schema.ts'

export interface Signatures {
  simhash: string
  minhash: Uint32Array
  /** Word index of the shingle behind each MinHash value (dedupSignatures); absent: textScore has no evidence. */
  positions?: Uint32Array
  /** Normalised title. */
  title: string
  /** Packed identity (compute/dedup/identity.ts): tells a sibling from a revision; absent: not told apart. */
  identity?: Uint8Array
}

export interface Candidate {
  doc_id: string
  stage: 1 | 2
  /** Hamming distance (stage 1) or 1 - Jaccard scaled to bits (stage 2): lower is closer. */
  closeness: number
  /** MinHash Jaccard estimate of the word 3-shingle sets. */
  jaccard: number
  /** The candidate's normalised title. */
  title: string
  /** The candidate's MinHash signature (a copy), for textScore. */
  minhash: Uint32Array
}

export type EarlyVerdict =
  | { verdict: 'identical'; match: string; title: string }
  | { verdict: 'compare'; candidates: Candidate[] }
  | { verdict: 'unique' }

/**
 * identical (a copy): not indexed (outdated, duplicate_of = match); title_changed (identical body, another title)
 * and similar (a revision): indexed, and the match becomes outdated with duplicate_of = this document; sibling
 * (written from the same template) and overlap (shares passages, each holds text of its own): both stay indexed.
 */
export type FinalVerdict =
  | { verdict: 'identical' | 'title_changed' | 'similar' | 'sibling' | 'overlap'; match: string; score: number; stage?: 1 | 3; reason?: string }
  | { verdict: 'unique' }

export type VerdictName = FinalVerdict['verdict']
export const VERDICTS: readonly VerdictName[] = ['unique', 'identical', 'title_changed', 'similar', 'sibling', 'overlap']

/** The verdict recorded on a document (documents.dedup); null for a unique document or when dedup is off. */
export interface DedupRecord {
  verdict: Exclude<VerdictName, 'unique'>
  stage: 1 | 3
  score: number
  matched_doc_id: string
  reason: string
}

type DedupCfg = KbSettings['dedup']

/**
 * The word-shingle Jaccard a stage-1 "identical" (SimHash distance at most the identical threshold) must
 * confirm before a document is skipped. Copies with 1-5 % of their words changed measure 0.70-0.98 on SciFact
 * documents (bench/dedup-quality.bench.ts), disjoint documents at most 0.05; a candidate between the KB's
 * title_only_min_jaccard_floor and this goes to stage 3 instead, which sees where the texts differ.
 */
export const IDENTICAL_MIN_JACCARD = 0.9

const toBytes = (a: Uint32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength)
const toLanes = (b: Uint8Array) => new Uint32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))

const SIMHASH_LANES = 2
const SKETCH_WORDS = 16 // 128 MinHash values x 4 bits

function popcount32(v: number): number {
  v -= (v >>> 1) & 0x55555555
  v = (v & 0x33333333) + ((v >>> 2) & 0x33333333)
  return (Math.imul((v + (v >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24)
}

/**
 * The signatures of one KB in flat typed arrays, one slot per document, so a screen is a scan over contiguous
 * memory instead of a walk over objects. Stage 2 compares a 4-bit sketch of each MinHash value first (eight
 * values per 32-bit word, equal nibbles counted with a few bit operations): equal values have equal nibbles,
 * so the nibble count bounds the exact count from above and an entry whose bound is below the stage-2 floor
 * cannot pass; unrelated entries agree on about 8 of 128 nibbles by chance, far below the 32 the default
 * floor needs. The result is the same as comparing every full signature, at a fraction of the cost.
 */
export class KbSignatures {
  private ids: (string | null)[] = []
  private readonly slotOf = new Map<string, number>()
  private readonly free: number[] = []
  private simhash = new Uint32Array(0)
  private minhash = new Uint32Array(0)
  private sketch = new Uint32Array(0)
  private titles: string[] = []
  private seqs: number[] = []
  private permutations = 0

  get size(): number {
    return this.slotOf.size
  }

  seqOf(docId: string): number | undefined {
    const slot = this.slotOf.get(docId)
    return slot === undefined ? undefined : this.seqs[slot]
  }

  set(docId: string, simhash: Uint32Array, minhash: Uint32Array, title: string, seq: number): void {
    if (simhash.length !== SIMHASH_LANES) return // not a 64-bit SimHash: never comparable
    if (this.permutations === 0) this.permutations = minhash.length
    if (minhash.length !== this.permutations) return
    let slot = this.slotOf.get(docId)
    if (slot === undefined) {
      slot = this.free.pop() ?? this.ids.length
      if (slot === this.ids.length) this.grow(slot + 1)
      this.slotOf.set(docId, slot)
    }
    this.ids[slot] = docId
    this.titles[slot] = title
    this.seqs[slot] = seq
    this.simhash.set(simhash, slot * SIMHASH_LANES)
    this.minhash.set(minhash, slot * this.permutations)
    const words = Math.ceil(this.permutations / 8)
    for (let w = 0; w < words; w++) {
      let x = 0
      for (let k = 0; k < 8; k++) {
        const i = w * 8 + k
        if (i < this.permutations) x |= (minhash[i] & 15) << (4 * k)
      }
      this.sketch[slot * words + w] = x >>> 0
    }
  }

  /** The sequence numbers above `seq` this index holds. */
  seqsAfter(seq: number): number[] {
    const out: number[] = []
    for (let slot = 0; slot < this.ids.length; slot++) if (this.ids[slot] !== null && this.seqs[slot] > seq) out.push(this.seqs[slot])
    return out
  }

  /** The entries whose sequence number is above `seq`, but `selfId` and those in `skip`, as an index of their own. */
  subsetAfter(seq: number, selfId: string, skip: ReadonlySet<string>): KbSignatures {
    const out = new KbSignatures()
    const lanes = new Uint32Array(SIMHASH_LANES)
    for (let slot = 0; slot < this.ids.length; slot++) {
      const id = this.ids[slot]
      if (id === null || this.seqs[slot] <= seq || id === selfId || skip.has(id)) continue
      lanes.set(this.simhash.subarray(slot * SIMHASH_LANES, (slot + 1) * SIMHASH_LANES))
      out.set(id, lanes, this.minhash.subarray(slot * this.permutations, (slot + 1) * this.permutations), this.titles[slot], this.seqs[slot])
    }
    return out
  }

  delete(docId: string): void {
    const slot = this.slotOf.get(docId)
    if (slot === undefined) return
    this.slotOf.delete(docId)
    this.ids[slot] = null
    this.titles[slot] = ''
    // the slot's old values stay until reused; every scan skips a slot without an id
    this.free.push(slot)
  }

  private grow(slots: number): void {
    let cap = Math.max(16, this.simhash.length / SIMHASH_LANES)
    if (slots <= cap && this.minhash.length > 0) return
    while (cap < slots) cap *= 2
    const words = Math.ceil(this.permutations / 8)
    const resize = (old: Uint32Array, per: number) => {
      const next = new Uint32Array(cap * per)
      next.set(old.subarray(0, Math.min(old.length, next.length)))
      return next
    }
    this.simhash = resize(this.simhash, SIMHASH_LANES)
    this.minhash = resize(this.minhash, this.permutations)
    this.sketch = resize(this.sketch, words)
  }

  /** A copy: a slot is reused after a delete. */
  private minhashAt(slot: number): Uint32Array {
    return this.minhash.slice(slot * this.permutations, (slot + 1) * this.permutations)
  }

  private jaccardAt(slot: number, minhash: Uint32Array): number {
    const p = this.permutations
    const base = slot * p
    let same = 0
    for (let i = 0; i < p; i++) if (this.minhash[base + i] === minhash[i]) same++
    return same / p
  }

  /** Stages 1 and 2 over every entry but `selfId`; the candidates are not yet checked against the database. */
  scan(selfId: string, sig: Signatures, cfg: DedupCfg): { stage1: Candidate[]; identical: Candidate | null; stage2: () => Candidate[] } {
    const { hamming_identical_threshold: identicalBits, hamming_similar_threshold: similarBits } = cfg.simhash
    const { jaccard_threshold, title_fuzzy_threshold, title_only_min_jaccard_floor } = cfg.minhash
    const n = this.ids.length
    const comparable = sig.minhash.length === this.permutations
    const stage1: Candidate[] = []
    let identical: Candidate | null = null
    const mine = simhashFromHex(sig.simhash)
    if (comparable && mine.length === SIMHASH_LANES) {
      const hi = mine[0]
      const lo = mine[1]
      const lanes = this.simhash
      for (let slot = 0; slot < n; slot++) {
        const d = popcount32((lanes[2 * slot] ^ hi) >>> 0) + popcount32((lanes[2 * slot + 1] ^ lo) >>> 0)
        if (d > similarBits) continue
        const id = this.ids[slot]
        if (id === null || id === selfId) continue
        const jaccard = this.jaccardAt(slot, sig.minhash)
        // no shared word shingles: the n-grams of one language and domain, not the same text
        if (jaccard < title_only_min_jaccard_floor) continue
        const c: Candidate = { doc_id: id, stage: 1, closeness: d, jaccard, title: this.titles[slot], minhash: this.minhashAt(slot) }
        stage1.push(c)
        if (d <= identicalBits && jaccard >= IDENTICAL_MIN_JACCARD && (!identical || d < identical.closeness)) identical = c
      }
    }
    const stage2 = (): Candidate[] => {
      if (!comparable) return []
      const p = this.permutations
      const words = Math.ceil(p / 8)
      const floor = Math.min(jaccard_threshold, title_only_min_jaccard_floor)
      const need = Math.ceil(floor * p - 1e-9)
      const q = new Uint32Array(words)
      for (let w = 0; w < words; w++) {
        let x = 0
        for (let k = 0; k < 8 && w * 8 + k < p; k++) x |= (sig.minhash[w * 8 + k] & 15) << (4 * k)
        q[w] = x >>> 0
      }
      // nibbles past the signature's end are zero on both sides: they must not count
      const padding = words * 8 - p
      const sketch = this.sketch
      const out: Candidate[] = []
      for (let slot = 0; slot < n; slot++) {
        let differ = 0
        const base = slot * words
        for (let w = 0; w < words; w++) {
          const x = (sketch[base + w] ^ q[w]) >>> 0
          // one bit per nibble that is not zero
          differ += popcount32((x | (x >>> 1) | (x >>> 2) | (x >>> 3)) & 0x11111111)
        }
        if (words * 8 - padding - differ < need) continue
        const id = this.ids[slot]
        if (id === null || id === selfId) continue
        const j = this.jaccardAt(slot, sig.minhash)
        const passes = j >= jaccard_threshold || (j >= title_only_min_jaccard_floor && titleSimilarity(sig.title, this.titles[slot]) >= title_fuzzy_threshold)
        if (passes) out.push({ doc_id: id, stage: 2, closeness: 1 - j, jaccard: j, title: this.titles[slot], minhash: this.minhashAt(slot) })
      }
      return out
    }
    return { stage1, identical, stage2 }
  }
}

/**
 * Stages 1 and 2 over one KB's signatures. `confirm` keeps the candidates that still count (the pipeline: still
 * indexed in the database); stage 2 runs only when stage 1 kept none.
 */
export async function screenEntries(
  entries: KbSignatures, selfId: string, sig: Signatures, cfg: DedupCfg, confirm: (candidates: Candidate[]) => Promise<Candidate[]>,
): Promise<EarlyVerdict> {
  const found = entries.scan(selfId, sig, cfg)
  let live = await confirm(found.stage1)
  if (live.length > 0) {
    live.sort((a, b) => a.closeness - b.closeness || b.jaccard - a.jaccard)
    const identical = found.identical && live.find((c) => c.doc_id === found.identical!.doc_id)
    // close signatures and shared shingles also come from a copy with one passage replaced: stage 3 sees it
    const text = identical ? textScore(sig, identical.minhash) : null
    if (identical && (text === null || text >= cfg.chunk_compare.body_identical_threshold)) {
      return { verdict: 'identical', match: identical.doc_id, title: identical.title }
    }
    return { verdict: 'compare', candidates: live }
  }
  live = await confirm(found.stage2())
  if (live.length > 0) return { verdict: 'compare', candidates: live.sort((a, b) => a.closeness - b.closeness) }
  return { verdict: 'unique' }
}

/**
 * The signature rows of a KB above sequence number `after` but those numbered `known` (held in memory already):
 * a signature row is read whole only once per process, since its MinHash (512 bytes of bytea) costs most of the read.
 */
async function readUnknown(db: SqlRunner, kbId: string, after: number, known: readonly number[]): Promise<{ doc_id: string; simhash: Uint32Array; minhash: Uint32Array; title: string; seq: number }[]> {
  const rows = await db.query<{ doc_id: string; simhash: string; minhash: Uint8Array; title: string; seq: number }>(
    'SELECT doc_id, simhash, minhash, title, seq FROM dedup_signatures WHERE kb_id = $1 AND seq > $2 AND seq <> ALL($3::int8[])', [kbId, after, known])
  return rows.map((r) => ({ doc_id: r.doc_id, simhash: simhashFromHex(r.simhash), minhash: toLanes(r.minhash), title: r.title, seq: Number(r.seq) }))
}

/** The sequence numbers above `after` that `entries` holds, and the highest of them (`after` when none). */
function heldAfter(entries: KbSignatures, after: number): { seqs: number[]; seen: number } {
  const seqs = entries.seqsAfter(after)
  let seen = after
  for (const seq of seqs) if (seq > seen) seen = seq
  return { seqs, seen }
}

/**
 * Sequence numbers are taken when a row is written but become visible when it commits, which can be in a
 * different order across concurrent writers: the last REREAD numbers are read again (more than the writers
 * that can be in flight at once), so a late commit is not missed.
 */
const REREAD = 16

/**
 * Signature rows written in this process, per database handle and KB: every writer counts each statement or
 * transaction that writes one (or may have: a failed one counts too), in the KB's dedup turn, once it has ended. A
 * SignatureIndex that holds every write counted so far needs no read to know what committed since: on PGlite, where
 * this process is the only writer (it holds the data folder), the rescreen at each commit then reads nothing (see
 * rescreen).
 */
const signatureWrites = new WeakMap<object, Map<string, number>>()

/** The writes of the KB's signature rows counted through `db` so far (noteSignatureWrite). */
export const countedSignatureWrites = (db: object, kbId: string): number => signatureWrites.get(db)?.get(kbId) ?? 0

/**
 * Counts a write of the KB's signature rows through `db` (the handle commitUnlessLate is given): an import calls it
 * in the turn, after the transaction that wrote them, whatever its outcome.
 */
export function noteSignatureWrite(db: object, kbId: string): void {
  let kbs = signatureWrites.get(db)
  if (!kbs) signatureWrites.set(db, (kbs = new Map()))
  kbs.set(kbId, (kbs.get(kbId) ?? 0) + 1)
}

interface HeldKb {
  entries: KbSignatures
  seen: number
  readAt: number
  /**
   * The count of writes (countedSignatureWrites) this index holds every one of: set by a rescreen's read of an entry a refresh has
   * read (readAt), advanced by its own commits; -1 none.
   */
  trusted: number
}

/**
 * The signatures of each KB, held in memory and refreshed incrementally from SQL (rows created since the last
 * read), so screening a document compares against every indexed document of its KB without reading them all
 * from the database each time. Several processes may write: a candidate found here is confirmed against the
 * database (still indexed) before it counts, and entries found stale are dropped.
 */
export class SignatureIndex {
  private readonly kbs = new Map<string, HeldKb>()

  /**
   * @param refreshMs how stale the view of other processes' writes may get: within this long after a read, a
   *   screen uses the signatures in memory (this process's own writes are added at once by `add`). Documents
   *   processed at the same moment by different processes cannot see each other anyway.
   */
  constructor(private readonly refreshMs = 500) {}

  private kbOf(kbId: string): HeldKb {
    let kb = this.kbs.get(kbId)
    if (!kb) this.kbs.set(kbId, (kb = { entries: new KbSignatures(), seen: 0, readAt: -Infinity, trusted: -1 }))
    return kb
  }

  /**
   * Adds to `entries` the KB's signature rows above `after` that it does not hold (readUnknown); returns the highest
   * sequence number above `after` it holds now (`after` when none).
   */
  private async readAfter(db: SqlRunner, kbId: string, entries: KbSignatures, after: number): Promise<number> {
    const { seqs, seen: held } = heldAfter(entries, after)
    let seen = held
    for (const r of await readUnknown(db, kbId, after, seqs)) {
      if (r.seq > seen) seen = r.seq
      entries.set(r.doc_id, r.simhash, r.minhash, r.title, r.seq)
    }
    return seen
  }

  private async refresh(db: SqlRunner, kbId: string): Promise<KbSignatures> {
    const kb = this.kbOf(kbId)
    const now = performance.now()
    if (now - kb.readAt < this.refreshMs) return kb.entries
    kb.readAt = now
    // The read position moves past every row this index holds, this process's own commits included: the next
    // refresh then reads only what committed since, not every signature of the KB again.
    kb.seen = Math.max(kb.seen, await this.readAfter(db, kbId, kb.entries, Math.max(0, kb.seen - REREAD)))
    return kb.entries
  }

  /**
   * A signature this index's process committed through `db` in the KB's turn (commitUnlessLate): counted as a write
   * (noteSignatureWrite) and held at once. When the index held every write before it, it holds every one after it.
   */
  committed(db: object, kbId: string, docId: string, sig: Signatures, seq: number): void {
    const before = countedSignatureWrites(db, kbId)
    noteSignatureWrite(db, kbId)
    this.add(kbId, docId, sig, seq)
    const kb = this.kbs.get(kbId)
    if (kb !== undefined && kb.trusted === before) kb.trusted = before + 1
  }

  /** A signature this process has just committed (finishIndexed), visible to its next screen at once. */
  add(kbId: string, docId: string, sig: Signatures, seq: number): void {
    const kb = this.kbs.get(kbId)
    // A KB never read yet is read whole at its first screen, this row included.
    if (!kb) return
    kb.entries.set(docId, simhashFromHex(sig.simhash), sig.minhash, sig.title, seq)
  }

  forget(kbId: string, docId: string): void {
    this.kbs.get(kbId)?.entries.delete(docId)
  }

  dropKb(kbId: string): void {
    this.kbs.delete(kbId)
  }

  /** Stages 1 and 2. */
  async screen(db: SqlRunner, kbId: string, selfId: string, sig: Signatures, cfg: DedupCfg): Promise<EarlyVerdict> {
    return (await this.screenFrom(db, kbId, selfId, sig, cfg)).early
  }

  /**
   * Stages 1 and 2, and the sequence number they screened up to (`seen`): a signature committed later was not
   * compared, and `rescreen` compares it at the commit.
   */
  async screenFrom(db: SqlRunner, kbId: string, selfId: string, sig: Signatures, cfg: DedupCfg): Promise<{ early: EarlyVerdict; seen: number }> {
    const entries = await this.refresh(db, kbId)
    // read before the scan, in the same turn: no other screen's refresh comes in between
    const seen = this.kbs.get(kbId)!.seen
    return { early: await screenEntries(entries, selfId, sig, cfg, (candidates) => this.confirm(db, kbId, selfId, candidates)), seen }
  }

  /**
   * Stages 1 and 2 against the signatures committed after `since` (a document's own screen, or its last rescreen),
   * leaving out the documents already judged against it. The pipeline calls this in the transaction that indexes the
   * document, under the KB's commit lock (commitUnlessLate): a copy and its original processed at the same moment
   * were each screened before the other was indexed, and the one that commits second finds the first here. Every
   * writer of signature rows takes that lock (lockDedupCommits; PGlite: the turn, and its transactions run one at a
   * time), so the KB's signatures commit in the order of their sequence numbers and `since` misses none.
   *
   * sole: the database handle, when this process is the only one writing to it (PGlite) and every writer counts its
   * writes through that handle (noteSignatureWrite). When this index holds every write counted there, nothing is
   * read: memory holds every committed row. Otherwise the rows above `since` it does not hold are read, and the count
   * taken before that read is what it holds from then on (a row counted was committed before the read began, and a
   * read sees every row committed before it: PGlite runs one statement at a time).
   */
  async rescreen(db: SqlRunner, kbId: string, selfId: string, sig: Signatures, cfg: DedupCfg, since: number, judged: ReadonlySet<string>,
    sole?: object): Promise<{ early: EarlyVerdict; seen: number }> {
    const kb = this.kbOf(kbId)
    let seen: number
    if (sole !== undefined && kb.trusted === countedSignatureWrites(sole, kbId)) seen = heldAfter(kb.entries, since).seen
    else {
      const writes = sole === undefined ? -1 : countedSignatureWrites(sole, kbId)
      // What this index committed itself is in memory already (`add`): only other writers' rows are read.
      seen = await this.readAfter(db, kbId, kb.entries, since)
      // The read holds the rows above `since`; those at or below it are in memory only if a refresh read this entry
      // (an entry made by this rescreen, after dropKb, holds none of them).
      if (sole !== undefined && kb.readAt !== -Infinity && writes > kb.trusted) kb.trusted = writes
    }
    const late = kb.entries.subsetAfter(since, selfId, judged)
    if (late.size === 0) return { early: { verdict: 'unique' }, seen }
    return { early: await screenEntries(late, selfId, sig, cfg, (candidates) => this.confirm(db, kbId, selfId, candidates)), seen }
  }

  /**
   * Keeps the candidates whose document is still indexed and that an editor has not declared distinct from this
   * one (a restore: dedup_distinct); forgets those no longer indexed.
   */
  private async confirm(db: SqlRunner, kbId: string, selfId: string, candidates: Candidate[]): Promise<Candidate[]> {
    if (candidates.length === 0) return candidates
    const rows = await db.query<{ doc_id: string; distinct: boolean }>(
      `SELECT d.doc_id, EXISTS (SELECT 1 FROM dedup_distinct x WHERE (x.doc_a = $2 AND x.doc_b = d.doc_id) OR (x.doc_a = d.doc_id AND x.doc_b = $2)) AS distinct
       FROM documents d WHERE d.doc_id = ANY($1::text[]) AND d.status = 'indexed'`, [candidates.map((c) => c.doc_id), selfId])
    const indexed = new Set(rows.map((r) => r.doc_id))
    const ok = new Set(rows.filter((r) => !r.distinct).map((r) => r.doc_id))
    for (const c of candidates) if (!indexed.has(c.doc_id)) this.forget(kbId, c.doc_id)
    return candidates.filter((c) => ok.has(c.doc_id))
  }
}

/** Stage 3's chunk comparison of a new document against one candidate: local, or in the compute pool. */
export type PairScorer = (fresh: readonly Float32Array[], other: readonly Float32Array[], matchThreshold: number) => Promise<ChunkPairs>

/** The scorer on this thread (tests, benches); the pipeline runs the same function in the compute pool. */
export const localPairs: PairScorer = async (fresh, other, matchThreshold) => {
  const a = packRows(fresh)
  const b = packRows(other)
  return chunkPairsFlat(a.flat, b.flat, a.dims || b.dims, matchThreshold)
}

/**
 * Stage 3 score of a new document against one candidate (compute/dedup/chunks.ts): the mean over the new chunks
 * of their pair score relative to the background, pair scores below chunk_match_threshold counted 0, scaled by the
 * chunk-count ratio.
 */
export function chunkScore(fresh: readonly Float32Array[], other: readonly Float32Array[], matchThreshold: number): number {
  const a = packRows(fresh)
  const b = packRows(other)
  return chunkPairsFlat(a.flat, b.flat, a.dims || b.dims, matchThreshold).score
}

/**
 * A stretch of changed samples (textScore) is a replaced passage when, net of the kept samples inside it
 * (KEPT_WEIGHT each), it holds PASSAGE_SAMPLES changed ones whose places lie PASSAGE_SPAN words apart or more,
 * and reaches over PASSAGE_WORDS words (to halfway to the kept samples around it). One changed word changes
 * the 3 shingles that hold it: at most 3 samples over 3 words, and two edits a few words apart rarely leave no
 * kept sample between them.
 */
const PASSAGE_SAMPLES = 4
const PASSAGE_SPAN = 6
const PASSAGE_WORDS = 8
const KEPT_WEIGHT = 2
/**
 * Where samples are dense (a short text: at least DENSE samples per word), one changed sample fewer suffices:
 * consecutive samples are a few words apart, so 3 changed ones spread over PASSAGE_SPAN words are not one edit
 * and seldom two, and a sentence of 8-10 words replaced yields only 3-4 of them. In a long text samples lie
 * tens of words apart, and 3 changed ones in a row happen by chance among scattered edits.
 */
const DENSE = 0.2
/** Fewer labelled samples than this (a text of a few words) say too little: the chunk score stands alone. */
const MIN_SAMPLES = 16
/**
 * The MinHash estimate of the two shingle sets' size ratio varies by about 5 % between copies of one size
 * (SciFact, 128 values): only a difference beyond this slack scales the score down.
 */
const SIZE_SLACK = 0.1

/**
 * The share of the new text found in the candidate, small edits forgiven: the evidence of stage 3 where chunk
 * vectors cannot tell. A chunk vector moves about as much when a chunk boundary shifts by a sentence (words
 * inserted before it) as when a sentence of it is replaced, so chunk scores call an edited copy similar and a
 * short document with a replaced sentence identical.
 *
 * Each MinHash value of the new text is the minimum over its shingles, and `positions` says which shingle gave
 * it: equal to the candidate's value, that shingle is in the candidate; lower, it is not; higher, the value
 * samples a shingle of the candidate instead and is left out. So the values are a uniform sample of the new
 * text's shingles, each labelled kept or changed, with its place in the text. Scattered word edits leave short
 * runs of changed samples; a replaced passage leaves one long run. The score is 1 minus the share of the text
 * the long runs span, scaled by the size ratio of the two shingle sets when it is off by more than SIZE_SLACK (a
 * document inside a longer one is not identical to it). null: no positions, or too few samples.
 */
export function textScore(fresh: Pick<Signatures, 'minhash' | 'positions'>, other: Uint32Array): number | null {
  const { minhash, positions } = fresh
  if (!positions || positions.length !== minhash.length || other.length !== minhash.length) return null
  const changed = new Map<number, boolean>()
  let mineOnly = 0
  let shared = 0
  let theirsOnly = 0
  for (let i = 0; i < minhash.length; i++) {
    if (minhash[i] === MINHASH_EMPTY || other[i] === MINHASH_EMPTY) return null
    if (minhash[i] > other[i]) {
      theirsOnly++
      continue
    }
    if (minhash[i] === other[i]) shared++
    else mineOnly++
    changed.set(positions[i], minhash[i] < other[i])
  }
  if (changed.size < MIN_SAMPLES) return null
  const at = [...changed.keys()].sort((a, b) => a - b)
  // the last sample stands for the text's end (the largest of this many uniform samples is close to it)
  const words = at[at.length - 1] + 1
  const need = at.length >= DENSE * words ? PASSAGE_SAMPLES - 1 : PASSAGE_SAMPLES
  let inPassages = 0
  // A passage is a stretch where changed samples outweigh kept ones KEPT_WEIGHT to 1: other text of the same
  // field shares a common phrase now and then ("in this study"), which must not cut the passage in two.
  let from = -1
  let net = 0
  let peak = 0
  let peakAt = -1
  const close = () => {
    if (peak >= need && at[peakAt] - at[from] >= PASSAGE_SPAN) {
      // the passage reaches halfway to the kept samples on either side: its length, not its sample count,
      // which varies more (about 11 samples for a tenth of any text, give or take 3)
      const start = from > 0 ? (at[from - 1] + at[from]) / 2 : 0
      const end = peakAt + 1 < at.length ? (at[peakAt] + at[peakAt + 1]) / 2 : words
      if (end - start >= PASSAGE_WORDS) inPassages += end - start
    }
    from = -1
    net = peak = 0
  }
  for (let k = 0; k < at.length; k++) {
    if (changed.get(at[k])) {
      if (from < 0) from = k
      if (++net > peak) {
        peak = net
        peakAt = k
      }
    } else if (from >= 0 && (net -= KEPT_WEIGHT) <= 0) close()
  }
  close()
  const ratio = (mineOnly + shared) / (theirsOnly + shared)
  const size = Math.min(1, Math.min(ratio, 1 / ratio) + SIZE_SLACK)
  return (1 - inPassages / words) * size
}

/**
 * Stage 3. The aggregate score of a candidate is its textScore (the share of the new text found in it) when the
 * chunk vectors confirm the match (some new chunk's pair score reaches chunk_match_threshold), else the chunk
 * score; without text evidence (no positions), the chunk score.
 */
export async function compare(
  candidates: readonly Candidate[],
  fresh: readonly Float32Array[],
  vectorsOf: (docId: string) => Promise<Float32Array[]>,
  cfg: DedupCfg,
  sig?: Pick<Signatures, 'minhash' | 'positions'>,
  pairs: PairScorer = localPairs,
): Promise<FinalVerdict & { title?: string }> {
  const c = cfg.chunk_compare
  const pool = c.compare_all_candidates ? candidates : candidates.slice(0, 1)
  let best: { match: string; score: number; title: string; stage: 3 } | null = null
  for (const cand of pool) {
    const chunks = await pairs(fresh, await vectorsOf(cand.doc_id), c.chunk_match_threshold)
    const text = sig ? textScore(sig, cand.minhash) : null
    const score = text !== null && chunks.top >= c.chunk_match_threshold ? text : chunks.score
    if (!best || score > best.score) best = { match: cand.doc_id, score, title: cand.title, stage: 3 }
  }
  if (!best) return { verdict: 'unique' }
  if (best.score >= c.body_identical_threshold) return { verdict: 'identical', ...best }
  if (best.score >= c.body_similar_threshold) return { verdict: 'similar', ...best }
  return { verdict: 'unique' }
}

/** An identical body under another title is the older service's "title changed": the newer document wins. */
export function titleChanged(verdict: FinalVerdict & { title?: string }, freshTitle: string): FinalVerdict {
  if (verdict.verdict !== 'identical' || verdict.title === undefined || verdict.title === freshTitle) return verdict
  return { verdict: 'title_changed', match: verdict.match, score: verdict.score, ...(verdict.stage ? { stage: verdict.stage } : {}) }
}

/** What the relation rule reads of either document. */
export interface RelationSide {
  /** Packed identity (dedup_signatures.identity); null for a row written before identities were kept. */
  identity: Uint8Array | Identity | null
  /** Normalised title (as the signatures hold it). */
  title: string
  connector_id: string | null
  source: string
}

/** A text this short (in tokens) that substitutes one identity token is another document: a note of one line. */
export const SHORT_TEXT_WORDS = 64
/** Substituted identity slots, as a share of the slots of the text that has fewer, that make a template's sibling. */
export const SUBSTITUTION_SHARE = 0.02

const asIdentity = (x: Uint8Array | Identity | null): Identity | null => (x === null ? null : x instanceof Uint8Array ? unpackIdentity(x) : x)
const titleWords = (t: string) => new Set(t.split(/[^\p{L}\p{N}]+/u).filter((w) => w !== ''))

/** The older document's title still names the newer one: equal, contained in it, or fuzzy-equal (stage 2's rule). */
function titleKept(older: string, fresh: string, cfg: DedupCfg): boolean {
  if (older === fresh) return true
  const words = titleWords(fresh)
  const olderWords = [...titleWords(older)]
  if (olderWords.length > 0 && olderWords.every((w) => words.has(w))) return true
  return titleSimilarity(older, fresh) >= cfg.minhash.title_fuzzy_threshold
}

/**
 * The relation rule (issue 36), applied to a verdict of stages 1-3 before anything is hidden. Text likeness alone
 * says "near-copy"; this tells the four relations apart:
 * - a copy (the same text, perhaps under another name): identical / title_changed, as stages 1-3 said;
 * - a revision (the same document, edited): similar, the older becomes outdated, as stages 1-3 said;
 * - a sibling (another document written from the same template): the newer text puts identity tokens of its own
 *   (codes, numbers, names, the title's distinguishing words) into the slots where the older has others
 *   (identityDiff). Two such slots that are at least SUBSTITUTION_SHARE of the identity slots, or one slot with
 *   titles that name different things, or one slot in a text of fewer than SHORT_TEXT_WORDS tokens; or titles
 *   that name different things over texts that differ by passages (similar). Both stay indexed;
 * - an overlap (shares passages, each holds text of its own): a similar verdict whose titles do not keep the older
 *   one's name (titleKept). Both stay indexed.
 * Two pages of one connector under different sources (both live at the source) never supersede each other: a
 * similar one is an overlap or a sibling, and a copy under another URL (a print view, a mirror) is skipped, so
 * `duplicate_of` names the visible one, as title_changed would have hidden the older.
 */
export function relate(verdict: FinalVerdict, fresh: RelationSide, older: RelationSide, cfg: DedupCfg): FinalVerdict {
  if (verdict.verdict !== 'identical' && verdict.verdict !== 'title_changed' && verdict.verdict !== 'similar') return verdict
  const { match, score } = verdict
  const stage = verdict.stage ?? 3
  const a = asIdentity(fresh.identity)
  const b = asIdentity(older.identity)
  if (a && b) {
    const d = identityDiff(a, b)
    const slots = Math.max(1, Math.min(a.slots.length, b.slots.length) / 3)
    const sibling = (d.substitutions >= 2 && d.substitutions / slots >= SUBSTITUTION_SHARE)
      || (d.substitutions >= 1 && (d.titleSubstituted || d.words < SHORT_TEXT_WORDS))
      || (d.titleSubstituted && verdict.verdict === 'similar')
    if (sibling) {
      const what = [
        d.substitutions > 0 ? `${d.substitutions} identity token${d.substitutions === 1 ? '' : 's'} (codes, numbers, names) substituted in the same places` : '',
        d.titleSubstituted ? 'titles that name different things' : '',
      ].filter(Boolean).join(' and ')
      return { verdict: 'sibling', match, score, stage, reason: `written from the same template as ${match}: ${what}; both stay indexed` }
    }
  }
  const sameConnector = fresh.connector_id !== null && fresh.connector_id === older.connector_id && fresh.source !== older.source
  if (sameConnector && verdict.verdict === 'title_changed') {
    return { verdict: 'identical', match, score, stage, reason: `a copy of ${match} under another address of the same connector (${older.source}): not indexed` }
  }
  if (sameConnector && verdict.verdict === 'similar') {
    return { verdict: 'overlap', match, score, stage, reason: `shares most of its text with ${match}, another page of the same connector that is still live at the source (${older.source}); both stay indexed` }
  }
  if (verdict.verdict === 'similar' && !titleKept(older.title, fresh.title, cfg)) {
    return { verdict: 'overlap', match, score, stage, reason: `shares passages with ${match}, but each holds text of its own under a title of its own; both stay indexed` }
  }
  return { ...verdict, stage, reason: verdict.reason ?? defaultReason(verdict.verdict, match, score) }
}

/** Whether `older` names another thing than `fresh` by its identity alone (the sibling test without the text verdict). */
function otherIdentity(fresh: Identity, older: Identity): boolean {
  const d = identityDiff(fresh, older)
  const slots = Math.max(1, Math.min(fresh.slots.length, older.slots.length) / 3)
  return (d.substitutions >= 2 && d.substitutions / slots >= SUBSTITUTION_SHARE) || d.titleSubstituted || (d.substitutions >= 1 && d.words < SHORT_TEXT_WORDS)
}

/** Candidates whose identity is read before stage 3 picks the best one. */
export const IDENTITY_RANKED = 16

/**
 * Stage 3 compares the best candidate only (compare_all_candidates false): among documents of one template the
 * closest signature is often a sibling, not the document this one revises. So the first IDENTITY_RANKED
 * candidates are put in two groups, same identity first (each in its stage order): a revision is compared with
 * its own older version even when a sibling's signature lies closer.
 */
export async function rankByIdentity(candidates: Candidate[], fresh: Uint8Array | Identity | null, sidesOf: (ids: string[]) => Promise<Map<string, RelationSide>>): Promise<Candidate[]> {
  const mine = asIdentity(fresh)
  if (!mine || candidates.length < 2) return candidates
  const head = candidates.slice(0, IDENTITY_RANKED)
  const sides = await sidesOf(head.map((c) => c.doc_id))
  const other = (c: Candidate) => {
    const theirs = asIdentity(sides.get(c.doc_id)?.identity ?? null)
    return theirs !== null && otherIdentity(mine, theirs)
  }
  const same = head.filter((c) => !other(c))
  return [...same, ...head.filter((c) => other(c)), ...candidates.slice(IDENTITY_RANKED)]
}

function defaultReason(verdict: 'identical' | 'title_changed' | 'similar', match: string, score: number): string {
  const s = score.toFixed(3)
  if (verdict === 'identical') return `the same text as ${match} (score ${s}): not indexed`
  if (verdict === 'title_changed') return `the same text as ${match} under another title (score ${s}): indexed, and ${match} is superseded`
  return `a revision of ${match} (score ${s}): indexed, and ${match} is superseded`
}

/** The record of a verdict for each side: the new document's, and the older one's when it becomes outdated. */
export function dedupRecords(docId: string, v: FinalVerdict): { fresh: DedupRecord | null; older: DedupRecord | null } {
  if (v.verdict === 'unique') return { fresh: null, older: null }
  const fresh: DedupRecord = { verdict: v.verdict, stage: v.stage ?? 3, score: round(v.score), matched_doc_id: v.match, reason: v.reason ?? '' }
  if (v.verdict !== 'similar' && v.verdict !== 'title_changed') return { fresh, older: null }
  const older: DedupRecord = {
    verdict: v.verdict, stage: v.stage ?? 3, score: round(v.score), matched_doc_id: docId,
    reason: v.verdict === 'similar'
      ? `superseded by ${docId}, a newer revision of this document (score ${v.score.toFixed(3)}); restore it if they are different documents`
      : `superseded by ${docId}, the same text under a new title; restore it if they are different documents`,
  }
  return { fresh, older }
}

const round = (x: number) => Math.round(x * 1e4) / 1e4

export interface IndexedFields {
  chunk_count: number
  embedding_model: string
  title: string
  doc_type: string
}

/**
 * The end of a successful ingest in one statement: the document's signature row replaced, the document moved
 * running -> indexed (compare-and-set), and, for a revision, the document it supersedes moved indexed -> outdated
 * in the same statement (issue 42: two statements left both indexed when the process died between them, and
 * nothing could tell afterwards). The superseded document's vectors are removed after; a crash before that leaves
 * an outdated document with vectors, which start-up reconciliation (reconcile.ts) deletes. Returns the signature's
 * sequence number and whether the older document was superseded (it may have left `indexed` meanwhile), or null
 * when this document left `running` meanwhile (nothing is superseded then); the signatures written then are removed
 * by the caller's clean-up.
 */
export async function finishIndexed(db: SqlRunner, kbId: string, docId: string, sig: Signatures, f: IndexedFields, dedup: DedupRecord | null = null,
  supersede: { docId: string; dedup: DedupRecord | null } | null = null): Promise<{ seq: number; superseded: boolean } | null> {
  const rows = await db.query<{ seq: number; superseded: number }>(
    `WITH sig AS (
            INSERT INTO dedup_signatures (doc_id, kb_id, simhash, minhash, title, chunk_count, identity) VALUES ($1, $2, $3, $4, $5, $6, $11)
            ON CONFLICT (doc_id) DO UPDATE SET simhash = EXCLUDED.simhash, minhash = EXCLUDED.minhash, title = EXCLUDED.title,
              chunk_count = EXCLUDED.chunk_count, identity = EXCLUDED.identity, created_at = now(), seq = nextval(pg_get_serial_sequence('dedup_signatures', 'seq'))
            RETURNING doc_id, seq),
          me AS (
            UPDATE documents SET status = 'indexed', updated_at = now(), process_finished_at = now(), heartbeat_at = NULL, chunk_count = $6, embedding_model = $7,
              title = $8, doc_type = $9, last_error = NULL, duplicate_of = NULL, dedup = $10::jsonb
            WHERE doc_id = $1 AND status = 'running' RETURNING doc_id),
          old AS (
            UPDATE documents SET status = 'outdated', updated_at = now(), heartbeat_at = NULL, deleted_at = NULL, duplicate_of = $1, dedup = $13::jsonb
            WHERE doc_id = $12::text AND status = 'indexed' AND EXISTS (SELECT 1 FROM me) RETURNING doc_id)
     SELECT (SELECT seq FROM sig) AS seq, (SELECT count(*) FROM old)::int AS superseded FROM me`,
    [docId, kbId, sig.simhash, toBytes(sig.minhash), sig.title, f.chunk_count, f.embedding_model, f.title, f.doc_type,
      dedup, sig.identity ?? null, supersede?.docId ?? null, supersede?.dedup ?? null],
  )
  return rows.length > 0 ? { seq: Number(rows[0].seq), superseded: Number(rows[0].superseded) > 0 } : null
}

/** The commit in progress per KB in this process (commitUnlessLate): the next waits for it without holding a connection. */
const commitsInTurn = new Map<string, Promise<void>>()

/**
 * Runs fn when this process's commits to the KB before it are done: every writer of a KB's signature rows takes
 * this turn (the pipeline's commitUnlessLate, an import's document).
 */
export async function inDedupTurn<R>(kbId: string, fn: () => Promise<R>): Promise<R> {
  const before = commitsInTurn.get(kbId)
  const run = before ? before.then(fn) : fn()
  const settled = run.then(() => {}, () => {})
  commitsInTurn.set(kbId, settled)
  try {
    return await run
  } finally {
    if (commitsInTurn.get(kbId) === settled) commitsInTurn.delete(kbId)
  }
}

/**
 * One try at indexing a document whose signatures were screened up to `since`: one commit per KB at a time, the
 * signatures committed since are screened (SignatureIndex.rescreen); when they find nothing, `commit` indexes the
 * document, and otherwise nothing is written and the caller judges what was found, then tries again from `seen`.
 * Without the turn a copy and its original, each screened before the other was indexed, could both rescreen before
 * either committed.
 *
 * Commits take turns per KB in this process; on PostgreSQL, where other processes commit too, the rescreen and
 * `commit` also run in one transaction under a transaction-scoped advisory lock per KB. PGlite has one process (it
 * holds the data folder), so the turn suffices there, and the two statements run on their own: a transaction would
 * hold its one connection from every other caller meanwhile.
 */
export async function commitUnlessLate<R extends { seq: number } | null>(sql: Pick<Sql, 'name' | 'transaction' | 'query'>, index: SignatureIndex, kbId: string, docId: string,
  sig: Signatures, cfg: DedupCfg, since: number, judged: ReadonlySet<string>, commit: (tx: SqlRunner) => Promise<R>): Promise<({ late: Exclude<EarlyVerdict, { verdict: 'unique' }> } | { done: R }) & { seen: number }> {
  // PGlite: this process is the only writer, and every writer here counts its writes (noteSignatureWrite), so the
  // rescreen reads nothing while the index holds all of them.
  const sole = sql.name === 'pglite' ? sql : undefined
  const attempt = async (tx: SqlRunner) => {
    const { early, seen } = await index.rescreen(tx, kbId, docId, sig, cfg, since, judged, sole)
    if (early.verdict !== 'unique') return { late: early, seen }
    return { done: await commit(tx), seen }
  }
  return inDedupTurn(kbId, async () => {
    let round: Awaited<ReturnType<typeof attempt>>
    try {
      round = sole !== undefined ? await attempt(sql) : await sql.transaction(async (tx) => {
        await lockDedupCommits(tx, kbId)
        return attempt(tx)
      })
    } catch (err) {
      // counted all the same (the failure may have come after the write): the next rescreen reads
      noteSignatureWrite(sql, kbId)
      throw err
    }
    // held (and counted) in the turn, before the next commit's rescreen; a commit that found the document no longer
    // running wrote its signature row all the same, which is not held: counted only
    if ('done' in round) {
      const done: { seq: number } | null = round.done ?? null
      if (done !== null) index.committed(sql, kbId, docId, sig, done.seq)
      else noteSignatureWrite(sql, kbId)
    }
    return round
  })
}

/**
 * The transaction-scoped advisory lock every writer of a KB's signature rows takes on PostgreSQL before it writes
 * one, in the transaction that writes it: the rows then commit in the order of their sequence numbers, which the
 * rescreen relies on (it reads above a number).
 */
export async function lockDedupCommits(tx: SqlRunner, kbId: string): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`quarry:dedup-commit:${kbId}`])
}

/**
 * The verdict a document ends with when its rescreen at the commit found `late` (a document indexed while this
 * one was processed) after its own screen gave `current`. `currentIndexed`: the document `current` names is still
 * indexed; when it is not (the late one superseded it, as a newer revision of it), `current` no longer holds and
 * `late` stands: so a third revision supersedes the second, as it would have one after the other. Otherwise a
 * copy of a newer document is not indexed, the stronger relation stands, and of two of one kind the first (a
 * document supersedes at most one other).
 */
export function laterVerdict(current: FinalVerdict, late: FinalVerdict, currentIndexed = true): FinalVerdict {
  if (current.verdict !== 'unique' && !currentIndexed) return late
  const rank = (v: FinalVerdict) => v.verdict === 'identical' ? 3 : v.verdict === 'similar' || v.verdict === 'title_changed' ? 2 : v.verdict === 'unique' ? 0 : 1
  return rank(late) > rank(current) ? late : current
}

/** Records that two documents are distinct (a restore): neither is judged against the other again. */
export async function markDistinct(db: SqlRunner, kbId: string, a: string, b: string): Promise<void> {
  if (a === b) return
  const [x, y] = a < b ? [a, b] : [b, a]
  await db.query('INSERT INTO dedup_distinct (kb_id, doc_a, doc_b) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [kbId, x, y])
}

/** What the relation rule reads of indexed documents (those still there). */
export async function relationSides(db: SqlRunner, docIds: string[]): Promise<Map<string, RelationSide>> {
  const rows = await db.query<{ doc_id: string; source: string; connector_id: string | null; title: string | null; identity: Uint8Array | null }>(
    `SELECT d.doc_id, d.source, d.connector_id::text AS connector_id, s.title, s.identity FROM documents d
     LEFT JOIN dedup_signatures s ON s.doc_id = d.doc_id WHERE d.doc_id = ANY($1::text[])`, [docIds])
  return new Map(rows.map((r) => [r.doc_id, { source: r.source, connector_id: r.connector_id, title: r.title ?? '', identity: r.identity ?? null }]))
}

/** What the relation rule reads of one document; null when it is gone. */
export async function relationSideOf(db: SqlRunner, docId: string): Promise<RelationSide | null> {
  return (await relationSides(db, [docId])).get(docId) ?? null
}

export async function dropSignatures(db: SqlRunner, docId: string): Promise<void> {
  await db.query('DELETE FROM dedup_signatures WHERE doc_id = $1', [docId])
}
