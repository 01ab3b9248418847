// MCP over stdio (`npm run mcp`): the client starts this process and speaks JSON-RPC on its stdin/stdout.
// stdout carries the protocol only; kernel/main.ts sends the logs to stderr in this mode.
import type { Readable, Writable } from 'node:stream'
import type { Logger } from '../../kernel/log.ts'
import type { McpServerFactory } from './index.ts'

export interface StdioOptions {
  input?: Readable
  output?: Writable
}

export interface StdioSession {
  /** Settles when the client closes its end (stdin ends) or close() is called. */
  readonly closed: Promise<void>
  close(): Promise<void>
}

export async function serveStdio(createServer: McpServerFactory, log: Logger, opts: StdioOptions = {}): Promise<StdioSession> {
  const { StdioServerTransport } = await import('@modelcontextprotocol/sdk/server/stdio.js')
  const input = opts.input ?? process.stdin
  const output = opts.output ?? process.stdout
  const server = await createServer(null)
  const transport = new StdioServerTransport(input, output)
  transport.onerror = (err) => log.warn({ err }, 'MCP stdio: unreadable message')
  let resolveClosed!: () => void
  const closed = new Promise<void>((resolve) => (resolveClosed = resolve))
  let closing = false
  const close = async () => {
    if (closing) return closed
    closing = true
    await server.close().catch((err: unknown) => log.warn({ err }, 'MCP server close failed'))
    resolveClosed()
  }
  // The SDK transport does not watch for the end of input; a client that closes stdin expects the server to exit.
  input.once('end', () => void close())
  input.once('close', () => void close())
  await server.connect(transport)
  log.info('MCP server on stdio')
  return { closed, close }
}
