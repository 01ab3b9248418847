// Model Context Protocol (spec 4.11, notes.md): the tools of tools.ts over Streamable HTTP at /mcp, and over
// stdio for `npm run mcp` (kernel/main.ts calls serveStdio).
import { createRequire } from 'node:module'
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { definePlugin, type Caller } from '../../kernel/plugin.ts'
import type { AuthzService } from '../authz/types.ts'
import type { DocsPlugin } from '../docs/index.ts'
import type { KbService } from '../kb/service.ts'
import type { SearchService } from '../search/service.ts'
import { registerMcpRoutes } from './http.ts'
import { registerSseRoutes } from './sse.ts'
import { createSessionIds } from './session.ts'
import { serveStdio, type StdioOptions, type StdioSession } from './stdio.ts'
import type { ToolDeps } from './tools.ts'

export type McpServerFactory = (caller: Caller | null) => Promise<McpServer>

export interface McpService {
  /** A new server with the tools, for one HTTP request or one stdio session. */
  createServer: McpServerFactory
  /** Speaks MCP on stdin/stdout (or the given streams) until the input ends. */
  serveStdio(opts?: StdioOptions): Promise<StdioSession>
}

const require = createRequire(import.meta.url)
const version = (require('../../package.json') as { version: string }).version

export default definePlugin<McpService & { close(): Promise<void> }>({
  name: 'mcp',
  dependsOn: ['kb', 'docs', 'search', 'authz'],
  register(ctx) {
    const deps: ToolDeps = {
      search: ctx.use<SearchService>('search'),
      kbs: ctx.use<KbService>('kb'),
      docs: ctx.use<DocsPlugin>('docs').service,
      log: ctx.log,
      authz: ctx.use<AuthzService | null>('authz'),
    }
    // The SDK and the schemas load on the first MCP request, not at every start of the service.
    let tools: Promise<typeof import('./tools.ts')> | undefined
    const createServer: McpServerFactory = async (caller) =>
      (await (tools ??= import('./tools.ts'))).createMcpServer(deps, { name: 'quarry', version }, caller)

    // streamable-http: /mcp. sse: /mcp too, and the deprecated HTTP+SSE endpoints beside it for older clients.
    // stdio: no HTTP endpoint; `npm run mcp` serves stdio whatever the setting.
    const { enabled, transport } = ctx.settings.mcp
    let sse: { close(): Promise<void> } | null = null
    if (!enabled) ctx.log.info('MCP disabled (mcp.enabled: false): /mcp is not served')
    else if (transport === 'stdio') ctx.log.info('mcp.transport is stdio: /mcp is not served; run `npm run mcp` for the stdio server')
    else {
      registerMcpRoutes(ctx, createServer, createSessionIds(ctx.adapters.secrets))
      if (transport === 'sse') sse = registerSseRoutes(ctx, createServer)
    }
    return {
      createServer,
      serveStdio: (opts) => serveStdio(createServer, ctx.log, opts),
      close: async () => void (await sse?.close()),
    }
  },
  close: (service) => service.close(),
})
