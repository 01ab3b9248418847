// The deprecated HTTP+SSE transport (MCP 2024-11-05), served when mcp.transport is `sse` for clients that
// predate Streamable HTTP: GET /mcp/sse opens a stream whose first event names the URL to POST messages to
// (/mcp/messages?session_id=...); answers travel back on the stream. The SDK's SSE server transport writes
// to a node:http response, which the uWS kernel does not have, hence this small Transport of our own.
// Sessions live in this process: behind several instances, route a session's requests to one instance.
// [ENT] A session belongs to the user who opened it: a message from anyone else (or from no one) is refused as
// if the session did not exist, so a leaked session id gives nobody else that user's access. Its tools run with
// the Caller of the opening request, so a message whose own token carries other groups or another super-admin
// status is refused too (403): what the token says now must decide, and the client opens a new session.
import { randomUUID } from 'node:crypto'
import { PassThrough } from 'node:stream'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js'
import { AppError, clip } from '../../kernel/errors.ts'
import { rawReply, streamReply, type Caller, type PluginContext } from '../../kernel/plugin.ts'
import { MCP_PATH } from './http.ts'
import type { McpServerFactory } from './index.ts'

export const SSE_PATH = `${MCP_PATH}/sse`
export const MESSAGES_PATH = `${MCP_PATH}/messages`
const MAX_SESSIONS = 1000
const KEEP_ALIVE_MS = 15_000

/** What the session's tools were given that a later token of the same user may change (roles come from the store). */
const grantsOf = (c: Caller) => JSON.stringify([c.is_super_admin, [...c.groups].sort()])

class SseTransport implements Transport {
  readonly sessionId = randomUUID()
  readonly stream = new PassThrough()
  /** [ENT] Who opened it; null in the base edition. */
  opener: Caller | null = null
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (message: JSONRPCMessage) => void
  private closed = false
  private readonly keepAlive: NodeJS.Timeout

  constructor() {
    // Proxies drop idle connections: a comment line now and then keeps the stream open.
    this.keepAlive = setInterval(() => this.write(': keep-alive\n\n'), KEEP_ALIVE_MS).unref()
    this.stream.once('close', () => void this.close())
  }

  async start(): Promise<void> {}

  private write(frame: string): boolean {
    return !this.closed && this.stream.write(frame)
  }

  announce(endpoint: string): void {
    this.write(`event: endpoint\ndata: ${endpoint}\n\n`)
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) throw new Error('SSE stream closed')
    // Waits for the client to read when it is slow: its unread answers do not pile up here.
    if (!this.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`)) await new Promise((r) => this.stream.once('drain', r))
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    clearInterval(this.keepAlive)
    this.stream.end()
    this.onclose?.()
  }
}

export function registerSseRoutes(ctx: PluginContext, createServer: McpServerFactory): { close(): Promise<void> } {
  const sessions = new Map<string, SseTransport>()
  let types: Promise<typeof import('@modelcontextprotocol/sdk/types.js')> | undefined
  const tags = ['mcp']

  ctx.route({
    method: 'GET', path: SSE_PATH, tags,
    summary: 'MCP over the deprecated HTTP+SSE transport: opens the stream (mcp.transport sse only)',
    responses: { 200: { description: 'Event stream; the first event (endpoint) names the URL for messages', contentType: 'text/event-stream' }, 503: { description: 'Too many open sessions' } },
    handler: async (req) => {
      if (sessions.size >= MAX_SESSIONS) throw new AppError('MCP_TOO_MANY_SESSIONS', 503, `At most ${MAX_SESSIONS} MCP SSE sessions are open at once; use Streamable HTTP at ${MCP_PATH}`)
      const server = await createServer(req.caller)
      const transport = new SseTransport()
      transport.opener = req.caller
      sessions.set(transport.sessionId, transport)
      transport.onclose = () => {
        sessions.delete(transport.sessionId)
        void server.close().catch(() => {})
      }
      req.signal.addEventListener('abort', () => void transport.close(), { once: true })
      await server.connect(transport)
      transport.announce(`${MESSAGES_PATH}?session_id=${transport.sessionId}`)
      return streamReply(transport.stream, 'text/event-stream', { 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no' })
    },
  })

  ctx.route({
    method: 'POST', path: MESSAGES_PATH, tags, bodyKind: 'json',
    summary: 'MCP over the deprecated HTTP+SSE transport: one JSON-RPC message for a session (mcp.transport sse only)',
    responses: { 202: { description: 'Accepted; the answer comes on the session\'s stream' }, 400: { description: 'Not a JSON-RPC message' }, 404: { description: 'No such session' } },
    handler: async (req) => {
      const id = typeof req.query.session_id === 'string' ? req.query.session_id : ''
      const found = sessions.get(id)
      const transport = found && (found.opener?.user_id ?? null) === (req.caller?.user_id ?? null) ? found : undefined
      if (!transport) throw new AppError('MCP_SESSION_NOT_FOUND', 404, `MCP session '${clip(id)}' not found: open one with GET ${SSE_PATH}`)
      if (transport.opener && req.caller && grantsOf(transport.opener) !== grantsOf(req.caller)) {
        throw new AppError('MCP_SESSION_CALLER_CHANGED', 403, `MCP session '${clip(id)}' was opened with other groups or super-admin status than this token's: open a new one with GET ${SSE_PATH}`)
      }
      const { JSONRPCMessageSchema } = await (types ??= import('@modelcontextprotocol/sdk/types.js'))
      const parsed = JSONRPCMessageSchema.safeParse(req.body)
      if (!parsed.success) throw new AppError('MCP_BAD_MESSAGE', 400, 'Not a JSON-RPC 2.0 message')
      transport.onmessage?.(parsed.data)
      return rawReply(202, 'Accepted', 'text/plain; charset=utf-8')
    },
  })

  return {
    async close() {
      await Promise.all([...sessions.values()].map((s) => s.close()))
    },
  }
}
