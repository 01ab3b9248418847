// Our TypeScript compiled to JavaScript (kernel/compiled.mjs): the compute tasks, a pool whose workers run them
// without tsx, and a program started compiled by kernel/run.mjs.
import { describe, it, after } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { execFile } from 'node:child_process'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { compiledEntry, compiledTasks } from '../../kernel/compiled.mjs'
import { createComputePool } from '../../compute/pool.ts'
import { parseDocument } from '../../compute/parse/index.ts'
import { utf8 } from '../fixtures/make-text.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const TASKS = readdirSync(path.join(ROOT, 'compute', 'tasks')).filter((f) => f.endsWith('.task.ts')).map((f) => f.replace(/\.ts$/, '.mjs'))
/** A TypeScript module for the probe: importing it works only where tsx is registered. */
const TS_MODULE = pathToFileURL(path.join(ROOT, 'compute', 'protocol.ts')).href

/** A cache folder of its own inside the repository (as the real cache is: the bundles' package imports resolve from its node_modules). */
function repoCacheRoot(): string {
  mkdirSync(path.join(ROOT, 'node_modules', '.cache'), { recursive: true })
  return mkdtempSync(path.join(ROOT, 'node_modules', '.cache', 'quarry-test-'))
}

/** A cache root that cannot be created (under a regular file), and a folder to remove afterwards. */
function unwritableCacheRoot(): { root: string; dir: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'quarry-compiled-'))
  writeFileSync(path.join(dir, 'not-a-folder'), '')
  return { root: path.join(dir, 'not-a-folder', 'cache'), dir }
}

describe('compiled compute tasks', () => {
  const cacheRoot = repoCacheRoot()
  after(() => rmSync(cacheRoot, { recursive: true, force: true }))

  it('bundles every task once and reuses the build while its sources are unchanged', async () => {
    const url = compiledTasks(cacheRoot)
    assert.ok(url !== null && url.startsWith('file://') && url.endsWith('/'), `a folder URL, got ${String(url)}`)
    const dir = fileURLToPath(url)
    assert.ok(dir.startsWith(cacheRoot), 'built under the cache root asked for')
    for (const f of TASKS) assert.ok(existsSync(path.join(dir, f)), `${f} is built`)
    assert.equal(compiledTasks(cacheRoot), url, 'unchanged sources: the same build')
    // The build is plain JavaScript that runs here: its selftest task answers as the source does.
    const mod = (await import(`${url}selftest.task.mjs`)) as { default(req: unknown): Promise<unknown> }
    assert.deepEqual(await mod.default({ mode: 'echo', value: 'compiled' }), { ok: true, value: { echo: 'compiled' } })
  })

  it('builds again when a source differs from what the manifest recorded, keeping the older builds in use', () => {
    const first = compiledTasks(cacheRoot)!
    const [home] = readdirSync(cacheRoot).filter((d) => d.startsWith('compute-'))
    const manifestPath = path.join(cacheRoot, home, 'manifest.json')
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { inputs: Record<string, [number, number]> }
    assert.ok('compute/tasks/analyze.task.ts' in manifest.inputs && 'compute/parse/pdf.ts' in manifest.inputs, 'the manifest names the sources, imports included')
    // As if compute/parse/pdf.ts had been edited since (its size and time no longer match).
    manifest.inputs['compute/parse/pdf.ts'] = [manifest.inputs['compute/parse/pdf.ts'][0] + 1, 0]
    writeFileSync(manifestPath, JSON.stringify(manifest))
    const second = compiledTasks(cacheRoot)!
    assert.notEqual(second, first, 'a new build')
    assert.ok(existsSync(fileURLToPath(first)), 'the earlier build stays for a process still loading from it')
    assert.equal(compiledTasks(cacheRoot), second)
    // A damaged manifest is rebuilt, not trusted.
    writeFileSync(manifestPath, '{')
    const third = compiledTasks(cacheRoot)!
    assert.ok(third !== second && existsSync(path.join(fileURLToPath(third), 'analyze.task.mjs')))
  })

  it('keeps the newest builds only', () => {
    const homeOf = () => path.join(cacheRoot, readdirSync(cacheRoot).find((d) => d.startsWith('compute-'))!)
    const builds = () => readdirSync(homeOf()).filter((d) => d.startsWith('build-'))
    for (let i = 0; i < 7; i++) {
      writeFileSync(path.join(homeOf(), 'manifest.json'), '{')
      compiledTasks(cacheRoot)
    }
    assert.equal(builds().length, 5, 'the current build and the four newest others')
  })

  it('answers null when no build can be written', () => {
    const unwritable = unwritableCacheRoot()
    assert.equal(compiledTasks(unwritable.root), null)
    rmSync(unwritable.dir, { recursive: true, force: true })
  })
})

describe('a compute pool on compiled tasks', () => {
  it('runs the tasks without tsx in its workers; with compiledTasks null, through tsx', async () => {
    const pool = createComputePool({ maxThreads: 1, minThreads: 1 })
    try {
      assert.ok(pool.compiledTasks !== null, 'the default pool compiles its tasks')
      assert.deepEqual(await pool.run('selftest', { mode: 'echo', value: 'x' }), { echo: 'x' })
      assert.equal((await pool.run('selftest', { mode: 'typescript', url: TS_MODULE })).echo, 'ERR_UNKNOWN_FILE_EXTENSION', 'no tsx in the worker')
    } finally {
      await pool.close()
    }
    const sources = createComputePool({ maxThreads: 1, minThreads: 1, compiledTasks: null })
    try {
      assert.equal(sources.compiledTasks, null)
      assert.equal((await sources.run('selftest', { mode: 'typescript', url: TS_MODULE })).echo, 'imported')
    } finally {
      await sources.close()
    }
  })

  it('registers tsx in a worker when a parser plugin written in TypeScript is loaded', async (t) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'quarry-ts-plugin-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    // A plugin package of ES modules, as tsx's ES-module hooks (all the worker registers) expect.
    writeFileSync(path.join(dir, 'package.json'), '{"type":"module"}')
    writeFileSync(path.join(dir, 'shout.ts'), `const up = (s: string): string => s.toUpperCase()
export function register(r: { register(ext: string, fn: (i: { bytes: Uint8Array }) => unknown): void }): void {
  r.register('txt', (i) => ({ title: 'ts', doc_type: 'txt', pages: [{ page_num: 1, page_label: '1', text: up(new TextDecoder().decode(i.bytes)) }] }))
}
`)
    const pool = createComputePool({ maxThreads: 1, minThreads: 1 })
    try {
      assert.ok(pool.compiledTasks !== null)
      const doc = await pool.run('parse', { bytes: utf8('typed plugin'), filename: 'a.txt', policy: 'balanced', parserPlugins: [`${dir}/shout.ts:register`] })
      assert.equal(doc.pages[0].text, 'TYPED PLUGIN')
      assert.equal((await pool.run('selftest', { mode: 'typescript', url: TS_MODULE })).echo, 'imported', 'tsx is registered from then on')
      // The same plugin in this thread (already under tsx) parses alike.
      const here = await parseDocument({ bytes: utf8('typed plugin'), filename: 'a.txt', policy: 'balanced', parserPlugins: [`${dir}/shout.ts:register`] })
      assert.equal(here.pages[0].text, doc.pages[0].text)
    } finally {
      await pool.close()
    }
  })
})

describe('a program started by kernel/run.mjs', () => {
  it('runs compiled, without tsx, with its arguments, its path as argv[1] and its sources\' import.meta.url', async (t) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'quarry-run-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const entry = path.join(dir, 'entry.ts')
    // TypeScript that imports the compute pool: the pool finds its worker entry beside its source (import.meta.url).
    writeFileSync(entry, `import { createComputePool } from ${JSON.stringify(path.join(ROOT, 'compute', 'pool.ts'))}
const probe = async (): Promise<string> => {
  try {
    await import(${JSON.stringify(TS_MODULE)})
    return 'imported'
  } catch (err) {
    return (err as { code?: string }).code ?? String(err)
  }
}
const pool = createComputePool({ maxThreads: 1, minThreads: 1 })
const echo: { echo?: string } = await pool.run('selftest', { mode: 'echo', value: 'from the pool' })
await pool.close()
process.stdout.write(JSON.stringify({ args: process.argv.slice(2), argv1: process.argv[1], url: import.meta.url, typescript: await probe(), echo: echo.echo, tasks: pool.compiledTasks !== null }))
`)
    const run = async () => JSON.parse((await promisify(execFile)(process.execPath, ['kernel/run.mjs', entry, 'serve', '--config', 'x.yaml'], { cwd: ROOT, timeout: 60_000 })).stdout) as Record<string, unknown>
    const out = await run()
    assert.deepEqual(out, { args: ['serve', '--config', 'x.yaml'], argv1: entry, url: pathToFileURL(entry).href, typescript: 'ERR_UNKNOWN_FILE_EXTENSION', echo: 'from the pool', tasks: true })
    // Started again: the build is reused (the same folder), and it answers the same.
    const builds = () => readdirSync(path.join(ROOT, 'node_modules', '.cache', 'quarry')).filter((d) => d.startsWith('entry-entry-'))
      .flatMap((d) => readdirSync(path.join(ROOT, 'node_modules', '.cache', 'quarry', d)).filter((b) => b.startsWith('build-')).map((b) => `${d}/${b}`))
    const before = builds()
    assert.deepEqual(await run(), out)
    assert.deepEqual(builds(), before)
  })

  it('compiledEntry answers the entry module of a build, reused while unchanged, and null when none can be made', async (t) => {
    const url = await compiledEntry(path.join(ROOT, 'kernel', 'main.ts'))
    assert.ok(url !== null && url.endsWith('/main.mjs') && existsSync(fileURLToPath(url)), String(url))
    assert.equal(await compiledEntry(path.join(ROOT, 'kernel', 'main.ts')), url)
    const unwritable = unwritableCacheRoot()
    t.after(() => rmSync(unwritable.dir, { recursive: true, force: true }))
    assert.equal(await compiledEntry(path.join(ROOT, 'kernel', 'main.ts'), unwritable.root), null)
    // A source that does not compile: null, and no half-made build is left behind.
    const broken = path.join(unwritable.dir, 'broken.ts')
    writeFileSync(broken, 'const x: = 1\n')
    const cacheRoot = repoCacheRoot()
    t.after(() => rmSync(cacheRoot, { recursive: true, force: true }))
    assert.equal(await compiledEntry(broken, cacheRoot), null)
    const homes = readdirSync(cacheRoot)
    assert.equal(homes.length, 1)
    assert.deepEqual(readdirSync(path.join(cacheRoot, homes[0])).filter((d) => d.startsWith('build-')), [])
  })
})
