// Sample searches: what an import checks end to end against the source KB. A few queries are drawn from the KB's
// own text when it is exported, and the vector store's two candidate lists for each (dense by cosine, sparse by the
// IDF-weighted score: what every answer, hybrid or similarity, is made from) are recorded with their scores; the
// import asks its own store the same and compares. The store level is what is compared because that is what the
// KB's data decides: fusion, auto-merge and reranking follow settings, not data, and a hybrid rank depends on which
// of two equally close chunks a store happens to list first, which no store promises.
import { createHash } from 'node:crypto'
import type { Adapters, VectorHit } from '../../adapters/ports.ts'
import { encodeQuery } from '../../compute/text/sparse.ts'
import type { SqlRunner } from '../../adapters/ports.ts'

/** Documents sampled, one query each. */
const SAMPLES = 5
export const SAMPLE_TOP_K = 10
/** Scores this close are one tie (the stores' arithmetic differs in the last bits; their order inside a tie is their own). */
const TIE = 1e-5

export interface SampleList {
  /** chunk_ids, best first (for the report), their scores and what each says (textKey). */
  ids: string[]
  scores: number[]
  texts: string[]
}

export interface SampleSearch {
  query: string
  dense: SampleList
  sparse: SampleList
}

export interface SampleCheck {
  query: string
  list: 'dense' | 'sparse'
  expected: string[]
  got: string[]
}

/** What a chunk says: copies of one text (a copy kept beside its original) score alike and stand for each other. */
export const textKey = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 16)

/** The words a sample query is made of: the opening of a chunk in the middle of a document. */
export function sampleQuery(text: string): string {
  return text.replace(/\s+/g, ' ').trim().split(' ').slice(0, 12).join(' ').slice(0, 200)
}

type Stores = Pick<Adapters, 'vectors' | 'embedder'>

async function lists(a: Stores, kbId: string, query: string): Promise<{ dense: SampleList; sparse: SampleList }> {
  const [dense] = await a.embedder.embed([query])
  const r = await a.vectors.search(kbId, { dense, sparse: encodeQuery(query), limit: SAMPLE_TOP_K })
  const list = (hits: VectorHit[]): SampleList => ({ ids: hits.map((h) => h.id), scores: hits.map((h) => h.score), texts: hits.map((h) => textKey(h.payload.text ?? '')) })
  return { dense: list(r.dense), sparse: list(r.sparse) }
}

/** The samples of a KB: a spread of its indexed documents (by md5 of the id: the same for the same KB). */
export async function recordSamples(a: Stores & { sql: SqlRunner }, kbId: string): Promise<SampleSearch[]> {
  const docs = await a.sql.query<{ doc_id: string }>(
    `SELECT doc_id FROM documents WHERE kb_id = $1 AND status = 'indexed' ORDER BY md5(doc_id) LIMIT ${SAMPLES}`, [kbId])
  const out: SampleSearch[] = []
  for (const { doc_id } of docs) {
    const points = await a.vectors.docPoints(kbId, doc_id)
    if (points.length === 0) continue
    const query = sampleQuery(points[Math.floor(points.length / 2)].payload.text ?? '')
    if (query) out.push({ query, ...(await lists(a, kbId, query)) })
  }
  return out
}

/**
 * Whether a list is the sample's: at every rank the same score, and in each run of equal scores the same texts
 * (as a set); a run reaching the end of a full list may continue past the cut, where another store may have
 * kept other members of the tie, so there only the scores are compared.
 */
export function sameList(expected: SampleList, got: SampleList): boolean {
  if (expected.scores.length !== got.scores.length) return false
  const n = expected.scores.length
  const tied = (x: number, y: number) => Math.abs(x - y) <= TIE * Math.max(1, Math.abs(x))
  for (let k = 0; k < n; k++) if (!tied(expected.scores[k], got.scores[k])) return false
  for (let i = 0; i < n;) {
    let j = i + 1
    while (j < n && tied(expected.scores[i], expected.scores[j])) j++
    if (!(j === n && n === SAMPLE_TOP_K)) {
      const a = expected.texts.slice(i, j).sort()
      const b = got.texts.slice(i, j).sort()
      if (a.some((x, k) => x !== b[k])) return false
    }
    i = j
  }
  return true
}

/** Runs each sample against a KB; the lists that differ (ids mapped to the KB's by idOf). */
export async function checkSamples(a: Stores, kbId: string, samples: readonly SampleSearch[], idOf: (id: string) => string): Promise<{ checked: number; matched: number; mismatches: SampleCheck[] }> {
  const out = { checked: 0, matched: 0, mismatches: [] as SampleCheck[] }
  for (const s of samples) {
    const got = await lists(a, kbId, s.query)
    for (const list of ['dense', 'sparse'] as const) {
      out.checked++
      if (sameList(s[list], got[list])) out.matched++
      else out.mismatches.push({ query: s.query, list, expected: s[list].ids.map(idOf), got: got[list].ids })
    }
  }
  return out
}
