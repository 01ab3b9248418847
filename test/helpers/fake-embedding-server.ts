// A real HTTP server on 127.0.0.1 that speaks the two embedding APIs the providers use:
//   Ollama:  POST .../api/embed       {model, input}  -> {model, embeddings}
//   OpenAI:  POST .../embeddings      {model, input}  -> {object, data: [{index, embedding}], model, usage}
//   listing: GET  .../v1/models (and .../models), GET .../api/tags
// Vectors come from the builtin embedder (deterministic, so a test can compute what to expect), scaled so
// that a client that forgets to normalise is caught. Faults are queued per embedding request.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { embedText } from '../../adapters/embedders/builtin.ts'

export interface Fault {
  /** Answer this error status (with the API's error body). */
  status?: number
  /** The error message in the body. */
  message?: string
  retryAfter?: string
  /** Wait before answering (the answer is still given, unless the client is gone). */
  delayMs?: number
  /** 200 with a body that is not JSON. */
  malformed?: boolean
  /** Destroy the socket without answering. */
  close?: boolean
  /** Answer vectors of this length instead of the server's dimensions. */
  dimensions?: number
  /** Answer only the first `count` vectors. */
  count?: number
}

export interface RecordedRequest {
  method: string
  path: string
  headers: IncomingMessage['headers']
  body: unknown
}

export interface FakeEmbeddingServerOptions {
  dimensions?: number
  /** Vectors are the builtin vector times this (default 3). */
  scale?: number
  /** OpenAI answers list data in reverse order (with correct indexes). */
  shuffle?: boolean
  /** When set, requests without `Authorization: Bearer <key>` get a 401 that echoes the key they sent. */
  requireKey?: string
  /** Status of GET .../models (default 200; 404 mimics a server without the OpenAI-compatible listing). */
  modelsStatus?: number
}

export interface FakeEmbeddingServer {
  /** http://127.0.0.1:<port>, no trailing slash. */
  url: string
  dimensions: number
  requests: RecordedRequest[]
  /** The recorded POSTs to an embedding path. */
  embedRequests(): RecordedRequest[]
  /** The next `times` embedding requests get this fault. */
  fail(fault: Fault, times?: number): void
  /** Applies to every embedding request without a queued fault. */
  setDefault(fault: Fault): void
  setModelsStatus(status: number): void
  close(): Promise<void>
}

export async function startFakeEmbeddingServer(opts: FakeEmbeddingServerOptions = {}): Promise<FakeEmbeddingServer> {
  const dimensions = opts.dimensions ?? 16
  const scale = opts.scale ?? 3
  const requests: RecordedRequest[] = []
  const queue: Fault[] = []
  let fallback: Fault = {}
  let modelsStatus = opts.modelsStatus ?? 200
  const timers = new Set<NodeJS.Timeout>()

  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    if (res.destroyed) return
    res.writeHead(status, { 'content-type': 'application/json', ...headers })
    res.end(typeof body === 'string' ? body : JSON.stringify(body))
  }

  const vector = (text: string, dims: number) => Array.from(embedText(text, dims), (x) => x * scale)

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = []
    for await (const c of req) chunks.push(c as Buffer)
    const raw = Buffer.concat(chunks).toString('utf8')
    let body: unknown = raw
    try {
      body = raw ? JSON.parse(raw) : undefined
    } catch {
      // recorded as text
    }
    const path = new URL(req.url ?? '/', 'http://x').pathname
    requests.push({ method: req.method ?? '', path, headers: req.headers, body })
    const ollama = path.endsWith('/api/embed')
    const errorBody = (message: string) => (ollama ? { error: message } : { error: { message, type: 'invalid_request_error', code: null } })

    if (opts.requireKey && req.headers.authorization !== `Bearer ${opts.requireKey}`) {
      const sent = String(req.headers.authorization ?? '').replace(/^Bearer /, '')
      return send(res, 401, errorBody(`Incorrect API key provided: ${sent}. You can find your API key in your account settings.`))
    }

    if (req.method === 'GET') {
      if (path.endsWith('/models')) {
        if (modelsStatus !== 200) return send(res, modelsStatus, errorBody('no models listing here'))
        return send(res, 200, { object: 'list', data: [{ id: 'fake-embed', object: 'model', owned_by: 'test' }] })
      }
      if (path.endsWith('/api/tags')) return send(res, 200, { models: [{ name: 'fake-embed:latest' }] })
      return send(res, 404, errorBody(`no route GET ${path}`))
    }

    if (req.method !== 'POST' || !(ollama || path.endsWith('/embeddings'))) return send(res, 404, errorBody(`no route ${req.method} ${path}`))

    const fault = queue.shift() ?? fallback
    if (fault.delayMs) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(() => {
          timers.delete(t)
          resolve()
        }, fault.delayMs)
        timers.add(t)
      })
    }
    if (fault.close) {
      req.socket.destroy()
      return
    }
    if (fault.status) {
      const headers: Record<string, string> = fault.retryAfter !== undefined ? { 'retry-after': fault.retryAfter } : {}
      return send(res, fault.status, errorBody(fault.message ?? `fake failure ${fault.status}`), headers)
    }
    if (fault.malformed) return send(res, 200, '{"embeddings": [[0.1, 0.2,')

    const { model, input } = (body ?? {}) as { model?: unknown; input?: unknown }
    const inputs = typeof input === 'string' ? [input] : input
    if (typeof model !== 'string' || !Array.isArray(inputs) || !inputs.every((x) => typeof x === 'string')) {
      return send(res, 400, errorBody('model (string) and input (string or array of strings) are required'))
    }
    const dims = fault.dimensions ?? dimensions
    const vectors = inputs.slice(0, fault.count ?? inputs.length).map((t: string) => vector(t, dims))
    if (ollama) return send(res, 200, { model, embeddings: vectors, total_duration: 1, load_duration: 0, prompt_eval_count: inputs.length })
    const data = vectors.map((embedding, index) => ({ object: 'embedding', index, embedding }))
    if (opts.shuffle) data.reverse()
    return send(res, 200, { object: 'list', data, model, usage: { prompt_tokens: inputs.length, total_tokens: inputs.length } })
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => send(res, 500, { error: String(err) }))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo

  return {
    url: `http://127.0.0.1:${port}`,
    dimensions,
    requests,
    embedRequests: () => requests.filter((r) => r.method === 'POST'),
    fail(fault, times = 1) {
      for (let i = 0; i < times; i++) queue.push(fault)
    },
    setDefault(fault) {
      fallback = fault
    },
    setModelsStatus(status) {
      modelsStatus = status
    },
    async close() {
      for (const t of timers) clearTimeout(t)
      timers.clear()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
