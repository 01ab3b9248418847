// The uWebSockets.js transport: one catch-all handler feeding the kernel's dispatcher.
// uWS rules kept here: req is valid only synchronously; onAborted before the first await; onData must be
// attached synchronously and its chunks copied; every write happens inside res.cork.
import { STATUS_CODES } from 'node:http'
import { Readable } from 'node:stream'
import uws from 'uWebSockets.js'
import { AppError } from '../errors.ts'
import type { Logger } from '../log.ts'
import type { Method } from '../router.ts'
import type { BodySource, Dispatcher, HttpResult } from './types.ts'

const STATUS_LINES = new Map<number, string>()
const statusLine = (code: number): string => {
  let line = STATUS_LINES.get(code)
  if (!line) STATUS_LINES.set(code, (line = `${code} ${STATUS_CODES[code] ?? 'Unknown'}`))
  return line
}

const METHODS: Record<string, Method> = {
  get: 'GET', post: 'POST', put: 'PUT', patch: 'PATCH', delete: 'DELETE', head: 'HEAD', options: 'OPTIONS',
  GET: 'GET', POST: 'POST', PUT: 'PUT', PATCH: 'PATCH', DELETE: 'DELETE', HEAD: 'HEAD', OPTIONS: 'OPTIONS',
}

export interface UwsServer {
  readonly port: number
  /** Stops accepting; resolves when in-flight requests finished or graceMs passed; then closes all sockets. */
  close(graceMs: number): Promise<void>
  inflight(): number
}

export function listenUws(dispatcher: Dispatcher, opts: { host: string; port: number; log: Logger }): Promise<UwsServer> {
  const app = uws.App()
  let inflight = 0
  let draining = false
  let onIdle: (() => void) | null = null

  app.any('/*', (res, req) => {
    const aborter = new AbortController()
    let aborted = false
    let done = false
    res.onAborted(() => {
      aborted = true
      aborter.abort()
    })

    const method = METHODS[req.getMethod()] ?? ('OPTIONS' as Method)
    const path = req.getUrl()
    const rawQuery = req.getQuery() ?? ''
    const headers: Record<string, string> = {}
    req.forEach((k, v) => {
      headers[k] = v
    })
    const remoteAddress = Buffer.from(res.getRemoteAddressAsText()).toString()

    const finish = (result: HttpResult) => {
      if (aborted || done) return
      done = true
      send(res, method, result, draining, () => aborted)
    }

    if (draining) {
      finish(dispatcher.refuse(503, 'Server is shutting down'))
      return
    }

    const plan = dispatcher.plan(method, path)
    const declared = headers['content-length'] ? Number(headers['content-length']) : NaN
    if (plan.kind === 'buffer' && declared > plan.limit) {
      finish(dispatcher.refuse(413, `Request body too large: at most ${plan.limit} bytes`))
      return
    }
    const body = plan.kind === 'stream' ? streamBody(res, aborter.signal) : plan.kind === 'buffer' ? bufferBody(res, plan.limit) : discardBody(res)

    inflight++
    dispatcher
      .dispatch({ method, path, rawQuery, headers, remoteAddress, body, signal: aborter.signal })
      .then(finish, (err) => {
        opts.log.error({ err }, 'dispatch failed')
        finish(dispatcher.refuse(500, 'Internal Server Error'))
      })
      .finally(() => {
        inflight--
        if (inflight === 0 && onIdle) onIdle()
      })
  })

  return new Promise((resolve, reject) => {
    app.listen(opts.host, opts.port, (listenSocket) => {
      if (!listenSocket) {
        reject(new AppError('KERNEL_LISTEN_FAILED', 500, `cannot listen on ${opts.host}:${opts.port} (port in use or not permitted)`))
        return
      }
      const port = uws.us_socket_local_port(listenSocket)
      resolve({
        port,
        inflight: () => inflight,
        async close(graceMs) {
          if (draining) return
          draining = true
          uws.us_listen_socket_close(listenSocket)
          if (inflight > 0) {
            await new Promise<void>((done) => {
              const timer = setTimeout(done, graceMs)
              onIdle = () => {
                clearTimeout(timer)
                done()
              }
            })
          }
          ;(app as unknown as { close(): void }).close()
        },
      })
    })
  })
}

function send(res: uws.HttpResponse, method: Method, result: HttpResult, closeConnection: boolean, isAborted: () => boolean): void {
  const { status, headers, body } = result
  if (body instanceof Readable) {
    pipeStream(res, result, body, isAborted)
    return
  }
  // uWS writes its own Connection header: a 'connection: close' from the kernel becomes its close flag.
  const close = closeConnection || headers.connection === 'close'
  res.cork(() => {
    res.writeStatus(statusLine(status))
    for (const k in headers) if (k !== 'connection') res.writeHeader(k, headers[k])
    if (method === 'HEAD') res.endWithoutBody(undefined, close)
    else res.end(body ?? '', close)
  })
}

function pipeStream(res: uws.HttpResponse, result: HttpResult, stream: Readable, isAborted: () => boolean): void {
  res.cork(() => {
    res.writeStatus(statusLine(result.status))
    for (const k in result.headers) res.writeHeader(k, result.headers[k])
  })
  const stop = () => stream.destroy()
  stream.on('data', (chunk: Buffer | string) => {
    if (isAborted()) return stop()
    let ok = true
    res.cork(() => {
      ok = res.write(typeof chunk === 'string' ? chunk : new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength))
    })
    if (!ok) {
      stream.pause()
      res.onWritable(() => {
        stream.resume()
        return true
      })
    }
  })
  stream.on('end', () => {
    if (!isAborted()) res.cork(() => res.end())
  })
  stream.on('error', () => {
    // Headers are gone already: the only honest signal left is to cut the connection.
    if (!isAborted()) res.close()
  })
}

function copy(chunk: ArrayBuffer): Buffer {
  return Buffer.from(new Uint8Array(chunk).slice())
}

function bufferBody(res: uws.HttpResponse, limit: number): BodySource {
  const chunks: Buffer[] = []
  let size = 0
  let settled = false
  let resolveFn: (b: Buffer) => void
  let rejectFn: (e: unknown) => void
  const promise = new Promise<Buffer>((resolve, reject) => {
    resolveFn = resolve
    rejectFn = reject
  })
  promise.catch(() => {})
  res.onData((chunk, isLast) => {
    if (settled) return
    size += chunk.byteLength
    if (size > limit) {
      settled = true
      rejectFn(new AppError('BODY_TOO_LARGE', 413, `Request body too large: at most ${limit} bytes`, { headers: { connection: 'close' } }))
      return
    }
    chunks.push(copy(chunk))
    if (isLast) {
      settled = true
      resolveFn(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size))
    }
  })
  return {
    buffer: () => promise,
    stream: () => Readable.from(promise.then((b) => [b]).catch(() => []) as never),
  }
}

function streamBody(res: uws.HttpResponse, signal: AbortSignal): BodySource {
  let paused = false
  const readable = new Readable({
    highWaterMark: 256 * 1024,
    read() {
      if (paused) {
        paused = false
        res.resume()
      }
    },
  })
  res.onData((chunk, isLast) => {
    if (!readable.push(copy(chunk)) && !isLast) {
      paused = true
      res.pause()
    }
    if (isLast) readable.push(null)
  })
  signal.addEventListener('abort', () => readable.destroy(new AppError('CLIENT_ABORTED', 400, 'client closed the connection')), { once: true })
  return {
    buffer: async () => {
      const parts: Buffer[] = []
      for await (const part of readable) parts.push(part as Buffer)
      return Buffer.concat(parts)
    },
    stream: () => readable,
  }
}

function discardBody(res: uws.HttpResponse): BodySource {
  res.onData(() => {})
  return {
    buffer: async () => Buffer.alloc(0),
    stream: () => Readable.from([]),
  }
}
