// A retrieval data set in BEIR layout: corpus.jsonl ({_id, title, text}), queries.jsonl ({_id, text}) and
// qrels/<split>.tsv (query-id, corpus-id, score, after a header line). Read from where it lies: evaluation
// sets are not copied into the repository.
import { existsSync, readFileSync } from 'node:fs'
import { basename, join, resolve } from 'node:path'
import type { Judgements } from './metrics.ts'

export interface CorpusDoc {
  id: string
  title: string
  text: string
}

export interface Query {
  id: string
  text: string
}

export interface BeirDataset {
  name: string
  dir: string
  corpus: CorpusDoc[]
  /** Only the judged queries of the split (at least one positive judgement), in queries.jsonl order. */
  queries: Query[]
  qrels: Map<string, Map<string, number>>
  /** Sizes before any limit. */
  full: { docs: number; queries: number }
}

export interface ReadBeirOptions {
  split?: string
  /**
   * Keep at most this many documents: the relevant documents of the kept queries first (all of them, so
   * every query can still be answered), then others in corpus order.
   */
  limitDocs?: number
  /** Keep the first this many judged queries. */
  limitQueries?: number
}

function readJsonl(path: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = []
  readFileSync(path, 'utf8').split('\n').forEach((line, i) => {
    if (line.trim() === '') return
    try {
      out.push(JSON.parse(line) as Record<string, unknown>)
    } catch {
      throw new Error(`${path}:${i + 1}: not a JSON object`)
    }
  })
  return out
}

const str = (v: unknown) => (v === undefined || v === null ? '' : String(v))

export function readQrels(path: string): Map<string, Map<string, number>> {
  const qrels = new Map<string, Map<string, number>>()
  const lines = readFileSync(path, 'utf8').split('\n')
  lines.forEach((line, i) => {
    const cols = line.replace(/\r$/, '').split('\t')
    if (cols.length < 3 || cols[0] === '') return
    const grade = Number(cols[2])
    // The BEIR header (query-id, corpus-id, score) and any other non-numeric line are not judgements.
    if (!Number.isFinite(grade)) {
      if (i === 0) return
      throw new Error(`${path}:${i + 1}: score '${cols[2]}' is not a number`)
    }
    let rel = qrels.get(cols[0])
    if (!rel) qrels.set(cols[0], (rel = new Map()))
    rel.set(cols[1], grade)
  })
  return qrels
}

export function readBeir(dir: string, opts: ReadBeirOptions = {}): BeirDataset {
  const root = resolve(dir)
  const split = opts.split ?? 'test'
  const files = { corpus: join(root, 'corpus.jsonl'), queries: join(root, 'queries.jsonl'), qrels: join(root, 'qrels', `${split}.tsv`) }
  for (const f of Object.values(files)) if (!existsSync(f)) throw new Error(`${f} is missing: a BEIR data set folder holds corpus.jsonl, queries.jsonl and qrels/${split}.tsv`)

  const corpus: CorpusDoc[] = readJsonl(files.corpus).map((d) => ({ id: str(d._id), title: str(d.title), text: str(d.text) }))
  const allQrels = readQrels(files.qrels)
  const judged = (rel: Judgements | undefined) => rel !== undefined && [...rel.values()].some((g) => g > 0)
  let queries: Query[] = readJsonl(files.queries)
    .map((q) => ({ id: str(q._id), text: str(q.text) }))
    .filter((q) => judged(allQrels.get(q.id)))
  const fullQueries = queries.length
  if (opts.limitQueries !== undefined) queries = queries.slice(0, Math.max(0, opts.limitQueries))
  const qrels = new Map(queries.map((q) => [q.id, allQrels.get(q.id)!]))

  let kept = corpus
  if (opts.limitDocs !== undefined && opts.limitDocs < corpus.length) {
    const keep = new Set<string>()
    for (const rel of qrels.values()) for (const [id, g] of rel) if (g > 0) keep.add(id)
    for (const d of corpus) {
      if (keep.size >= opts.limitDocs) break
      keep.add(d.id)
    }
    kept = corpus.filter((d) => keep.has(d.id))
  }
  return { name: basename(root), dir: root, corpus: kept, queries, qrels, full: { docs: corpus.length, queries: fullQueries } }
}
