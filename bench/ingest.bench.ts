// Ingest throughput, end to end on the embedded default with the built-in embedder: generated documents
// (mixed md, html, txt, pdf; 5-20 KB) uploaded over HTTP, processed by the built-in worker through the compute
// pool, until every one is indexed. Reports documents/s, MB/s, time per stage and peak RSS. Baseline in the same
// run: the same steps (parse, chunk, sparse, embed, index) called directly, one document at a time, on the main
// thread, with no HTTP, storage or dedup: what a straightforward script would do.
//
// Every service run is a process of its own: its peak RSS is then its own high-water mark, not the baseline's
// or an earlier run's. That process holds the service and the bench's timing loop only: the documents are
// generated and written to files by the parent, and the baseline's modules (parsers, embedder, vector store on
// the main thread) are imported by the parent alone; in the child they took 66 MB of RSS that no service holds.
// The growth series (full mode: 1,000 and 5,000 documents; any sizes with `--sizes=1000,5000` or the `sizes`
// option) reports documents/s and peak RSS at each size.
// Targets (issue 40, bench/report/targets.ts): documents/s at least 1.2x the script's at 1,000 documents; CPU per
// document, all threads, at most 1.3x the script's; peak RSS at 5,000 documents at most 450 MB, and at most 25 %
// above the peak at 1,000.
// `--service-only --documents=N [--profile=<file>]` runs the service part alone (in a child, as above) and prints
// its JSON; with --profile it also writes a .cpuprofile of the service's main thread over the measured run.
import { spawn } from 'node:child_process'
import { closeSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import type { ComputePoolStats } from '../compute/pool.ts'
import { fixMallocThresholds, serviceEnv, serviceExecArgv } from '../kernel/allocator.ts'
import { createApp, type App } from '../kernel/app.ts'
import { resolveSettings } from '../kernel/config/load.ts'
import { createLogger } from '../kernel/log.ts'
import { defaultPlugins } from '../kernel/plugins.ts'
import { STAGES, type PipelineMetrics } from '../plugins/docs/pipeline.ts'
import type { GeneratedDoc } from './lib/corpus.ts'
import { cpuMsOfStat, highWaterBytes, highWaterSinceStart, machine, median, resetHighWater, round } from './lib/machine.ts'
import { progress } from './lib/progress.ts'
import { startUploadClient } from './lib/upload-client.ts'
import { computePoolNote } from './report/normalise.ts'
import { TARGETS as ALL_TARGETS } from './report/targets.ts'
import { profileWhile } from './search/profile.ts'

export interface IngestBenchOptions {
  quick: boolean
  /** Documents to ingest (default 1000; CI smoke runs use a few dozen). */
  documents?: number
  concurrency?: number
  /** Sizes of the growth series (documents/s and peak RSS at each); default none in quick mode, 1,000 and 5,000 in full. */
  sizes?: number[]
}

/** Issue 40: each against a ceiling measured in the same run (the script), or a bound on memory. */
export const TARGETS = ALL_TARGETS.ingest

const DIMS = 1024

/**
 * A thread's CPU time so far (user + system, ms), its name (kernel/thread-name.mjs names our worker threads), and
 * how long it has waited, runnable, for a core (ms; /proc's schedstat, absent where the kernel keeps none).
 */
interface ThreadCpu {
  ms: number
  name: string
  waitMs?: number
}

/**
 * CPU time of each thread of this process so far by thread id, from /proc (Linux; empty elsewhere). Differences
 * between two readings say which threads did a run's work: the main thread (id = pid), the compute pool's workers
 * (named quarry-compute), the PGlite thread (quarry-metadata) and the rest: V8's helper threads (garbage
 * collection, compiling) and libuv's pool (fsync), all named "node".
 */
function threadCpuMs(): Map<number, ThreadCpu> {
  const out = new Map<number, ThreadCpu>()
  let tids: string[]
  try {
    tids = readdirSync('/proc/self/task')
  } catch {
    return out
  }
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8')
      // The name is between the first '(' and the last ')' (it may hold spaces).
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
      const t: ThreadCpu = { ms: cpuMsOfStat(stat), name }
      // schedstat: ns on a core, ns waiting on a run queue, timeslices.
      const wait = Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[1])
      if (Number.isFinite(wait)) t.waitMs = wait / 1e6
      out.set(Number(tid), t)
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return out
}

/**
 * What creating a file costs in `dir`, µs of wall time per file (openSync 'wx' and closeSync on this thread; the median
 * of rounds of 16). The service creates a file per document (its original, in the object store's temporary folder),
 * and the cost follows the file system's state, not the service: on ext4 without a journal (this machine's disk) the
 * inode allocator reads past every inode freed shortly before, one by one (fs/ext4/ialloc.c, recently_deleted). The
 * files stay, in a folder of their own, until remove(): deleted before the run, they would slow its own creations.
 */
export function fileCreateProbe(dir: string, files = 64): { us: number; remove(): void } {
  mkdirSync(dir, { recursive: true })
  const probe = mkdtempSync(join(dir, 'create-probe-'))
  const remove = () => rmSync(probe, { recursive: true, force: true })
  const rounds: number[] = []
  try {
    for (let from = 0; from < files; from += 16) {
      const to = Math.min(files, from + 16)
      const t0 = performance.now()
      for (let i = from; i < to; i++) closeSync(openSync(join(probe, String(i)), 'wx'))
      rounds.push(((performance.now() - t0) * 1000) / (to - from))
    }
  } catch (err) {
    remove()
    throw err
  }
  return { us: median(rounds), remove }
}

/**
 * Where the memory is at a moment, MB: the process's RSS, the main thread's JavaScript heap (reserved), memory outside
 * it that the main thread's objects hold (external, of which ArrayBuffers: the vector store's arrays), and from
 * /proc/self/smaps_rollup the anonymous memory (every heap: V8's of each thread, glibc's for usearch's graph and
 * PGlite's WebAssembly memory) and the file-backed pages (code, mapped files). The peak of a run is read here.
 */
function memoryAt(): Record<string, number> {
  const m = process.memoryUsage()
  const mb = (n: number) => round(n / 2 ** 20, 1)
  const out: Record<string, number> = { rss: mb(m.rss), heap_total: mb(m.heapTotal), external: mb(m.external), array_buffers: mb(m.arrayBuffers) }
  try {
    const rollup = readFileSync('/proc/self/smaps_rollup', 'utf8')
    for (const [key, name] of [['Anonymous', 'anonymous'], ['Rss', 'rss_smaps']] as const) {
      const kb = Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(rollup)?.[1])
      if (Number.isFinite(kb)) out[name] = round(kb / 1024, 1)
    }
    if (out.rss_smaps !== undefined && out.anonymous !== undefined) out.file_backed = round(out.rss_smaps - out.anonymous, 1)
    delete out.rss_smaps
  } catch {
    // Not Linux: the process's own figures only.
  }
  return out
}

/**
 * How far RSS rises between two breakdowns of it (memoryAt), bytes. The peak itself is read every turn (cheap); the
 * breakdown reads /proc/self/smaps_rollup, about 4 ms of the measured process's main thread each time: read at every
 * rise, as before, that was 455 ms of the main thread over 1,000 documents (its CPU profile, 4.1 %), counted as the
 * service's CPU per document. The breakdown shown is then that of a moment within this much of the peak.
 */
const BREAKDOWN_STEP = 16 * 2 ** 20

/**
 * The highest RSS over a window, from its making until max() is read: the kernel's high-water mark, reset when it is
 * made (Linux), so that a rise shorter than a sampling period, or one while the main thread cannot sample (a garbage
 * collection's pause, when V8 maps the pages it moves survivors to before it frees the old ones), counts; elsewhere
 * the highest of sample()'s readings (call it every turn). Its breakdown is that of a sampled moment within
 * BREAKDOWN_STEP of the highest sample.
 */
class RssPeak {
  /** Whether max() is the kernel's high-water mark over the window. */
  readonly exact = resetHighWater()
  /** The highest RSS sample() read. */
  sampled = process.memoryUsage.rss()
  atPeak = memoryAt()
  private brokenDownAt = this.sampled

  sample(): void {
    const rss = process.memoryUsage.rss()
    if (rss > this.sampled) this.sampled = rss
    if (rss < this.brokenDownAt + BREAKDOWN_STEP) return
    this.brokenDownAt = rss
    this.atPeak = memoryAt()
  }

  /** The window's highest RSS, bytes: read it when the window ends, before another RssPeak resets the mark. */
  max(): number {
    return Math.max(this.sampled, (this.exact ? highWaterBytes() : null) ?? 0)
  }
}

/** CPU ms per document by role: the main thread, the compute pool's workers (each), the metadata thread, the rest. */
export interface ThreadShares {
  main: number
  compute: number[]
  metadata: number
  /** V8's helper threads and libuv's pool (and any other unnamed thread), busiest first. */
  other: number[]
  /** Every thread but the main one, busiest first (the form of earlier reports). */
  others: number[]
  /**
   * Time spent runnable but waiting for a core, ms per document, by the same roles (the compute pool's workers and the
   * rest summed); null where /proc has no schedstat. Work that waits here on a 2-core machine is work the cores had no
   * room for: less CPU elsewhere, not more threads, makes it run sooner.
   */
  waiting: { main: number; compute: number; metadata: number; other: number } | null
}

/** Per-thread CPU between two readings, ms per document, by the threads' roles (their names). */
export function threadShares(before: Map<number, ThreadCpu>, after: Map<number, ThreadCpu>, docs: number, mainTid = process.pid): ThreadShares {
  const out: ThreadShares = { main: 0, compute: [], metadata: 0, other: [], others: [], waiting: { main: 0, compute: 0, metadata: 0, other: 0 } }
  for (const [tid, t] of after) {
    const ms = (t.ms - (before.get(tid)?.ms ?? 0)) / docs
    const role = tid === mainTid ? 'main' : t.name === 'quarry-compute' ? 'compute' : t.name === 'quarry-metadata' ? 'metadata' : 'other'
    if (t.waitMs === undefined) out.waiting = null
    else if (out.waiting !== null) out.waiting[role] += (t.waitMs - (before.get(tid)?.waitMs ?? 0)) / docs
    if (tid === mainTid) {
      out.main = ms
      continue
    }
    if (ms <= 0) continue
    out.others.push(ms)
    if (t.name === 'quarry-compute') out.compute.push(ms)
    else if (t.name === 'quarry-metadata') out.metadata += ms
    else out.other.push(ms)
  }
  for (const list of [out.compute, out.other, out.others]) list.sort((a, b) => b - a)
  return out
}

/**
 * Uploads every file of `files` (a folder the parent wrote) into KB `kb` with the client process: creates the KB
 * and starts the client, then returns the timed part, which resolves with the seconds from the first upload until
 * every one is done.
 */
async function ingestRun(app: App, base: string, kb: string, files: string, concurrency: number, bar?: ReturnType<typeof progress>) {
  const count = readdirSync(files).length
  await fetch(`${base}/api/kb`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ kb_id: kb }) })
  const docsPlugin = app.use<{ metrics: PipelineMetrics; pool: { stats(): ComputePoolStats }; service: { repo: { counts(kb: string): Promise<Map<string, Record<string, number>>> } } }>('docs')
  // A copy, stage times included: the pipeline adds to its counters in place.
  const before = { ...docsPlugin.metrics, stageMs: { ...docsPlugin.metrics.stageMs } }
  // The clock starts once the client has its files in memory and is told to go. Its last line is its own CPU.
  const client = await startUploadClient(base, kb, files, concurrency)
  return async () => {
    const started = performance.now()
    const cpu0 = process.cpuUsage()
    const threads0 = threadCpuMs()
    // How long the main thread was held at a time: what a search arriving during the ingest waits on top of its own work.
    const delay = monitorEventLoopDelay({ resolution: 1 })
    delay.enable()
    const tasks0 = docsPlugin.pool.stats().completed
    client.go()
    let finished = 0
    let counts: Record<string, number> = {}
    // The peak over this run only (RssPeak resets the kernel's mark), sampled every turn as well for its breakdown.
    const peak = new RssPeak()
    while (finished < count) {
      await new Promise((r) => setTimeout(r, 100))
      peak.sample()
      if (client.code !== null && client.code !== 0) throw new Error(`the upload client failed (exit ${client.code})`)
      // The pipeline's own counters each turn (no query); the database confirms once they say done, so the
      // benchmark does not load the metadata store it measures.
      const m = docsPlugin.metrics
      const done = m.indexed + m.failed + m.skipped - (before.indexed + before.failed + before.skipped)
      bar?.set(Math.min(count, done))
      if (done < count) continue
      counts = (await docsPlugin.service.repo.counts(kb)).get(kb) ?? {}
      finished = (counts.indexed ?? 0) + (counts.failed ?? 0) + (counts.outdated ?? 0)
    }
    const seconds = (performance.now() - started) / 1000
    delay.disable()
    const eventLoopDelayMs = { p99: delay.percentile(99) / 1e6, max: delay.max / 1e6 }
    // Every thread of this process (HTTP, pipeline, pool workers, metadata thread, GC): a figure the load of other
    // processes on the machine changes much less than the wall time.
    const cpu = process.cpuUsage(cpu0)
    const cpuMs = (cpu.user + cpu.system) / 1000
    const threads = threadShares(threads0, threadCpuMs(), count)
    const pool = docsPlugin.pool.stats()
    const tasks = pool.completed - tasks0
    // Its waits and runs since the start (the warm-up's few tasks included), its workers' CPU over this run.
    const computePool = { tasks, waitMsP50: pool.waitMs.p50, runMsP50: pool.runMs.p50, workerCpuMsPerTask: tasks > 0 ? (threads.compute.reduce((a, b) => a + b, 0) * count) / tasks : 0 }
    const clientReport = await client.result()
    const m = docsPlugin.metrics
    const metrics: PipelineMetrics = {
      documents: m.documents - before.documents, indexed: m.indexed - before.indexed, failed: m.failed - before.failed,
      skipped: m.skipped - before.skipped, bytes: m.bytes - before.bytes, chunks: m.chunks - before.chunks,
      stageMs: Object.fromEntries(STAGES.map((s) => [s, m.stageMs[s] - before.stageMs[s]])) as PipelineMetrics['stageMs'],
    }
    return { seconds, cpuMs, threads, computePool, uploadClientCpuMs: clientReport.cpu_ms, counts, metrics, rssMaxMb: peak.max() / 2 ** 20, rssSampledMb: peak.sampled / 2 ** 20, rssExact: peak.exact, atPeak: peak.atPeak, eventLoopDelayMs }
  }
}

/**
 * The service, warmed first with the files of `warm` in a KB of their own (its pool workers' JIT, the lazy parser
 * imports; their graph finished), then timed on the files of `files` from the first upload until every one is done.
 */
async function service(files: string, warm: string | undefined, concurrency: number, profileFile?: string) {
  const dir = mkdtempSync(join(tmpdir(), 'quarry-ingest-'))
  const { settings } = resolveSettings({ data_dir: join(dir, 'data'), logging: { level: 'ERROR' }, embedding: { vector_size: DIMS } })
  const app = await createApp({ settings, plugins: defaultPlugins(), log: createLogger('ERROR') })
  try {
    const port = await app.listen(0, '127.0.0.1')
    const base = `http://127.0.0.1:${port}`
    const store = app.adapters.vectors as { whenIndexed?(kb: string): Promise<void> }
    if (warm !== undefined) {
      await (await ingestRun(app, base, 'warm', warm, concurrency))()
      await store.whenIndexed?.('warm')
    }
    // Beside the object store's own temporary files, after the warm-up: the files stay until the run is over.
    const createProbe = fileCreateProbe(join(settings.data_dir, 'objects', 'tmp'))
    const count = readdirSync(files).length
    const bar = progress('ingest', count, { unit: 'docs' })
    // The client started before the timed part (and its profile) begins.
    const measured = await ingestRun(app, base, 'bench', files, concurrency, bar)
    let run: Awaited<ReturnType<typeof measured>>
    if (profileFile === undefined) run = await measured()
    else {
      // The main thread, sampled over the measured run only (not the warm-up).
      const { value, profile } = await profileWhile(measured)
      writeFileSync(profileFile, JSON.stringify(profile))
      run = value
    }
    const { seconds, cpuMs, threads, computePool, uploadClientCpuMs, counts, metrics, rssMaxMb, rssSampledMb, rssExact, atPeak, eventLoopDelayMs } = run
    bar.done()
    // Every document is indexed (searchable: rows not yet in the HNSW graph are scanned exactly). The graph
    // trails a bulk ingest and catches up once writes pause: how long that takes is reported beside it.
    // Sampled on through the catch-up: the graph grows there (about 2 KB a chunk at 1,024 dimensions).
    const graphStarted = performance.now()
    const catchUp = new RssPeak()
    const sampler = setInterval(() => catchUp.sample(), 100)
    try {
      await store.whenIndexed?.('bench')
    } finally {
      clearInterval(sampler)
    }
    const graphCatchUp = (performance.now() - graphStarted) / 1000
    createProbe.remove()
    catchUp.sample()
    const peakRssMb = Math.max(rssMaxMb, catchUp.max() / 2 ** 20)
    const sampledPeakRssMb = Math.max(rssSampledMb, catchUp.sampled / 2 ** 20)
    const memoryAtPeak = rssSampledMb >= catchUp.sampled / 2 ** 20 ? atPeak : catchUp.atPeak
    // Since the process started, through the windows' resets (Linux); elsewhere getrusage's maxRSS, never reset there.
    const highWaterRssMb = Math.max((highWaterSinceStart() ?? process.resourceUsage().maxRSS * 1024) / 2 ** 20, peakRssMb)
    return { seconds, cpuMs, threads, computePool, uploadClientCpuMs, fileCreateUs: createProbe.us, graphCatchUp, counts, metrics, peakRssMb, peakRssExact: rssExact && catchUp.exact, sampledPeakRssMb, ingestPeakRssMb: rssMaxMb, highWaterRssMb, memoryAtPeak, eventLoopDelayMs }
  } finally {
    await app.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

type ServiceResult = Awaited<ReturnType<typeof service>>

/**
 * service() over `docs` (the first 20, under other names, warm it up) in a process of its own; peak RSS is that
 * process's. The files are written here, so that the child holds the service and nothing of the generator.
 */
async function serviceInChild(docs: GeneratedDoc[], concurrency: number, profileFile?: string): Promise<ServiceResult> {
  const dir = mkdtempSync(join(tmpdir(), 'quarry-ingest-files-'))
  try {
    const files = join(dir, 'bench')
    const warm = join(dir, 'warm')
    mkdirSync(files)
    mkdirSync(warm)
    for (const d of docs) writeFileSync(join(files, d.name), d.bytes)
    // Other file names than the measured ones: the warm-up must not make them re-uploads.
    for (const d of docs.slice(0, 20)) writeFileSync(join(warm, `warm-${d.name}`), d.bytes)
    // Compiled, as npm start runs the service (kernel/run.mjs): no tsx in its process.
    const args = [...serviceExecArgv(), 'kernel/run.mjs', 'bench/ingest.bench.ts', '--service-child', `--files=${files}`, `--warm=${warm}`, `--concurrency=${concurrency}`]
    if (profileFile !== undefined) args.push(`--profile=${profileFile}`)
    // Started as npm start starts the service: with its malloc arena setting and V8 thread count (kernel/allocator.ts).
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], env: serviceEnv(process.env) })
    let out = ''
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d))
    // 'close', not 'exit': its JSON may still be arriving when it exits.
    const code = await new Promise<number>((resolve) => child.once('close', (c) => resolve(c ?? 1)))
    if (code !== 0) throw new Error(`the ingest service run (${docs.length} documents) exited with code ${code}`)
    return JSON.parse(out) as ServiceResult
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

export async function baseline(docs: GeneratedDoc[]) {
  // Imported here, not at the top: the service's child process loads this file too and must not hold them.
  const [{ parseDocument }, { chunkDocument }, { encodeDocument }, { embedTexts }, { createEmbeddedVectorStore }] = await Promise.all([
    import('../compute/parse/index.ts'), import('../compute/chunk/index.ts'), import('../compute/text/sparse.ts'),
    import('../adapters/embedders/builtin.ts'), import('../adapters/vectors/embedded.ts'),
  ])
  const dir = mkdtempSync(join(tmpdir(), 'quarry-ingest-base-'))
  const store = await createEmbeddedVectorStore({ dir, dimensions: DIMS })
  await store.ensureCollection('bench', DIMS)
  const opts = { strategy: 'recursive' as const, chunk_size: 1024, chunk_overlap: 128, min_chunk_chars: 30, semantic_threshold: 0.8, code_max_chars: 1500 }
  const started = performance.now()
  const cpu0 = process.cpuUsage()
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
    const cpu = process.cpuUsage(cpu0)
    return { seconds: (performance.now() - started) / 1000, cpuMs: (cpu.user + cpu.system) / 1000 }
  } finally {
    await store.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

export async function run(opts: IngestBenchOptions = { quick: true }) {
  const count = opts.documents ?? 1000
  const concurrency = opts.concurrency ?? 8
  const sizes = opts.sizes ?? (opts.quick ? [] : [1000, 5000])
  process.stderr.write(`generating ${count} documents...\n`)
  const { generateDocuments } = await import('./lib/corpus.ts')
  const docs = await generateDocuments(count)
  const bytes = docs.reduce((n, d) => n + d.bytes.length, 0)
  // Warm-up: a few documents through both paths (JIT, pool threads, lazy parser imports).
  const warm = docs.slice(0, Math.min(20, count))
  await baseline(warm)
  // Baseline on a subset (it is sequential): long enough for a stable rate; run before and after ours.
  const subset = docs.slice(0, Math.min(count, opts.quick ? 200 : 400))
  const base1 = await baseline(subset)
  const ours = await serviceInChild(docs, concurrency)
  const base2 = await baseline(subset)
  const baseRate = subset.length / ((base1.seconds + base2.seconds) / 2)
  const rate = count / ours.seconds
  const stageTotal = STAGES.reduce((n, s) => n + ours.metrics.stageMs[s], 0)
  const cpuPerDoc = ours.cpuMs / count
  const baseCpuPerDoc = (base1.cpuMs + base2.cpuMs) / (2 * subset.length)
  const growth: Record<string, { documents_per_s: number; peak_rss_mb: number; sampled_peak_rss_mb: number; ingest_peak_rss_mb: number; high_water_rss_mb: number; graph_catch_up_s: number; event_loop_delay_max_ms: number; memory_at_peak_mb: Record<string, number> }> = {}
  for (const n of sizes) {
    const r = n === count ? ours : await serviceInChild(await generateDocuments(n), concurrency)
    growth[String(n)] = { documents_per_s: round(n / r.seconds, 1), peak_rss_mb: round(r.peakRssMb, 0), sampled_peak_rss_mb: round(r.sampledPeakRssMb, 0), ingest_peak_rss_mb: round(r.ingestPeakRssMb, 0), high_water_rss_mb: round(r.highWaterRssMb, 0), graph_catch_up_s: round(r.graphCatchUp, 2), event_loop_delay_max_ms: round(r.eventLoopDelayMs.max, 1), memory_at_peak_mb: r.memoryAtPeak }
  }
  const rssFrom = growth[String(TARGETS.rss_growth_from_documents)]?.peak_rss_mb
  const rssAt = growth[String(TARGETS.peak_rss_at_documents)]?.peak_rss_mb
  const ratio = round(rate / baseRate, 2)
  const cpuFactor = round(cpuPerDoc / baseCpuPerDoc, 2)
  const growthPct = rssFrom !== undefined && rssAt !== undefined ? round((rssAt / rssFrom - 1) * 100, 1) : null
  return {
    name: 'ingest',
    machine: machine(),
    sizes: { documents: count, megabytes: round(bytes / 2 ** 20), mix: 'md, html, txt, pdf in turn; 5-20 KB', upload_concurrency: concurrency, vector_size: DIMS, baseline_documents: subset.length, growth_sizes: sizes },
    target: `documents/s >= ${TARGETS.documents_per_s_vs_script_min}x the sequential script's at ${TARGETS.documents_per_s_at_documents} documents; CPU ms per document (all threads) <= ${TARGETS.cpu_per_document_vs_script_max}x the script's; peak RSS <= ${TARGETS.peak_rss_mb_max} MB at ${TARGETS.peak_rss_at_documents} documents, growth from ${TARGETS.rss_growth_from_documents} <= ${TARGETS.rss_growth_max_pct} %`,
    targets: TARGETS,
    // Each target judged where this run measured its figure (null: not at the size the target is defined at).
    judged: {
      documents_per_s_vs_script: count === TARGETS.documents_per_s_at_documents ? ratio >= TARGETS.documents_per_s_vs_script_min : null,
      cpu_per_document_vs_script: cpuFactor <= TARGETS.cpu_per_document_vs_script_max,
      peak_rss_at_documents: rssAt === undefined ? null : rssAt <= TARGETS.peak_rss_mb_max,
      peak_rss_growth: growthPct === null ? null : growthPct <= TARGETS.rss_growth_max_pct,
    },
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
      // From the first upload until the graph caught up (the target's figure): the kernel's high-water mark over
      // that time where it can be reset (Linux; peak_rss_exact), else the highest of samples every 100 ms.
      peak_rss_mb: round(ours.peakRssMb, 0),
      peak_rss_exact: ours.peakRssExact,
      // The highest of the samples every 100 ms over the same time: the moment memory_at_peak_mb describes.
      sampled_peak_rss_mb: round(ours.sampledPeakRssMb, 0),
      // Where it was at that sample (memoryAt).
      memory_at_peak_mb: ours.memoryAtPeak,
      // The same as peak_rss_mb until the last document was indexed, before the graph's catch-up.
      ingest_peak_rss_mb: round(ours.ingestPeakRssMb, 0),
      // The process's highest RSS, its start included (a new data folder's initdb runs in a child process, not here).
      high_water_rss_mb: round(ours.highWaterRssMb, 0),
      // The main thread's event-loop delay while ingesting, ms: p99 and the longest single stall.
      event_loop_delay_ms: { p99: round(ours.eventLoopDelayMs.p99, 1), max: round(ours.eventLoopDelayMs.max, 1) },
      baseline_documents_per_s: round(baseRate, 1),
      // CPU time per document over all threads (the upload client's own process not counted), ours vs the script's.
      cpu_ms_per_doc: round(cpuPerDoc, 2),
      baseline_cpu_ms_per_doc: round(baseCpuPerDoc, 2),
      // Ours over the script's (the target is at most 1.3).
      cpu_per_doc_vs_baseline: cpuFactor,
      // The service's CPU ms per document by thread (Linux): the main thread, the compute pool's workers, the PGlite
      // thread, the rest (V8's helper threads, libuv's pool) busiest first; and every thread but the main one.
      cpu_ms_per_doc_by_thread: {
        main: round(ours.threads.main, 2),
        compute: ours.threads.compute.map((x) => round(x, 2)),
        metadata: round(ours.threads.metadata, 2),
        other: round(ours.threads.other.reduce((a, b) => a + b, 0), 2),
        others: ours.threads.others.slice(0, 8).map((x) => round(x, 2)),
      },
      // The same threads' time runnable but waiting for a core, ms per document (Linux schedstat; null elsewhere).
      run_queue_wait_ms_per_doc_by_thread: ours.threads.waiting === null ? null : {
        main: round(ours.threads.waiting.main, 2),
        compute: round(ours.threads.waiting.compute, 2),
        metadata: round(ours.threads.waiting.metadata, 2),
        other: round(ours.threads.waiting.other, 2),
      },
      ratio_vs_baseline: ratio,
      // The compute pool, the stage documents queue for (one worker on 2 cores): its tasks per document, the median time
      // a task waited for a worker and took there (from the hand-off to the answer, waits for a core included; since the
      // start, the warm-up's tasks among them), and its workers' CPU per task over the run.
      compute_pool: {
        tasks_per_doc: round(ours.computePool.tasks / count, 2),
        wait_ms_p50: round(ours.computePool.waitMsP50, 2),
        run_ms_p50: round(ours.computePool.runMsP50, 2),
        worker_cpu_ms_per_task: round(ours.computePool.workerCpuMsPerTask, 2),
      },
      // Creating a file in the service's data folder, µs (fileCreateProbe): the service creates one per document, and
      // on some file systems the cost swings with what was deleted nearby, moving the time per document with it.
      file_create_us: round(ours.fileCreateUs, 1),
      // The upload client, a process of its own on the same cores (the script has none): its CPU per document, and the
      // cores the service and the client kept busy together over the measured run (of machine().cores).
      upload_client_cpu_ms_per_doc: round(ours.uploadClientCpuMs / count, 2),
      cores_busy: round((ours.cpuMs + ours.uploadClientCpuMs) / 1000 / ours.seconds, 2),
      // Documents/s and peak RSS (each size in a process of its own) as the batch grows.
      growth,
      // Peak RSS at 5,000 documents over the peak at 1,000, minus 1, percent (null without both sizes in the series).
      peak_rss_growth_pct: growthPct,
    },
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const flag = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1]
  const n = flag('documents')
  if (process.argv.includes('--service-child')) {
    // One service run for serviceInChild: JSON on stdout, progress on stderr. glibc's mmap and trim thresholds as kernel/main.ts sets them.
    fixMallocThresholds()
    const result = await service(flag('files')!, flag('warm'), Number(flag('concurrency') ?? 8), flag('profile'))
    process.stdout.write(JSON.stringify(result))
  } else if (process.argv.includes('--service-only')) {
    const { generateDocuments } = await import('./lib/corpus.ts')
    const result = await serviceInChild(await generateDocuments(Number(n ?? 1000)), Number(flag('concurrency') ?? 8), flag('profile'))
    process.stdout.write(JSON.stringify(result))
  } else {
    const sizes = flag('sizes')?.split(',').map(Number)
    const result = await run({ quick: !process.argv.includes('--full'), documents: n ? Number(n) : undefined, sizes })
    console.log(JSON.stringify(result, null, 2))
    // The targets on stderr, so that stdout stays one JSON document.
    const { machine: m, results: r, judged: j } = result
    const verdict = (x: boolean | null) => (x === null ? 'not judged at this size' : x ? 'met' : 'NOT met')
    const say = (line: string) => process.stderr.write(`${line}\n`)
    say(`machine: ${m.cpu} x${m.cores}, ${m.memory_gb} GB, node ${m.node}, load average ${JSON.stringify(m.load_average)}; ${result.sizes.documents} documents`)
    say(`documents/s ${r.documents_per_s} vs the script's ${r.baseline_documents_per_s}: ${r.ratio_vs_baseline}x (target >= ${TARGETS.documents_per_s_vs_script_min}x at ${TARGETS.documents_per_s_at_documents} documents: ${verdict(j.documents_per_s_vs_script)})`)
    say(`CPU ms per document, all threads ${r.cpu_ms_per_doc} vs the script's ${r.baseline_cpu_ms_per_doc}: ${r.cpu_per_doc_vs_baseline}x (target <= ${TARGETS.cpu_per_document_vs_script_max}x: ${verdict(j.cpu_per_document_vs_script)})`)
    const t = r.cpu_ms_per_doc_by_thread
    say(`  by thread: main ${t.main}, compute pool ${t.compute.join(' + ') || '-'}, metadata (PGlite) ${t.metadata}, V8 helpers and libuv ${t.other}`)
    const w = r.run_queue_wait_ms_per_doc_by_thread
    if (w !== null) say(`  waiting for a core, ms per document: main ${w.main}, compute pool ${w.compute}, metadata ${w.metadata}, V8 helpers and libuv ${w.other}`)
    say(`  the upload client's process on the same cores ${r.upload_client_cpu_ms_per_doc}; cores busy, service and client: ${r.cores_busy} of ${m.cores}`)
    say(`  ${computePoolNote(r.compute_pool)}`)
    say(`  creating a file in the data folder: ${r.file_create_us} µs (the service creates one per document; the file system's state sets it)`)
    const at = r.growth[String(TARGETS.peak_rss_at_documents)]?.peak_rss_mb
    say(`peak RSS ${r.peak_rss_mb} MB (${r.peak_rss_exact ? `the kernel's high-water mark; sampled every 100 ms ${r.sampled_peak_rss_mb} MB` : 'sampled every 100 ms'}); at ${TARGETS.peak_rss_at_documents} documents ${at ?? '-'} MB (target <= ${TARGETS.peak_rss_mb_max} MB: ${verdict(j.peak_rss_at_documents)}); growth from ${TARGETS.rss_growth_from_documents} ${r.peak_rss_growth_pct ?? '-'} % (target <= ${TARGETS.rss_growth_max_pct} %: ${verdict(j.peak_rss_growth)})`)
  }
}
