// Peer comparison: our embedded store against Orama (@orama/orama 3, the most used TypeScript search engine
// with full-text and vector search) on SciFact. Both index the same chunks (our chunker, default settings)
// with the same built-in 1024-dimension vectors, in this process, on one thread, without HTTP:
// - keyword: our sparse (BM25-like) index vs Orama's BM25 full-text search,
// - vector: our HNSW (exact f32 rescoring) vs Orama's flat cosine scan,
// - hybrid: our in-KB fusion (plugins/search/fusion.ts) vs Orama's hybrid mode.
// Reported: build time, memory of the index (each engine in a fresh process), nDCG@10 per mode (document
// level: a document's best chunk, over every judged query), and queries/s per mode, after a warm-up, engines
// alternating round by round; a pass runs the queries in order until all are done or its time budget is
// spent (Orama as shipped answers a few keyword queries a second here). Orama runs twice: as shipped
// (prefix matching, no stemming, no stop words) and tuned (English stemming, the stop words our sparse
// encoder drops, whole-word matching), so that no tokenizer choice decides the keyword comparison.
//
//   npx tsx bench/orama.bench.ts              full SciFact, 5 rounds
//   npx tsx bench/orama.bench.ts --quick      full SciFact, 2 rounds, tuned Orama only (`npm run bench` quick also
//                                             limits it to 100 queries, 3-s passes and no memory probes)
//   npx tsx bench/orama.bench.ts --smoke      300 documents, 30 queries, 1 round (CI)
//   options: --dataset DIR, --limit-docs N, --limit-queries M, --rounds R, --budget SECONDS (per pass),
//            --no-memory, --json FILE
import { spawn } from 'node:child_process'
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { firstPerDocument, score } from './eval/metrics.ts'
import { machine, median, round } from './lib/machine.ts'
import { prepare, type PreparedData } from './orama/data.ts'
import { createOramaEngine, createQuarryEngine, SEARCH_MODES, type Engine, type SearchMode } from './orama/engines.ts'
import type { MemoryFigures, ProbeEngine } from './orama/memory-probe.ts'

const DATASETS = process.env.QUARRY_DATASETS ?? join(import.meta.dirname, '..', '..', 'shared', 'datasets')

export interface OramaBenchOptions {
  quick: boolean
  /** BEIR folder; default the shared SciFact. */
  dataset?: string
  limitDocs?: number
  limitQueries?: number
  /** Measured rounds per engine and mode (default 5, quick 2). */
  rounds?: number
  /** Longest time of one measured pass over the queries, in seconds (default 10, quick 5). */
  budgetSeconds?: number
  /** Measure memory in child processes (default true). */
  memory?: boolean
  log?: (line: string) => void
}

/** Chunks asked for per query, in every mode and engine; documents are ranked by their best chunk among them. */
const K = 20

interface EngineEntry {
  /** null: no memory probe (same index structures as another entry). */
  probe: ProbeEngine | null
  engine: Engine
  ours: boolean
}

async function probeMemory(dataset: string, engine: ProbeEngine, limitDocs?: number, limitQueries?: number): Promise<MemoryFigures> {
  const args = ['--expose-gc', '--import', 'tsx', join(import.meta.dirname, 'orama', 'memory-probe.ts'), dataset, engine]
  if (limitDocs !== undefined || limitQueries !== undefined) args.push(String(limitDocs ?? ''), String(limitQueries ?? ''))
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (d: Buffer) => (out += d.toString()))
    child.once('error', reject)
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`memory probe for ${engine} exited with ${code}`))
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()!) as MemoryFigures)
      } catch (err) {
        reject(err)
      }
    })
  })
}

async function rankings(e: Engine, mode: SearchMode, data: PreparedData): Promise<Map<string, string[]>> {
  const runs = new Map<string, string[]>()
  for (const q of data.queries) runs.set(q.id, firstPerDocument((await e.search(mode, q, K)).map((n) => data.chunks[n].doc)))
  return runs
}

/** Queries per second of one pass: the queries in order, until all are done or `budgetMs` is spent (at least 3). */
async function pass(e: Engine, mode: SearchMode, data: PreparedData, budgetMs: number): Promise<number> {
  const t = performance.now()
  let n = 0
  for (const q of data.queries) {
    await e.search(mode, q, K)
    n++
    if (n >= 3 && performance.now() - t > budgetMs) break
  }
  return n / ((performance.now() - t) / 1000)
}

export async function run(opts: OramaBenchOptions = { quick: true }) {
  const log = opts.log ?? ((l: string) => process.stderr.write(`${l}\n`))
  const dataset = opts.dataset ?? join(DATASETS, 'scifact')
  if (!existsSync(join(dataset, 'corpus.jsonl'))) return { name: 'orama', skipped: `no data set at ${dataset}` }
  const rounds = opts.rounds ?? (opts.quick ? 2 : 5)
  const budgetMs = (opts.budgetSeconds ?? (opts.quick ? 5 : 10)) * 1000

  log('preparing chunks and vectors...')
  const data = await prepare(dataset, { limitDocs: opts.limitDocs, limitQueries: opts.limitQueries })
  log(`${data.dataset.corpus.length} documents -> ${data.chunks.length} chunks (${data.seconds.chunk.toFixed(1)} s), vectors ${data.seconds.embed.toFixed(1)} s; ${data.queries.length} queries`)

  const entries: EngineEntry[] = [
    { probe: 'quarry', engine: createQuarryEngine(), ours: true },
    // Every vector compared (no graph): the ceiling of the vector mode's nDCG@10, which Orama's exact scan also has.
    ...(opts.quick ? [] : [{ probe: null, engine: createQuarryEngine({ name: 'quarry (exact scan)', store: { exactBudget: 2 ** 30 } }), ours: true } satisfies EngineEntry]),
    // Orama as shipped is below the tuned Orama in every mode (nDCG@10 and q/s) and takes most of the run
    // (2-5 q/s over 300 queries): the quick run compares with the tuned one only.
    ...(opts.quick ? [] : [{ probe: 'orama', engine: createOramaEngine(), ours: false } satisfies EngineEntry]),
    { probe: 'orama-tuned', engine: createOramaEngine({ tuned: true }), ours: false },
  ]
  const build: Record<string, number> = {}
  for (const { engine } of entries) {
    const t = performance.now()
    await engine.build(data.chunks)
    build[engine.name] = (performance.now() - t) / 1000
    log(`${engine.name}: built in ${build[engine.name].toFixed(2)} s`)
  }

  try {
    const quality: Record<string, Record<SearchMode, number>> = {}
    for (const { engine } of entries) {
      quality[engine.name] = {} as Record<SearchMode, number>
      for (const mode of SEARCH_MODES) quality[engine.name][mode] = score(await rankings(engine, mode, data), data.dataset.qrels).ndcg_at_10
      log(`${engine.name}: nDCG@10 ${SEARCH_MODES.map((m) => `${m} ${quality[engine.name][m].toFixed(4)}`).join(', ')}`)
    }

    // Warm-up: every engine and mode on a slice of the queries (JIT, caches).
    const warm = { ...data, queries: data.queries.slice(0, 50) }
    for (const { engine } of entries) for (const mode of SEARCH_MODES) await pass(engine, mode, warm, 2000)

    const qps: Record<string, Record<SearchMode, number[]>> = Object.fromEntries(entries.map((e) => [e.engine.name, { keyword: [], vector: [], hybrid: [] }]))
    for (let r = 0; r < rounds; r++) {
      // Alternate which engine goes first, so neither always runs on a cooler or warmer machine.
      const order = r % 2 === 0 ? entries : [...entries].reverse()
      for (const mode of SEARCH_MODES) for (const { engine } of order) qps[engine.name][mode].push(await pass(engine, mode, data, budgetMs))
      log(`round ${r + 1}/${rounds}: ${entries.map((e) => `${e.engine.name} ${SEARCH_MODES.map((m) => qps[e.engine.name][m].at(-1)!.toFixed(0)).join('/')}`).join(', ')} q/s (keyword/vector/hybrid)`)
    }

    let memory: Record<string, MemoryFigures> | null = null
    if (opts.memory ?? true) {
      memory = {}
      for (const { probe, engine } of entries) if (probe) memory[engine.name] = await probeMemory(dataset, probe, opts.limitDocs, opts.limitQueries)
    }

    const ourNames = entries.filter((e) => e.ours).map((e) => e.engine.name)
    const peers = entries.filter((e) => !e.ours).map((e) => e.engine.name)
    const medianQps = Object.fromEntries(Object.entries(qps).map(([n, m]) => [n, Object.fromEntries(SEARCH_MODES.map((mode) => [mode, round(median(m[mode]), 1)]))])) as Record<string, Record<SearchMode, number>>
    const bestPeer = (_mode: SearchMode, of: (n: string) => number) => Math.max(...peers.map(of))
    const targets = ourNames.flatMap((ours) => [
      ...SEARCH_MODES.map((mode) => {
        const peer = bestPeer(mode, (n) => quality[n][mode])
        return { name: `${ours}: nDCG@10 ${mode} >= Orama's best`, met: quality[ours][mode] >= peer, detail: `${quality[ours][mode].toFixed(4)} vs ${peer.toFixed(4)}` }
      }),
      (() => {
        const peer = bestPeer('hybrid', (n) => medianQps[n].hybrid)
        const ratio = medianQps[ours].hybrid / peer
        return { name: `${ours}: hybrid queries/s >= 2x Orama's best`, met: ratio >= 2, detail: `${medianQps[ours].hybrid} vs ${peer} q/s (x${ratio.toFixed(1)})` }
      })(),
    ])
    const result = {
      name: 'orama',
      machine: machine(),
      sizes: {
        dataset: data.dataset.name, documents: data.dataset.corpus.length, chunks: data.chunks.length, queries: data.queries.length,
        dimensions: 1024, k_chunks_per_query: K, rounds, pass_budget_seconds: budgetMs / 1000,
      },
      engines: Object.fromEntries(entries.map((e) => [e.engine.name, e.engine.config])),
      results: Object.fromEntries(entries.map(({ engine }) => [engine.name, {
        build_seconds: round(build[engine.name], 2),
        memory: memory?.[engine.name] ?? null,
        ndcg_at_10: Object.fromEntries(SEARCH_MODES.map((m) => [m, round(quality[engine.name][m], 4)])),
        qps: medianQps[engine.name],
        qps_rounds: Object.fromEntries(SEARCH_MODES.map((m) => [m, qps[engine.name][m].map((x) => round(x, 1))])),
      }])),
      ratios_vs_orama: Object.fromEntries(ourNames.flatMap((ours) => peers.map((p) => [`${ours} / ${p}`, Object.fromEntries(SEARCH_MODES.map((m) => [`qps_${m}`, round(medianQps[ours][m] / medianQps[p][m], 2)]))]))),
      targets,
    }
    return result
  } finally {
    for (const { engine } of entries) await engine.close()
  }
}

export function formatOramaReport(r: Awaited<ReturnType<typeof run>>): string {
  if (!('results' in r)) return `orama bench skipped: ${r.skipped}`
  const m = r.machine
  const lines = [
    `Machine: ${m.cpu}, ${m.cores} cores, Node ${m.node}; load ${m.load_average.join(' ')}`,
    `Data: ${r.sizes.dataset}, ${r.sizes.documents} documents -> ${r.sizes.chunks} chunks (recursive 1024/128), ${r.sizes.dimensions}-dim built-in vectors, ${r.sizes.queries} queries; ${r.sizes.k_chunks_per_query} chunks per query; median of ${r.sizes.rounds} rounds of at most ${r.sizes.pass_budget_seconds} s per engine and mode; one thread, in-process`,
    '',
    '| engine | build s | heap MiB | external MiB | RSS MiB | nDCG@10 keyword | vector | hybrid | q/s keyword | vector | hybrid |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ]
  for (const [name, x] of Object.entries(r.results)) {
    const mem = x.memory
    lines.push(`| ${name} | ${x.build_seconds} | ${mem?.heap_used_mib ?? '-'} | ${mem?.external_mib ?? '-'} | ${mem?.rss_mib ?? '-'} | ${x.ndcg_at_10.keyword.toFixed(4)} | ${x.ndcg_at_10.vector.toFixed(4)} | ${x.ndcg_at_10.hybrid.toFixed(4)} | ${x.qps.keyword} | ${x.qps.vector} | ${x.qps.hybrid} |`)
  }
  lines.push('')
  for (const [pair, ratios] of Object.entries(r.ratios_vs_orama)) lines.push(`${pair} queries/s: keyword x${ratios.qps_keyword}, vector x${ratios.qps_vector}, hybrid x${ratios.qps_hybrid}`)
  for (const t of r.targets) lines.push(`Target ${t.name}: ${t.met ? 'met' : 'MISSED'}, ${t.detail}`)
  lines.push('Memory: each engine built in a fresh process (node --expose-gc), process.memoryUsage() after full GCs, after minus before the build, input chunks alive in both readings.')
  return lines.join('\n')
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean' }, smoke: { type: 'boolean' }, dataset: { type: 'string' }, 'limit-docs': { type: 'string' },
      'limit-queries': { type: 'string' }, rounds: { type: 'string' }, budget: { type: 'string' }, 'no-memory': { type: 'boolean' }, json: { type: 'string' },
    },
  })
  const num = (v: string | undefined) => (v === undefined ? undefined : Number(v))
  const smoke = values.smoke ?? false
  const result = await run({
    quick: (values.quick ?? false) || smoke,
    dataset: values.dataset,
    limitDocs: num(values['limit-docs']) ?? (smoke ? 300 : undefined),
    limitQueries: num(values['limit-queries']) ?? (smoke ? 30 : undefined),
    rounds: num(values.rounds) ?? (smoke ? 1 : undefined),
    budgetSeconds: num(values.budget) ?? (smoke ? 2 : undefined),
    memory: !values['no-memory'],
  })
  console.log(formatOramaReport(result))
  if (values.json) writeFileSync(values.json, `${JSON.stringify(result, null, 2)}\n`)
}
