// A real HTTP server speaking the Cohere/Jina-compatible rerank API (POST /v1/rerank {model, query,
// documents, top_n} -> {results: [{index, relevance_score}]}), scoring by shared words with the query,
// with switches to be slow or to fail.
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface FakeRerankServer {
  url: string
  requests: { path: string; body: any; authorization?: string }[]
  mode: 'ok' | 'slow' | 'fail' | 'garbage'
  close(): Promise<void>
}

const words = (s: string) => new Set(s.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])

export async function startFakeRerankServer(): Promise<FakeRerankServer> {
  const state: FakeRerankServer = { url: '', requests: [], mode: 'ok', close: async () => {} }
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString() || '{}')
      state.requests.push({ path: req.url ?? '', body, authorization: req.headers.authorization })
      const answer = () => {
        if (state.mode === 'fail') {
          res.writeHead(500, { 'content-type': 'application/json' }).end('{"message":"internal error"}')
          return
        }
        if (state.mode === 'garbage') {
          res.writeHead(200, { 'content-type': 'application/json' }).end('{"nope":')
          return
        }
        const q = words(body.query)
        // Relevance: share of query words in the document, then the reverse of the given order (so a test can
        // tell reranked output from the fused order).
        const scored = (body.documents as string[]).map((d, index) => {
          const w = words(d)
          let shared = 0
          for (const x of q) if (w.has(x)) shared++
          return { index, relevance_score: +(shared / Math.max(1, q.size) + index * 1e-3).toFixed(6) }
        })
        scored.sort((a, b) => b.relevance_score - a.relevance_score)
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ results: scored.slice(0, body.top_n ?? scored.length) }))
      }
      if (state.mode === 'slow') setTimeout(answer, 3000).unref()
      else answer()
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  state.close = () => new Promise<void>((r) => {
    server.closeAllConnections()
    server.close(() => r())
  })
  return state
}
