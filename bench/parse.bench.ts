// PDF parsing throughput: the parse task through the compute pool with 1 and 2 workers, against pdf.js called
// directly in the main thread the way unpdf sets it up (the same pdf.js build the parser uses), on the same
// generated multi-page PDFs. Targets: 1 worker >= 1x the direct call, 2 workers >= 1.8x.
// Beside them, for reading the ratios:
// - our parser called directly in the main thread, set up as in a pool thread (pdf.js's own inflate instead of
//   DecompressionStream, the in-thread port): the same work without the pool, so pool / this is the pool's own
//   cost (1 worker) and its scaling (2 workers), apart from how our parser drives pdf.js;
// - the direct loop in 1 and 2 plain worker threads (no pool) running for a set time, which shows how far this
//   machine lets one and two threads of this work go.
//   npx tsx bench/parse.bench.ts [--quick]
import os from 'node:os'
import { pathToFileURL } from 'node:url'
import { Worker } from 'node:worker_threads'
import { createComputePool } from '../compute/pool.ts'
import type { ComputePool } from '../compute/pool.ts'
import { makePdf, proseLines } from '../test/fixtures/make-pdf.ts'
import { directPdfjs } from './lib/pdfjs-direct.ts'
import { parseDocument } from '../compute/parse/index.ts'

export interface ParseBenchResult {
  machine: { cpu: string; cores: number; node: string; loadavgBefore: number[]; loadavgAfter: number[] }
  sizes: { pdfs: number; pagesPerPdf: number; linesPerPage: number; totalPages: number; bytesPerPdf: number; rounds: number; warmups: number; settleMs: number; sampleSeconds: number }
  /** Median over the rounds, and the best round (the least disturbed by other load on the machine); each round parses for `sizes.sampleSeconds`. */
  pagesPerSec: { direct: number; ours: number; pool1: number; pool2: number }
  bestPagesPerSec: { direct: number; ours: number; pool1: number; pool2: number }
  /** CPU time of the whole process (all threads) per page, median: the pool's overhead independent of load. */
  cpuMsPerPage: { direct: number; ours: number; pool1: number; pool2: number }
  /** Against the direct call (the targets), and against our parser called in the main thread (no target). */
  ratio: { pool1VsDirect: number; pool2VsDirect: number; oursVsDirect: number; pool1VsOurs: number; pool2VsOurs: number }
  bestRatio: { pool1VsDirect: number; pool2VsDirect: number }
  targets: { pool1VsDirect: number; pool2VsDirect: number }
  /** Targets met by the median ratios. */
  met: boolean
  /**
   * The direct loop in plain worker threads, no pool, each running for `seconds` after its warm-up: pages/s of
   * 1 thread and of 2 at once, 2 threads against 1, and 2 threads against the direct call in the main thread.
   */
  plainThreads: { seconds: number; one: number; two: number; twoVsOne: number; twoVsDirect: number }
}

/** The direct loop in `threads` plain worker threads at once, for `seconds` each after `warmups` passes: summed pages/s. */
async function plainThreads(pdfs: Uint8Array[], threads: number, warmups: number, seconds: number): Promise<number> {
  const workers = Array.from({ length: threads }, () => new Worker(new URL('./lib/pdfjs-thread.mjs', import.meta.url), { execArgv: [], workerData: { pdfs, warmups, seconds } }))
  try {
    const next = (w: Worker) => new Promise<{ ready?: true; pagesPerSec?: number }>((resolve, reject) => {
      w.once('message', resolve)
      w.once('error', reject)
    })
    await Promise.all(workers.map(next))
    const rates = workers.map(next)
    for (const w of workers) w.postMessage('go')
    return (await Promise.all(rates)).reduce((n, m) => n + (m.pagesPerSec ?? 0), 0)
  } finally {
    await Promise.all(workers.map((w) => w.terminate()))
  }
}

/**
 * Our parser in this thread, set up as compute/worker.mjs sets up a pool thread (no DecompressionStream, so
 * pdf.js inflates with its own code).
 */
async function oursDirect(pdfs: readonly Uint8Array[], first = 0): Promise<number> {
  const saved = Object.getOwnPropertyDescriptor(globalThis, 'DecompressionStream')
  delete (globalThis as { DecompressionStream?: unknown }).DecompressionStream
  try {
    let pages = 0
    for (const [i, bytes] of pdfs.entries()) pages += (await parseDocument({ bytes, filename: `bench-${first + i}.pdf`, policy: 'balanced' })).pages.length
    return pages
  } finally {
    if (saved) Object.defineProperty(globalThis, 'DecompressionStream', saved)
  }
}

/** Ours: each PDF submitted to the pool, bytes moved into the worker. */
async function viaPool(pool: ComputePool, pdfs: readonly Uint8Array[], first = 0): Promise<number> {
  const docs = await Promise.all(
    pdfs.map((b, i) => {
      const bytes = b.slice()
      return pool.run('parse', { bytes, filename: `bench-${first + i}.pdf`, policy: 'balanced', parserPlugins: [] }, { transfer: [bytes] })
    }),
  )
  return docs.reduce((n, d) => n + d.pages.length, 0)
}

interface Sample {
  pagesPerSec: number
  cpuMsPerPage: number
}

/**
 * One sample: `lanes` loops, each parsing one PDF after another (`parse` takes one PDF and returns its pages)
 * until `seconds` have passed; pages of every finished PDF over the time until the last one finished. A pool
 * gets two lanes per worker, so a worker never waits for its next document, as under a stream of uploads.
 * Each sample starts on a quiet process: the run before it leaves garbage that V8 collects on background
 * threads, which on a 2-core machine takes a core from whichever run comes next.
 */
async function sustained(pdfs: readonly Uint8Array[], lanes: number, seconds: number, settleMs: number, parse: (pdf: Uint8Array, i: number) => Promise<number>): Promise<Sample> {
  await new Promise((resolve) => setTimeout(resolve, settleMs))
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  const until = t0 + seconds * 1000
  let pages = 0
  let next = 0
  let failed = false
  const lane = async () => {
    while (!failed && performance.now() < until) {
      const i = next++ % pdfs.length
      try {
        const n = await parse(pdfs[i], i) // not `pages += await ...`: that reads `pages` before the await, losing other lanes' pages
        pages += n
      } catch (err) {
        failed = true // the other lanes stop at their next document
        throw err
      }
    }
  }
  await Promise.all(Array.from({ length: lanes }, lane))
  const wall = performance.now() - t0
  const cpu = process.cpuUsage(cpu0)
  return { pagesPerSec: pages / (wall / 1000), cpuMsPerPage: (cpu.user + cpu.system) / 1000 / pages }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d

export async function run(opts: { quick: boolean; pdfs?: number; pagesPerPdf?: number; rounds?: number; warmups?: number; settleMs?: number; sampleSeconds?: number }): Promise<ParseBenchResult> {
  const loadavgBefore = os.loadavg().map((l) => round(l))
  const pdfCount = opts.pdfs ?? (opts.quick ? 4 : 8)
  const pagesPerPdf = opts.pagesPerPdf ?? (opts.quick ? 15 : 30)
  const linesPerPage = 40
  const rounds = opts.rounds ?? (opts.quick ? 3 : 5)
  const settleMs = opts.settleMs ?? 300
  const sampleSeconds = opts.sampleSeconds ?? (opts.quick ? 1 : 3)
  // pdf.js is a large body of code that V8 keeps optimising for several passes (one pass left the direct call
  // at ~150 pages/s where six reach ~230 on this machine), and every pool worker warms up on its own share.
  const warmups = opts.warmups ?? (opts.quick ? 4 : 6)
  const pdfs: Uint8Array[] = []
  for (let d = 0; d < pdfCount; d++) {
    pdfs.push(await makePdf({ title: `Bench ${d}`, pages: Array.from({ length: pagesPerPdf }, (_, p) => proseLines(d * pagesPerPdf + p, linesPerPage)) }))
  }

  const pool1 = createComputePool({ maxThreads: 1, minThreads: 1 })
  const pool2 = createComputePool({ maxThreads: 2, minThreads: 2 })
  try {
    // Warm-up: starts the workers, loads pdf.js everywhere, lets the JIT settle in every thread.
    for (let w = 0; w < warmups; w++) {
      await directPdfjs(pdfs)
      await oursDirect(pdfs)
      await viaPool(pool1, pdfs)
      await viaPool(pool2, pdfs)
    }

    const samples: Record<'direct' | 'ours' | 'pool1' | 'pool2', Sample[]> = { direct: [], ours: [], pool1: [], pool2: [] }
    const sample = (lanes: number, parse: (pdf: Uint8Array, i: number) => Promise<number>) => sustained(pdfs, lanes, sampleSeconds, settleMs, parse)
    // Alternating rounds, so that load from elsewhere on the machine falls on all four alike.
    for (let r = 0; r < rounds; r++) {
      samples.direct.push(await sample(1, (pdf) => directPdfjs([pdf])))
      samples.ours.push(await sample(1, (pdf, i) => oursDirect([pdf], i)))
      samples.pool1.push(await sample(2, (pdf, i) => viaPool(pool1, [pdf], i)))
      samples.pool2.push(await sample(4, (pdf, i) => viaPool(pool2, [pdf], i)))
    }
    const pick = (f: (xs: number[]) => number, key: keyof Sample, d = 1) => ({
      direct: round(f(samples.direct.map((x) => x[key])), d),
      ours: round(f(samples.ours.map((x) => x[key])), d),
      pool1: round(f(samples.pool1.map((x) => x[key])), d),
      pool2: round(f(samples.pool2.map((x) => x[key])), d),
    })
    const pagesPerSec = pick(median, 'pagesPerSec')
    const bestPagesPerSec = pick((xs) => Math.max(...xs), 'pagesPerSec')
    const ratio = {
      pool1VsDirect: round(pagesPerSec.pool1 / pagesPerSec.direct),
      pool2VsDirect: round(pagesPerSec.pool2 / pagesPerSec.direct),
      oursVsDirect: round(pagesPerSec.ours / pagesPerSec.direct),
      pool1VsOurs: round(pagesPerSec.pool1 / pagesPerSec.ours),
      pool2VsOurs: round(pagesPerSec.pool2 / pagesPerSec.ours),
    }
    const bestRatio = { pool1VsDirect: round(bestPagesPerSec.pool1 / bestPagesPerSec.direct), pool2VsDirect: round(bestPagesPerSec.pool2 / bestPagesPerSec.direct) }
    const targets = { pool1VsDirect: 1.0, pool2VsDirect: 1.8 }
    const seconds = opts.quick ? 3 : 8
    const one = round(await plainThreads(pdfs, 1, warmups, seconds), 1)
    const two = round(await plainThreads(pdfs, 2, warmups, seconds), 1)
    return {
      machine: { cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.availableParallelism(), node: process.version, loadavgBefore, loadavgAfter: os.loadavg().map((l) => round(l)) },
      sizes: { pdfs: pdfCount, pagesPerPdf, linesPerPage, totalPages: pdfCount * pagesPerPdf, bytesPerPdf: Math.round(pdfs.reduce((n, b) => n + b.length, 0) / pdfCount), rounds, warmups, settleMs, sampleSeconds },
      pagesPerSec,
      bestPagesPerSec,
      cpuMsPerPage: pick(median, 'cpuMsPerPage', 2),
      ratio,
      bestRatio,
      targets,
      met: ratio.pool1VsDirect >= targets.pool1VsDirect && ratio.pool2VsDirect >= targets.pool2VsDirect,
      plainThreads: { seconds, one, two, twoVsOne: round(two / one), twoVsDirect: round(two / pagesPerSec.direct) },
    }
  } finally {
    await Promise.all([pool1.close(), pool2.close()])
  }
}

function print(r: ParseBenchResult): void {
  console.log(`machine: ${r.machine.cpu}, ${r.machine.cores} cores, Node ${r.machine.node}, load average ${r.machine.loadavgBefore.join(' ')} before, ${r.machine.loadavgAfter.join(' ')} after`)
  console.log(`sizes:   ${r.sizes.pdfs} PDFs x ${r.sizes.pagesPerPdf} pages x ${r.sizes.linesPerPage} lines (${r.sizes.totalPages} pages, ~${Math.round(r.sizes.bytesPerPdf / 1024)} KiB per PDF), ${r.sizes.warmups} warm-up passes, ${r.sizes.rounds} alternating rounds of ${r.sizes.sampleSeconds} s per case, each after a ${r.sizes.settleMs} ms pause`)
  const row = (name: string, k: 'direct' | 'ours' | 'pool1' | 'pool2', ratio?: number, best?: number, target?: number) =>
    console.log(`${name.padEnd(28)} ${String(r.pagesPerSec[k]).padStart(7)} pages/s median, ${String(r.bestPagesPerSec[k]).padStart(7)} best, ${r.cpuMsPerPage[k]} CPU ms/page${ratio === undefined ? '' : `  ratio ${ratio}x median, ${best}x best (target ${target}x)`}`)
  row('direct pdf.js, main thread', 'direct')
  row('our parser, main thread', 'ours')
  row('pool, 1 worker', 'pool1', r.ratio.pool1VsDirect, r.bestRatio.pool1VsDirect, r.targets.pool1VsDirect)
  row('pool, 2 workers', 'pool2', r.ratio.pool2VsDirect, r.bestRatio.pool2VsDirect, r.targets.pool2VsDirect)
  console.log(`our parser in the main thread (set up as in a pool thread) ${r.ratio.oursVsDirect}x of the direct call; the pool against it: 1 worker ${r.ratio.pool1VsOurs}x, 2 workers ${r.ratio.pool2VsOurs}x`)
  const p = r.plainThreads
  console.log(`plain worker threads, direct loop, ${p.seconds} s each (no pool; what the machine allows): 1 thread ${p.one} pages/s, 2 threads ${p.two} pages/s = ${p.twoVsOne}x of 1 thread, ${p.twoVsDirect}x of the direct call`)
  console.log(`targets ${r.met ? 'met' : 'NOT met'} (median ratios)`)
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await run({ quick: process.argv.includes('--quick') })
  print(result)
  console.log(JSON.stringify(result))
}
