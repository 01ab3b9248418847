// A search request's fixed cost alone (issue 40): the search bench's cached round trip against GET /health, on a
// small KB (the figure does not depend on the KB's size), without the rest of the search bench. Three uses:
//
//   npx tsx bench/search/fixed-cost.ts [--chunks=500] [--rounds=5] [--pairs=200] [--data=<dir>]
//       the service in this process as the search bench starts it, the bench's load client in another; per round
//       and case, each query sent twice (the second a hit, checked) beside a GET /health, in turn; p50 ratios.
//   node kernel/run.mjs bench/search/fixed-cost.ts --serve [--port=N] [--slow=50] [--data=<dir>]
//       the same service with every query of both hybrid cases cached, then "ready <port>" on stdout; for
//       valgrind --tool=callgrind --instr-atstart=no (--slow: the service's clocks run this many times slower, so
//       that under valgrind a hit still answers in under a millisecond, as at full speed, and per-KB settings are
//       read again as often per request as at full speed).
//   npx tsx bench/search/fixed-cost.ts --send --port=N --what=health|one|split --requests=N
//       exactly N requests at 1 connection, one in flight (hits checked), for counting between two dumps.
import { fork } from 'node:child_process'
import { connect } from 'node:net'
import { mkdirSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createAdapters } from '../../adapters/index.ts'
import { createApp } from '../../kernel/app.ts'
import { resolveSettings } from '../../kernel/config/load.ts'
import { createLogger } from '../../kernel/log.ts'
import { defaultPlugins } from '../../kernel/plugins.ts'
import { median } from '../lib/machine.ts'
import { captureAnswers, startBareAnswer } from './bare-answer.ts'
import { buildSearchData, readSearchData, registerSearchDocuments } from './build-data.ts'
import { gateCache } from './cache-gate.ts'
import type { LoadResult, LoadRun } from './load-client.ts'
import { profileWhile, summarizeProfile } from './profile.ts'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..')
const DIMS = 1024
const SPLITS = 10
const TOP_K = 10

const argv = process.argv.slice(2)
const arg = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
const num = (name: string, dflt: number) => (arg(name) === undefined ? dflt : Number(arg(name)))

async function startService(port: number) {
  const chunks = num('chunks', 500)
  const dataDir = arg('data') ?? join(tmpdir(), `quarry-fixed-cost-${chunks}`)
  mkdirSync(dataDir, { recursive: true })
  const dataOpts = { dataDir, chunks, dimensions: DIMS, splits: SPLITS, queries: 200 }
  const data = (await readSearchData(dataOpts)) ?? (await buildSearchData(dataOpts))
  const { settings } = resolveSettings({
    data_dir: dataDir, logging: { level: 'ERROR' }, embedding: { vector_size: DIMS },
    knowledge_bases: [data.kbs.one, ...data.kbs.split].map((id) => ({ id })),
  })
  const log = createLogger('ERROR')
  const adapters = await createAdapters(settings, log)
  await registerSearchDocuments(adapters, data)
  const cache = gateCache(adapters.searchCache)
  adapters.searchCache = cache
  const app = await createApp({ settings, plugins: defaultPlugins(), log, adapters })
  const bound = await app.listen(port, '127.0.0.1')
  const store = app.adapters.vectors as { whenIndexed?(kb: string): Promise<void> }
  for (const kb of [data.kbs.one, ...data.kbs.split]) await store.whenIndexed?.(kb)
  cache.storing = true
  return { app, data, cache, port: bound, base: `http://127.0.0.1:${bound}` }
}

const request = (host: string, method: string, path: string, body?: object) => {
  const b = body === undefined ? null : Buffer.from(JSON.stringify(body))
  const head = `${method} ${path} HTTP/1.1\r\nHost: ${host}\r\n` + (b === null ? '\r\n' : `Content-Type: application/json\r\nContent-Length: ${b.length}\r\n\r\n`)
  return b === null ? Buffer.from(head, 'latin1') : Buffer.concat([Buffer.from(head, 'latin1'), b])
}

const searchBody = (query: string, kbIds: string[]) => ({ query, kb_ids: kbIds, options: { mode: 'hybrid', top_k: TOP_K } })

/** Sends requests one at a time on one keep-alive connection; resolves each answer read by Content-Length. */
function sender(port: number) {
  const socket = connect({ host: '127.0.0.1', port, noDelay: true })
  let buf: Buffer = Buffer.alloc(0)
  let waiting: ((body: Buffer) => void) | null = null
  socket.on('data', (d: Buffer) => {
    buf = buf.length === 0 ? d : Buffer.concat([buf, d])
    const end = buf.indexOf('\r\n\r\n')
    if (end < 0) return
    const m = /content-length: *(\d+)/i.exec(buf.toString('latin1', 0, end))
    const total = end + 4 + Number(m![1])
    if (buf.length < total) return
    const body = buf.subarray(end + 4, total)
    buf = Buffer.alloc(0)
    const w = waiting
    waiting = null
    w!(body)
  })
  return {
    send: (bytes: Buffer) => new Promise<Buffer>((r) => {
      waiting = r
      socket.write(bytes)
    }),
    close: () => socket.destroy(),
  }
}

const kbsOf = (what: string): string[] => (what === 'one' ? ['one'] : Array.from({ length: SPLITS }, (_, i) => `s${i}`))

async function send(): Promise<void> {
  const port = num('port', 0)
  const what = arg('what') ?? 'health'
  const n = num('requests', 1000)
  const queries = num('queries', 50)
  const qs = JSON.parse(process.env.FIXED_COST_QUERIES ?? '[]') as string[]
  const host = `127.0.0.1:${port}`
  const reqs = what === 'health' ? [request(host, 'GET', '/health')] : qs.slice(0, queries).map((q) => request(host, 'POST', '/api/search', searchBody(q, kbsOf(what))))
  if (reqs.length === 0) throw new Error('no queries: FIXED_COST_QUERIES is empty')
  const s = sender(port)
  for (let i = 0; i < n; i++) {
    const body = await s.send(reqs[i % reqs.length])
    if (what !== 'health' && !body.subarray(-40).toString().includes('"cache_status":"hit"')) throw new Error(`not a hit: ${body.subarray(-80)}`)
  }
  s.close()
}

async function serve(): Promise<void> {
  const slow = num('slow', 1)
  if (slow !== 1) {
    // Only what the service reads: its clocks run `slow` times slower from here on.
    const perfNow = performance.now.bind(performance)
    const t0 = perfNow()
    performance.now = () => t0 + (perfNow() - t0) / slow
    const dateNow = Date.now
    const d0 = dateNow()
    Date.now = () => Math.floor(d0 + (dateNow() - d0) / slow)
  }
  const { data, port } = await startService(num('port', 0))
  const queries = data.queries.slice(0, num('queries', 50))
  const s = sender(port)
  const host = `127.0.0.1:${port}`
  for (const what of ['one', 'split']) {
    for (const q of queries) {
      // a KB's first search with results gives it its cache version; the next one stores
      await s.send(request(host, 'POST', '/api/search', searchBody(q, kbsOf(what))))
      await s.send(request(host, 'POST', '/api/search', searchBody(q, kbsOf(what))))
      const b = await s.send(request(host, 'POST', '/api/search', searchBody(q, kbsOf(what))))
      if (!b.toString().includes('"cache_status":"hit"')) throw new Error('the second send was not a hit')
    }
  }
  s.close()
  process.stdout.write(`ready ${port} ${JSON.stringify(queries)}\n`)
  const profileTo = arg('profile')
  if (profileTo !== undefined) {
    // --profile=<file.cpuprofile>: the main thread profiled from here until SIGUSR2, then summarised
    let stop: () => void
    const stopped = new Promise<void>((r) => (stop = r))
    process.once('SIGUSR2', () => stop())
    const { profile } = await profileWhile(() => stopped, num('interval', 50))
    writeFileSync(profileTo, JSON.stringify(profile))
    const sum = await summarizeProfile(profile, ROOT, 40)
    console.log(`busy ${sum.busy_ms} ms, idle ${sum.idle_ms} ms`)
    for (const c of sum.by_category) console.log(`  ${(c.share * 100).toFixed(1).padStart(5)} %  ${c.category}`)
    for (const f of sum.top_functions) console.log(`  ${(f.share * 100).toFixed(1).padStart(5)} %  ${f.fn}`)
    process.exit(0)
  }
}

async function ratio(): Promise<void> {
  const rounds = num('rounds', 5)
  const pairs = num('pairs', 200)
  const { app, data, base } = await startService(0)
  const child = fork(join(ROOT, 'bench/search/load-client.ts'), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const waiting = new Map<number, (r: LoadResult) => void>()
  await new Promise<void>((ready) => {
    child.on('message', (m: LoadResult | { type: 'ready' }) => (m.type === 'ready' ? ready() : waiting.get(m.id)?.(m)))
    child.send({ type: 'init', base, queries: data.queries })
  })
  let id = 0
  const run = (r: Omit<LoadRun, 'type' | 'id'>) => new Promise<LoadResult>((res) => {
    const i = id++
    waiting.set(i, (x) => {
      waiting.delete(i)
      if (x.errors > 0) throw new Error(x.firstError ?? 'error')
      res(x)
    })
    child.send({ type: 'run', id: i, ...r })
  })
  const cases = [{ name: 'hybrid 1 KB', kbIds: kbsOf('one') }, { name: 'hybrid 10 KBs', kbIds: kbsOf('split') }]
  // A KB gets a cache version at its first search with results: only from then on are its answers stored.
  for (const c of cases) await run({ kbIds: c.kbIds, options: { mode: 'hybrid', top_k: TOP_K }, connections: 1, requests: 20, queryOffset: 0 })
  // The ceiling beside: bare uWS answering the same requests with the same bytes (bench/search/bare-answer.ts).
  const bodies = cases.flatMap((c) => Array.from({ length: Math.min(rounds * pairs, data.queries.length) }, (_, k) =>
    JSON.stringify({ query: data.queries[k % data.queries.length], kb_ids: c.kbIds, options: { mode: 'hybrid', top_k: TOP_K } })))
  const captured = await captureAnswers(base, bodies)
  const bare = await startBareAnswer(captured.health, captured.answers)
  const all = new Map(cases.map((c) => [c.name, { cached: [] as number[], health: [] as number[], bareCached: [] as number[], bareHealth: [] as number[], rounds: [] as number[] }]))
  for (let r = 0; r < rounds; r++) {
    for (const c of r % 2 === 0 ? cases : [...cases].reverse()) {
      const m = all.get(c.name)!
      const cached: number[] = []
      const health: number[] = []
      for (let i = 0; i < pairs; i++) {
        const req = { kbIds: c.kbIds, options: { mode: 'hybrid', top_k: TOP_K }, connections: 1, requests: 1, queryOffset: (r * pairs + i) % data.queries.length }
        await run(req)
        const healthReq = { kbIds: [], options: {}, connections: 1, requests: 1, queryOffset: 0, health: true }
        const timed = [
          async () => cached.push((await run({ ...req, cacheStatus: 'hit' })).latencies[0]),
          async () => health.push((await run(healthReq)).latencies[0]),
          async () => m.bareCached.push((await run({ ...req, cacheStatus: 'hit', target: bare.base })).latencies[0]),
          async () => m.bareHealth.push((await run({ ...healthReq, target: bare.base })).latencies[0]),
        ]
        for (let k = 0; k < timed.length; k++) await timed[(k + i) % timed.length]()
      }
      m.cached.push(...cached)
      m.health.push(...health)
      m.rounds.push(median(cached) / median(health))
    }
  }
  for (const c of cases) {
    const m = all.get(c.name)!
    const f = (x: number) => x.toFixed(4)
    console.log(`${c.name}: cached p50 ${f(median(m.cached))} ms, GET /health p50 ${f(median(m.health))} ms: ${(median(m.cached) / median(m.health)).toFixed(3)}x (rounds ${m.rounds.map((x) => x.toFixed(3)).join(' ')})`)
    console.log(`  ceiling, bare uWS answering the same bytes: POST p50 ${f(median(m.bareCached))} ms, GET /health p50 ${f(median(m.bareHealth))} ms: ${(median(m.bareCached) / median(m.bareHealth)).toFixed(3)}x; ` +
      `ours over bare: cached ${(median(m.cached) / median(m.bareCached)).toFixed(3)}x, GET /health ${(median(m.health) / median(m.bareHealth)).toFixed(3)}x`)
  }
  bare.close()
  child.send({ type: 'exit' })
  await app.close()
}

const main = argv.includes('--serve') ? serve : argv.includes('--send') ? send : ratio
await main()
