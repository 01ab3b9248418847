// The worker side of the compute pool (loaded by worker.cjs, the entry Piscina starts). It is plain ESM because
// it must run before any TypeScript can. The pool hands it the folder of the compiled tasks (kernel/compiled.mjs): the
// tasks then run as plain JavaScript, with no tsx in this thread (28 MB of RSS less). Without that folder (no
// build could be made) it registers tsx and imports the .task.ts sources, the same way whether the process was
// started with `tsx`, `node --import tsx` or `node --test` (the pool starts workers with an empty execArgv). A
// parser plugin written in TypeScript gets tsx registered when it is loaded (TSX_HOOK, compute/parse/registry.ts).
import { parentPort } from 'node:worker_threads'
import { move, transferableSymbol, valueSymbol, workerData } from 'piscina'
import { nameThread } from '../kernel/thread-name.mjs'

nameThread('quarry-compute')

/** @type {string | null} */
const compiled = workerData?.compiledTasks ?? null
/** @type {Promise<void> | undefined} */
let tsx
const registerTsx = () => (tsx ??= import('tsx/esm/api').then(({ register }) => void register()))
globalThis[Symbol.for('quarry.registerTsx')] = registerTsx
if (compiled === null) await registerTsx()

// pdf.js inflates each FlateDecode stream through the DecompressionStream global when there is one. In Node 20
// that goes through web streams over node:zlib, whose per-stream cost outweighs the inflating on the small
// streams that make up PDF pages: pdf.js's own inflate (its path where the global is missing) parsed text
// 15-20 % faster on generated and real PDFs alike (figures: compute/parse/README.md). Only compute tasks run
// in this thread, one at a time, and none of ours uses DecompressionStream, so it is removed here; other threads
// keep it. Parser plugins get it back while they run (compute/parse/index.ts, withWebGlobals), from this stash.
const decompressionStream = Object.getOwnPropertyDescriptor(globalThis, 'DecompressionStream')
if (decompressionStream) {
  globalThis[Symbol.for('quarry.DecompressionStream')] = decompressionStream
  delete globalThis.DecompressionStream
}

const TASK_NAME = /^[a-z][a-z0-9-]*$/
const modules = new Map()

function load(task) {
  let mod = modules.get(task)
  if (mod === undefined) {
    if (typeof task !== 'string' || !TASK_NAME.test(task)) throw new Error(`invalid task name ${JSON.stringify(task)}`)
    mod = import(compiled !== null ? `${compiled}${task}.task.mjs` : new URL(`./tasks/${task}.task.ts`, import.meta.url).href)
    // A module that fails to load is not cached, so the next call tries again (a fixed source, when the sources
    // run through tsx; a compiled build stays as it was for the life of the pool).
    mod.catch(() => modules.delete(task))
    modules.set(task, mod)
  }
  return mod
}

/** Typed arrays in a result that own their whole buffer, collected so the reply moves them instead of copying. */
function collectBuffers(value, out, depth) {
  if (value === null || typeof value !== 'object' || depth > 6) return
  if (ArrayBuffer.isView(value)) {
    const buf = value.buffer
    if (buf instanceof ArrayBuffer && value.byteOffset === 0 && value.byteLength === buf.byteLength) out.add(buf)
    return
  }
  if (value instanceof ArrayBuffer) {
    out.add(value)
    return
  }
  if (Array.isArray(value)) {
    // Arrays of primitives (token ids, offsets) hold nothing to move: look at the first element only.
    if (value.length > 0 && (value[0] === null || typeof value[0] !== 'object')) return
    for (const v of value) collectBuffers(v, out, depth + 1)
    return
  }
  for (const k in value) collectBuffers(value[k], out, depth + 1)
}

function movable(reply) {
  if (!reply.result?.ok) return reply
  const buffers = new Set()
  collectBuffers(reply.result.value, buffers, 0)
  if (buffers.size === 0) return reply
  return move({
    get [transferableSymbol]() { return [...buffers] },
    get [valueSymbol]() { return reply },
  })
}

export default async function runTask({ id, task, request }) {
  parentPort?.postMessage({ quarryTaskStarted: id })
  let result
  try {
    const mod = await load(task)
    if (typeof mod.default !== 'function') throw new Error(`compute/tasks/${task}.task.ts has no default export function`)
    result = await mod.default(request)
  } catch (err) {
    return { thrown: err instanceof Error ? `${err.name === 'Error' ? '' : `${err.name}: `}${err.message}` : String(err) }
  }
  if (result === null || typeof result !== 'object' || typeof result.ok !== 'boolean') {
    return { thrown: `returned ${result === null ? 'null' : typeof result} instead of a TaskResult` }
  }
  return movable({ result })
}
