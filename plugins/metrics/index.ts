// GET /metrics (Prometheus text format) and tracing's start and stop. The request, search, ingest, connector
// and rate-limit instruments live in kernel/telemetry.ts, where the code they measure records into them; what
// is a state rather than an event (documents by status, queue depth, pool load) is read here at each scrape.
// A worker process (`npm run worker`) serves no API: it answers GET /metrics alone on server.host:server.port.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { definePlugin, rawReply } from '../../kernel/plugin.ts'
import { telemetry } from '../../kernel/telemetry.ts'
import type { DocsPlugin } from '../docs/index.ts'
import { createScrapeMetrics } from './scrape.ts'

export interface MetricsService {
  /** The text a scrape gets: the process's instruments, then this app's states. */
  render(): Promise<string>
  readonly contentType: string
  /** Worker mode: the port of the metrics listener; null in API mode (GET /metrics on the API port). */
  readonly port: number | null
  close(): Promise<void>
}

export default definePlugin<MetricsService>({
  name: 'metrics',
  dependsOn: ['docs'],
  async register(ctx) {
    const scrape = createScrapeMetrics(ctx.use<DocsPlugin>('docs'), ctx.adapters.queue, ctx.log)
    const contentType = telemetry.registry.contentType
    const render = async () => (await telemetry.registry.metrics()) + (await scrape.registry.metrics())

    ctx.route({
      method: 'GET', path: '/metrics', summary: 'Metrics in Prometheus text format', tags: ['health'], access: { level: 'public' },
      responses: { 200: { description: 'Prometheus exposition format 0.0.4', contentType } },
      handler: async () => rawReply(200, await render(), contentType),
    })

    await telemetry.startTracing(ctx.settings, ctx.log)
    let server: Server | null = null
    try {
      if (ctx.mode === 'worker') server = await listenMetrics(render, contentType, ctx.settings.server.host, ctx.settings.server.port)
    } catch (err) {
      await telemetry.stopTracing()
      throw err
    }
    if (server) ctx.log.info({ port: (server.address() as AddressInfo).port }, 'worker metrics listening')

    return {
      render,
      contentType,
      port: server ? (server.address() as AddressInfo).port : null,
      async close() {
        if (server) await new Promise<void>((resolve) => server!.close(() => resolve()))
        await telemetry.stopTracing()
      },
    }
  },
  close: (service) => service.close(),
})

/** The worker's listener: node:http, since the uWS transport and its routing belong to the API process. */
function listenMetrics(render: () => Promise<string>, contentType: string, host: string, port: number): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?', 1)[0]
    if (path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ detail: 'Not Found' }))
      return
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { 'content-type': 'application/json', allow: 'GET' }).end(JSON.stringify({ detail: 'Method Not Allowed' }))
      return
    }
    render().then(
      (text) => res.writeHead(200, { 'content-type': contentType }).end(req.method === 'HEAD' ? undefined : text),
      () => res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ detail: 'Internal Server Error' })),
    )
  })
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve(server)
    })
  })
}
