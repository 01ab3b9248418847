// The suite runner's command line, run for real: comparing two result files, usage errors, and a benchmark
// that throws (the kernel benchmark without wrk on the PATH) turning into a failed entry and exit status 2.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it, type TestContext } from 'node:test'
import { XMLValidator } from 'fast-xml-parser'
import { comparison } from '../../bench/report/normalise.ts'
import type { SuiteResult } from '../../bench/report/types.ts'

const ROOT = join(import.meta.dirname, '..', '..')

function runBench(args: string[], env: NodeJS.ProcessEnv = process.env) {
  return spawnSync(process.execPath, ['--import', 'tsx', 'bench/run.ts', ...args], { cwd: ROOT, encoding: 'utf8', env, timeout: 120_000 })
}

function tempDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'quarry-bench-run-test-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

function suiteFile(dir: string, name: string, ratioOurs: number): string {
  const s: SuiteResult = {
    format: 1, started_at: '2025-01-01T00:00:00.000Z', seconds: 1, mode: 'quick', machine: { cpu: 'cpu' }, git_revision: null, raw: {},
    benchmarks: [{ name: 'chunk', status: 'ok', seconds: 1, sizes: { rounds: 3 }, series: [], notes: [],
      comparisons: [comparison('recursive chunking MB/s', ratioOurs, 100, { unit: 'MB/s' })] }],
  }
  const file = join(dir, name)
  writeFileSync(file, JSON.stringify(s))
  return file
}

describe('bench/run.ts', () => {
  it('--compare with --with exits 1 on a regression beyond the margin, 0 within it', (t) => {
    const dir = tempDir(t)
    const before = suiteFile(dir, 'before.json', 1000)
    const after = suiteFile(dir, 'after.json', 850)
    const worse = runBench(['--compare', before, '--with', after])
    assert.equal(worse.status, 1, worse.stderr)
    assert.match(worse.stdout, /recursive chunking MB\/s.*-15\.0 %.*REGRESSED/)
    const wide = runBench(['--compare', before, '--with', after, '--margin', '20'])
    assert.equal(wide.status, 0, wide.stderr)
    assert.match(wide.stdout, /no tracked metric regressed by more than 20 %/)
    const better = runBench(['--compare', after, '--with', before])
    assert.equal(better.status, 0, better.stderr)
    assert.match(better.stdout, /improved/)
  })

  it('rejects unknown benchmarks and bad options with status 64', () => {
    const r = runBench(['no-such-bench'])
    assert.equal(r.status, 64)
    assert.match(r.stderr, /unknown benchmark\(s\): no-such-bench/)
    assert.equal(runBench(['--smoke', '--full']).status, 64)
    assert.equal(runBench(['--margin', 'lots']).status, 64)
  })

  it('records a benchmark that throws as failed, still writes the report, and exits 2', (t) => {
    const dir = tempDir(t)
    // Without wrk on the PATH the kernel benchmark throws before it starts any server.
    const r = runBench(['kernel', '--smoke', '--out', dir], { ...process.env, PATH: join(dir, 'empty-path') })
    assert.equal(r.status, 2, r.stderr)
    const files = readdirSync(dir)
    const json = files.find((f) => f.endsWith('-smoke.json'))
    assert.ok(json, `no result file in ${files.join(', ')}`)
    const s = JSON.parse(readFileSync(join(dir, json), 'utf8')) as SuiteResult
    assert.equal(s.benchmarks[0].name, 'kernel')
    assert.equal(s.benchmarks[0].status, 'failed')
    assert.match(s.benchmarks[0].error ?? '', /wrk is not installed/)
    const md = readFileSync(join(dir, json.replace(/\.json$/, '.md')), 'utf8')
    assert.match(md, /\| kernel \| failed: /)
    for (const svg of files.filter((f) => f.endsWith('.svg'))) assert.equal(XMLValidator.validate(readFileSync(join(dir, svg), 'utf8')), true)
  })
})
