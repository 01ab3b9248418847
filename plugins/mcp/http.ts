// Streamable HTTP at /mcp on the uWS kernel. The SDK's web-standard transport takes a Fetch Request and
// answers a Response; this file bridges our request to one and the Response back to a kernel Reply.
// A new server and transport per POST, so any instance behind a load balancer answers any request. A client
// that accepts text/event-stream gets what FastMCP (the older service) gives it: SSE-framed answers and, from
// initialize, an mcp-session-id, signed so that every instance recognises it (session.ts). A client that asks
// for JSON only gets plain JSON and no session, as before.
import { Readable } from 'node:stream'
import type { ReadableStream as WebReadableStream } from 'node:stream/web'
import { AppError } from '../../kernel/errors.ts'
import { Reply, reply, type PluginContext, type Request as KernelRequest } from '../../kernel/plugin.ts'
import type { McpServerFactory } from './index.ts'
import type { SessionIds } from './session.ts'

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

/** Our request as a Fetch Request: method, headers (with `overrides`) and the (already bounded) body. */
export function toFetchRequest(req: KernelRequest, body: Buffer | null, overrides: Record<string, string> = {}): Request {
  const headers = new Headers()
  for (const [k, v] of Object.entries(req.headers)) headers.set(k, v)
  for (const [k, v] of Object.entries(overrides)) headers.set(k, v)
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

/** JSON-RPC error body for the methods this endpoint does not offer. */
const methodNotAllowed = () =>
  reply(405, { jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed: POST JSON-RPC messages to this endpoint; it keeps no server-to-client stream and no session to end.' }, id: null }, { allow: 'POST' })

/** What the MCP spec asks for a session id the server does not know (the client then initializes again); the SDK's own text. */
const sessionNotFound = () => reply(404, { jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null })

export const SSE = 'text/event-stream'
/** Accept values under which a JSON-only answer is what the client asked for. */
const JSON_ACCEPT = /application\/json|application\/\*|\*\/\*/

type Parsed = { ok: true; value: unknown } | { ok: false }

function parseJson(body: Buffer): Parsed {
  try {
    return { ok: true, value: JSON.parse(body.toString('utf8')) }
  } catch {
    return { ok: false }
  }
}

export function registerMcpRoutes(ctx: PluginContext, createServer: McpServerFactory, sessions: SessionIds): void {
  const limit = ctx.settings.server.json_body_limit_kb * 1024
  let transportModule: Promise<typeof import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js')> | undefined
  let typesModule: Promise<typeof import('@modelcontextprotocol/sdk/types.js')> | undefined
  const tags = ['mcp']

  ctx.route({
    method: 'POST', path: MCP_PATH, tags, bodyKind: 'stream',
    summary: 'Model Context Protocol (Streamable HTTP): JSON-RPC requests and notifications',
    description: 'Tools: search, list_knowledge_bases, get_document, get_document_status. ' +
      'With `Accept: application/json, text/event-stream` (what MCP clients send) requests are answered as SSE (`event: message`, ' +
      '`data: <JSON-RPC response>`) and initialize returns an `mcp-session-id` header, valid on every instance, to send with later requests. ' +
      'With `Accept: application/json` only, answers are plain JSON and no session is opened. Notifications are answered with 202.',
    responses: {
      200: { description: 'JSON-RPC response, as SSE or JSON by the Accept header' },
      202: { description: 'Notification or response accepted' },
      400: { description: 'Malformed JSON-RPC message (JSON-RPC error body)' },
      404: { description: 'mcp-session-id not issued by this service, or expired: initialize again' },
      406: { description: 'Accept header allows neither application/json nor text/event-stream' },
      413: { description: 'Body too large' },
      415: { description: 'Content-Type is not application/json' },
    },
    handler: async (req) => {
      const [{ WebStandardStreamableHTTPServerTransport }, { isInitializeRequest }] = await Promise.all([
        transportModule ??= import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'),
        typesModule ??= import('@modelcontextprotocol/sdk/types.js'),
      ])
      // Read whole before any answer, so that a keep-alive connection is left at the next request.
      const body = await readBody(req, limit)
      const sessionId = req.headers['mcp-session-id']
      if (sessionId !== undefined && !(await sessions.verify(sessionId))) return sessionNotFound()
      const accept = req.headers.accept ?? ''
      const sse = accept.includes(SSE)
      // The transport wants both types listed; a JSON-only client is told so by its Accept, and answered in JSON.
      const overrides: Record<string, string> = !sse && (accept === '' || JSON_ACCEPT.test(accept)) ? { accept: `application/json, ${SSE}` } : {}
      // Parsed once here (to tell initialize) and handed over; a body that does not parse is left to the transport's 400.
      const parsed = parseJson(body)
      const initialize = parsed.ok && (Array.isArray(parsed.value) ? parsed.value.some((m) => isInitializeRequest(m)) : isInitializeRequest(parsed.value))
      const issued = sse && initialize ? await sessions.issue() : undefined
      const server = await createServer(req.caller)
      const transport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: issued === undefined ? undefined : () => issued,
        enableJsonResponse: !sse,
        maxRequestBodySize: limit,
      })
      let closed = false
      const close = () => {
        if (closed) return
        closed = true
        server.close().catch((err: unknown) => req.log.warn({ err }, 'MCP server close failed'))
      }
      try {
        await server.connect(transport)
        const res = await transport.handleRequest(toFetchRequest(req, body, overrides), parsed.ok ? { parsedBody: parsed.value } : undefined)
        const out = await toReply(res, close)
        // Every answer inside a session names it, as the transport does for the sessions it keeps itself.
        if (sessionId !== undefined && res.status < 400) out.headers['mcp-session-id'] = sessionId
        return out
      } catch (err) {
        close()
        throw err
      }
    },
  })
  for (const method of ['GET', 'DELETE'] as const) {
    ctx.route({
      method, path: MCP_PATH, tags,
      summary: method === 'GET' ? 'MCP server-to-client stream: not offered (the tools send nothing unasked), 405' : 'End an MCP session: not offered (sessions hold nothing to end), 405',
      responses: { 405: { description: 'Not offered; the MCP spec allows 405 for both' } },
      handler: methodNotAllowed,
    })
  }
}
