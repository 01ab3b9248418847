// Kernel throughput: the same GET and JSON POST handlers on our uWS kernel, node:http, Fastify 5 and bare
// uWebSockets.js (the transport alone: the ceiling for any kernel on it), loaded by wrk (a separate process) in
// alternating rounds after a warm-up. Target (issue 40): at least 0.95 of bare uWebSockets.js's req/s on GET and on
// POST, measured in the same run. node:http and Fastify are shown beside it, not gated.
// Beside req/s, each round reads the CPU time the server's process used (Linux /proc): CPU per request is the work
// the kernel adds to the transport's, which the issue asks to bring under 5 %. On 2 cores wrk and the server share
// the machine and req/s moves with where the scheduler puts them; CPU per request does not, but a shared machine's
// speed still moves it by 5-15 % between rounds (docs/benchmarks.md: counting instructions instead).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { writeFileSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { machine, processCpuMs } from './lib/machine.ts'
import { TARGETS } from './report/targets.ts'

type Server = 'quarry' | 'node' | 'fastify' | 'uws'
const SERVERS: Server[] = ['quarry', 'node', 'fastify', 'uws']
const TARGET_VS_UWS = TARGETS.kernel.rps_vs_bare_uws_min

export interface KernelBenchOptions {
  quick: boolean
  /** Alternating rounds (default 3 quick, 5 full) and seconds of load per round (default 3 quick, 10 full). */
  rounds?: number
  seconds?: number
  /** Seconds of warm-up per server and route (default 1). */
  warmup?: number
}

interface Sample {
  rps: number
  p99ms: number
  requests: number
  /** The server process's CPU (all threads) over the round per request answered, µs; null where /proc is not. */
  cpuUs: number | null
}

function wrkPath(): string {
  const which = spawnSync('sh', ['-c', 'command -v wrk'], { encoding: 'utf8' })
  if (which.status !== 0) throw new Error("wrk is not installed: apt-get install wrk (Debian package 'wrk')")
  return which.stdout.trim()
}

async function startServer(kind: Server, port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['kernel/run.mjs', 'bench/kernel/servers.ts', kind, String(port)], { stdio: ['ignore', 'pipe', 'inherit'] })
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${kind} did not start`)), 30_000)
    child.stdout!.on('data', (d: Buffer) => {
      if (d.toString().includes('ready')) {
        clearTimeout(timer)
        resolve()
      }
    })
    child.once('exit', (code) => reject(new Error(`${kind} exited with ${code}`)))
  })
  return child
}

export function parseWrk(out: string): Omit<Sample, 'cpuUs'> {
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1])
  const requests = Number(/(\d+) requests in /.exec(out)?.[1])
  const m = /\s99%\s+([\d.]+)(us|ms|s)/.exec(out)
  if (!rps || !requests || !m) throw new Error(`cannot read wrk output:\n${out}`)
  const p99ms = Number(m[1]) * (m[2] === 'us' ? 0.001 : m[2] === 's' ? 1000 : 1)
  return { rps, p99ms, requests }
}

/** One round of wrk against url; serverPid's CPU time is read around it. */
function runWrk(wrk: string, url: string, seconds: number, script?: string, serverPid?: number): Sample {
  const args = ['-t1', '-c64', `-d${seconds}s`, '--latency', ...(script ? ['-s', script] : []), url]
  const cpu0 = serverPid === undefined ? null : processCpuMs(serverPid)
  const r = spawnSync(wrk, args, { encoding: 'utf8', timeout: (seconds + 30) * 1000 })
  const cpu1 = serverPid === undefined ? null : processCpuMs(serverPid)
  if (r.status !== 0) throw new Error(`wrk failed: ${r.stderr}`)
  const sample = parseWrk(r.stdout)
  return { ...sample, cpuUs: cpu0 === null || cpu1 === null ? null : ((cpu1 - cpu0) * 1000) / sample.requests }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

export async function run(opts: KernelBenchOptions = { quick: true }) {
  const wrk = wrkPath()
  const rounds = opts.rounds ?? (opts.quick ? 3 : 5)
  const seconds = opts.seconds ?? (opts.quick ? 3 : 10)
  const warmup = opts.warmup ?? 1
  const dir = mkdtempSync(join(tmpdir(), 'quarry-bench-'))
  const postScript = join(dir, 'post.lua')
  writeFileSync(postScript, `wrk.method = "POST"\nwrk.body = '{"name":"quarry","count":21,"tags":["a","b"]}'\nwrk.headers["Content-Type"] = "application/json"\n`)

  const ports: Record<Server, number> = { quarry: 18431, node: 18432, fastify: 18433, uws: 18434 }
  const children: ChildProcess[] = []
  const pids: Partial<Record<Server, number>> = {}
  try {
    for (const s of SERVERS) {
      const child = await startServer(s, ports[s])
      children.push(child)
      pids[s] = child.pid
    }
    await sleep(300)
    // Warm-up: every server, both routes.
    for (const s of SERVERS) {
      runWrk(wrk, `http://127.0.0.1:${ports[s]}/ping`, warmup)
      runWrk(wrk, `http://127.0.0.1:${ports[s]}/echo`, warmup, postScript)
    }
    const samples: Record<string, Record<Server, Sample[]>> = { get: { quarry: [], node: [], fastify: [], uws: [] }, post: { quarry: [], node: [], fastify: [], uws: [] } }
    for (let round = 0; round < rounds; round++) {
      // Alternate the order each round so drift on the machine does not favour one server.
      const order = round % 2 === 0 ? SERVERS : [...SERVERS].reverse()
      for (const s of order) {
        samples.get[s].push(runWrk(wrk, `http://127.0.0.1:${ports[s]}/ping`, seconds, undefined, pids[s]))
        samples.post[s].push(runWrk(wrk, `http://127.0.0.1:${ports[s]}/echo`, seconds, postScript, pids[s]))
      }
    }
    const summary: Record<string, unknown> = {}
    for (const route of ['get', 'post'] as const) {
      const stat = (s: Server) => {
        const rps = samples[route][s].map((x) => x.rps)
        const p99 = samples[route][s].map((x) => x.p99ms)
        const cpu = samples[route][s].map((x) => x.cpuUs)
        const known = cpu.every((x): x is number => x !== null)
        return {
          rps_median: Math.round(median(rps)), rps_min: Math.round(Math.min(...rps)), rps_max: Math.round(Math.max(...rps)), p99_ms_median: +median(p99).toFixed(3),
          // the server's CPU per request answered, µs (null where /proc is not)
          cpu_us_per_request_median: known ? +median(cpu).toFixed(3) : null,
          cpu_us_per_request_min: known ? +Math.min(...cpu).toFixed(3) : null,
          cpu_us_per_request_max: known ? +Math.max(...cpu).toFixed(3) : null,
        }
      }
      const q = stat('quarry'), n = stat('node'), f = stat('fastify'), u = stat('uws')
      const ratioVsUws = +(q.rps_median / u.rps_median).toFixed(3)
      summary[route] = {
        quarry: q, node_http: n, fastify: f, uws: u,
        // The gated figure: the share of what the transport allows (bare uWS, same handlers) that the kernel keeps.
        ratio_vs_uws: ratioVsUws,
        target_vs_uws: TARGET_VS_UWS,
        met: ratioVsUws >= TARGET_VS_UWS,
        // The kernel's CPU per request over bare uWS's: what it does per request that the transport alone does not.
        cpu_vs_uws: q.cpu_us_per_request_median !== null && u.cpu_us_per_request_median !== null ? +(q.cpu_us_per_request_median / u.cpu_us_per_request_median).toFixed(3) : null,
        cpu_vs_uws_max: TARGETS.kernel.cpu_per_request_vs_bare_uws_max,
        // Shown beside it, not gated.
        ratio_vs_fastify: +(q.rps_median / f.rps_median).toFixed(2),
        ratio_vs_node_http: +(q.rps_median / n.rps_median).toFixed(2),
        uws_vs_fastify: +(u.rps_median / f.rps_median).toFixed(2),
      }
    }
    return {
      name: 'kernel',
      machine: machine(),
      sizes: { rounds, seconds_per_round: seconds, connections: 64, wrk_threads: 1 },
      target: `quarry req/s >= ${TARGET_VS_UWS}x bare uWebSockets.js (same handlers, same run) on GET and on POST`,
      targets: { rps_vs_bare_uws_min: TARGET_VS_UWS },
      results: summary,
    }
  } finally {
    for (const c of children) c.kill('SIGTERM')
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await run({ quick: !process.argv.includes('--full') })
  const r = result.results as Record<string, any>
  const m = result.machine
  console.log(`machine: ${m.cpu} x${m.cores}, ${m.memory_gb} GB, node ${m.node}, load average ${JSON.stringify(m.load_average)}; ${JSON.stringify(result.sizes)}`)
  for (const route of ['get', 'post']) {
    const x = r[route]
    console.log(`${route.toUpperCase().padEnd(4)} quarry ${x.quarry.rps_median} req/s (p99 ${x.quarry.p99_ms_median} ms) | bare uws ${x.uws.rps_median} (p99 ${x.uws.p99_ms_median}) | node:http ${x.node_http.rps_median} (p99 ${x.node_http.p99_ms_median}) | fastify ${x.fastify.rps_median} (p99 ${x.fastify.p99_ms_median})`)
    console.log(`     quarry vs bare uws ${x.ratio_vs_uws}x (target >= ${x.target_vs_uws}x: ${x.met ? 'met' : 'NOT met'}); not gated: vs fastify ${x.ratio_vs_fastify}x, vs node:http ${x.ratio_vs_node_http}x, bare uws vs fastify ${x.uws_vs_fastify}x`)
    if (x.cpu_vs_uws !== null) {
      console.log(`     server CPU per request: quarry ${x.quarry.cpu_us_per_request_median} us (${x.quarry.cpu_us_per_request_min}-${x.quarry.cpu_us_per_request_max}), bare uws ${x.uws.cpu_us_per_request_median} us (${x.uws.cpu_us_per_request_min}-${x.uws.cpu_us_per_request_max}): ${x.cpu_vs_uws}x (target <= ${x.cpu_vs_uws_max}x: ${x.cpu_vs_uws <= x.cpu_vs_uws_max ? 'met' : 'NOT met'})`)
    }
  }
}
