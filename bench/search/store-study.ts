// The embedded store alone on the search bench's data (bench/search.bench.ts --data=<dir>): one KB of all the
// chunks against the same chunks in ten KBs, searched as plugins/search/service.ts searches them (its per-KB
// limits and effort shares, rank-only dense lists in hybrid mode). No service, no HTTP: what the 10-KB / 1-KB
// ratio of the store is made of, and the dense list's recall@10 against an exact scan of the same KB.
//
//   npx tsx bench/search/store-study.ts --data=<dir> [--queries=200] [--rounds=5] [--mode=hybrid,similarity]
//       [--recall=100] (queries whose dense recall@10 is measured; 0: none)
//       [--layout=1kb,10kb] [--ctl=1] (0: --count without callgrind_control, e.g. under node --cpu-prof)
//       [--ef=N] (the store's expansionSearch instead of its default; the store alone only)
//       [--service] (the search service in process, its answer JSON.stringify'd, instead of the store alone)
//       [--count=N] (instruction counting: N searches per case and layout, no timing rounds; run it under
//        valgrind --tool=callgrind twice with two N and take the difference, see docs/benchmarks.md)
//
// Timing: per round, every layout and mode once over the same queries, the order reversed every other round;
// medians of the per-round means, and the 10-KB / 1-KB ratio of each round.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { embedTexts } from '../../adapters/embedders/builtin.ts'
import { createEmbeddedVectorStore } from '../../adapters/vectors/embedded.ts'
import type { VectorStore } from '../../adapters/ports.ts'
import { encodeQuery } from '../../compute/text/sparse.ts'
import { resolveSettings } from '../../kernel/config/load.ts'
import { inKbFusionK, storeLimit } from '../../plugins/search/fusion.ts'
import { readSearchData, registerSearchDocuments } from './build-data.ts'
import { gateCache } from './cache-gate.ts'
import { createAdapters } from '../../adapters/index.ts'
import { createApp, type App } from '../../kernel/app.ts'
import { createLogger } from '../../kernel/log.ts'
import { defaultPlugins } from '../../kernel/plugins.ts'
import type { SearchService } from '../../plugins/search/service.ts'

const arg = (name: string, fallback: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback
const dataDir = arg('data', '')
if (dataDir === '') throw new Error('--data=<dir> of a search bench run is required')
const chunks = Number(arg('chunks', '100000'))
const Q = Number(arg('queries', '200'))
const ROUNDS = Number(arg('rounds', '5'))
const RECALL = Number(arg('recall', '100'))
const COUNT = Number(arg('count', '0'))
const MODES = arg('mode', 'hybrid,similarity').split(',') as ('hybrid' | 'similarity')[]
const LAYOUTS = arg('layout', '1kb,10kb').split(',') as ('1kb' | '10kb')[]
/** With --count: switch callgrind's collection on and dump per case (1), or only run the searches (0: --cpu-prof). */
const CTL = arg('ctl', '1') === '1'
/** The graph's search candidate list (EmbeddedVectorStoreOptions.expansionSearch); empty: the store's default. */
const EF = arg('ef', '')
const TOP_K = 10
const DIMS = 1024

const data = await readSearchData({ dataDir, chunks, dimensions: DIMS, splits: 10, queries: 1000 })
if (data === null) throw new Error(`no search bench data of ${chunks} chunks in ${dataDir}`)
const { settings } = resolveSettings({ data_dir: dataDir, logging: { level: 'ERROR' }, embedding: { vector_size: DIMS } })
const fusionK = inKbFusionK(settings.retrieval.hybrid)
/**
 * --service: the search service in this process (plugins/search/service.ts, as the bench's in-process path calls it:
 * embedding, store, fusion, results and JSON.stringify of the answer) instead of the store alone.
 */
const SERVICE = process.argv.includes('--service')
let service: SearchService | undefined
let app: App | undefined
let store: VectorStore & { whenIndexed(kb?: string): Promise<void> }
if (SERVICE) {
  const { settings: s } = resolveSettings({
    data_dir: dataDir, logging: { level: 'ERROR' }, embedding: { vector_size: DIMS },
    knowledge_bases: [data.kbs.one, ...data.kbs.split].map((id) => ({ id })),
  })
  const log = createLogger('ERROR')
  const adapters = await createAdapters(s, log)
  await registerSearchDocuments(adapters, data)
  adapters.searchCache = gateCache(adapters.searchCache)
  app = await createApp({ settings: s, plugins: defaultPlugins(), log, adapters })
  service = app.use<SearchService>('search')
  store = adapters.vectors as typeof store
} else {
  store = await createEmbeddedVectorStore({
    dir: join(dataDir, 'vectors'), dimensions: DIMS, snapshotOnClose: false, ...(EF === '' ? {} : { expansionSearch: Number(EF) }),
  })
}
const split = data.kbs.split
const one = data.kbs.one
for (const kb of [one, ...split]) await store.whenIndexed(kb)
const sizes = await Promise.all(split.map((kb) => store.count(kb)))
const total = sizes.reduce((a, b) => a + b, 0)
const efforts = sizes.map((n) => n / total)

const queries = data.queries.slice(0, Q)
const dense = embedTexts(queries, DIMS)
const qDense = queries.map((_, i) => dense.subarray(i * DIMS, (i + 1) * DIMS))
const qSparse = queries.map((q) => encodeQuery(q))

async function once(mode: 'hybrid' | 'similarity', layout: '1kb' | '10kb', q: number) {
  if (service !== undefined) {
    const out = await service.search({ query: queries[q], kb_ids: layout === '1kb' ? [one] : split, options: { mode, top_k: TOP_K } })
    JSON.stringify(out)
    return []
  }
  const sparse = mode === 'hybrid' ? qSparse[q] : undefined
  const rankOnly = mode === 'hybrid'
  if (layout === '1kb') return [await store.search(one, { dense: qDense[q], sparse, limit: storeLimit(mode, TOP_K, fusionK), rankOnly })]
  return Promise.all(split.map((kb, i) => store.search(kb, { dense: qDense[q], sparse, limit: storeLimit(mode, TOP_K, fusionK, efforts[i]), effort: efforts[i], rankOnly })))
}

const layouts = ['1kb', '10kb'] as const
const exactCache = new Map<string, { ids: string[]; m: Float32Array; norms: Float32Array }>()
const exactTruth = new Map<string, { id: string; score: number }[]>()
if (COUNT > 0) {
  // Instruction counting, under valgrind --tool=callgrind --instr-atstart=no: warmed up, then collection is switched
  // on and each case's COUNT searches end with a dump (callgrind_control -d), so dump i holds case i alone.
  for (let r = 0; r < 3; r++) for (const mode of MODES) for (const layout of layouts) for (let q = 0; q < 100; q++) await once(mode, layout, q)
  // The payload table's background work after the start (filter columns, the blob's spill) ends before counting.
  await new Promise((r) => setTimeout(r, 5000))
  const { execFileSync } = await import('node:child_process')
  const ctl = (...a: string[]) => CTL && execFileSync('callgrind_control', [...a, String(process.pid)], { stdio: 'ignore' })
  ctl('-i', 'on')
  ctl('-d', 'start')
  for (const mode of MODES) {
    for (const layout of LAYOUTS) {
      for (let i = 0; i < COUNT; i++) await once(mode, layout, i % queries.length)
      ctl('-d', `${mode}-${layout}`)
    }
  }
  ctl('-i', 'off')
  await (app !== undefined ? app.close() : store.close())
  process.exit(0)
}

// Warm-up.
for (const mode of MODES) for (const layout of layouts) for (let q = 0; q < Math.min(50, queries.length); q++) await once(mode, layout, q)

const means = new Map<string, number[]>()
for (let r = 0; r < ROUNDS; r++) {
  const order = MODES.flatMap((mode) => layouts.map((layout) => [mode, layout] as const))
  for (const [mode, layout] of r % 2 === 0 ? order : order.reverse()) {
    const t = performance.now()
    for (let q = 0; q < queries.length; q++) await once(mode, layout, q)
    const key = `${mode} ${layout}`
    if (!means.has(key)) means.set(key, [])
    means.get(key)!.push((performance.now() - t) / queries.length)
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
console.log(`store alone, ${chunks} chunks, ${queries.length} queries x ${ROUNDS} rounds, ef ${EF === '' ? 'default' : EF}, effort per split KB ${efforts.map((e) => e.toFixed(3)).join(' ')}`)
for (const mode of ROUNDS > 0 ? MODES : []) {
  const o = means.get(`${mode} 1kb`)!
  const t = means.get(`${mode} 10kb`)!
  const ratios = t.map((x, i) => x / o[i])
  console.log(`  ${mode.padEnd(10)} 1 KB ${median(o).toFixed(3)} ms, 10 KBs ${median(t).toFixed(3)} ms: ${median(ratios).toFixed(3)}x (rounds ${ratios.map((x) => x.toFixed(3)).join(' ')})`)
}

// Dense recall@10 against an exact scan: the similarity list (top_k, exact scores) and hybrid's dense list
// (its first 10 ranks), per layout; for 10 KBs each KB against its own exact top 10 (what its list can hold),
// and the merged top 10 against the exact top 10 over all ten KBs.
if (RECALL > 0) {
  const n = Math.min(RECALL, queries.length)
  // The exact answers depend on the data and the queries only: kept beside the data for later runs.
  const truthFile = join(dataDir, `store-study-exact-${n}.json`)
  try {
    for (const [key, value] of Object.entries(JSON.parse(readFileSync(truthFile, 'utf8')) as Record<string, { id: string; score: number }[]>)) exactTruth.set(key, value)
  } catch {
    // none yet
  }
  const known = exactTruth.size
  for (const mode of MODES) {
    let r1 = 0
    let rPer = 0
    let rMerged = 0
    for (let q = 0; q < n; q++) {
      const truthOne = await exactTop(one, q, 10)
      const got1 = (await once(mode, '1kb', q))[0].dense.slice(0, 10).map((h) => h.id)
      r1 += overlap(got1, truthOne.map((x) => x.id)) / 10
      const lists = await once(mode, '10kb', q)
      let per = 0
      const all: { id: string; score: number }[] = []
      for (let i = 0; i < split.length; i++) {
        const t = await exactTop(split[i], q, 10)
        all.push(...t)
        per += overlap(lists[i].dense.slice(0, 10).map((h) => h.id), t.map((x) => x.id)) / Math.max(1, t.length)
      }
      rPer += per / split.length
      const truthMerged = all.sort((a, b) => b.score - a.score).slice(0, 10).map((x) => x.id)
      const gotMerged = lists.flatMap((l) => l.dense.slice(0, 10)).sort((a, b) => b.score - a.score).slice(0, 10).map((h) => h.id)
      rMerged += overlap(gotMerged, truthMerged) / 10
    }
    if (exactTruth.size > known) writeFileSync(truthFile, JSON.stringify(Object.fromEntries(exactTruth)))
    console.log(`  dense recall@10 ${mode.padEnd(10)} 1 KB ${(r1 / n).toFixed(4)}; 10 KBs per KB ${(rPer / n).toFixed(4)}, merged ${(rMerged / n).toFixed(4)} (${n} queries)`)
  }
}
await store.close()

function overlap(a: string[], b: string[]): number {
  const s = new Set(b)
  return a.filter((x) => s.has(x)).length
}

/** The exact top k of a KB by cosine: every point's vector read back (docPoints) once per KB and kept. */
async function exactTop(kb: string, q: number, k: number): Promise<{ id: string; score: number }[]> {
  const known = exactTruth.get(`${kb} ${q} ${k}`)
  if (known !== undefined) return known
  let e = exactCache.get(kb)
  if (e === undefined) {
    const ids: string[] = []
    const vecs: Float32Array[] = []
    for (const docId of (await store.docChunkCounts(kb)).keys()) {
      for (const p of await store.docPoints(kb, docId)) {
        ids.push(p.payload.chunk_id)
        vecs.push(p.dense)
      }
    }
    const m = new Float32Array(ids.length * DIMS)
    const norms = new Float32Array(ids.length)
    vecs.forEach((v, i) => {
      m.set(v, i * DIMS)
      let s = 0
      for (let j = 0; j < DIMS; j++) s += v[j] * v[j]
      norms[i] = Math.sqrt(s)
    })
    e = { ids, m, norms }
    exactCache.set(kb, e)
  }
  const v = qDense[q]
  let qq = 0
  for (let j = 0; j < DIMS; j++) qq += v[j] * v[j]
  const scores = new Float64Array(e.ids.length)
  for (let i = 0; i < e.ids.length; i++) {
    let s = 0
    const off = i * DIMS
    for (let j = 0; j < DIMS; j++) s += v[j] * e.m[off + j]
    scores[i] = s / (Math.sqrt(qq) * e.norms[i] || 1)
  }
  const order = Array.from(scores.keys()).sort((a, b) => scores[b] - scores[a]).slice(0, k)
  const top = order.map((i) => ({ id: e!.ids[i], score: scores[i] }))
  exactTruth.set(`${kb} ${q} ${k}`, top)
  return top
}
