// The search benchmark's load generator, in its own process so that the service's main thread does not also
// run it. Forked with an IPC channel; the parent sends the base URL and the query texts once, then one `run`
// per measurement. A run is closed-loop: `connections` loops over keep-alive sockets, each sending the next
// query as soon as its previous answer has been read, for `seconds` or until `requests` were sent. Requests
// are prepared bytes on raw keep-alive sockets (see Connection), as load generators such as wrk do.
import { connect, type Socket } from 'node:net'

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
  /**
   * Every answer must say this meta.cache_status ('hit': answered from the search cache); one that does not counts
   * as an error. Read from the answer's last bytes after its time is taken.
   */
  cacheStatus?: 'hit' | 'miss'
  /** Another server to send the same requests to (a base URL; bench/search/bare-answer.ts): default the service. */
  target?: string
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
/** Idle keep-alive connections per server (host:port), reused across runs: a run takes what it needs and gives them back. */
const idlePools = new Map<string, Connection[]>()
const requestCache = new Map<string, Buffer[]>()
const CHECKED = 5
const HEADER_END = Buffer.from('\r\n\r\n')

/**
 * One keep-alive HTTP/1.1 connection with one request in flight, written as prepared bytes and read by
 * Content-Length: the least client work per request, so that the latency measured is the service's
 * (node:http's client adds a few hundred microseconds of its own per request, which is not the service's).
 */
class Connection {
  private readonly socket: Socket
  private chunks: Buffer[] = []
  private size = 0
  private waiting: { resolve(r: { status: number; body: Buffer }): void; reject(e: Error): void } | null = null
  private broken: Error | null = null

  constructor(host: string, port: number) {
    this.socket = connect({ host, port, noDelay: true })
    this.socket.on('data', (d: Buffer) => this.onData(d))
    this.socket.on('error', (e) => this.fail(e))
    this.socket.on('close', () => this.fail(new Error('the service closed the connection')))
  }

  get usable(): boolean {
    return this.broken === null
  }

  request(bytes: Buffer): Promise<{ status: number; body: Buffer }> {
    if (this.broken) return Promise.reject(this.broken)
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject }
      this.socket.write(bytes)
    })
  }

  close(): void {
    this.socket.destroy()
  }

  private fail(e: Error): void {
    this.broken ??= e
    const w = this.waiting
    this.waiting = null
    w?.reject(e)
  }

  private onData(d: Buffer): void {
    this.chunks.push(d)
    this.size += d.length
    const all = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks, this.size)
    this.chunks = [all]
    const headEnd = all.indexOf(HEADER_END)
    if (headEnd < 0) return
    const head = all.toString('latin1', 0, headEnd)
    const status = Number(head.slice(9, 12))
    const m = /\r\ncontent-length:\s*(\d+)/i.exec(head)
    if (m === null) {
      this.fail(new Error(`response without Content-Length (chunked answers are not read by this client): ${head.slice(0, 200)}`))
      this.socket.destroy()
      return
    }
    const end = headEnd + 4 + Number(m[1])
    if (all.length < end) return
    if (all.length > end) {
      this.fail(new Error('bytes after the response: one request at a time per connection'))
      this.socket.destroy()
      return
    }
    this.chunks = []
    this.size = 0
    const w = this.waiting
    this.waiting = null
    w?.resolve({ status, body: all.subarray(headEnd + 4, end) })
  }
}

const CACHE_STATUS = Buffer.from('"cache_status":"')

/** meta.cache_status of a search answer, found from its end (the field closes the answer: plugins/search/cache.ts). */
function cacheStatusOf(body: Buffer): string | null {
  const at = body.lastIndexOf(CACHE_STATUS)
  if (at < 0) return null
  const from = at + CACHE_STATUS.length
  const end = body.indexOf(0x22, from)
  return end < 0 ? null : body.toString('utf8', from, end)
}

function httpRequest(method: string, path: string, body: Buffer | null): Buffer {
  const head = `${method} ${path} HTTP/1.1\r\nHost: ${base!.host}\r\n` +
    (body === null ? '\r\n' : `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`)
  return body === null ? Buffer.from(head, 'latin1') : Buffer.concat([Buffer.from(head, 'latin1'), body])
}

async function runLoad(r: LoadRun): Promise<LoadResult> {
  // Requests prepared before the clock starts: the client's own work stays small next to the service's.
  const key = r.health ? 'health' : JSON.stringify([r.kbIds, r.options])
  let requests = requestCache.get(key)
  if (requests === undefined) {
    requests = r.health
      ? [httpRequest('GET', '/health', null)]
      : queries.map((query) => httpRequest('POST', '/api/search', Buffer.from(JSON.stringify({ query, kb_ids: r.kbIds, options: r.options }))))
    requestCache.set(key, requests)
  }
  const server = r.target === undefined ? base! : new URL(r.target)
  let idle = idlePools.get(server.host)
  if (idle === undefined) idlePools.set(server.host, (idle = []))
  const conns: Connection[] = []
  while (conns.length < r.connections) {
    const c = idle.pop() ?? new Connection(server.hostname, Number(server.port))
    if (c.usable) conns.push(c)
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
  const loop = async (conn: Connection) => {
    while (more()) {
      sent++
      const bytes = requests![next++ % requests!.length]
      const t = performance.now()
      try {
        const res = await conn.request(bytes)
        const dt = performance.now() - t
        if (res.status !== 200) {
          errors++
          firstError ??= `HTTP ${res.status}: ${res.body.toString('utf8', 0, 300)}`
          continue
        }
        if (r.cacheStatus !== undefined) {
          const status = cacheStatusOf(res.body)
          if (status !== r.cacheStatus) {
            errors++
            firstError ??= `meta.cache_status ${status ?? 'absent'}, expected ${r.cacheStatus}`
            continue
          }
        }
        latencies.push(dt)
        if (checked < CHECKED && !r.health) {
          checked++
          if ((JSON.parse(res.body.toString('utf8')) as { results: unknown[] }).results.length > 0) nonEmpty++
        }
      } catch (err) {
        errors++
        firstError ??= (err as Error).message
      }
    }
  }
  await Promise.all(conns.map(loop))
  const elapsedMs = performance.now() - started
  for (const c of conns) {
    if (c.usable) idle.push(c)
    else c.close()
  }
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
    for (const idle of idlePools.values()) for (const c of idle.splice(0)) c.close()
    process.disconnect()
  }
})
