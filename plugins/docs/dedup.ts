// The three-stage dedup decision of spec 2.9. Stage 1: SimHash Hamming distance; stage 2 (only when stage 1
// found nothing): MinHash Jaccard and title similarity; stage 3: embedding comparison of the chunks, for the
// candidates stages 1-2 passed on. Only documents in status `indexed` of the same KB are compared.
import type { SqlRunner } from '../../adapters/ports.ts'
import { cosineDistance } from '../../compute/chunk/semantic.ts'
import { hammingDistance, jaccardEstimate, simhashFromHex, titleSimilarity } from '../../compute/dedup/index.ts'
import type { KbSettings } from '../../kernel/config/schema.ts'

export interface Signatures {
  simhash: string
  bands: string[]
  minhash: Uint32Array
  /** Normalised title. */
  title: string
}

export interface Candidate {
  doc_id: string
  stage: 1 | 2
  /** Hamming distance (stage 1) or 1 - Jaccard scaled to bits (stage 2): lower is closer. */
  closeness: number
}

export type EarlyVerdict =
  | { verdict: 'identical'; match: string }
  | { verdict: 'compare'; candidates: Candidate[] }
  | { verdict: 'unique' }

export type FinalVerdict = { verdict: 'identical' | 'similar'; match: string; score: number } | { verdict: 'unique' }

type DedupCfg = KbSettings['dedup']

const toBytes = (a: Uint32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength)
const toLanes = (b: Uint8Array) => new Uint32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))

interface Entry {
  /** The SimHash as 32-bit lanes, parsed once: a screen compares it with every entry of the KB. */
  simhash: Uint32Array
  minhash: Uint32Array
  title: string
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
  private readonly kbs = new Map<string, { entries: Map<string, Entry & { seq: number }>; seen: number; readAt: number }>()

  /**
   * @param refreshMs how stale the view of other processes' writes may get: within this long after a read, a
   *   screen uses the signatures in memory (this process's own writes are added at once by `add`). Documents
   *   processed at the same moment by different processes cannot see each other anyway.
   */
  constructor(private readonly refreshMs = 500) {}

  private async refresh(db: SqlRunner, kbId: string): Promise<Map<string, Entry>> {
    let kb = this.kbs.get(kbId)
    if (!kb) this.kbs.set(kbId, (kb = { entries: new Map(), seen: 0, readAt: -Infinity }))
    const now = performance.now()
    if (now - kb.readAt < this.refreshMs) return kb.entries
    kb.readAt = now
    const rows = await db.query<{ doc_id: string; simhash: string; minhash: Uint8Array; title: string; seq: number }>(
      'SELECT doc_id, simhash, minhash, title, seq FROM dedup_signatures WHERE kb_id = $1 AND seq > $2', [kbId, Math.max(0, kb.seen - REREAD)])
    for (const r of rows) {
      if (kb.entries.get(r.doc_id)?.seq === r.seq) continue
      kb.entries.set(r.doc_id, { simhash: simhashFromHex(r.simhash), minhash: toLanes(r.minhash), title: r.title, seq: r.seq })
      if (r.seq > kb.seen) kb.seen = r.seq
    }
    return kb.entries
  }

  /** A signature this process has just committed (finishIndexed), visible to its next screen at once. */
  add(kbId: string, docId: string, sig: Signatures, seq: number): void {
    const kb = this.kbs.get(kbId)
    // A KB never read yet is read whole at its first screen, this row included.
    if (!kb) return
    kb.entries.set(docId, { simhash: simhashFromHex(sig.simhash), minhash: sig.minhash, title: sig.title, seq })
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
    const { hamming_identical_threshold: identical, hamming_similar_threshold: similar } = cfg.simhash
    const stage1: Candidate[] = []
    const mine = simhashFromHex(sig.simhash)
    for (const [docId, e] of entries) {
      if (docId === selfId) continue
      const d = hammingDistance(mine, e.simhash)
      if (d <= similar) stage1.push({ doc_id: docId, stage: 1, closeness: d })
    }
    let live = await this.confirm(db, kbId, stage1)
    if (live.length > 0) {
      live.sort((a, b) => a.closeness - b.closeness)
      if (live[0].closeness <= identical) return { verdict: 'identical', match: live[0].doc_id }
      return { verdict: 'compare', candidates: live }
    }
    const { jaccard_threshold, title_fuzzy_threshold, title_only_min_jaccard_floor } = cfg.minhash
    const stage2: Candidate[] = []
    for (const [docId, e] of entries) {
      if (docId === selfId) continue
      const j = jaccardEstimate(sig.minhash, e.minhash)
      const passes = j >= jaccard_threshold || (j >= title_only_min_jaccard_floor && titleSimilarity(sig.title, e.title) >= title_fuzzy_threshold)
      if (passes) stage2.push({ doc_id: docId, stage: 2, closeness: 1 - j })
    }
    live = await this.confirm(db, kbId, stage2)
    if (live.length > 0) return { verdict: 'compare', candidates: live.sort((a, b) => a.closeness - b.closeness) }
    return { verdict: 'unique' }
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
 * Stage 3 score of a new document against one candidate: the mean over the new chunks of their best (top-1)
 * cosine match among the candidate's chunks, counting matches below chunk_match_threshold as 0, scaled by
 * the chunk-count ratio min(n, m) / max(n, m) so that a document contained in a much longer one is not
 * called identical to it.
 */
export function chunkScore(fresh: readonly Float32Array[], other: readonly Float32Array[], matchThreshold: number): number {
  if (fresh.length === 0 || other.length === 0) return 0
  let sum = 0
  for (const v of fresh) {
    let best = 0
    for (const w of other) {
      const c = 1 - cosineDistance(v, w)
      if (c > best) best = c
    }
    if (best >= matchThreshold) sum += best
  }
  const ratio = Math.min(fresh.length, other.length) / Math.max(fresh.length, other.length)
  return (sum / fresh.length) * ratio
}

/** Stage 3. */
export async function compare(
  candidates: readonly Candidate[],
  fresh: readonly Float32Array[],
  vectorsOf: (docId: string) => Promise<Float32Array[]>,
  cfg: DedupCfg,
): Promise<FinalVerdict> {
  const c = cfg.chunk_compare
  const pool = c.compare_all_candidates ? candidates : candidates.slice(0, 1)
  let best: { match: string; score: number } | null = null
  for (const cand of pool) {
    const score = chunkScore(fresh, await vectorsOf(cand.doc_id), c.chunk_match_threshold)
    if (!best || score > best.score) best = { match: cand.doc_id, score }
  }
  if (!best) return { verdict: 'unique' }
  if (best.score >= c.body_identical_threshold) return { verdict: 'identical', ...best }
  if (best.score >= c.body_similar_threshold) return { verdict: 'similar', ...best }
  return { verdict: 'unique' }
}

export interface IndexedFields {
  chunk_count: number
  embedding_model: string
  title: string
  doc_type: string
}

/**
 * The end of a successful ingest in one statement: the document's signature row and band keys replaced,
 * and the document moved running -> indexed (compare-and-set). Returns the signature's sequence number, or
 * null when the document left `running` meanwhile; the signatures written then are removed by the caller's
 * clean-up.
 */
export async function finishIndexed(db: SqlRunner, kbId: string, docId: string, sig: Signatures, f: IndexedFields): Promise<number | null> {
  const rows = await db.query<{ seq: number }>(
    `WITH old_bands AS (DELETE FROM dedup_bands WHERE doc_id = $1),
          sig AS (
            INSERT INTO dedup_signatures (doc_id, kb_id, simhash, minhash, title, chunk_count) VALUES ($1, $2, $3, $4, $5, $6)
            ON CONFLICT (doc_id) DO UPDATE SET simhash = EXCLUDED.simhash, minhash = EXCLUDED.minhash, title = EXCLUDED.title,
              chunk_count = EXCLUDED.chunk_count, created_at = now(), seq = nextval(pg_get_serial_sequence('dedup_signatures', 'seq'))
            RETURNING doc_id, seq),
          bands AS (INSERT INTO dedup_bands (kb_id, band, doc_id) SELECT $2, b, sig.doc_id FROM sig, unnest($7::text[]) AS b ON CONFLICT DO NOTHING)
     UPDATE documents SET status = 'indexed', updated_at = now(), heartbeat_at = NULL, chunk_count = $6, embedding_model = $8, title = $9,
       doc_type = $10, last_error = NULL, duplicate_of = NULL
     WHERE doc_id = $1 AND status = 'running' RETURNING doc_id, (SELECT seq FROM sig) AS seq`,
    [docId, kbId, sig.simhash, toBytes(sig.minhash), sig.title, f.chunk_count, sig.bands, f.embedding_model, f.title, f.doc_type],
  )
  return rows.length > 0 ? Number(rows[0].seq) : null
}

export async function dropSignatures(db: SqlRunner, docId: string): Promise<void> {
  await db.query('WITH b AS (DELETE FROM dedup_bands WHERE doc_id = $1) DELETE FROM dedup_signatures WHERE doc_id = $1', [docId])
}
