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
import type { SqlRunner } from '../../adapters/ports.ts'
import { cosineDistance } from '../../compute/chunk/semantic.ts'
import { MINHASH_EMPTY, simhashFromHex, titleSimilarity } from '../../compute/dedup/index.ts'
import type { KbSettings } from '../../kernel/config/schema.ts'

export interface Signatures {
  simhash: string
  minhash: Uint32Array
  /** Word index of the shingle behind each MinHash value (dedupSignatures); absent: textScore has no evidence. */
  positions?: Uint32Array
  /** Normalised title. */
  title: string
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
 * identical: not indexed (outdated, duplicate_of = match); title_changed (identical body, another title) and
 * similar: indexed, and the match becomes outdated with duplicate_of = this document.
 */
export type FinalVerdict = { verdict: 'identical' | 'title_changed' | 'similar'; match: string; score: number } | { verdict: 'unique' }

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
 * Sequence numbers are taken when a row is written but become visible when it commits, which can be in a
 * different order across concurrent writers: the last REREAD numbers are read again (more than the writers
 * that can be in flight at once), so a late commit is not missed.
 */
const REREAD = 16

/**
 * The signatures of each KB, held in memory and refreshed incrementally from SQL (rows created since the last
 * read), so screening a document compares against every indexed document of its KB without reading them all
 * from the database each time. Several processes may write: a candidate found here is confirmed against the
 * database (still indexed) before it counts, and entries found stale are dropped.
 */
export class SignatureIndex {
  private readonly kbs = new Map<string, { entries: KbSignatures; seen: number; readAt: number }>()

  /**
   * @param refreshMs how stale the view of other processes' writes may get: within this long after a read, a
   *   screen uses the signatures in memory (this process's own writes are added at once by `add`). Documents
   *   processed at the same moment by different processes cannot see each other anyway.
   */
  constructor(private readonly refreshMs = 500) {}

  private async refresh(db: SqlRunner, kbId: string): Promise<KbSignatures> {
    let kb = this.kbs.get(kbId)
    if (!kb) this.kbs.set(kbId, (kb = { entries: new KbSignatures(), seen: 0, readAt: -Infinity }))
    const now = performance.now()
    if (now - kb.readAt < this.refreshMs) return kb.entries
    kb.readAt = now
    const rows = await db.query<{ doc_id: string; simhash: string; minhash: Uint8Array; title: string; seq: number }>(
      'SELECT doc_id, simhash, minhash, title, seq FROM dedup_signatures WHERE kb_id = $1 AND seq > $2', [kbId, Math.max(0, kb.seen - REREAD)])
    for (const r of rows) {
      const seq = Number(r.seq)
      // The read position moves past every row read, this process's own commits (already added) included: the
      // next refresh then reads only what committed since, not every signature of the KB again.
      if (seq > kb.seen) kb.seen = seq
      if (kb.entries.seqOf(r.doc_id) === seq) continue
      kb.entries.set(r.doc_id, simhashFromHex(r.simhash), toLanes(r.minhash), r.title, seq)
    }
    return kb.entries
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
    const entries = await this.refresh(db, kbId)
    return screenEntries(entries, selfId, sig, cfg, (candidates) => this.confirm(db, kbId, candidates))
  }

  /** Keeps the candidates whose document is still indexed; forgets the others. */
  private async confirm(db: SqlRunner, kbId: string, candidates: Candidate[]): Promise<Candidate[]> {
    if (candidates.length === 0) return candidates
    const rows = await db.query<{ doc_id: string }>(
      `SELECT doc_id FROM documents WHERE doc_id = ANY($1::text[]) AND status = 'indexed'`, [candidates.map((c) => c.doc_id)])
    const ok = new Set(rows.map((r) => r.doc_id))
    for (const c of candidates) if (!ok.has(c.doc_id)) this.forget(kbId, c.doc_id)
    return candidates.filter((c) => ok.has(c.doc_id))
  }
}

/**
 * How far from the background towards an exact copy a best match must lie to count as the same passage in
 * full. A passage with a few words changed then scores 1 (built-in embedder, 1024 dimensions, SciFact: 5 % of
 * the words replaced leaves cosines of 0.90-0.99, 0.87-0.99 relative to the background), so small edits spread
 * over a document leave it identical, while a passage partly rewritten keeps its graded score (one paragraph
 * in ten replaced: similar), and one about the same subject in other words falls below chunk_match_threshold.
 */
const NEAR_COPY = 0.88

/**
 * Stage 3 score of a new document against one candidate: the mean over the new chunks of their pair score,
 * counting pair scores below chunk_match_threshold as 0, scaled by the chunk-count ratio min(n, m) / max(n, m)
 * so that a document contained in a much longer one is not called identical to it.
 *
 * The pair score of a chunk is its best (top-1) cosine among the candidate's chunks, set against the
 * background: the mean cosine of the two documents' chunk pairs that are not the same passage. Raw cosines of
 * unrelated passages of one language or domain are far from 0 (shared vocabulary with hashed lexical
 * features, shared topic with a neural model), so a mean of raw cosines rose with the background; the pair
 * score is (best - background) / (1 - background), and 1 from NEAR_COPY up.
 */
export function chunkScore(fresh: readonly Float32Array[], other: readonly Float32Array[], matchThreshold: number): number {
  return chunkPairs(fresh, other, matchThreshold).score
}

/** chunkScore, and the highest pair score of a new chunk (`top`), before the cut at the match threshold. */
function chunkPairs(fresh: readonly Float32Array[], other: readonly Float32Array[], matchThreshold: number): { score: number; top: number } {
  const n = fresh.length
  const m = other.length
  if (n === 0 || m === 0) return { score: 0, top: 0 }
  const cos = new Float64Array(n * m)
  const best = new Float64Array(n).fill(-Infinity)
  const at = new Int32Array(n)
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < m; j++) {
      const c = (cos[i * m + j] = 1 - cosineDistance(fresh[i], other[j]))
      if (c > best[i]) {
        best[i] = c
        at[i] = j
      }
    }
  }
  // Background pairs: not a chunk's best match, nor a neighbour of it (neighbouring chunks share
  // chunk_overlap characters and continue one passage). Against a candidate of one or two chunks there are
  // none, and the cosines stand as they are.
  let sum = 0
  let pairs = 0
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < m; j++) {
      if (Math.abs(j - at[i]) <= 1) continue
      sum += cos[i * m + j]
      pairs++
    }
  }
  // unrelated passages are not anti-correlated: a negative mean is noise, not a lower background
  const background = pairs > 0 ? Math.min(Math.max(0, sum / pairs), 0.9) : 0
  let score = 0
  let top = 0
  for (let i = 0; i < n; i++) {
    let pair = (best[i] - background) / (1 - background)
    if (pair >= NEAR_COPY) pair = 1
    if (pair >= matchThreshold) score += pair
    if (pair > top) top = pair
  }
  return { score: (score / n) * (Math.min(n, m) / Math.max(n, m)), top }
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
): Promise<FinalVerdict & { title?: string }> {
  const c = cfg.chunk_compare
  const pool = c.compare_all_candidates ? candidates : candidates.slice(0, 1)
  let best: { match: string; score: number; title: string } | null = null
  for (const cand of pool) {
    const chunks = chunkPairs(fresh, await vectorsOf(cand.doc_id), c.chunk_match_threshold)
    const text = sig ? textScore(sig, cand.minhash) : null
    const score = text !== null && chunks.top >= c.chunk_match_threshold ? text : chunks.score
    if (!best || score > best.score) best = { match: cand.doc_id, score, title: cand.title }
  }
  if (!best) return { verdict: 'unique' }
  if (best.score >= c.body_identical_threshold) return { verdict: 'identical', ...best }
  if (best.score >= c.body_similar_threshold) return { verdict: 'similar', ...best }
  return { verdict: 'unique' }
}

/** An identical body under another title is the older service's "title changed": the newer document wins. */
export function titleChanged(verdict: FinalVerdict & { title?: string }, freshTitle: string): FinalVerdict {
  if (verdict.verdict !== 'identical' || verdict.title === undefined || verdict.title === freshTitle) return verdict
  return { verdict: 'title_changed', match: verdict.match, score: verdict.score }
}

export interface IndexedFields {
  chunk_count: number
  embedding_model: string
  title: string
  doc_type: string
}

/**
 * The end of a successful ingest in one statement: the document's signature row replaced,
 * and the document moved running -> indexed (compare-and-set). Returns the signature's sequence number, or
 * null when the document left `running` meanwhile; the signatures written then are removed by the caller's
 * clean-up.
 */
export async function finishIndexed(db: SqlRunner, kbId: string, docId: string, sig: Signatures, f: IndexedFields): Promise<number | null> {
  const rows = await db.query<{ seq: number }>(
    `WITH sig AS (
            INSERT INTO dedup_signatures (doc_id, kb_id, simhash, minhash, title, chunk_count) VALUES ($1, $2, $3, $4, $5, $6)
            ON CONFLICT (doc_id) DO UPDATE SET simhash = EXCLUDED.simhash, minhash = EXCLUDED.minhash, title = EXCLUDED.title,
              chunk_count = EXCLUDED.chunk_count, created_at = now(), seq = nextval(pg_get_serial_sequence('dedup_signatures', 'seq'))
            RETURNING doc_id, seq)
     UPDATE documents SET status = 'indexed', updated_at = now(), process_finished_at = now(), heartbeat_at = NULL, chunk_count = $6, embedding_model = $7, title = $8,
       doc_type = $9, last_error = NULL, duplicate_of = NULL
     WHERE doc_id = $1 AND status = 'running' RETURNING doc_id, (SELECT seq FROM sig) AS seq`,
    [docId, kbId, sig.simhash, toBytes(sig.minhash), sig.title, f.chunk_count, f.embedding_model, f.title, f.doc_type],
  )
  return rows.length > 0 ? Number(rows[0].seq) : null
}

export async function dropSignatures(db: SqlRunner, docId: string): Promise<void> {
  await db.query('DELETE FROM dedup_signatures WHERE doc_id = $1', [docId])
}
