// Ingest throughput, end to end on the embedded default with the built-in embedder: generated documents
// (mixed md, html, txt, pdf; 5-20 KB) uploaded over HTTP, processed by the built-in worker through the compute
// pool, until every one is indexed. Reports documents/s, MB/s, time per stage and peak RSS. Baseline in the same
// run: the same steps (parse, chunk, sparse, embed, index) called directly, one document at a time, on the main
// thread, with no HTTP, storage or dedup: what a straightforward script would do.
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createApp, type App } from '../kernel/app.ts'
import { resolveSettings } from '../kernel/config/load.ts'
import { createLogger } from '../kernel/log.ts'
import { defaultPlugins } from '../kernel/plugins.ts'
import { parseDocument } from '../compute/parse/index.ts'
import { chunkDocument } from '../compute/chunk/index.ts'
import { encodeDocument } from '../compute/text/sparse.ts'
import { embedTexts } from '../adapters/embedders/builtin.ts'
import { createEmbeddedVectorStore } from '../adapters/vectors/embedded.ts'
import { STAGES, type PipelineMetrics } from '../plugins/docs/pipeline.ts'
import { generateDocuments, type GeneratedDoc } from './lib/corpus.ts'
import { machine, round } from './lib/machine.ts'
import { progress } from './lib/progress.ts'

export interface IngestBenchOptions {
  quick: boolean
  /** Documents to ingest (default 1000; CI smoke runs use a few dozen). */
  documents?: number
  concurrency?: number
}

const DIMS = 1024

/** Uploads `docs` with the client process into KB `kb`; resolves with the seconds from the first upload until every one is done. */
async function ingestRun(app: App, base: string, kb: string, docs: GeneratedDoc[], concurrency: number, dir: string, bar?: ReturnType<typeof progress>) {
  const files = join(dir, `files-${kb}`)
  mkdirSync(files)
  for (const d of docs) writeFileSync(join(files, d.name), d.bytes)
  await fetch(`${base}/api/kb`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ kb_id: kb }) })
  const docsPlugin = app.use<{ metrics: PipelineMetrics; service: { repo: { counts(kb: string): Promise<Map<string, Record<string, number>>> } } }>('docs')
  // A copy, stage times included: the pipeline adds to its counters in place.
  const before = { ...docsPlugin.metrics, stageMs: { ...docsPlugin.metrics.stageMs } }
  const client = spawn(process.execPath, ['--import', 'tsx', 'bench/lib/upload-client.ts', base, kb, files, String(concurrency)], { stdio: ['pipe', 'pipe', 'inherit'] })
  const clientDone = new Promise<number>((resolve) => client.once('exit', (code) => resolve(code ?? 1)))
  let clientCode: number | null = null
  void clientDone.then((c) => (clientCode = c))
  // The clock starts once the client has its files in memory and is told to go.
  await new Promise<void>((resolve, reject) => {
    client.stdout!.once('data', () => resolve())
    void clientDone.then((c) => reject(new Error(`the upload client exited (code ${c}) before it was ready`)))
  })
  const started = performance.now()
  client.stdin!.end('go\n')
  let finished = 0
  let counts: Record<string, number> = {}
  while (finished < docs.length) {
    await new Promise((r) => setTimeout(r, 100))
    if (clientCode !== null && clientCode !== 0) throw new Error(`the upload client failed (exit ${clientCode})`)
    // The pipeline's own counters each turn (no query); the database confirms once they say done, so the
    // benchmark does not load the metadata store it measures.
    const m = docsPlugin.metrics
    const done = m.indexed + m.failed + m.skipped - (before.indexed + before.failed + before.skipped)
    bar?.set(Math.min(docs.length, done))
    if (done < docs.length) continue
    counts = (await docsPlugin.service.repo.counts(kb)).get(kb) ?? {}
    finished = (counts.indexed ?? 0) + (counts.failed ?? 0) + (counts.outdated ?? 0)
  }
  const seconds = (performance.now() - started) / 1000
  await clientDone
  const m = docsPlugin.metrics
  const metrics: PipelineMetrics = {
    documents: m.documents - before.documents, indexed: m.indexed - before.indexed, failed: m.failed - before.failed,
    skipped: m.skipped - before.skipped, bytes: m.bytes - before.bytes, chunks: m.chunks - before.chunks,
    stageMs: Object.fromEntries(STAGES.map((s) => [s, m.stageMs[s] - before.stageMs[s]])) as PipelineMetrics['stageMs'],
  }
  return { seconds, counts, metrics }
}

/**
 * The service, warmed first with `warm` documents in a KB of their own (its pool workers' JIT, the lazy parser
 * imports; their graph finished), then timed on `docs` from the first upload until every one is done.
 */
export async function service(docs: GeneratedDoc[], concurrency: number, warm: GeneratedDoc[] = []) {
  const dir = mkdtempSync(join(tmpdir(), 'quarry-ingest-'))
  const { settings } = resolveSettings({ data_dir: join(dir, 'data'), logging: { level: 'ERROR' }, embedding: { vector_size: DIMS } })
  const app = await createApp({ settings, plugins: defaultPlugins(), log: createLogger('ERROR') })
  try {
    const port = await app.listen(0, '127.0.0.1')
    const base = `http://127.0.0.1:${port}`
    const store = app.adapters.vectors as { whenIndexed?(kb: string): Promise<void> }
    if (warm.length > 0) {
      // Other file names than the measured ones: the warm-up must not make them re-uploads.
      await ingestRun(app, base, 'warm', warm.map((d) => ({ ...d, name: `warm-${d.name}` })), concurrency, dir)
      await store.whenIndexed?.('warm')
    }
    const bar = progress('ingest', docs.length, { unit: 'docs' })
    const { seconds, counts, metrics } = await ingestRun(app, base, 'bench', docs, concurrency, dir, bar)
    bar.done()
    // Every document is indexed (searchable: rows not yet in the HNSW graph are scanned exactly). The graph
    // trails a bulk ingest and catches up once writes pause: how long that takes is reported beside it.
    const graphStarted = performance.now()
    await store.whenIndexed?.('bench')
    const graphCatchUp = (performance.now() - graphStarted) / 1000
    return { seconds, graphCatchUp, counts, metrics, peakRssMb: process.resourceUsage().maxRSS / 1024 }
  } finally {
    await app.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

export async function baseline(docs: GeneratedDoc[]) {
  const dir = mkdtempSync(join(tmpdir(), 'quarry-ingest-base-'))
  const store = await createEmbeddedVectorStore({ dir, dimensions: DIMS })
  await store.ensureCollection('bench', DIMS)
  const opts = { strategy: 'recursive' as const, chunk_size: 1024, chunk_overlap: 128, min_chunk_chars: 30, semantic_threshold: 0.8, code_max_chars: 1500 }
  const started = performance.now()
  try {
    for (const [n, d] of docs.entries()) {
      const parsed = await parseDocument({ bytes: d.bytes.slice(), filename: d.name, policy: 'lenient' })
      const { chunks } = chunkDocument(parsed.pages, opts)
      const dense = embedTexts(chunks.map((c) => c.text), DIMS)
      await store.upsert('bench', chunks.map((c, i) => ({
        dense: dense.subarray(i * DIMS, (i + 1) * DIMS),
        sparse: encodeDocument(c.text),
        payload: { chunk_id: `${n}-${i}`, kb_id: 'bench', doc_id: String(n), chunk_index: i, title: parsed.title, source_type: 's3', source: d.name, doc_type: parsed.doc_type, page_num: c.page_num, page_label: c.page_label, text: c.text, start: c.start, end: c.end, parent_chunk_id: null, updated_at: '' },
      })))
    }
    return { seconds: (performance.now() - started) / 1000 }
  } finally {
    await store.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

export async function run(opts: IngestBenchOptions = { quick: true }) {
  const count = opts.documents ?? 1000
  const concurrency = opts.concurrency ?? 8
  process.stderr.write(`generating ${count} documents...\n`)
  const docs = await generateDocuments(count)
  const bytes = docs.reduce((n, d) => n + d.bytes.length, 0)
  // Warm-up: a few documents through both paths (JIT, pool threads, lazy parser imports).
  const warm = docs.slice(0, Math.min(20, count))
  await baseline(warm)
  // Baseline on a subset (it is sequential): long enough for a stable rate.
  const subset = docs.slice(0, Math.min(count, opts.quick ? 200 : 400))
  const base1 = await baseline(subset)
  const ours = await service(docs, concurrency, warm)
  const base2 = await baseline(subset)
  const baseRate = subset.length / ((base1.seconds + base2.seconds) / 2)
  const rate = count / ours.seconds
  const stageTotal = STAGES.reduce((n, s) => n + ours.metrics.stageMs[s], 0)
  return {
    name: 'ingest',
    machine: machine(),
    sizes: { documents: count, megabytes: round(bytes / 2 ** 20), mix: 'md, html, txt, pdf in turn; 5-20 KB', upload_concurrency: concurrency, vector_size: DIMS, baseline_documents: subset.length },
    target: 'at least 50 documents/s',
    results: {
      documents_per_s: round(rate, 1),
      mb_per_s: round(bytes / 2 ** 20 / ours.seconds, 2),
      seconds: round(ours.seconds, 2),
      // After the last document was indexed, until the HNSW graph held every vector (searches scan the rest).
      graph_catch_up_s: round(ours.graphCatchUp, 2),
      outcome: { indexed: ours.counts.indexed, failed: ours.counts.failed, outdated: ours.counts.outdated },
      chunks: ours.metrics.chunks,
      // Summed over concurrent documents: shares show where the work goes, not wall time.
      stage_ms_per_doc: Object.fromEntries(STAGES.map((s) => [s, round(ours.metrics.stageMs[s] / ours.metrics.documents, 2)])),
      stage_share: Object.fromEntries(STAGES.map((s) => [s, round(ours.metrics.stageMs[s] / stageTotal, 3)])),
      peak_rss_mb: round(ours.peakRssMb, 0),
      baseline_documents_per_s: round(baseRate, 1),
      ratio_vs_baseline: round(rate / baseRate, 2),
    },
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const n = process.argv.find((a) => a.startsWith('--documents='))
  const result = await run({ quick: !process.argv.includes('--full'), documents: n ? Number(n.split('=')[1]) : undefined })
  console.log(JSON.stringify(result, null, 2))
}
