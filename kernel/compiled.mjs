// Our TypeScript compiled to plain JavaScript, so that the service's threads run without tsx. tsx registers module
// hooks, which Node 20 runs in a thread of their own per thread that registers them, and keeps its transforms and
// source maps: an idle service took 300-313 MB of RSS started with tsx and 245 MB started from the compiled entry
// (kernel/run.mjs), and a compute pool worker 28 MB more with tsx than without.
//
// Two kinds of build, both with esbuild (tsx's own), packages left as imports resolved from node_modules:
// - compiledTasks(): compute/tasks/*.task.ts, what the compute pool's workers import (compute/worker.mjs).
//   Synchronous, as the pool is created synchronously.
// - compiledEntry(file): a program's entry and everything it imports (kernel/run.mjs starts it). Each module's
//   import.meta.url is its source file's URL, so that files found next to a source (pglite-thread.mjs, the
//   migrations, the pool's worker entry) are found from the bundle as from the source.
// Each goes to node_modules/.cache/quarry/ once: a manifest names every source file a build came from with its
// size and modification time, and a later call that finds them unchanged reuses the build (a stat per file). An
// edit, another esbuild or another Node makes a new build (40-100 ms) in a folder of its own: a process started
// earlier keeps importing from the folder it began with (modules load lazily), and only builds older than the
// KEEP_BUILDS newest are removed. Source maps are written beside the bundles (node --enable-source-maps reads them).
//
// Plain JavaScript, like worker.mjs and run.mjs: nothing here needs transpiling.
import { createHash } from 'node:crypto'
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { basename, dirname, extname, join, relative, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const requireFromRoot = createRequire(join(ROOT, 'package.json'))
const DEFAULT_CACHE = join(ROOT, 'node_modules', '.cache', 'quarry')
/** Builds kept beside the current one (a running process may still load modules from them). */
const KEEP_BUILDS = 4

/**
 * The folder of the compiled compute tasks as a file URL ending in '/' (`<task>.task.mjs` each), built first if the
 * sources changed since the last build; null when no build can be made or read (no esbuild, a read-only install):
 * the worker then runs the TypeScript sources through tsx. `cacheRoot` must lie inside the repository, so that the
 * bundles' package imports resolve from its node_modules (tests pass a folder of their own).
 */
export function compiledTasks(cacheRoot = DEFAULT_CACHE) {
  let c
  try {
    const tasks = join(ROOT, 'compute', 'tasks')
    const entries = readdirSync(tasks).filter((f) => f.endsWith('.task.ts')).sort().map((f) => `compute/tasks/${f}`)
    c = cache(cacheRoot, 'compute', entries)
    if (c.url !== null) return c.url
    const { buildSync } = requireFromRoot('esbuild')
    return c.record(buildSync(options(c.out, entries, 'compute/tasks')))
  } catch {
    discard(c)
    return null
  }
}

/**
 * The compiled form of the program whose entry is `file` (a .ts path), as the file URL of its entry module, built
 * first if any of its sources changed; null when no build can be made (kernel/run.mjs then runs the source through
 * tsx). `cacheRoot`: as for compiledTasks.
 */
export async function compiledEntry(file, cacheRoot = DEFAULT_CACHE) {
  let c
  try {
    const abs = resolve(file)
    const entry = relative(ROOT, abs)
    // Named after the entry: kernel/main.ts and a benchmark keep a build each.
    c = cache(cacheRoot, `entry-${basename(abs, extname(abs))}-${hash(abs)}`, [entry])
    const name = `${basename(abs, extname(abs))}.mjs`
    if (c.url !== null) return c.url + name
    const { build } = requireFromRoot('esbuild')
    const url = c.record(await build({ ...options(c.out, [entry], dirname(entry)), plugins: [sourceMetaUrl] }))
    return url + name
  } catch {
    discard(c)
    return null
  }
}

/** Removes the folder of a build that failed (a source that does not compile): the sources then run through tsx. */
function discard(c) {
  if (c?.out !== undefined) rmSync(c.out, { recursive: true, force: true })
}

function options(out, entries, outbase) {
  return {
    absWorkingDir: ROOT,
    entryPoints: entries,
    outdir: out,
    outbase,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: `node${process.versions.node.split('.')[0]}`,
    packages: 'external',
    sourcemap: 'linked',
    metafile: true,
    logLevel: 'silent',
  }
}

/** esbuild plugin: each of our modules' import.meta.url becomes its source file's URL (packages are not bundled). */
const sourceMetaUrl = {
  name: 'source-import-meta-url',
  setup(b) {
    b.onLoad({ filter: /\.(?:[cm]?ts|mjs|js)$/ }, (args) => {
      const text = readFileSync(args.path, 'utf8')
      return { contents: text.replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href)), loader: /ts$/.test(args.path) ? 'ts' : 'js' }
    })
  },
}

const hash = (s) => createHash('sha256').update(s).digest('hex').slice(0, 12)

/** [size, modification time in ms] of a file (relative to the repository), or null when it is gone. */
function stamp(rel) {
  const s = statSync(resolve(ROOT, rel), { throwIfNoEntry: false })
  return s === undefined ? null : [s.size, s.mtimeMs]
}

/**
 * The cache folder of one build `name` of `entries`: `url`, the folder of a build still fresh (or null), `out`, a new
 * folder to build into, and `record(result)`, which marks that build complete and current and answers its URL.
 */
function cache(cacheRoot, name, entries) {
  // One folder per checkout: work trees that share node_modules (a symlink) do not replace each other's builds.
  const home = join(cacheRoot, `${name}-${hash(ROOT)}`)
  const manifestPath = join(home, 'manifest.json')
  const key = { esbuild: requireFromRoot('esbuild/package.json').version, node: process.versions.node, entries }
  let manifest = null
  try {
    manifest = JSON.parse(readFileSync(manifestPath, 'utf8'))
  } catch {
    // No build yet, or a damaged manifest: build.
  }
  if (manifest !== null && isFresh(manifest, key, home)) return { url: pathToFileURL(join(home, manifest.dir)).href + '/' }
  const dir = `build-${Date.now().toString(36)}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
  const out = join(home, dir)
  mkdirSync(out, { recursive: true })
  const startedAt = Date.now()
  return {
    url: null,
    out,
    record(result) {
      // Marks the folder complete: a build cut off half-way is never used.
      writeFileSync(join(out, 'complete'), '')
      const inputs = {}
      let settled = true
      for (const rel of Object.keys(result.metafile.inputs)) {
        const s = stamp(rel)
        if (s === null) throw new Error(`compiled: ${rel} vanished during the build`)
        inputs[rel] = s
        // Saved while the build ran: this build may hold the older text, so it is not recorded for the next start.
        if (s[1] >= startedAt) settled = false
      }
      if (settled) {
        const tmp = `${manifestPath}.${process.pid}.tmp`
        writeFileSync(tmp, JSON.stringify({ ...key, inputs, dir }))
        renameSync(tmp, manifestPath)
      }
      removeOldBuilds(home, dir)
      return pathToFileURL(out).href + '/'
    },
  }
}

function isFresh(manifest, key, home) {
  if (manifest.esbuild !== key.esbuild || manifest.node !== key.node) return false
  if (JSON.stringify(manifest.entries) !== JSON.stringify(key.entries)) return false
  if (statSync(join(home, manifest.dir, 'complete'), { throwIfNoEntry: false }) === undefined) return false
  for (const [rel, was] of Object.entries(manifest.inputs)) {
    const now = stamp(rel)
    if (now === null || now[0] !== was[0] || now[1] !== was[1]) return false
  }
  return true
}

/** Keeps the current build and the KEEP_BUILDS newest others; removes the rest. */
function removeOldBuilds(home, current) {
  const builds = readdirSync(home, { withFileTypes: true })
    .filter((d) => d.isDirectory() && d.name.startsWith('build-') && d.name !== current)
    .map((d) => ({ name: d.name, at: statSync(join(home, d.name)).mtimeMs }))
    .sort((a, b) => b.at - a.at)
  for (const b of builds.slice(KEEP_BUILDS)) rmSync(join(home, b.name), { recursive: true, force: true })
}
