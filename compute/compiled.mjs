// The compute tasks as plain JavaScript, so that the pool's worker threads run without tsx. Registering tsx in a
// thread starts a module-hooks thread for it and keeps its transforms: 28 MB of RSS for a worker importing one
// small file, and about 25 MB on the peak of a bulk ingest (bench/ingest.bench.ts --service-only, 1,000
// documents, five runs each way in turn: median 542 -> 515 MB, at the same documents/s and CPU per document).
//
// compiledTasks() bundles compute/tasks/*.task.ts with esbuild (tsx's own; packages stay imports, resolved
// from node_modules as before) into node_modules/.cache/quarry/, once: a manifest names every source file the
// bundles came from with its size and modification time, and a later call that finds them unchanged reuses the
// bundles (a few dozen stat calls). An edit, a new task, another esbuild or another Node makes a new build (about
// 40 ms) in a folder of its own: a process started earlier keeps importing from the folder it began with (the
// parsers load lazily), and only builds older than the KEEP_BUILDS newest are removed.
//
// Plain JavaScript, like worker.mjs: nothing here needs transpiling.
import { createHash } from 'node:crypto'
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const TASKS = join(ROOT, 'compute', 'tasks')
const requireFromRoot = createRequire(join(ROOT, 'package.json'))
/** Builds kept beside the current one (a running process may still load parsers from them). */
const KEEP_BUILDS = 4

/**
 * The folder of the compiled tasks as a file URL ending in '/' (`<task>.task.mjs` each), built first if the
 * sources changed since the last build; null when no build can be made or read (no esbuild, a read-only install):
 * the worker then runs the TypeScript sources through tsx. `cacheRoot` must lie inside the repository, so that the
 * bundles' package imports resolve from its node_modules (tests pass a folder of their own).
 */
export function compiledTasks(cacheRoot = join(ROOT, 'node_modules', '.cache', 'quarry')) {
  try {
    return build(cacheRoot)
  } catch {
    return null
  }
}

/** [size, modification time in ms] of a file of the repository, or null when it is gone. */
function stamp(rel) {
  const s = statSync(join(ROOT, rel), { throwIfNoEntry: false })
  return s === undefined ? null : [s.size, s.mtimeMs]
}

function build(cacheRoot) {
  // One folder per checkout: work trees that share node_modules (a symlink) do not replace each other's builds.
  const home = join(cacheRoot, `compute-${createHash('sha256').update(ROOT).digest('hex').slice(0, 12)}`)
  const manifestPath = join(home, 'manifest.json')
  const entries = readdirSync(TASKS).filter((f) => f.endsWith('.task.ts')).sort().map((f) => `compute/tasks/${f}`)
  const key = { esbuild: requireFromRoot('esbuild/package.json').version, node: process.versions.node, entries }
  let manifest = null
  try {
    manifest = JSON.parse(readFileSync(manifestPath, 'utf8'))
  } catch {
    // No build yet, or a damaged manifest: build.
  }
  if (manifest !== null && isFresh(manifest, key, home)) return pathToFileURL(join(home, manifest.dir)).href + '/'
  return rebuild(home, manifestPath, key)
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

function rebuild(home, manifestPath, key) {
  const { buildSync } = requireFromRoot('esbuild')
  const dir = `build-${Date.now().toString(36)}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
  const out = join(home, dir)
  mkdirSync(out, { recursive: true })
  const startedAt = Date.now()
  const result = buildSync({
    absWorkingDir: ROOT,
    entryPoints: key.entries,
    outdir: out,
    outbase: 'compute/tasks',
    outExtension: { '.js': '.mjs' },
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: `node${process.versions.node.split('.')[0]}`,
    packages: 'external',
    metafile: true,
    logLevel: 'silent',
  })
  // Marks the folder complete: a build cut off half-way is never used.
  writeFileSync(join(out, 'complete'), '')
  const inputs = {}
  let settled = true
  for (const rel of Object.keys(result.metafile.inputs)) {
    const s = stamp(rel)
    if (s === null) throw new Error(`compiled tasks: ${rel} vanished during the build`)
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
}

/** Keeps the current build and the KEEP_BUILDS newest others; removes the rest. */
function removeOldBuilds(home, current) {
  const builds = readdirSync(home, { withFileTypes: true })
    .filter((d) => d.isDirectory() && d.name.startsWith('build-') && d.name !== current)
    .map((d) => ({ name: d.name, at: statSync(join(home, d.name)).mtimeMs }))
    .sort((a, b) => b.at - a.at)
  for (const b of builds.slice(KEEP_BUILDS)) rmSync(join(home, b.name), { recursive: true, force: true })
}
