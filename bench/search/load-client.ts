// The search benchmark's load generator, in its own process so that the service's main thread does not also
// run it. Forked with an IPC channel; the parent sends the base URL and the query texts once, then one `run`
// per measurement. A run is closed-loop: `connections` loops over keep-alive sockets, each sending the next
// query as soon as its previous answer has been read, for `seconds` or until `requests` were sent.
import { Agent, request } from 'node:http'

export interface LoadInit {
  type: 'init'
  base: string
  queries: string[]
}

export interface LoadRun {
  type: 'run'
  id: number
  kbIds: string[]
  options: Record<string, unknown>
  connections: number
  /** Stop sending after this many seconds (in-flight requests still complete and count). */
  seconds?: number
  /** Or after this many requests. */
  requests?: number
  /** Index of the first query; the loops take queries in turn from there, wrapping around. */
  queryOffset: number
  /** `GET /health` instead of searches: the round trip of the HTTP stack with no work behind it. */
  health?: boolean
}

export interface LoadResult {
  type: 'result'
  id: number
  /** Per completed request, ms from sending to the last byte of the answer, in completion order. */
  latencies: number[]
  errors: number
  firstError: string | null
  /** Answers parsed to check them (the first few of a run): how many had at least one result. */
  checked: number
  nonEmpty: number
  elapsedMs: number
  /** CPU this process used during the run (user + system), ms. */
  cpuMs: number
}

let base: URL | undefined
let queries: string[] = []
const agents = new Map<number, Agent>()
const bodyCache = new Map<string, Buffer[]>()
const CHECKED = 5

function send(agent: Agent, body: Buffer | null): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request({
      agent, host: base!.hostname, port: base!.port, path: body === null ? '/health' : '/api/search', method: body === null ? 'GET' : 'POST',
      headers: body === null ? {} : { 'content-type': 'application/json', 'content-length': body.length },
    }, (res) => {
      const parts: Buffer[] = []
      res.on('data', (d: Buffer) => parts.push(d))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: parts.length === 1 ? parts[0] : Buffer.concat(parts) }))
      res.on('error', reject)
    })
    req.on('error', reject)
    if (body === null) req.end()
    else req.end(body)
  })
}

async function runLoad(r: LoadRun): Promise<LoadResult> {
  let agent = agents.get(r.connections)
  if (agent === undefined) {
    agent = new Agent({ keepAlive: true, maxSockets: r.connections })
    agents.set(r.connections, agent)
  }
  // Bodies prepared before the clock starts: the client's own work stays small next to the service's.
  const key = JSON.stringify([r.kbIds, r.options])
  let bodies = bodyCache.get(key)
  if (bodies === undefined) {
    bodies = queries.map((query) => Buffer.from(JSON.stringify({ query, kb_ids: r.kbIds, options: r.options })))
    bodyCache.set(key, bodies)
  }
  const latencies: number[] = []
  let errors = 0
  let firstError: string | null = null
  let checked = 0
  let nonEmpty = 0
  let sent = 0
  let next = r.queryOffset
  const cpu0 = process.cpuUsage()
  const started = performance.now()
  const deadline = r.seconds === undefined ? Infinity : started + r.seconds * 1000
  const more = () => (r.requests === undefined || sent < r.requests) && performance.now() < deadline
  const loop = async () => {
    while (more()) {
      sent++
      const body = r.health ? null : bodies![next++ % bodies!.length]
      const t = performance.now()
      try {
        const res = await send(agent, body)
        const dt = performance.now() - t
        if (res.status !== 200) {
          errors++
          firstError ??= `HTTP ${res.status}: ${res.body.toString('utf8', 0, 300)}`
          continue
        }
        latencies.push(dt)
        if (checked < CHECKED && body !== null) {
          checked++
          if ((JSON.parse(res.body.toString('utf8')) as { results: unknown[] }).results.length > 0) nonEmpty++
        }
      } catch (err) {
        errors++
        firstError ??= (err as Error).message
      }
    }
  }
  await Promise.all(Array.from({ length: r.connections }, loop))
  const elapsedMs = performance.now() - started
  const cpu = process.cpuUsage(cpu0)
  return { type: 'result', id: r.id, latencies, errors, firstError, checked, nonEmpty, elapsedMs, cpuMs: (cpu.user + cpu.system) / 1000 }
}

process.on('message', (m: LoadInit | LoadRun | { type: 'exit' }) => {
  if (m.type === 'init') {
    base = new URL(m.base)
    queries = m.queries
    process.send!({ type: 'ready' })
  } else if (m.type === 'run') {
    void runLoad(m).then((res) => process.send!(res))
  } else {
    for (const a of agents.values()) a.destroy()
    process.disconnect()
  }
})
