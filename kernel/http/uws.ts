// The uWebSockets.js transport: one catch-all handler feeding the kernel's dispatcher.
// uWS rules kept here: req is valid only synchronously; onAborted before returning unanswered from the handler;
// onData must be attached synchronously and its chunks copied; every write happens corked: uWS corks the
// response for the synchronous part of the handler and of onData, so an answer given there writes directly
// (most requests: no closure for res.cork), and a later one goes through res.cork.
import { STATUS_CODES } from 'node:http'
import { Readable } from 'node:stream'
import uws from 'uWebSockets.js'
import { AppError } from '../errors.ts'
import type { Logger } from '../log.ts'
import { asciiBytes, jsonThenRequestId, requestIdBytes, requestIdText } from '../request-id.ts'
import type { Method } from '../router.ts'
import { JSON_HEADERS, type BodySource, type Dispatcher, type HttpExchange, type HttpResult, type Matched } from './types.ts'

/**
 * Header names and values uWS is given on every request, as bytes: uWS converts a string argument to UTF-8 in a
 * buffer it allocates and frees per call (about 500 instructions a string), and reads an ArrayBuffer in place.
 */
const bytes = (s: string): ArrayBuffer => asciiBytes(s).buffer
const CONTENT_TYPE = bytes('content-type')
const APPLICATION_JSON = bytes('application/json')
const CONTENT_LENGTH = bytes('content-length')
const X_REQUEST_ID = bytes('x-request-id')

/** Paths of plain segments (no empty one, no ':' or '*'), which uWS matches as the kernel's lookup does. */
const PLAIN_PATH = /^(\/[\w.~-]+)+$/

const STATUS_LINES = new Map<number, string>()
const statusLine = (code: number): string => {
  let line = STATUS_LINES.get(code)
  if (!line) STATUS_LINES.set(code, (line = `${code} ${STATUS_CODES[code] ?? 'Unknown'}`))
  return line
}

/**
 * uWS's method name (lower case; upper case in some builds) as the kernel's. A switch compares the fresh string
 * uWS makes per request by content; looking it up as a property key would intern it first.
 */
function methodOf(m: string): Method {
  switch (m) {
    case 'get': case 'GET': return 'GET'
    case 'post': case 'POST': return 'POST'
    case 'put': case 'PUT': return 'PUT'
    case 'patch': case 'PATCH': return 'PATCH'
    case 'delete': case 'DELETE': return 'DELETE'
    case 'head': case 'HEAD': return 'HEAD'
    default: return 'OPTIONS'
  }
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
  let onIdle: (() => void) | null = null

  const state = {
    draining: false,
    log: opts.log,
    /** Called when a dispatched promise settles. */
    settled() {
      inflight--
      if (inflight === 0 && onIdle) onIdle()
    },
  }

  const serve = (res: uws.HttpResponse, req: uws.HttpRequest, method: Method, path: string | null, matched: Matched | null): void => {
    const ex = new UwsExchange(res, req, state, method, path)
    try {
      handle(ex, matched)
    } finally {
      // req dies when this handler returns: a request not answered yet keeps a copy of its headers.
      ex.release()
    }
  }
  // One handler per method, so that the method is known without asking uWS for its name (a string per request);
  // any other method goes through the catch-all, which asks.
  type Handler = (res: uws.HttpResponse, req: uws.HttpRequest) => void
  const on: Partial<Record<Method, (path: string, handler: Handler) => void>> = {
    GET: (p, h) => app.get(p, h), POST: (p, h) => app.post(p, h), PUT: (p, h) => app.put(p, h),
    PATCH: (p, h) => app.patch(p, h), DELETE: (p, h) => app.del(p, h), HEAD: (p, h) => app.head(p, h),
  }
  for (const [method, register] of Object.entries(on) as [Method, (path: string, handler: Handler) => void][]) {
    register('/*', (res, req) => serve(res, req, method, null, null))
  }
  app.any('/*', (res, req) => serve(res, req, methodOf(req.getMethod()), null, null))
  // A route without parameters is routed by uWS itself, to a handler that knows its match: no lookup, and the
  // path is not asked for (uWS compares the raw path exactly, as the kernel's lookup of such a route does).
  // Only plain paths: uWS gives ':' and '*' a meaning, and its handling of empty segments is its own.
  for (const { method, path, matched } of dispatcher.statics) {
    // HEAD stays with the kernel's router, which answers it for GET routes too
    if (method === 'HEAD' || !PLAIN_PATH.test(path)) continue
    on[method]?.(path, (res, req) => serve(res, req, method, path, matched))
  }

  const handle = (ex: UwsExchange, known: Matched | null): void => {
    if (state.draining) {
      ex.finish(dispatcher.refuse(503, 'Server is shutting down'), true)
      return
    }
    const matched = known ?? dispatcher.match(ex.method, ex.path)
    const plan = matched.plan
    if (plan.kind !== 'discard') {
      // answered after uWS's handler returns: the headers are copied now, and read from the copy below
      ex.keepHeaders()
    }
    if (plan.kind === 'buffer') {
      const declared = ex.contentLength()
      if (declared !== undefined && Number(declared) > plan.limit) {
        ex.finish(dispatcher.refuse(413, `Request body too large: at most ${plan.limit} bytes`), true)
        return
      }
      ex.watchAbort()
      // Read the whole (capped) body first, then dispatch from the data callback: a synchronous handler
      // answers there, with no promise between the last byte and the response.
      ex.collect(ex.response, plan.limit, matched, run)
      return
    } else if (plan.kind === 'stream') {
      ex.watchAbort()
      ex.source = streamBody(ex.response, ex)
    }
    run(ex, matched)
  }

  const run = (ex: UwsExchange, matched: Matched): void => {
    let out: HttpResult | Promise<HttpResult>
    try {
      out = dispatcher.dispatch(ex, matched)
    } catch (err) {
      opts.log.error({ err }, 'dispatch failed')
      out = dispatcher.refuse(500, 'Internal Server Error')
    }
    if (out instanceof Promise) {
      // answered later: uWS must say if the client goes away meanwhile
      ex.watchAbort()
      inflight++
      ex.wait(out, dispatcher)
    } else {
      // still inside the handler or onData: corked by uWS
      ex.finish(out, true)
    }
  }

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
          if (state.draining) return
          state.draining = true
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

interface ServerState {
  draining: boolean
  log: Logger
  settled(): void
}

// req.forEach is synchronous: one shared callback fills whichever header list is being collected, instead of a
// new closure per request. A list of name, value, name, value...: storing a fresh name as an object's key would
// intern it (a hash and a string-table lookup per header) and go through a megamorphic store; the object is built
// from the list only when a handler asks for it.
const EMPTY_LIST: string[] = []
let collecting: string[] = EMPTY_LIST
const collectHeader = (key: string, value: string): void => {
  collecting.push(key, value)
}

/**
 * One request: built synchronously from uWS's req (valid only while uWS's handler runs), then read lazily by the
 * kernel. The headers are copied out of req only when asked for, or when the handler returns with the request not
 * answered yet (release): a request answered at once that reads none (GET /health) never copies them, and no
 * header is read from a dead req.
 */
class UwsExchange implements HttpExchange {
  readonly method: Method
  readonly path: string
  readonly rawQuery: string
  private req: uws.HttpRequest | null
  /** The headers copied out of req, as name, value, name, value... */
  private list: string[] | null = null
  private object: Record<string, string> | null = null
  source: BodySource | null = null
  aborted = false
  done = false
  /** The socket is paused because a streamed body's reader fell behind (streamBody). */
  bodyPaused = false
  private controller: AbortController | null = null
  private remote: string | null = null

  /** path: when uWS routed the request to a route's own handler, that route's path (then equal to req.getUrl()). */
  constructor(private readonly res: uws.HttpResponse, req: uws.HttpRequest, private readonly state: ServerState, method: Method, path: string | null) {
    this.req = req
    this.method = method
    this.path = path ?? req.getUrl()
    this.rawQuery = req.getQuery() ?? ''
  }

  get response(): uws.HttpResponse {
    return this.res
  }

  get headers(): Record<string, string> {
    if (this.object !== null) return this.object
    const list = this.copy()
    const out: Record<string, string> = {}
    for (let i = 0; i < list.length; i += 2) out[list[i]] = list[i + 1]
    return (this.object = out)
  }

  header(name: string): string | undefined {
    if (this.list === null && this.req !== null) {
      // uWS answers '' for a header the request does not have (an empty one reads as absent here too).
      const v = this.req.getHeader(name === 'x-request-id' ? X_REQUEST_ID : name === 'content-length' ? CONTENT_LENGTH : name)
      return v === '' ? undefined : v
    }
    const list = this.copy()
    // The last of a repeated header, as in the object (where a later one overwrites an earlier one).
    for (let i = list.length - 2; i >= 0; i -= 2) if (list[i] === name) return list[i + 1]
    return undefined
  }

  /** The headers as a list, copied out of req the first time (none once req is gone without a copy). */
  private copy(): string[] {
    if (this.list !== null) return this.list
    const list: string[] = []
    if (this.req !== null) {
      collecting = list
      this.req.forEach(collectHeader)
      collecting = EMPTY_LIST
    }
    return (this.list = list)
  }

  /** The first content-length header, as uWS frames the body by (a repeated one is not read from the last). */
  contentLength(): string | undefined {
    if (this.list === null) return this.header('content-length')
    const list = this.list
    for (let i = 0; i < list.length; i += 2) if (list[i] === 'content-length') return list[i + 1] === '' ? undefined : list[i + 1]
    return undefined
  }

  /** Copies the headers out of req now (a request that will be answered after uWS's handler returns). */
  keepHeaders(): void {
    this.copy()
  }

  /** uWS's handler returns: req is invalid from now on. A request still waiting for its answer keeps its headers. */
  release(): void {
    if (this.req === null) return
    if (!this.done) this.copy()
    this.req = null
  }

  get remoteAddress(): string {
    if (this.remote === null) this.remote = this.aborted || this.done ? '' : Buffer.from(this.res.getRemoteAddressAsText()).toString()
    return this.remote
  }

  get body(): BodySource {
    // a body read whole is wrapped only when asked for: the kernel reads bodyBytes directly
    return (this.source ??= this.bodyBytes ? new ReadBody(this.bodyBytes) : EMPTY_BODY)
  }

  get signal(): AbortSignal {
    this.controller ??= new AbortController()
    if (this.aborted) this.controller.abort()
    return this.controller.signal
  }

  bodyBytes?: Buffer
  private watching = false
  private chunks: Buffer[] | null = null
  private received = 0

  private limit = 0
  private matched: Matched | null = null
  private next: ((ex: UwsExchange, matched: Matched) => void) | null = null

  /** Collects the body up to limit, then calls next(this, matched) (or answers 413 and closes). */
  collect(res: uws.HttpResponse, limit: number, matched: Matched, next: (ex: UwsExchange, matched: Matched) => void): void {
    this.limit = limit
    this.matched = matched
    this.next = next
    res.onData(this.onData.bind(this))
  }

  private onData(chunk: ArrayBuffer, isLast: boolean): void {
      const limit = this.limit
      if (this.done || this.aborted) return
      this.received += chunk.byteLength
      if (this.received > limit) {
        this.chunks = null
        this.finish(this.refuseTooLarge(limit), true)
        return
      }
      if (isLast && this.chunks === null) {
        this.bodyBytes = copy(chunk)
      } else {
        ;(this.chunks ??= []).push(copy(chunk))
        if (isLast) this.bodyBytes = Buffer.concat(this.chunks, this.received)
      }
      if (isLast) {
        this.chunks = null
        this.next!(this, this.matched!)
      }
  }

  private refuseTooLarge(limit: number): HttpResult {
    return {
      status: 413,
      headers: { 'content-type': 'application/json', connection: 'close' },
      body: JSON.stringify({ detail: `Request body too large: at most ${limit} bytes` }),
    }
  }

  /** Registers onAborted (once): required before the handler returns without having answered. */
  watchAbort(): void {
    if (this.watching) return
    this.watching = true
    // bind, not an arrow: under tsx every arrow created per request also pays a keepNames wrapper.
    this.res.onAborted(this.abort.bind(this))
  }

  abort(): void {
    this.aborted = true
    this.controller?.abort()
  }

  /** corked: called synchronously from uWS's handler or onData, where uWS has corked the response already. */
  finish(result: HttpResult, corked = false): void {
    if (this.aborted || this.done) return
    this.done = true
    if (this.bodyPaused) {
      this.bodyPaused = false
      this.res.resume()
    }
    // a streamed answer outlives the handler: uWS must be able to say the client left
    if (typeof result.body !== 'string' && result.body instanceof Readable) this.watchAbort()
    send(this.res, this.method, result, this.state.draining, this, corked)
  }

  wait(out: Promise<HttpResult>, dispatcher: Dispatcher): void {
    out.then(
      (result) => {
        this.finish(result)
        this.state.settled()
      },
      (err: unknown) => {
        this.state.log.error({ err }, 'dispatch failed')
        this.finish(dispatcher.refuse(500, 'Internal Server Error'))
        this.state.settled()
      },
    )
  }
}

function send(res: uws.HttpResponse, method: Method, result: HttpResult, closeConnection: boolean, ex: { aborted: boolean }, corked: boolean): void {
  const body = result.body
  // (a string first: instanceof Readable walks the stream classes' prototypes)
  if (typeof body !== 'string' && body instanceof Readable) {
    pipeStream(res, result, body, () => ex.aborted)
    return
  }
  // uWS writes its own Connection header: a 'connection: close' from the kernel becomes its close flag.
  // (JSON_HEADERS, frozen, is not asked: a missing property of it is a slow lookup)
  const close = closeConnection || (result.headers !== JSON_HEADERS && result.headers.connection === 'close')
  if (corked) {
    write(res, method, result, close)
    return
  }
  // a shared callback and these slots instead of a closure per response (cork calls it synchronously)
  corkRes = res
  corkMethod = method
  corkResult = result
  corkClose = close
  res.cork(writeCorked)
  corkRes = null
  corkResult = null
}

/**
 * The headers of a frozen headers object as one writeHeader call: its first name, and as the value its first value
 * followed by CRLF, name, ': ', value of each other header (uWS writes key, ': ', value, CRLF: the same bytes as one
 * call per header). Made once per object; null (one call per header as usual) when a name or value is not plain
 * printable ASCII, or there is no header besides connection (which uWS writes itself).
 */
const headerBlocks = new WeakMap<object, { name: ArrayBuffer; value: ArrayBuffer } | null>()
const PRINTABLE = /^[\x20-\x7e]*$/

function headerBlock(headers: Record<string, string>): { name: ArrayBuffer; value: ArrayBuffer } | null {
  let block = headerBlocks.get(headers)
  if (block === undefined) {
    const names = Object.keys(headers).filter((k) => k !== 'connection')
    const plain = names.length > 0 && names.every((k) => PRINTABLE.test(k) && typeof headers[k] === 'string' && PRINTABLE.test(headers[k]))
    block = plain ? { name: bytes(names[0]), value: bytes(names.map((k, i) => (i === 0 ? headers[k] : `\r\n${k}: ${headers[k]}`)).join('')) } : null
    headerBlocks.set(headers, block)
  }
  return block
}

let corkRes: uws.HttpResponse | null = null
let corkMethod: Method = 'GET'
let corkResult: HttpResult | null = null
let corkClose = false
const writeCorked = (): void => write(corkRes!, corkMethod, corkResult!, corkClose)

function write(res: uws.HttpResponse, method: Method, result: HttpResult, close: boolean): void {
  const { headers, body } = result
  // uWS answers 200 OK unless told otherwise: one call across to C++ fewer for most responses
  if (result.status !== 200) res.writeStatus(statusLine(result.status))
  const requestId = result.requestId
  if (headers === JSON_HEADERS) {
    // One call for both headers when the id is the newest made one: uWS writes a header as key, ': ', value,
    // CRLF, so the value 'application/json', CRLF, 'x-request-id: ', id puts the same bytes on the wire as two
    // calls, with one call across to C++ (about 700 instructions) fewer. A client's id gets a call of its own.
    const both = jsonThenRequestId(requestId)
    if (both !== null) res.writeHeader(CONTENT_TYPE, both)
    else {
      res.writeHeader(CONTENT_TYPE, APPLICATION_JSON)
      if (requestId !== undefined) res.writeHeader(X_REQUEST_ID, requestIdBytes(requestId))
    }
  } else {
    // Constant headers (a frozen object a route answers with every time): one call, bytes made once.
    const block = Object.isFrozen(headers) ? headerBlock(headers) : null
    if (block !== null) res.writeHeader(block.name, block.value)
    else for (const k in headers) if (k !== 'connection') res.writeHeader(k, headers[k])
    if (requestId !== undefined) res.writeHeader(X_REQUEST_ID, requestIdBytes(requestId))
  }
  // This build of uWS answers nothing for endWithoutBody called with any argument but a number (undefined, or a
  // second argument, included): the handler then returns unanswered and uWS ends the process. A HEAD answer that
  // must close the connection goes out with an empty body (Content-Length: 0) instead.
  if (method === 'HEAD' && !close) res.endWithoutBody()
  else res.end(method === 'HEAD' ? '' : (body ?? '') as string | Uint8Array, close)
}

function pipeStream(res: uws.HttpResponse, result: HttpResult, stream: Readable, isAborted: () => boolean): void {
  res.cork(() => {
    res.writeStatus(statusLine(result.status))
    for (const k in result.headers) res.writeHeader(k, result.headers[k])
    if (result.requestId !== undefined) res.writeHeader('x-request-id', requestIdText(result.requestId))
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

/**
 * uWS neuters the chunk when the callback returns: one copy, into Node's buffer pool when small. Not
 * chunk.slice(0): a new ArrayBuffer per request has a backing store of its own, which cost about 40 times the copy.
 */
function copy(chunk: ArrayBuffer): Buffer {
  const out = Buffer.allocUnsafe(chunk.byteLength)
  out.set(new Uint8Array(chunk))
  return out
}

/** A body already read whole. */
class ReadBody implements BodySource {
  constructor(private readonly bytes: Buffer) {}
  buffer(): Promise<Buffer> {
    return Promise.resolve(this.bytes)
  }
  stream(): Readable {
    return Readable.from([this.bytes])
  }
}

const EMPTY_BODY: BodySource = {
  buffer: async () => Buffer.alloc(0),
  stream: () => Readable.from([]),
}

/**
 * A streamed request body. A handler may answer before the body has all arrived (a multipart upload refused at
 * its first part); from then on uWS's response must not be touched (it throws, uncaught, from a stream
 * callback), the rest of the body is dropped instead of buffered, and finish() resumes a paused socket so
 * that uWS reads the body to its end and the connection stays usable.
 */
function streamBody(res: uws.HttpResponse, ex: UwsExchange): BodySource {
  const live = () => !ex.done && !ex.aborted
  const readable = new Readable({
    highWaterMark: 256 * 1024,
    read() {
      if (ex.bodyPaused && live()) {
        ex.bodyPaused = false
        res.resume()
      }
    },
  })
  res.onData((chunk, isLast) => {
    if (!live()) {
      if (isLast) readable.push(null)
      return
    }
    if (!readable.push(copy(chunk)) && !isLast) {
      ex.bodyPaused = true
      res.pause()
    }
    if (isLast) readable.push(null)
  })
  ex.signal.addEventListener('abort', () => readable.destroy(new AppError('CLIENT_ABORTED', 400, 'client closed the connection')), { once: true })
  return {
    buffer: async () => {
      const parts: Buffer[] = []
      for await (const part of readable) parts.push(part as Buffer)
      return Buffer.concat(parts)
    },
    stream: () => readable,
  }
}
