// Streamable HTTP at /mcp on the uWS kernel. The SDK's web-standard transport takes a Fetch Request and
// answers a Response; this file bridges our request to one and the Response back to a kernel Reply.
// Stateless: a new server and transport per POST, no session id, so any instance behind a load balancer
// can answer any request and nothing is kept between requests.
import { Readable } from 'node:stream'
import type { ReadableStream as WebReadableStream } from 'node:stream/web'
import { AppError } from '../../kernel/errors.ts'
import { Reply, reply, type PluginContext, type Request as KernelRequest } from '../../kernel/plugin.ts'
import type { McpServerFactory } from './index.ts'

export const MCP_PATH = '/mcp'

/** Reads the raw body up to `limit` bytes: 413 beyond, as for every JSON route. */
export async function readBody(req: KernelRequest, limit: number): Promise<Buffer> {
  const declared = req.headers['content-length']
  if (declared !== undefined && Number(declared) > limit) throw tooLarge(limit)
  const stream = req.stream()
  const parts: Buffer[] = []
  let size = 0
  for await (const chunk of stream) {
    const buf = chunk as Buffer
    size += buf.length
    if (size > limit) {
      stream.destroy()
      throw tooLarge(limit)
    }
    parts.push(buf)
  }
  return parts.length === 1 ? parts[0] : Buffer.concat(parts, size)
}

const tooLarge = (limit: number) =>
  new AppError('BODY_TOO_LARGE', 413, `Request body too large: at most ${limit} bytes`, { headers: { connection: 'close' } })

/** Our request as a Fetch Request: method, headers and the (already bounded) body. */
export function toFetchRequest(req: KernelRequest, body: Buffer | null): Request {
  const headers = new Headers()
  for (const [k, v] of Object.entries(req.headers)) headers.set(k, v)
  const url = `http://${req.headers.host || 'localhost'}${req.path}`
  return new Request(url, { method: req.method, headers, body: body && body.length > 0 ? body : null, signal: req.signal })
}

// Hop-by-hop headers: uWS writes its own framing and connection handling.
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length'])

/**
 * A Fetch Response as a kernel Reply: an SSE body is streamed (with backpressure), anything else is sent
 * as bytes. `done` runs once the body has been fully consumed or abandoned.
 */
export async function toReply(res: Response, done: () => void): Promise<Reply> {
  const headers: Record<string, string> = {}
  res.headers.forEach((v, k) => {
    if (!HOP_BY_HOP.has(k)) headers[k] = v
  })
  const type = res.headers.get('content-type') ?? ''
  if (res.body && type.startsWith('text/event-stream')) {
    const body = Readable.fromWeb(res.body as unknown as WebReadableStream<Uint8Array>)
    body.once('close', done)
    return new Reply(res.status, body, headers, 'stream')
  }
  try {
    const bytes = res.body ? new Uint8Array(await res.arrayBuffer()) : new Uint8Array(0)
    return new Reply(res.status, bytes, headers, 'raw')
  } finally {
    done()
  }
}

/** JSON-RPC error body for the methods this stateless endpoint does not offer. */
const methodNotAllowed = () =>
  reply(405, { jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed: this endpoint is stateless, POST JSON-RPC messages to it.' }, id: null }, { allow: 'POST' })

export function registerMcpRoutes(ctx: PluginContext, createServer: McpServerFactory): void {
  const limit = ctx.settings.server.json_body_limit_kb * 1024
  let transportModule: Promise<typeof import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js')> | undefined
  const tags = ['mcp']

  ctx.route({
    method: 'POST', path: MCP_PATH, tags, bodyKind: 'stream',
    summary: 'Model Context Protocol (Streamable HTTP, stateless): JSON-RPC requests and notifications',
    description: 'Tools: search, list_knowledge_bases, get_document, get_document_status. Send `Accept: application/json, text/event-stream`. ' +
      'Requests are answered with a JSON-RPC response in JSON, notifications with 202.',
    responses: {
      200: { description: 'JSON-RPC response' },
      202: { description: 'Notification or response accepted' },
      400: { description: 'Malformed JSON-RPC message (JSON-RPC error body)' },
      406: { description: 'Accept header lacks application/json and text/event-stream' },
      413: { description: 'Body too large' },
      415: { description: 'Content-Type is not application/json' },
    },
    handler: async (req) => {
      const { WebStandardStreamableHTTPServerTransport } = await (transportModule ??= import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'))
      const body = await readBody(req, limit)
      const server = await createServer(req.caller)
      // JSON answers: the tools send no progress or log notifications, so a stream per request buys nothing.
      const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true, maxRequestBodySize: limit })
      let closed = false
      const close = () => {
        if (closed) return
        closed = true
        server.close().catch((err: unknown) => req.log.warn({ err }, 'MCP server close failed'))
      }
      try {
        await server.connect(transport)
        return await toReply(await transport.handleRequest(toFetchRequest(req, body)), close)
      } catch (err) {
        close()
        throw err
      }
    },
  })
  for (const method of ['GET', 'DELETE'] as const) {
    ctx.route({
      method, path: MCP_PATH, tags,
      summary: method === 'GET' ? 'MCP server-to-client stream: not offered (stateless endpoint), 405' : 'End an MCP session: no sessions (stateless endpoint), 405',
      responses: { 405: { description: 'Not offered by a stateless endpoint' } },
      handler: methodNotAllowed,
    })
  }
}
