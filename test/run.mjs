// `npm test`: runs every test/**/*.test.ts but the browser, cluster and crash-loop suites (steps of their own in .ci/run), each file in
// a process of its own, as many at a time as the machine has cores less one (at least 2; QUARRY_TEST_CONCURRENCY sets
// another count: 3 on 2 cores took longer, 19.7 against 19.0 minutes), the longest first. The runner
// starts the files in this order as its slots free up, so a long file started last would run alone at the end while the
// other slot idles: in name order (what `node --test` does with the files it is given, whatever their order) a run ended on
// the security suites (fuzz-ent 108 s). LONGEST is what one run measured (QUARRY_TEST_TIMES below; Intel Xeon, 2 cores,
// 2026-12-02: 1,062 s of suites, 591 s in all); a file not named there follows in name order. The list only orders: a
// file missing from it changes nothing else (test/readme/test-run.test.ts checks that every file it names exists).
//
//   node --import ./test/scratch.mjs --import tsx test/run.mjs [files...]   (npm test adds --openssl-legacy-provider)
//   node test/run.mjs --list                                               prints the files in order
//
// Given files, it runs those instead. The processes it starts get its own Node options (the --import hooks among them).
// QUARRY_TEST_TIMES=<file> writes, when the run ends, each file's seconds (its top-level tests' durations summed,
// the longest first) as JSON to that file: what LONGEST below is made from. A test is counted under the file that
// defines it, as node:test reports it: a suite a shared module defines (test/adapters/vectors.contract.ts) is
// counted under that module, once for all the files that run it.
import { readdirSync, writeFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { join, relative, resolve } from 'node:path'
import { run } from 'node:test'
import { spec, tap } from 'node:test/reporters'
import { fileURLToPath } from 'node:url'

const LONGEST = [
  'security/fuzz-ent', // 58.5
  'plugins/docs-stop', // 46.5
  'plugins/transfer/transfer', // 34.2
  'plugins/dedup-siblings', // 31.8
  'plugins/docs', // 31.3
  'plugins/search', // 30.8
  'cli/migrate', // 30.6
  'plugins/authz/roles', // 29.9
  'plugins/authz/matrix', // 28.9
  'security/fuzz', // 28.8
  'plugins/docs-faults', // 25.4
  'plugins/pgvector', // 24.2
  'plugins/reconcile', // 23.4
  'plugins/connectors/sources', // 23.4
  'adapters/metadata', // 23.1
  'cli/commands', // 22.5
  'plugins/dedup-index', // 22
  'security/hostile-files', // 19.4
  'plugins/connectors/connectors', // 17.4
  'cli/ingest', // 17.3
  'security/ssrf', // 17.1
  'readme/walkthrough', // 17.1
  'plugins/transfer/hold', // 17
].map((name) => `test/${name}.test.ts`)

const root = fileURLToPath(new URL('..', import.meta.url))
/**
 * Suites with a step of their own in .ci/run and a script of their own (package.json): the operator console in a browser,
 * the cluster fault suite, and the crash loop (test/crash/crash-loop.test.ts: 137 s of the 1,300 s npm test took on an AMD
 * EPYC family 26, 2 cores, 2026-12-02, over the 20 minutes npm test must fit in).
 */
const skipped = new Set(['test/cluster', 'test/plugins/console', 'test/crash/crash-loop.test.ts'])

/** Every *.test.ts under dir (a path relative to the root), in name order. */
function testFiles(dir) {
  const found = []
  for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`
    if (skipped.has(path)) continue
    if (entry.isDirectory()) found.push(...testFiles(path))
    else if (entry.name.endsWith('.test.ts')) found.push(path)
  }
  return found.sort()
}

const all = testFiles('test')
const rank = new Map(LONGEST.map((file, i) => [file, i]))
const ordered = [...all.filter((f) => rank.has(f)).sort((a, b) => rank.get(a) - rank.get(b)), ...all.filter((f) => !rank.has(f))]

const args = process.argv.slice(2)
if (args[0] === '--list') {
  process.stdout.write(`${ordered.join('\n')}\n`)
} else {
  const files = args.length > 0 ? args.map((f) => resolve(f)) : ordered.map((f) => join(root, f))
  const concurrency = Number(process.env.QUARRY_TEST_CONCURRENCY) || Math.max(2, availableParallelism() - 1)
  const stream = run({ files, concurrency })
  // A failed test, or a file that could not run; not a todo or skipped one (as node --test counts them).
  stream.on('test:fail', (data) => {
    if (data.todo === undefined && data.skip === undefined) process.exitCode = 1
  })
  const timesFile = process.env.QUARRY_TEST_TIMES
  if (timesFile) {
    const seconds = new Map()
    const count = (data) => {
      if (data.nesting !== 0 || !data.file) return
      const file = relative(root, data.file)
      seconds.set(file, (seconds.get(file) ?? 0) + data.details.duration_ms / 1000)
    }
    stream.on('test:pass', count)
    stream.on('test:fail', count)
    process.on('exit', () => {
      const sorted = [...seconds].sort((a, b) => b[1] - a[1]).map(([file, s]) => [file, Math.round(s * 10) / 10])
      writeFileSync(timesFile, `${JSON.stringify(Object.fromEntries(sorted), null, 1)}\n`)
    })
  }
  // node --test's default reporters: spec on a terminal, TAP otherwise.
  stream.compose(process.stdout.isTTY ? new spec() : tap).pipe(process.stdout)
}
