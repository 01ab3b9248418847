// PDF parsing throughput: the parse task through the compute pool with 1 and 2 workers, against pdf.js called
// directly in the main thread (the same pdf.js build the parser uses, via unpdf), on the same generated
// multi-page PDFs. Targets: 1 worker >= 1x the direct call, 2 workers >= 1.8x.
// Beside them, for reading the ratios: the same direct loop in 1 and 2 plain worker threads (no pool) running
// for a set time, which shows how far this machine lets one and two threads of this work go.
//   npx tsx bench/parse.bench.ts [--quick]
import os from 'node:os'
import { pathToFileURL } from 'node:url'
import { Worker } from 'node:worker_threads'
import { createComputePool } from '../compute/pool.ts'
import type { ComputePool } from '../compute/pool.ts'
import { makePdf, proseLines } from '../test/fixtures/make-pdf.ts'
import { directPdfjs } from './lib/pdfjs-direct.ts'

export interface ParseBenchResult {
  machine: { cpu: string; cores: number; node: string; loadavgBefore: number[]; loadavgAfter: number[] }
  sizes: { pdfs: number; pagesPerPdf: number; linesPerPage: number; totalPages: number; bytesPerPdf: number; rounds: number; warmups: number }
  /** Median over the rounds, and the best round (the least disturbed by other load on the machine). */
  pagesPerSec: { direct: number; pool1: number; pool2: number }
  bestPagesPerSec: { direct: number; pool1: number; pool2: number }
  /** CPU time of the whole process (all threads) per page, median: the pool's overhead independent of load. */
  cpuMsPerPage: { direct: number; pool1: number; pool2: number }
  ratio: { pool1VsDirect: number; pool2VsDirect: number }
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

/** Ours: every PDF submitted to the pool at once, bytes moved into the workers. */
async function viaPool(pool: ComputePool, pdfs: Uint8Array[]): Promise<number> {
  const docs = await Promise.all(
    pdfs.map((b, i) => {
      const bytes = b.slice()
      return pool.run('parse', { bytes, filename: `bench-${i}.pdf`, policy: 'balanced', parserPlugins: [] }, { transfer: [bytes] })
    }),
  )
  return docs.reduce((n, d) => n + d.pages.length, 0)
}

interface Sample {
  pagesPerSec: number
  cpuMsPerPage: number
}

async function timed(fn: () => Promise<number>): Promise<Sample> {
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  const pages = await fn()
  const wall = performance.now() - t0
  const cpu = process.cpuUsage(cpu0)
  return { pagesPerSec: pages / (wall / 1000), cpuMsPerPage: (cpu.user + cpu.system) / 1000 / pages }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d

export async function run(opts: { quick: boolean; pdfs?: number; pagesPerPdf?: number; rounds?: number; warmups?: number }): Promise<ParseBenchResult> {
  const loadavgBefore = os.loadavg().map((l) => round(l))
  const pdfCount = opts.pdfs ?? (opts.quick ? 4 : 8)
  const pagesPerPdf = opts.pagesPerPdf ?? (opts.quick ? 15 : 30)
  const linesPerPage = 40
  const rounds = opts.rounds ?? (opts.quick ? 3 : 5)
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
      await viaPool(pool1, pdfs)
      await viaPool(pool2, pdfs)
    }

    const samples: Record<'direct' | 'pool1' | 'pool2', Sample[]> = { direct: [], pool1: [], pool2: [] }
    // Alternating rounds, so that load from elsewhere on the machine falls on all three alike.
    for (let r = 0; r < rounds; r++) {
      samples.direct.push(await timed(() => directPdfjs(pdfs)))
      samples.pool1.push(await timed(() => viaPool(pool1, pdfs)))
      samples.pool2.push(await timed(() => viaPool(pool2, pdfs)))
    }
    const pick = (f: (xs: number[]) => number, key: keyof Sample, d = 1) => ({
      direct: round(f(samples.direct.map((x) => x[key])), d),
      pool1: round(f(samples.pool1.map((x) => x[key])), d),
      pool2: round(f(samples.pool2.map((x) => x[key])), d),
    })
    const pagesPerSec = pick(median, 'pagesPerSec')
    const bestPagesPerSec = pick((xs) => Math.max(...xs), 'pagesPerSec')
    const ratio = { pool1VsDirect: round(pagesPerSec.pool1 / pagesPerSec.direct), pool2VsDirect: round(pagesPerSec.pool2 / pagesPerSec.direct) }
    const bestRatio = { pool1VsDirect: round(bestPagesPerSec.pool1 / bestPagesPerSec.direct), pool2VsDirect: round(bestPagesPerSec.pool2 / bestPagesPerSec.direct) }
    const targets = { pool1VsDirect: 1.0, pool2VsDirect: 1.8 }
    const seconds = opts.quick ? 3 : 8
    const one = round(await plainThreads(pdfs, 1, warmups, seconds), 1)
    const two = round(await plainThreads(pdfs, 2, warmups, seconds), 1)
    return {
      machine: { cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.availableParallelism(), node: process.version, loadavgBefore, loadavgAfter: os.loadavg().map((l) => round(l)) },
      sizes: { pdfs: pdfCount, pagesPerPdf, linesPerPage, totalPages: pdfCount * pagesPerPdf, bytesPerPdf: Math.round(pdfs.reduce((n, b) => n + b.length, 0) / pdfCount), rounds, warmups },
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
  console.log(`sizes:   ${r.sizes.pdfs} PDFs x ${r.sizes.pagesPerPdf} pages x ${r.sizes.linesPerPage} lines (${r.sizes.totalPages} pages, ~${Math.round(r.sizes.bytesPerPdf / 1024)} KiB per PDF), ${r.sizes.warmups} warm-up passes, ${r.sizes.rounds} alternating rounds`)
  const row = (name: string, k: 'direct' | 'pool1' | 'pool2', ratio?: number, best?: number, target?: number) =>
    console.log(`${name.padEnd(28)} ${String(r.pagesPerSec[k]).padStart(7)} pages/s median, ${String(r.bestPagesPerSec[k]).padStart(7)} best, ${r.cpuMsPerPage[k]} CPU ms/page${ratio === undefined ? '' : `  ratio ${ratio}x median, ${best}x best (target ${target}x)`}`)
  row('direct pdf.js, main thread', 'direct')
  row('pool, 1 worker', 'pool1', r.ratio.pool1VsDirect, r.bestRatio.pool1VsDirect, r.targets.pool1VsDirect)
  row('pool, 2 workers', 'pool2', r.ratio.pool2VsDirect, r.bestRatio.pool2VsDirect, r.targets.pool2VsDirect)
  const p = r.plainThreads
  console.log(`plain worker threads, direct loop, ${p.seconds} s each (no pool; what the machine allows): 1 thread ${p.one} pages/s, 2 threads ${p.two} pages/s = ${p.twoVsOne}x of 1 thread, ${p.twoVsDirect}x of the direct call`)
  console.log(`targets ${r.met ? 'met' : 'NOT met'} (median ratios)`)
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await run({ quick: process.argv.includes('--quick') })
  print(result)
  console.log(JSON.stringify(result))
}
