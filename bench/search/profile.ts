// Profiles this process's main thread (where the service runs) with the inspector, and says where the time
// went: by project file and function, and by part of the search path. Native and Node frames (JSON.parse,
// usearch, socket writes) are charged to the nearest project frame above them, so "payloads.ts > parse" is
// JSON.parse called from adapters/vectors/payloads.ts.
import { readFileSync } from 'node:fs'
import { Session } from 'node:inspector'
import { dirname, relative, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

interface CallFrame {
  functionName: string
  url: string
  lineNumber: number
  columnNumber: number
}

interface ProfileNode {
  id: number
  callFrame: CallFrame
  children?: number[]
}

export interface CpuProfile {
  nodes: ProfileNode[]
  startTime: number
  endTime: number
  samples: number[]
  timeDeltas: number[]
}

export interface ProfileSummary {
  sampled_ms: number
  idle_ms: number
  busy_ms: number
  /** Shares of busy time. */
  by_category: { category: string; ms: number; share: number }[]
  by_file: { file: string; ms: number; share: number }[]
  top_functions: { fn: string; ms: number; share: number }[]
}

export async function profileWhile<T>(fn: () => Promise<T>, intervalUs = 200): Promise<{ value: T; profile: CpuProfile }> {
  const session = new Session()
  session.connect()
  const post = (method: string, params?: object) => new Promise<any>((resolve, reject) =>
    session.post(method, params ?? {}, (err, res) => (err ? reject(err) : resolve(res))))
  try {
    await post('Profiler.enable')
    await post('Profiler.setSamplingInterval', { interval: intervalUs })
    await post('Profiler.start')
    const value = await fn()
    const { profile } = await post('Profiler.stop') as { profile: CpuProfile }
    return { value, profile }
  } finally {
    session.disconnect()
  }
}

type Transform = (code: string) => string

/**
 * tsx runs each file as one line (esbuild, whitespace minified, names kept), so a frame's position is a
 * column of that line. The same transform here turns an anonymous function's column into its source text.
 */
async function loadTransform(): Promise<Transform | null> {
  try {
    const esbuild = await import('esbuild')
    return (code) => esbuild.transformSync(code, { loader: 'ts', format: 'esm', minifyWhitespace: true, keepNames: true, target: 'node20' }).code
  } catch {
    return null
  }
}

function createLocator(transform: Transform | null) {
  const cache = new Map<string, string | null>()
  return (url: string, column: number): string => {
    if (transform === null) return `@${column}`
    let code = cache.get(url)
    if (code === undefined) {
      try {
        code = transform(readFileSync(fileURLToPath(url), 'utf8')).split('\n')[0]
      } catch {
        code = null
      }
      cache.set(url, code)
    }
    return code === null ? `@${column}` : `\`${code.slice(column, column + 60)}\``
  }
}

const SPECIAL = new Set(['(garbage collector)', '(program)', '(idle)', '(root)'])

function categoryOf(file: string | null, fn: string): string {
  if (fn === '(garbage collector)') return 'GC'
  if (fn === '(program)') return '(program: native code outside JS frames, e.g. uWS I/O)'
  if (file === null) return 'other (no project frame)'
  if (file.startsWith('adapters/vectors/')) return 'vector index (adapters/vectors)'
  if (file.startsWith('adapters/embedders/') || file.startsWith('compute/text/')) return 'query encoding (embedder, sparse)'
  if (file.startsWith('plugins/search/')) return 'search service (plugins/search)'
  if (file.startsWith('kernel/')) return 'kernel (HTTP, routing, validation)'
  if (file.startsWith('bench/')) return 'bench harness'
  return `other (${file.split('/')[0]})`
}

/**
 * Self time by project file, function and category; `root` is the repository folder. V8 charges builtins
 * (JSON.parse, JSON.stringify, array sorts) to the JS function that called them, so they show as that function.
 */
export async function summarizeProfile(p: CpuProfile, root: string, top = 25): Promise<ProfileSummary> {
  const locate = createLocator(await loadTransform())
  const byId = new Map(p.nodes.map((n) => [n.id, n]))
  const parent = new Map<number, number>()
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  const projectFile = (url: string): string | null => {
    if (!url.startsWith('file://')) return null
    const rel = relative(root, fileURLToPath(url))
    return rel.startsWith('..') || rel.includes('node_modules') ? null : rel
  }
  const self = new Map<number, number>()
  for (let i = 0; i < p.samples.length; i++) {
    const dt = (i + 1 < p.timeDeltas.length ? p.timeDeltas[i + 1] : 0) / 1000
    self.set(p.samples[i], (self.get(p.samples[i]) ?? 0) + dt)
  }
  const cats = new Map<string, number>()
  const files = new Map<string, number>()
  const fns = new Map<string, number>()
  let idle = 0
  let sampled = 0
  for (const [id, ms] of self) {
    sampled += ms
    const node = byId.get(id)!
    const cf = node.callFrame
    if (cf.functionName === '(idle)') {
      idle += ms
      continue
    }
    let owner: { file: string; cf: CallFrame } | null = null
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const f = projectFile(byId.get(cur)!.callFrame.url)
      if (f !== null) {
        owner = { file: f, cf: byId.get(cur)!.callFrame }
        break
      }
    }
    const own = projectFile(cf.url)
    const nativeName = own === null && !SPECIAL.has(cf.functionName) ? cf.functionName || '(anonymous)' : null
    const where = owner === null ? null
      : `${owner.file} ${owner.cf.functionName || `(anonymous) ${locate(owner.cf.url, owner.cf.columnNumber)}`}`
    const module = cf.url ? ` [${cf.url.replace(/^.*node_modules\//, '').replace(/^file:\/\//, '')}]` : ' [native]'
    const fnKey = SPECIAL.has(cf.functionName) ? cf.functionName
      : nativeName !== null ? `${where ?? '(no project frame)'} > ${nativeName}${module}`
      : where!
    fns.set(fnKey, (fns.get(fnKey) ?? 0) + ms)
    const fileKey = owner?.file ?? (SPECIAL.has(cf.functionName) ? cf.functionName : '(no project frame)')
    files.set(fileKey, (files.get(fileKey) ?? 0) + ms)
    const cat = categoryOf(owner?.file ?? null, cf.functionName)
    cats.set(cat, (cats.get(cat) ?? 0) + ms)
  }
  const busy = sampled - idle
  const list = <K extends string>(m: Map<string, number>, key: K, n = Infinity) => [...m]
    .sort((a, b) => b[1] - a[1]).slice(0, n)
    .map(([k, ms]) => ({ [key]: k, ms: +ms.toFixed(1), share: +(ms / busy).toFixed(4) }) as { [P in K]: string } & { ms: number; share: number })
  return {
    sampled_ms: +sampled.toFixed(1), idle_ms: +idle.toFixed(1), busy_ms: +busy.toFixed(1),
    by_category: list(cats, 'category'), by_file: list(files, 'file', top), top_functions: list(fns, 'fn', top),
  }
}

// `npx tsx bench/search/profile.ts <file.cpuprofile>...` summarises profiles written by an earlier run.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..')
  for (const file of process.argv.slice(2)) {
    const s = await summarizeProfile(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, root, 30)
    console.log(`${file}: busy ${s.busy_ms} ms, idle ${s.idle_ms} ms`)
    for (const c of s.by_category) console.log(`  ${(c.share * 100).toFixed(1).padStart(5)} %  ${c.category}`)
    for (const f of s.top_functions) console.log(`  ${(f.share * 100).toFixed(1).padStart(5)} %  ${f.fn}`)
  }
}
