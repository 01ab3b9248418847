// `npm test`: runs every test/**/*.test.ts but the browser and cluster suites (steps of their own in .ci/run), each file in
// a process of its own, as many at a time as the machine has cores less one (at least 2; QUARRY_TEST_CONCURRENCY sets
// another count: 3 on 2 cores took longer, 19.7 against 19.0 minutes), the longest first. The runner
// starts the files in this order as its slots free up, so a long file started last would run alone at the end while the
// other slot idles: in name order (what `node --test` does with the files it is given, whatever their order) a run ended on
// the security suites (fuzz-ent 108 s). LONGEST is what one run measured (seconds of each file's suites, AMD EPYC, 2
// cores, 2026-11-29); a file not named there follows in name order. The list only orders: a file missing from it changes
// nothing else (test/readme/test-run.test.ts checks that every file it names exists).
//
//   node --import ./test/scratch.mjs --import tsx test/run.mjs [files...]   (npm test adds --openssl-legacy-provider)
//   node test/run.mjs --list                                               prints the files in order
//
// Given files, it runs those instead. The processes it starts get its own Node options (the --import hooks among them).
import { readdirSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { join, resolve } from 'node:path'
import { run } from 'node:test'
import { spec, tap } from 'node:test/reporters'
import { fileURLToPath } from 'node:url'

const LONGEST = [
  'crash/crash-loop', // 112 s
  'security/fuzz-ent', // 103
  'plugins/docs-stop', // 91
  'plugins/transfer/transfer', // 80
  'plugins/docs', // 69
  'plugins/dedup-siblings', // 67 (2026-11-30, with the test of documents uploaded together)
  'adapters/metadata', // 57
  'cli/migrate', // 56
  'security/fuzz', // 54
  'plugins/pgvector', // 53
  'plugins/authz/matrix', // 50
  'plugins/reconcile', // 50
  'plugins/transfer/hold', // 49
  'plugins/authz/roles', // 49
  'plugins/docs-faults', // 48
  'cli/commands', // 45
  'plugins/search', // 44
  'cli/ingest', // 38
  'security/hostile-files', // 38
  'readme/walkthrough', // 35
  'plugins/connectors/processes', // 35
].map((name) => `test/${name}.test.ts`)

const root = fileURLToPath(new URL('..', import.meta.url))
const skipped = new Set(['test/cluster', 'test/plugins/console'])

/** Every *.test.ts under dir (a path relative to the root), in name order. */
function testFiles(dir) {
  const found = []
  for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`
    if (entry.isDirectory()) {
      if (!skipped.has(path)) found.push(...testFiles(path))
    } else if (entry.name.endsWith('.test.ts')) found.push(path)
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
  // node --test's default reporters: spec on a terminal, TAP otherwise.
  stream.compose(process.stdout.isTTY ? new spec() : tap).pipe(process.stdout)
}
