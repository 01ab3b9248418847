// Ceilings measured beside the service (issue 40), bare uWebSockets.js servers that do nothing but what they must.
// startBareStore: an uncached search's share outside the index (below). startBareAnswer: a cached search's round
// trip: bare uWebSockets.js answering GET /health and POST
// /api/search with the bytes the service answered them with, so that the same client sends the same requests and
// reads the same answers from a server that does nothing else. A search's answer is found by its request body, exactly
// as the load client sends it (bench/search/load-client.ts), after the body was read whole and parsed as JSON, as any
// handler of a POST must. The ratio of its POST to its GET /health is the fixed cost's floor: what an answer of that
// size, behind a request with a body, costs over a 15-byte GET on this machine.
//
// Each listens in the process that runs the service, on a port of its own: the benchmarks drive their client from that
// process (a message per request), which keeps it awake, and a server in another process measured 20-30 µs slower
// per round trip for waking up (AMD EPYC, 2 cores).
import uWS from 'uWebSockets.js'

export interface BareAnswer {
  base: string
  close(): void
}

/** What the service answers to GET /health, and to each search body after it is cached (sent twice, the second kept). */
export async function captureAnswers(base: string, bodies: string[]): Promise<{ health: Buffer; answers: Map<string, Buffer> }> {
  const health = Buffer.from(await (await fetch(`${base}/health`)).arrayBuffer())
  const answers = new Map<string, Buffer>()
  for (const body of bodies) {
    if (answers.has(body)) continue
    let answer = Buffer.alloc(0)
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${base}/api/search`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
      if (res.status !== 200) throw new Error(`search answered ${res.status}`)
      answer = Buffer.from(await res.arrayBuffer())
    }
    if (!answer.includes('"cache_status":"hit"')) throw new Error(`the second send was not a hit: ${answer.subarray(-80)}`)
    answers.set(body, answer)
  }
  return { health, answers }
}

/** Listens with these answers: a search's request body (as the load client writes it) to its answer. */
export async function startBareAnswer(health: Buffer, answers: ReadonlyMap<string, Buffer>): Promise<BareAnswer> {
  const app = uWS.App()
  app.get('/health', (res) => {
    res.cork(() => res.writeHeader('content-type', 'application/json').end(health))
  })
  app.post('/api/search', (res) => onBody(res, (body) => {
    JSON.parse(body)
    const answer = answers.get(body)
    res.cork(() => (answer === undefined ? res.writeStatus('404 Not Found').end() : res.writeHeader('content-type', 'application/json').end(answer)))
  }))
  return listen(app)
}

/** Calls `then` with a request's whole body, read as any handler of a POST must read it; `gone()`: the client left. */
function onBody(res: uWS.HttpResponse, then: (body: string, gone: () => boolean) => void): void {
  let chunks: Buffer[] | null = []
  res.onAborted(() => (chunks = null))
  res.onData((ab, last) => {
    if (chunks === null) return
    chunks.push(Buffer.from(ab.slice(0)))
    if (last) then(Buffer.concat(chunks).toString(), () => chunks === null)
  })
}

async function listen(app: uWS.TemplatedApp): Promise<BareAnswer> {
  const token = await new Promise<uWS.us_listen_socket | false>((r) => app.listen('127.0.0.1', 0, r))
  if (!token) throw new Error('the bare server could not listen')
  return { base: `http://127.0.0.1:${uWS.us_socket_local_port(token)}`, close: () => uWS.us_listen_socket_close(token) }
}

/**
 * The ceiling of an uncached search's share outside the index (issue 40): bare uWS answering POST /api/search after
 * it did the baseline's work for the request, `work(body)` (bench/search.bench.ts: the query embedded and encoded,
 * then the vector store searched directly), and nothing else: no routing, validation, fusion, payloads or JSON. What
 * that work returns is the time it spent in the store, the ms the share divides by, and the answer sent (bytes of
 * an answer of the service to the same case, so that the client reads as much). Its end-to-end time less the store's
 * is the least any service answering through this client on this machine can spend outside the index: the loopback
 * round trip, the answer's bytes, and the wake-ups of a client and a server that waited for the index.
 */
export async function startBareStore(work: (body: string) => Promise<{ indexMs: number; answer: Buffer }>): Promise<BareAnswer & { lastIndexMs(): number }> {
  const app = uWS.App()
  let last = NaN
  app.post('/api/search', (res) => onBody(res, (body, gone) => {
    work(body).then(({ indexMs, answer }) => {
      last = indexMs
      if (!gone()) res.cork(() => res.writeHeader('content-type', 'application/json').end(answer))
    }, (err: unknown) => {
      if (!gone()) res.cork(() => res.writeStatus('500 Internal Server Error').end(String(err)))
    })
  }))
  return { ...(await listen(app)), lastIndexMs: () => last }
}
