// What `npm test` runs and shares between its test processes: test/run.mjs runs every test file once, the longest
// first; test/scratch.mjs makes the run's shared folder and removes it at exit; test/helpers/app.ts copies the PGlite
// template found there instead of making one per process.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { describe, it } from 'node:test'
import { ROOT } from './markdown.ts'

/** Every *.test.ts under test/, the browser, cluster and crash-loop suites left out, as paths from the root. */
function testFilesOnDisk(dir = 'test'): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const path = `${dir}/${e.name}`
    if (path === 'test/cluster' || path === 'test/plugins/console' || path === 'test/crash/crash-loop.test.ts') return []
    if (e.isDirectory()) return testFilesOnDisk(path)
    return e.name.endsWith('.test.ts') ? [path] : []
  })
}

describe('npm test', () => {
  it('runs every test file once, the browser, cluster and crash-loop suites apart, the longest named ones first', () => {
    const r = spawnSync(process.execPath, ['test/run.mjs', '--list'], { cwd: ROOT, encoding: 'utf8' })
    assert.equal(r.status, 0, r.stderr)
    const listed = r.stdout.trim().split('\n')
    assert.deepEqual([...listed].sort(), testFilesOnDisk().sort())
    assert.equal(new Set(listed).size, listed.length)
    assert.ok(listed.includes('test/readme/test-run.test.ts'))
    // Every file the ordering names exists (a renamed one would drop silently to name order), and they come first.
    const source = readFileSync(join(ROOT, 'test/run.mjs'), 'utf8')
    const named = [...source.slice(source.indexOf('const LONGEST'), source.indexOf('].map(')).matchAll(/'([\w/-]+)'/g)].map((m) => `test/${m[1]}.test.ts`)
    assert.ok(named.length >= 10, `${named.length} files named`)
    assert.deepEqual(listed.slice(0, named.length), named)
    assert.deepEqual(listed.slice(named.length), listed.slice(named.length).slice().sort())
    const script = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts.test
    assert.match(script, /--import \.\/test\/scratch\.mjs --import tsx test\/run\.mjs$/)
  })

  it('exits 1 when a test fails or a file cannot run, 0 when all pass (a failing todo test counts as passing)', (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'quarry-run-exit-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const file = (name: string, body: string) => {
      writeFileSync(join(dir, name), `import { it } from 'node:test'\nimport assert from 'node:assert/strict'\n${body}\n`)
      return join(dir, name)
    }
    const passes = file('passes.test.mjs', "it('adds', () => assert.equal(1 + 1, 2))\nit('is not done', { todo: true }, () => assert.fail('todo'))")
    const fails = file('fails.test.mjs', "it('adds wrongly', () => assert.equal(1 + 1, 3))")
    const broken = file('broken.test.mjs', "throw new Error('cannot load')")
    // As from a shell: in a test's process, NODE_TEST_CONTEXT would make run() report to this runner instead.
    const { NODE_TEST_CONTEXT: _child, ...env } = process.env
    const runner = (...files: string[]) => spawnSync(process.execPath, ['test/run.mjs', ...files], { cwd: ROOT, env, encoding: 'utf8' })
    const ok = runner(passes)
    assert.equal(ok.status, 0, ok.stdout)
    assert.match(ok.stdout, /# pass 1/)
    // The run's shared folder (made by test/scratch.mjs in the runner's process) reaches its test processes at their
    // start: node --test's own runner would not hand it on (nor TMPDIR).
    const inherits = file('inherits.test.mjs', `import { readFileSync } from 'node:fs'
it('starts with the shared folder', () => assert.match(readFileSync('/proc/self/environ', 'utf8'), /(^|\\0)QUARRY_TEST_SHARED=[^\\0]*quarry-run-/))`)
    const { QUARRY_TEST_SHARED: _shared, ...shell } = env
    const withScratch = spawnSync(process.execPath, ['--import', './test/scratch.mjs', 'test/run.mjs', inherits], { cwd: ROOT, env: shell, encoding: 'utf8' })
    assert.equal(withScratch.status, 0, withScratch.stdout)
    assert.equal(runner(passes, fails).status, 1)
    assert.equal(runner(broken).status, 1)
  })

  it('writes each file\'s seconds, the longest first, where QUARRY_TEST_TIMES says (what LONGEST is made from)', (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'quarry-run-times-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const file = (name: string, body: string) => {
      writeFileSync(join(dir, name), `import { it } from 'node:test'\nimport { setTimeout as sleep } from 'node:timers/promises'\n${body}\n`)
      return join(dir, name)
    }
    const quick = file('quick.test.mjs', "it('is quick', () => {})")
    const slow = file('slow.test.mjs', "it('waits', () => sleep(400))\nit('waits again', () => sleep(400))")
    const times = join(dir, 'times.json')
    const { NODE_TEST_CONTEXT: _child, ...env } = process.env
    const r = spawnSync(process.execPath, ['test/run.mjs', quick, slow], { cwd: ROOT, env: { ...env, QUARRY_TEST_TIMES: times }, encoding: 'utf8' })
    assert.equal(r.status, 0, r.stdout)
    const written = JSON.parse(readFileSync(times, 'utf8')) as Record<string, number>
    const slowName = relative(ROOT, slow)
    assert.deepEqual(Object.keys(written), [slowName, relative(ROOT, quick)])
    // both of the slow file's tests counted: more than their 0.8 s of waiting together
    assert.ok(written[slowName] >= 0.8, `${written[slowName]} s`)
  })

  it("gives its processes one shared folder, which the process that made it removes at exit", (t) => {
    const { QUARRY_TEST_SHARED: _unset, ...env } = process.env
    const print = 'process.stdout.write(String(process.env.QUARRY_TEST_SHARED))'
    const made = spawnSync(process.execPath, ['--import', './test/scratch.mjs', '-e', `${print}; require('node:fs').writeFileSync(process.env.QUARRY_TEST_SHARED + '/x', '')`], { cwd: ROOT, env, encoding: 'utf8' })
    assert.equal(made.status, 0, made.stderr)
    assert.match(made.stdout, /quarry-run-/)
    assert.equal(existsSync(made.stdout), false, 'removed at exit, with what it held')
    // A process given one (a test file under the runner) uses it and leaves it.
    const shared = mkdtempSync(join(tmpdir(), 'quarry-shared-given-'))
    t.after(() => rmSync(shared, { recursive: true, force: true }))
    const given = spawnSync(process.execPath, ['--import', './test/scratch.mjs', '-e', print], { cwd: ROOT, env: { ...env, QUARRY_TEST_SHARED: shared }, encoding: 'utf8' })
    assert.equal(given.stdout, shared)
    assert.equal(existsSync(shared), true)
  })

  it("copies the shared folder's PGlite template into a new data folder instead of making one", (t) => {
    const shared = mkdtempSync(join(tmpdir(), 'quarry-shared-template-'))
    t.after(() => rmSync(shared, { recursive: true, force: true }))
    // A stand-in template: were it made anew (7 s), the marker would be missing from the copy.
    mkdirSync(join(shared, 'pglite-template'))
    writeFileSync(join(shared, 'pglite-template', 'marker'), 'made by the first process')
    const dataDir = join(shared, 'data')
    const app = new URL('../helpers/app.ts', import.meta.url).href
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', `import { seedPglite } from ${JSON.stringify(app)}; await seedPglite(${JSON.stringify(dataDir)})`], {
      cwd: ROOT,
      env: { ...process.env, QUARRY_TEST_SHARED: shared },
      encoding: 'utf8',
    })
    assert.equal(r.status, 0, r.stderr)
    assert.equal(readFileSync(join(dataDir, 'pglite', 'marker'), 'utf8'), 'made by the first process')
    assert.deepEqual(readdirSync(shared).sort(), ['data', 'pglite-template'])
  })
})
