// The benchmark suite in one command: every benchmark (or those named), each in its own process, one after
// another; their results normalised, written as JSON and as a Markdown report with SVG charts, and compared
// with an earlier run on request.
//
//   npm run bench                         quick sizes (the whole suite in minutes)
//   npm run bench -- --full               full sizes
//   npm run bench -- --smoke              tiny sizes where the benchmark allows it (CI: fails if one throws)
//   npm run bench -- search ingest        only these
//   npm run bench -- --compare bench/results/<earlier>.json [--margin 10]
//   npm run bench -- --compare <earlier>.json --with <later>.json     compare two files, run nothing
//   npm run bench -- --render <result>.json     rewrite its report, re-reading the raw results (after a reader changed)
//
// Exit status: 0; 1 when --compare finds a tracked metric worse by more than the margin; 2 when a benchmark
// failed (threw, or ran past its time limit); 64 on a usage error.
import { fork, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { basename, dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import type { ChildAnswer, ChildRequest } from './lib/bench-child.ts'
import { machine } from './lib/machine.ts'
import { SUITE, suiteNames, type SuiteEntry } from './lib/suite.ts'
import { compareSuites, DEFAULT_MARGIN, formatCompareTable } from './report/compare.ts'
import { metText, renderReport, targetText } from './report/markdown.ts'
import { normalise, type Normalised } from './report/normalise.ts'
import { formatValue } from './report/svg.ts'
import type { NormalisedBench, SuiteMode, SuiteResult } from './report/types.ts'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const EXIT_REGRESSION = 1
const EXIT_FAILED = 2
const EXIT_USAGE = 64
/** Per benchmark, in seconds: generous, since the machine may be busy with other work. */
const TIME_LIMIT: Record<SuiteMode, number> = { smoke: 300, quick: 900, full: 5400 }

const USAGE = `usage: npm run bench -- [names...] [--smoke | --quick | --full] [--compare <earlier.json> [--with <later.json>]]
                        [--margin <percent>] [--out <dir>] [--timeout <seconds>] [--keep-data] [--list] [--render <result.json>]
benchmarks: ${suiteNames().join(', ')}`

function usage(message: string): never {
  process.stderr.write(`${message}\n${USAGE}\n`)
  process.exit(EXIT_USAGE)
}

const say = (s: string) => process.stderr.write(`${s}\n`)

function gitRevision(): string | null {
  // Read-only, and without optional locks: other work may be going on in this tree.
  const r = spawnSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, GIT_OPTIONAL_LOCKS: '0' } })
  return r.status === 0 ? r.stdout.trim() : null
}

function readSuite(file: string): SuiteResult {
  let data: SuiteResult
  try {
    data = JSON.parse(readFileSync(file, 'utf8')) as SuiteResult
  } catch (err) {
    usage(`cannot read ${file}: ${(err as Error).message}`)
  }
  if (data.format !== 1 || !Array.isArray(data.benchmarks)) usage(`${file} is not a result of bench/run.ts (format 1)`)
  return data
}

interface ChildOutcome {
  result?: unknown
  error?: string
}

/** Runs one benchmark in a child process (its own process group, so a time limit ends its helpers too). */
function runChild(file: string, options: Record<string, unknown>, limitSeconds: number): Promise<ChildOutcome> {
  return new Promise((resolveRun) => {
    const child = fork(join(ROOT, 'bench/lib/bench-child.ts'), [], {
      cwd: ROOT, execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'], detached: true,
    })
    let answer: ChildAnswer | undefined
    let timedOut = false
    const killGroup = (signal: NodeJS.Signals) => {
      try {
        process.kill(-child.pid!, signal)
      } catch {
        // already gone
      }
    }
    const timer = setTimeout(() => {
      timedOut = true
      killGroup('SIGTERM')
      setTimeout(() => killGroup('SIGKILL'), 5000).unref()
    }, limitSeconds * 1000)
    // Ctrl-C reaches only the foreground group, which the child has left: pass it on.
    const onSignal = () => {
      killGroup('SIGTERM')
      process.exit(130)
    }
    process.once('SIGINT', onSignal)
    process.once('SIGTERM', onSignal)
    child.on('message', (m: ChildAnswer) => (answer = m))
    child.once('exit', (code, signal) => {
      clearTimeout(timer)
      process.off('SIGINT', onSignal)
      process.off('SIGTERM', onSignal)
      // Helpers it started and did not stop (servers, load clients) go with it.
      killGroup('SIGKILL')
      if (answer?.type === 'result') resolveRun({ result: answer.result })
      else if (answer?.type === 'error') resolveRun({ error: answer.message })
      else if (timedOut) resolveRun({ error: `ran past the time limit of ${limitSeconds} s and was stopped` })
      else resolveRun({ error: `the benchmark process exited (${signal ?? `code ${code}`}) without a result` })
    })
    child.send({ file: join(ROOT, 'bench', file), options } satisfies ChildRequest)
  })
}

async function runOne(entry: SuiteEntry, mode: SuiteMode, limit: number, extra: Record<string, unknown>): Promise<{ bench: NormalisedBench; raw: unknown }> {
  const options = { ...entry.options(mode), ...extra }
  const base = { name: entry.name, options, sizes: {}, comparisons: [], series: [], notes: [] as string[] }
  if (!existsSync(join(ROOT, 'bench', entry.file))) {
    return { bench: { ...base, status: 'skipped', error: `bench/${entry.file} does not exist yet`, seconds: 0 }, raw: null }
  }
  const before = loadavg().map((x) => +x.toFixed(2))
  const t0 = performance.now()
  const outcome = await runChild(entry.file, options, limit)
  const seconds = +((performance.now() - t0) / 1000).toFixed(1)
  const load_average = { before, after: loadavg().map((x) => +x.toFixed(2)) }
  if (outcome.error !== undefined) return { bench: { ...base, status: 'failed', error: outcome.error, seconds, load_average }, raw: null }
  try {
    const { skipped, machine: benchMachine, ...n } = readResult(entry.name, outcome.result, mode)
    const bench: NormalisedBench = { name: entry.name, status: skipped ? 'skipped' : 'ok', seconds, load_average, options, machine: benchMachine, ...n }
    if (skipped) bench.error = skipped
    return { bench, raw: outcome.result }
  } catch (err) {
    // The measurement is kept (raw) even when its reader fails on a new shape.
    return { bench: { ...base, status: 'failed', error: `reading the result: ${(err as Error).stack}`, seconds, load_average }, raw: outcome.result }
  }
}

/** A benchmark's result in the common shape, with what the smoke mode could not shrink noted. */
function readResult(name: string, raw: unknown, mode: SuiteMode): Normalised {
  const n = normalise(name, raw)
  const gap = SUITE.find((e) => e.name === name)?.smokeGap
  return mode === 'smoke' && gap ? { ...n, notes: [...n.notes, gap] } : n
}

function headline(b: NormalisedBench): string[] {
  if (b.status !== 'ok') return [`  ${b.status.toUpperCase()}: ${(b.error ?? '').split('\n')[0]}`]
  return b.comparisons.map((c) => {
    const vs = c.baseline === null ? '' : ` vs ${formatValue(c.baseline)} (${c.baseline_name ?? 'baseline'}) = ${c.ratio === null ? '-' : formatValue(c.ratio)}x`
    const met = c.met === undefined ? metText(c) : c.met ? 'met' : 'NOT met'
    const target = c.target === undefined ? '' : ` [target ${targetText(c)}: ${met}]`
    return `  ${c.metric}: ${formatValue(c.ours)} ${c.unit}${vs}${target}`
  })
}

function parse() {
  return parseArgs({
    allowPositionals: true,
    options: {
      smoke: { type: 'boolean', default: false },
      quick: { type: 'boolean', default: false },
      full: { type: 'boolean', default: false },
      compare: { type: 'string' },
      render: { type: 'string' },
      with: { type: 'string' },
      margin: { type: 'string' },
      out: { type: 'string' },
      timeout: { type: 'string' },
      'keep-data': { type: 'boolean', default: false },
      list: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  })
}

async function main(): Promise<number> {
  let args: ReturnType<typeof parse>
  try {
    args = parse()
  } catch (err) {
    usage((err as Error).message)
  }
  const v = args.values
  if (v.help) {
    process.stdout.write(`${USAGE}\n`)
    return 0
  }
  if (v.list) {
    for (const e of SUITE) process.stdout.write(`${e.name.padEnd(8)} bench/${e.file.padEnd(17)} ${e.what}\n`)
    return 0
  }
  const modes = (['smoke', 'quick', 'full'] as const).filter((m) => v[m])
  if (modes.length > 1) usage(`choose one of --smoke, --quick, --full`)
  const mode: SuiteMode = modes[0] ?? 'quick'
  let margin = DEFAULT_MARGIN
  if (v.margin !== undefined) {
    const m = Number(v.margin.replace(/%$/, ''))
    if (!(m >= 0 && m < 1000)) usage(`--margin takes a percentage, e.g. 10 (got '${v.margin}')`)
    margin = m / 100
  }
  const limit = v.timeout === undefined ? TIME_LIMIT[mode] : Number(v.timeout)
  if (!(limit > 0)) usage(`--timeout takes seconds (got '${v.timeout}')`)

  if (v.render !== undefined) {
    const file = resolve(v.render)
    const suite = readSuite(file)
    suite.benchmarks = suite.benchmarks.map((b) => {
      if (b.status !== 'ok') return b
      const { comparisons, series, sizes, notes } = readResult(b.name, suite.raw[b.name], suite.mode)
      return { ...b, comparisons, series, sizes, notes }
    })
    writeFileSync(file, `${JSON.stringify(suite, null, 2)}\n`)
    const stem = basename(file).replace(/\.json$/, '')
    for (const f of renderReport(suite, stem)) writeFileSync(join(dirname(file), f.name), f.content)
    process.stdout.write(`report: ${join(dirname(file), `${stem}.md`)}\n`)
    return 0
  }
  if (v.with !== undefined) {
    if (v.compare === undefined) usage('--with needs --compare <earlier.json>')
    const result = compareSuites(readSuite(v.compare), readSuite(v.with), margin)
    process.stdout.write(`${formatCompareTable(result)}\n`)
    return result.regressions.length > 0 ? EXIT_REGRESSION : 0
  }
  const earlier = v.compare === undefined ? undefined : readSuite(v.compare)

  const unknown = args.positionals.filter((n) => !suiteNames().includes(n))
  if (unknown.length > 0) usage(`unknown benchmark(s): ${unknown.join(', ')}`)
  const entries = args.positionals.length === 0 ? SUITE : SUITE.filter((e) => args.positionals.includes(e.name))
  const outDir = resolve(v.out ?? join(ROOT, 'bench/results'))
  mkdirSync(outDir, { recursive: true })

  const startedAt = new Date()
  const t0 = performance.now()
  const suite: SuiteResult = {
    format: 1, started_at: startedAt.toISOString(), seconds: 0, mode, machine: machine(), git_revision: gitRevision(), benchmarks: [], raw: {},
  }
  say(`quarry benchmarks, ${mode} mode: ${entries.map((e) => e.name).join(', ')}`)
  say(`machine: ${String(suite.machine.cpu)}, ${String(suite.machine.cores)} cores, Node ${String(suite.machine.node)}; load average ${JSON.stringify(suite.machine.load_average)}`)
  for (const [i, entry] of entries.entries()) {
    say(`\n[${i + 1}/${entries.length}] ${entry.name}: ${entry.what}`)
    const extra: Record<string, unknown> = {}
    // The search data takes most of that benchmark's time; --keep-data builds it once per size and reuses it.
    if (entry.name === 'search' && v['keep-data']) extra.dataDir = join(outDir, 'data', `search-${mode}`)
    const { bench, raw } = await runOne(entry, mode, limit, extra)
    suite.benchmarks.push(bench)
    suite.raw[entry.name] = raw
    say(`[${i + 1}/${entries.length}] ${entry.name}: ${bench.status} in ${bench.seconds} s`)
    for (const line of headline(bench)) say(line)
  }
  suite.seconds = +((performance.now() - t0) / 1000).toFixed(1)

  const stem = startedAt.toISOString().replace(/\.\d+Z$/, 'Z').replace(/:/g, '-') + (mode === 'quick' ? '' : `-${mode}`)
  writeFileSync(join(outDir, `${stem}.json`), `${JSON.stringify(suite, null, 2)}\n`)
  for (const f of renderReport(suite, stem)) writeFileSync(join(outDir, f.name), f.content)
  const shown = (p: string) => relative(process.cwd(), p) || p
  say(`\nwhole run: ${suite.seconds} s`)
  process.stdout.write(`results: ${shown(join(outDir, `${stem}.json`))}\nreport:  ${shown(join(outDir, `${stem}.md`))}\n`)

  let status = 0
  if (earlier) {
    const result = compareSuites(earlier, suite, margin)
    process.stdout.write(`\nchange against ${v.compare}:\n${formatCompareTable(result)}\n`)
    if (result.regressions.length > 0) status = EXIT_REGRESSION
  }
  const failed = suite.benchmarks.filter((b) => b.status === 'failed')
  const skipped = suite.benchmarks.filter((b) => b.status === 'skipped')
  if (skipped.length > 0) say(`skipped: ${skipped.map((b) => `${b.name} (${(b.error ?? '').split('\n')[0]})`).join('; ')}`)
  if (failed.length > 0) {
    say(`FAILED: ${failed.map((b) => b.name).join(', ')}`)
    status = EXIT_FAILED
  }
  return status
}

process.exitCode = await main()
