// One process per server under test: `tsx bench/kernel/servers.ts <quarry|node|fastify|uws> <port>`.
// Every server has the same two handlers: GET /ping and POST /echo (JSON body validated, echoed back).
import { createServer } from 'node:http'
import { Type } from '@sinclair/typebox'

const [kind, portArg] = process.argv.slice(2)
const port = Number(portArg)
process.on('SIGINT', () => process.exit(0))
process.on('SIGTERM', () => process.exit(0))
const ready = () => process.stdout.write(`ready ${kind} ${port}\n`)

const Body = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 100 }),
  count: Type.Integer({ minimum: 0, maximum: 1000 }),
  tags: Type.Optional(Type.Array(Type.String(), { maxItems: 10 })),
})
const ping = { status: 'ok', service: 'bench' }
const echo = (b: { name: string; count: number; tags?: string[] }) => ({ name: b.name, count: b.count, tags: b.tags ?? [], total: b.count * 2 })

if (kind === 'quarry') {
  const { createApp } = await import('../../kernel/app.ts')
  const { resolveSettings } = await import('../../kernel/config/load.ts')
  const { createLogger } = await import('../../kernel/log.ts')
  const { definePlugin } = await import('../../kernel/plugin.ts')
  const plugin = definePlugin({
    name: 'bench',
    register(ctx) {
      ctx.route({ method: 'GET', path: '/ping', summary: 'ping', handler: () => ping })
      ctx.route({ method: 'POST', path: '/echo', summary: 'echo', body: Body, handler: (req) => echo(req.body) })
    },
  })
  // The kernel alone is measured: no route here touches a storage port.
  const app = await createApp({ settings: resolveSettings({}).settings, plugins: [plugin], adapters: {} as never, log: createLogger('ERROR') })
  await app.listen(port, '127.0.0.1')
  ready()
} else if (kind === 'node') {
  const { TypeCompiler } = await import('@sinclair/typebox/compiler')
  const check = TypeCompiler.Compile(Body)
  createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/ping') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(ping))
      return
    }
    if (req.method === 'POST' && req.url === '/echo') {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        let body: unknown
        try {
          body = JSON.parse(Buffer.concat(chunks).toString())
        } catch {
          res.writeHead(422, { 'content-type': 'application/json' }).end('{"detail":"bad json"}')
          return
        }
        if (!check.Check(body)) {
          res.writeHead(422, { 'content-type': 'application/json' }).end('{"detail":"invalid"}')
          return
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(echo(body)))
      })
      return
    }
    res.writeHead(404).end()
  }).listen(port, '127.0.0.1', ready)
} else if (kind === 'fastify') {
  const { default: Fastify } = await import('fastify')
  const app = Fastify({ logger: false })
  app.get('/ping', async () => ping)
  app.post('/echo', { schema: { body: Body } }, async (req) => echo(req.body as never))
  await app.listen({ port, host: '127.0.0.1' })
  ready()
} else if (kind === 'uws') {
  // The transport alone: uWebSockets.js with the handlers written straight on it (the same work as node:http
  // above), the ceiling for any kernel on this transport.
  const { default: uws } = await import('uWebSockets.js')
  const { TypeCompiler } = await import('@sinclair/typebox/compiler')
  const check = TypeCompiler.Compile(Body)
  const json = (res: import('uWebSockets.js').HttpResponse, status: string, body: string): void => {
    res.cork(() => {
      res.writeStatus(status).writeHeader('content-type', 'application/json').end(body)
    })
  }
  uws.App()
    .get('/ping', (res) => {
      json(res, '200 OK', JSON.stringify(ping))
    })
    .post('/echo', (res) => {
      const chunks: Buffer[] = []
      res.onAborted(() => chunks.splice(0))
      res.onData((chunk, isLast) => {
        chunks.push(Buffer.from(new Uint8Array(chunk)))
        if (!isLast) return
        let body: unknown
        try {
          body = JSON.parse(Buffer.concat(chunks).toString())
        } catch {
          json(res, '422 Unprocessable Entity', '{"detail":"bad json"}')
          return
        }
        if (!check.Check(body)) json(res, '422 Unprocessable Entity', '{"detail":"invalid"}')
        else json(res, '200 OK', JSON.stringify(echo(body)))
      })
    })
    .listen('127.0.0.1', port, (socket) => {
      if (!socket) {
        process.stderr.write(`uws: cannot listen on ${port}\n`)
        process.exit(1)
      }
      ready()
    })
} else {
  process.stderr.write(`unknown server kind '${kind}'\n`)
  process.exit(2)
}
