// A local OTLP/HTTP receiver standing in for Langfuse: it records every export request (path, headers, the
// JSON body the exporter sent) and answers as an OTLP server does. Spans come out flattened with their resource.
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface OtlpExport {
  method: string
  path: string
  headers: IncomingHttpHeaders
  body: any
}

export interface ReceivedSpan {
  name: string
  traceId: string
  spanId: string
  parentSpanId: string | undefined
  attributes: Record<string, unknown>
  status: { code?: number; message?: string }
  resource: Record<string, unknown>
}

const attributeMap = (list: { key: string; value: Record<string, unknown> }[] = []) =>
  Object.fromEntries(list.map(({ key, value }) => [key, value.stringValue ?? value.intValue ?? value.doubleValue ?? value.boolValue]))

export async function startOtlpReceiver(t: { after(fn: () => unknown): void }) {
  const exports: OtlpExport[] = []
  const server = createServer((req, res) => {
    const parts: Buffer[] = []
    req.on('data', (p: Buffer) => parts.push(p))
    req.on('end', () => {
      const text = Buffer.concat(parts).toString('utf8')
      exports.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: text ? JSON.parse(text) : null })
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    exports,
    spans(): ReceivedSpan[] {
      return exports.flatMap((e) => (e.body?.resourceSpans ?? []).flatMap((rs: any) => {
        const resource = attributeMap(rs.resource?.attributes)
        return (rs.scopeSpans ?? []).flatMap((ss: any) => (ss.spans ?? []).map((s: any): ReceivedSpan => ({
          name: s.name,
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId || undefined,
          attributes: attributeMap(s.attributes),
          status: s.status ?? {},
          resource,
        })))
      }))
    },
  }
}
