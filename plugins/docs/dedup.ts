// The three-stage dedup decision of spec 2.9. Stage 1: SimHash Hamming distance; stage 2 (only when stage 1
// found nothing): MinHash Jaccard and title similarity; stage 3: embedding comparison of the chunks, for the
// candidates stages 1-2 passed on. Only documents in status `indexed` of the same KB are compared.
import type { SqlRunner } from '../../adapters/ports.ts'
import { hammingDistance, jaccardEstimate, titleSimilarity } from '../../compute/dedup/index.ts'
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

/** Below this many indexed documents a KB is scanned whole, so no candidate hides from the LSH bands. */
const FULL_SCAN_LIMIT = 20_000

const toBytes = (a: Uint32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength)
const toLanes = (b: Uint8Array) => new Uint32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))

interface SigRow { doc_id: string; simhash: string; minhash: Uint8Array; title: string }

async function loadSignatures(db: SqlRunner, kbId: string, selfId: string, bands: string[]): Promise<SigRow[]> {
  const [{ n }] = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM dedup_signatures s JOIN documents d ON d.doc_id = s.doc_id WHERE s.kb_id = $1 AND d.status = 'indexed'`, [kbId])
  if (n === 0) return []
  if (n <= FULL_SCAN_LIMIT) {
    return db.query<SigRow>(
      `SELECT s.doc_id, s.simhash, s.minhash, s.title FROM dedup_signatures s JOIN documents d ON d.doc_id = s.doc_id
       WHERE s.kb_id = $1 AND d.status = 'indexed' AND s.doc_id <> $2`, [kbId, selfId])
  }
  return db.query<SigRow>(
    `SELECT DISTINCT s.doc_id, s.simhash, s.minhash, s.title FROM dedup_bands b
       JOIN dedup_signatures s ON s.doc_id = b.doc_id JOIN documents d ON d.doc_id = s.doc_id
     WHERE b.kb_id = $1 AND b.band = ANY($3::text[]) AND d.status = 'indexed' AND s.doc_id <> $2`, [kbId, selfId, bands])
}

/** Stages 1 and 2. */
export async function screen(db: SqlRunner, kbId: string, selfId: string, sig: Signatures, cfg: DedupCfg): Promise<EarlyVerdict> {
  const rows = await loadSignatures(db, kbId, selfId, sig.bands)
  if (rows.length === 0) return { verdict: 'unique' }
  const { hamming_identical_threshold: identical, hamming_similar_threshold: similar } = cfg.simhash
  let best: { doc_id: string; d: number } | null = null
  const stage1: Candidate[] = []
  for (const r of rows) {
    const d = hammingDistance(sig.simhash, r.simhash)
    if (d <= similar) stage1.push({ doc_id: r.doc_id, stage: 1, closeness: d })
    if (d <= identical && (!best || d < best.d)) best = { doc_id: r.doc_id, d }
  }
  if (best) return { verdict: 'identical', match: best.doc_id }
  if (stage1.length > 0) return { verdict: 'compare', candidates: stage1.sort((a, b) => a.closeness - b.closeness) }

  const { jaccard_threshold, title_fuzzy_threshold, title_only_min_jaccard_floor } = cfg.minhash
  const stage2: Candidate[] = []
  for (const r of rows) {
    const j = jaccardEstimate(sig.minhash, toLanes(r.minhash))
    const passes = j >= jaccard_threshold || (j >= title_only_min_jaccard_floor && titleSimilarity(sig.title, r.title) >= title_fuzzy_threshold)
    if (passes) stage2.push({ doc_id: r.doc_id, stage: 2, closeness: 1 - j })
  }
  if (stage2.length > 0) return { verdict: 'compare', candidates: stage2.sort((a, b) => a.closeness - b.closeness) }
  return { verdict: 'unique' }
}

function cosine(a: Float32Array, b: Float32Array): number {
  let dot = 0
  let na = 0
  let nb = 0
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i]
    na += a[i] * a[i]
    nb += b[i] * b[i]
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb)
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
      const c = cosine(v, w)
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

/** Replaces the document's signature row and band keys. */
export async function storeSignatures(db: SqlRunner, kbId: string, docId: string, sig: Signatures, chunkCount: number): Promise<void> {
  await db.query('DELETE FROM dedup_bands WHERE doc_id = $1', [docId])
  await db.query(
    `INSERT INTO dedup_signatures (doc_id, kb_id, simhash, minhash, title, chunk_count) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (doc_id) DO UPDATE SET simhash = EXCLUDED.simhash, minhash = EXCLUDED.minhash, title = EXCLUDED.title,
       chunk_count = EXCLUDED.chunk_count, created_at = now()`,
    [docId, kbId, sig.simhash, toBytes(sig.minhash), sig.title, chunkCount],
  )
  if (sig.bands.length > 0) {
    await db.query(
      `INSERT INTO dedup_bands (kb_id, band, doc_id) SELECT $1, b, $2 FROM unnest($3::text[]) AS b ON CONFLICT DO NOTHING`,
      [kbId, docId, sig.bands],
    )
  }
}

export async function dropSignatures(db: SqlRunner, docId: string): Promise<void> {
  await db.query('DELETE FROM dedup_bands WHERE doc_id = $1', [docId])
  await db.query('DELETE FROM dedup_signatures WHERE doc_id = $1', [docId])
}
