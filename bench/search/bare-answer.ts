// The ceiling of a cached search's round trip (issue 40): bare uWebSockets.js answering GET /health and POST
// /api/search with the bytes the service answered them with, so that the same client sends the same requests and
// reads the same answers from a server that does nothing else. A search's answer is found by its request body, exactly
// as the load client sends it (bench/search/load-client.ts), after the body was read whole and parsed as JSON, as any
// handler of a POST must. The ratio of its POST to its GET /health is the fixed cost's floor: what an answer of that
// size, behind a request with a body, costs over a 15-byte GET on this machine.
//
// It listens in the process that runs the service, on a port of its own: the benchmarks drive their client from that
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
  app.post('/api/search', (res) => {
    let chunks: Buffer[] | null = []
    res.onAborted(() => (chunks = null))
    res.onData((ab, last) => {
      if (chunks === null) return
      chunks.push(Buffer.from(ab.slice(0)))
      if (!last) return
      const body = Buffer.concat(chunks).toString()
      JSON.parse(body)
      const answer = answers.get(body)
      res.cork(() => (answer === undefined ? res.writeStatus('404 Not Found').end() : res.writeHeader('content-type', 'application/json').end(answer)))
    })
  })
  const token = await new Promise<uWS.us_listen_socket | false>((r) => app.listen('127.0.0.1', 0, r))
  if (!token) throw new Error('the bare server could not listen')
  return { base: `http://127.0.0.1:${uWS.us_socket_local_port(token)}`, close: () => uWS.us_listen_socket_close(token) }
}
