// Retrieval quality through the public API: a BEIR data set is ingested into a fresh KB of a running or
// in-process Quarry, every judged query is searched in four modes, and nDCG@10, recall@100 and MRR@10 are
// computed per document (a document's best chunk rank counts).
import { randomBytes } from 'node:crypto'
import { readBeir } from './beir.ts'
import {
  createKb, deleteKb, docCounts, embeddingModel, failedDocs, kbSettings, putOverrides, search, startInProcess, uploadAll, waitSettled,
  type DocCounts, type InProcessService, type QuarryClient,
} from './client.ts'
import { corpusFiles, type CorpusFormat } from './corpus-files.ts'
import { firstPerDocument, score, type Scores } from './metrics.ts'

export const MODES = ['sparse', 'dense', 'hybrid', 'similarity'] as const
export type ModeName = (typeof MODES)[number]

export interface EvalOptions {
  /** BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv). */
  dataset: string
  /** A running service; without it one is started in-process on the embedded engines. */
  url?: string
  /** Extra request headers for --url (an Authorization header). */
  headers?: Record<string, string>
  limitDocs?: number
  limitQueries?: number
  /**
   * Near-duplicate detection for the evaluation KB. Default false: a benchmark corpus must be indexed
   * whole, or judged documents that dedup marks outdated could never be found.
   */
  dedup?: boolean
  /** alpha of the hybrid mode; default: the service's retrieval.hybrid.alpha. */
  alpha?: number
  modes?: readonly ModeName[]
  /** Chunks asked for per query (the API allows at most 100). */
  topK?: number
  /** KB id to use; default eval-<dataset>-<random>. */
  kbId?: string
  /**
   * Spread the corpus over this many KBs (entry i into KB i mod N, ids <kbId>-1 ... <kbId>-N) and search them
   * all in one request: the quality of a multi-KB search, whose answer pools each KB's own ranking. Default 1.
   */
  split?: number
  /** Leave the KB in place afterwards (--url only; an in-process service's folder is removed anyway unless dataDir is set). */
  keep?: boolean
  /** The KB already holds this corpus (uploaded with the same file names): search only. */
  skipIngest?: boolean
  /** In-process service: its data folder (kept) instead of a temporary one. */
  dataDir?: string
  /** In-process service: settings merged over the defaults (as in settings.yaml). */
  settings?: Record<string, unknown>
  /** Search requests in flight. */
  concurrency?: number
  /** Upload format of the corpus entries (default txt; md puts the title in a heading). */
  format?: CorpusFormat
  log?: (line: string) => void
}

export interface ModeResult extends Scores {
  mode: ModeName
  options: Record<string, unknown>
  mean_latency_ms: number
}

export interface EvalResult {
  dataset: string
  sizes: { docs: number; queries: number; full_docs: number; full_queries: number; judgements: number }
  service: string
  settings: Record<string, unknown>
  ingest: {
    seconds: number | null
    docs_per_s: number | null
    counts: DocCounts
    refused: { name: string; error: string }[]
    failed: { source: string; corpus_id: string | undefined; last_error: string | null; judged: boolean }[]
    /** Corpus ids of documents judged relevant that are not indexed (failed, outdated or refused). */
    unreachable_judged: number
  }
  modes: ModeResult[]
  targets: { name: string; met: boolean; detail: string }[]
}

const round = (x: number, d = 4) => Number(x.toFixed(d))

export function modeOptions(mode: ModeName, topK: number, alpha: number | undefined): Record<string, unknown> {
  const base = { top_k: topK, rerank: { enabled: false } }
  switch (mode) {
    case 'sparse':
      return { ...base, mode: 'hybrid', hybrid: { alpha: 0 } }
    case 'dense':
      return { ...base, mode: 'hybrid', hybrid: { alpha: 1 } }
    case 'hybrid':
      return alpha === undefined ? { ...base, mode: 'hybrid' } : { ...base, mode: 'hybrid', hybrid: { alpha } }
    case 'similarity':
      return { ...base, mode: 'similarity', similarity: { min_score: 0 } }
  }
}

async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length)
  let next = 0
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, async () => {
    while (next < items.length) {
      const i = next++
      out[i] = await fn(items[i])
    }
  }))
  return out
}

/** The targets of the benchmark issue, for the data sets they name. */
export function targetsFor(dataset: string, modes: readonly ModeResult[]): EvalResult['targets'] {
  const by = new Map(modes.map((m) => [m.mode, m]))
  const hybrid = by.get('hybrid')
  const sparse = by.get('sparse')
  const out: EvalResult['targets'] = []
  if (dataset === 'scifact' && hybrid) {
    const gap = hybrid.ndcg_at_10 - 0.665
    out.push({ name: 'hybrid nDCG@10 >= 0.665 (BM25, BEIR paper)', met: gap >= 0, detail: `${hybrid.ndcg_at_10.toFixed(4)} (${gap >= 0 ? '+' : ''}${gap.toFixed(4)})` })
  }
  if (dataset === 'autorag-ko' && hybrid && sparse) {
    const gap = hybrid.ndcg_at_10 - sparse.ndcg_at_10
    out.push({ name: 'hybrid nDCG@10 >= sparse-only', met: gap >= 0, detail: `${hybrid.ndcg_at_10.toFixed(4)} vs ${sparse.ndcg_at_10.toFixed(4)} (${gap >= 0 ? '+' : ''}${gap.toFixed(4)})` })
  }
  return out
}

function sumCounts(all: DocCounts[]): DocCounts {
  const out: DocCounts = {}
  for (const counts of all) for (const [k, v] of Object.entries(counts)) out[k] = (out[k] ?? 0) + (v ?? 0)
  return out
}

async function ingest(c: QuarryClient, kbId: string, files: ReturnType<typeof corpusFiles>, log: (l: string) => void) {
  const total = files.files.length
  let lastLog = 0
  const every = (what: string) => (n: number) => {
    if (Date.now() - lastLog < 5000) return
    lastLog = Date.now()
    log(`${what}: ${n}/${total}`)
  }
  const started = performance.now()
  const refused = await uploadAll(c, kbId, files.files, { batchSize: 50, concurrency: 2, onProgress: every('uploaded') })
  const counts = await waitSettled(c, kbId, total - refused.length, { onProgress: every('settled') })
  const seconds = (performance.now() - started) / 1000
  log(`ingested ${total} documents into ${kbId} in ${seconds.toFixed(1)} s: ${JSON.stringify(counts)}`)
  return { seconds, counts, refused }
}

export async function runEval(opts: EvalOptions): Promise<EvalResult> {
  const log = opts.log ?? ((l: string) => process.stderr.write(`${l}\n`))
  const ds = readBeir(opts.dataset, { limitDocs: opts.limitDocs, limitQueries: opts.limitQueries })
  const modes = opts.modes ?? MODES
  const topK = opts.topK ?? 100
  const files = corpusFiles(ds.corpus, opts.format)
  const kbId = opts.kbId ?? `eval-${ds.name.toLowerCase().replace(/[^a-z0-9]+/g, '-').slice(0, 30)}-${randomBytes(3).toString('hex')}`
  const split = opts.split ?? 1
  if (!(Number.isInteger(split) && split >= 1)) throw new Error(`split must be a positive integer, got ${split}`)
  const kbIds = split === 1 ? [kbId] : Array.from({ length: split }, (_, i) => `${kbId}-${i + 1}`)

  let local: InProcessService | undefined
  let c: QuarryClient
  if (opts.url) c = { base: opts.url.replace(/\/+$/, ''), headers: opts.headers ?? {} }
  else {
    local = await startInProcess({ dataDir: opts.dataDir, settings: opts.settings })
    c = local.client
  }
  const created = !opts.skipIngest
  try {
    let ing: { seconds: number | null; counts: DocCounts; refused: { name: string; error: string }[] }
    if (opts.skipIngest) ing = { seconds: null, counts: sumCounts(await Promise.all(kbIds.map((id) => docCounts(c, id)))), refused: [] }
    else {
      for (const id of kbIds) {
        await createKb(c, id)
        if (!opts.dedup) await putOverrides(c, id, { 'dedup.enabled': false })
      }
      const started = performance.now()
      const parts = await Promise.all(kbIds.map((id, k) => ingest(c, id, { ...files, files: files.files.filter((_, i) => i % split === k) }, log)))
      ing = { seconds: (performance.now() - started) / 1000, counts: sumCounts(parts.map((x) => x.counts)), refused: parts.flatMap((x) => x.refused) }
    }
    const failed = ing.counts.failed ? (await Promise.all(kbIds.map((id) => failedDocs(c, id)))).flat() : []
    const judgedIds = new Set<string>()
    for (const rel of ds.qrels.values()) for (const [id, g] of rel) if (g > 0) judgedIds.add(id)

    // Every KB of a split run has the same settings (the defaults and the overrides above).
    const settings = await kbSettings(c, kbIds[0])
    const retrieval = settings.retrieval as { hybrid?: { alpha?: number; rrf_k?: number; kb_rrf_k?: number } } | undefined
    const model = await embeddingModel(c, kbIds[0])

    const results: ModeResult[] = []
    for (const mode of modes) {
      const options = modeOptions(mode, topK, opts.alpha)
      const runs = new Map<string, string[]>()
      let latency = 0
      await mapLimit(ds.queries, opts.concurrency ?? 4, async (q) => {
        const t0 = performance.now()
        const hits = await search(c, kbIds, q.text, options)
        latency += performance.now() - t0
        runs.set(q.id, firstPerDocument(hits.map((h) => files.idBySource.get(h.source) ?? `?${h.source}`)))
      })
      const s = score(runs, ds.qrels)
      results.push({ mode, options, ...s, mean_latency_ms: round(latency / Math.max(1, ds.queries.length), 1) })
      log(`${mode}: nDCG@10 ${s.ndcg_at_10.toFixed(4)}  recall@100 ${s.recall_at_100.toFixed(4)}  MRR@10 ${s.mrr_at_10.toFixed(4)}`)
    }

    // Judged documents that can never be found: refused at upload, failed, or marked outdated by dedup.
    const notIndexed = new Set<string>([...ing.refused.map((r) => r.name), ...failed.map((f) => f.source)])
    if ((ing.counts.outdated ?? 0) > 0) {
      // Outdated documents are listed by status, a page of 100 at a time.
      for (const id of kbIds) {
        for (let page = 1; ; page++) {
          const res = await fetch(`${c.base}/api/kb/${id}/docs?status=outdated&page_size=100&page=${page}`, { headers: c.headers })
          const body = (await res.json()) as { items: { source: string }[] }
          for (const d of body.items) notIndexed.add(d.source)
          if (body.items.length < 100) break
        }
      }
    }
    const unreachable = [...notIndexed].filter((s) => judgedIds.has(files.idBySource.get(s) ?? '')).length

    const hybridAlpha = opts.alpha ?? retrieval?.hybrid?.alpha
    const chunking = settings.chunking as Record<string, unknown>
    return {
      dataset: ds.name,
      sizes: {
        docs: ds.corpus.length, queries: ds.queries.length, full_docs: ds.full.docs, full_queries: ds.full.queries,
        judgements: [...ds.qrels.values()].reduce((n, r) => n + r.size, 0),
      },
      service: opts.url ? c.base : 'in-process (embedded engines)',
      settings: {
        embedding_model: model,
        chunking: { strategy: chunking?.strategy, chunk_size: chunking?.chunk_size, chunk_overlap: chunking?.chunk_overlap, min_chunk_chars: chunking?.min_chunk_chars },
        dedup_enabled: (settings.dedup as { enabled?: boolean } | undefined)?.enabled,
        hybrid_alpha: hybridAlpha,
        rrf_k: retrieval?.hybrid?.rrf_k,
        kb_rrf_k: retrieval?.hybrid?.kb_rrf_k,
        top_k: topK,
        kbs: split,
        rerank: false,
        document_level: 'best chunk rank per document; recall@100 over the documents of the top 100 chunks',
        upload: opts.format === 'md' ? 'one .md per corpus entry: title as a heading, then the text' : 'one .txt per corpus entry: title line, blank line, text',
      },
      ingest: {
        seconds: ing.seconds === null ? null : round(ing.seconds, 1),
        docs_per_s: ing.seconds === null ? null : round(ds.corpus.length / ing.seconds, 1),
        counts: ing.counts,
        refused: ing.refused,
        failed: failed.map((f) => {
          const id = files.idBySource.get(f.source)
          return { source: f.source, corpus_id: id, last_error: f.last_error, judged: id !== undefined && judgedIds.has(id) }
        }),
        unreachable_judged: unreachable,
      },
      modes: results.map((m) => ({ ...m, ndcg_at_10: round(m.ndcg_at_10), recall_at_100: round(m.recall_at_100), mrr_at_10: round(m.mrr_at_10) })),
      // The targets are about the whole set: a slice (smoke run) is not held to them.
      targets: ds.corpus.length === ds.full.docs && ds.queries.length === ds.full.queries ? targetsFor(ds.name, results) : [],
    }
  } finally {
    if (created && !opts.keep && opts.url) for (const id of kbIds) await deleteKb(c, id).catch(() => {})
    await local?.close()
  }
}

/** The report as a person reads it. */
export function formatReport(r: EvalResult): string {
  const lines: string[] = []
  lines.push(`Data set ${r.dataset}: ${r.sizes.docs} documents${r.sizes.docs < r.sizes.full_docs ? ` (of ${r.sizes.full_docs})` : ''}, ${r.sizes.queries} judged queries${r.sizes.queries < r.sizes.full_queries ? ` (of ${r.sizes.full_queries})` : ''}, ${r.sizes.judgements} judgements`)
  lines.push(`Service: ${r.service}`)
  const s = r.settings as Record<string, any>
  lines.push(`Settings: embedding ${s.embedding_model}; chunking ${s.chunking.strategy} ${s.chunking.chunk_size}/${s.chunking.chunk_overlap} (min ${s.chunking.min_chunk_chars} chars); dedup ${s.dedup_enabled ? 'on' : 'off'}; hybrid alpha ${s.hybrid_alpha}, in-KB k ${s.kb_rrf_k || s.rrf_k}, rrf_k ${s.rrf_k}; top_k ${s.top_k}${s.kbs > 1 ? `; corpus spread over ${s.kbs} KBs, searched together` : ''}; no reranking`)
  const c = r.ingest.counts
  if (r.ingest.seconds !== null) lines.push(`Ingest: ${r.ingest.seconds} s (${r.ingest.docs_per_s} docs/s); indexed ${c.indexed ?? 0}, failed ${c.failed ?? 0}, outdated ${c.outdated ?? 0}, refused ${r.ingest.refused.length}; judged documents not indexed: ${r.ingest.unreachable_judged}`)
  for (const f of r.ingest.failed.slice(0, 5)) lines.push(`  failed ${f.corpus_id ?? f.source}${f.judged ? ' (judged)' : ''}: ${f.last_error}`)
  lines.push('')
  lines.push('| mode | options | nDCG@10 | recall@100 | MRR@10 | ms/query |')
  lines.push('|---|---|---:|---:|---:|---:|')
  const describe = (m: ModeResult) => {
    const o = m.options as { mode: string; hybrid?: { alpha?: number } }
    return o.mode === 'similarity' ? 'similarity' : `hybrid, alpha ${o.hybrid?.alpha ?? s.hybrid_alpha}`
  }
  for (const m of r.modes) lines.push(`| ${m.mode} | ${describe(m)} | ${m.ndcg_at_10.toFixed(4)} | ${m.recall_at_100.toFixed(4)} | ${m.mrr_at_10.toFixed(4)} | ${m.mean_latency_ms} |`)
  for (const t of r.targets) lines.push(`Target ${t.name}: ${t.met ? 'met' : 'MISSED'}, ${t.detail}`)
  return lines.join('\n')
}
