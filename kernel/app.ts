// The kernel: boots plugins in dependency order, routes requests through hooks and validation to handlers,
// and turns results and errors into responses. Transports (uWS, inject) call the dispatcher.
import { performance } from 'node:perf_hooks'
import { Readable } from 'node:stream'
import type { TSchema } from '@sinclair/typebox'
import { closeAdapters, createAdapters } from '../adapters/index.ts'
import type { Adapters } from '../adapters/ports.ts'
import type { Settings } from './config/schema.ts'
import { AppError, clip, notFound, ValidationError, type ValidationIssue } from './errors.ts'
import { listenUws, type UwsServer } from './http/uws.ts'
import { JSON_HEADERS, type BodyPlan, type BodySource, type Dispatcher, type HttpExchange, type HttpResult, type Matched, type StaticMatch } from './http/types.ts'
import { createLogger, type Logger } from './log.ts'
import { Reply, type Caller, type Plugin, type PluginContext, type Request, type RequestHook, type RouteInfo, type RouteSpec } from './plugin.ts'
import { Router, type Method } from './router.ts'
import { couldExist, PATH_IDS, type PathIdFormat } from './schemas.ts'
import { nextRequestId, requestIdText, type RequestId } from './request-id.ts'
import { compile, jsonIssues, MAX_JSON_DEPTH, unstorable, unstorableIssue, type CompiledSchema } from './validate.ts'
import { telemetry } from './telemetry.ts'

interface CompiledRoute {
  info: RouteInfo
  /** RouteSpec.repeatBodies: its JSON bodies are kept, parsed and validated (see jsonBody). */
  memo: boolean
  /** JSON bodies seen, by their text: parsed and validated (see jsonBody); bodyChars: the length of their texts. */
  bodies: Map<string, unknown>
  bodyChars: number
  /** The fixed-format ids among the path's parameters, in path order (kb_id is checked before doc_id). */
  ids: [string, PathIdFormat][]
  params?: CompiledSchema<TSchema>
  query?: CompiledSchema<TSchema>
  body?: CompiledSchema<TSchema>
  handler: (req: Request<never, never, never>) => unknown
}

export interface AppOptions {
  settings: Readonly<Settings>
  plugins: readonly Plugin<unknown>[]
  /** Prebuilt ports (tests); otherwise opened from the settings and closed by app.close(). */
  adapters?: Adapters
  log?: Logger
  mode?: 'api' | 'worker'
}

export interface InjectRequest {
  method: Method
  url: string
  headers?: Record<string, string>
  body?: string | Uint8Array | object
}

export interface InjectResponse {
  status: number
  headers: Record<string, string>
  body: Buffer
  text(): string
  json<T = any>(): T
}

export interface App {
  readonly settings: Readonly<Settings>
  readonly log: Logger
  readonly adapters: Adapters
  readonly routes: readonly RouteInfo[]
  use<T>(name: string): T
  listen(port?: number, host?: string): Promise<number>
  /** Stops accepting, lets in-flight requests finish, closes plugins in reverse order, then the ports. */
  close(): Promise<void>
  /** Runs a request through the same pipeline without a socket. */
  inject(req: InjectRequest): Promise<InjectResponse>
}

const toOpenApiPath = (p: string) => p
const toRouterPath = (p: string) => p.replace(/\{([^}]+)\}/g, ':$1')

const REQUEST_ID = /^[\w.:-]{1,128}$/

/**
 * The safety net under every echo of user input: whatever a message was built from, an error body stays small.
 * Values should be clipped where they are echoed (clip, 200); this catches the echo someone forgot.
 */
const MAX_DETAIL_CHARS = 2000
/** Above clip's 200 plus its marker: a key clipped where it was echoed passes unchanged. */
const MAX_LOC_CHARS = 300

const boundIssue = (i: ValidationIssue): ValidationIssue => ({
  loc: i.loc.map((part) => (typeof part === 'string' ? clip(part, MAX_LOC_CHARS) : part)),
  msg: clip(i.msg, MAX_DETAIL_CHARS),
  type: i.type,
})

export function errorBody(err: unknown): { status: number; body: Record<string, unknown>; headers: Record<string, string> } {
  if (err instanceof ValidationError) return { status: 422, body: { detail: err.issues.map(boundIssue) }, headers: {} }
  if (err instanceof AppError) return { status: err.status, body: { ...err.extra, detail: clip(err.message, MAX_DETAIL_CHARS) }, headers: err.headers ?? {} }
  return { status: 500, body: { detail: 'Internal Server Error' }, headers: {} }
}

const pathIds = (path: string): [string, PathIdFormat][] =>
  [...path.matchAll(/\{([^}]+)\}/g)].flatMap(([, name]) => (PATH_IDS[name] ? [[name, PATH_IDS[name]] as [string, PathIdFormat]] : []))

/**
 * Runs before hooks and validation, so that neither an access check nor a handler ever sees a path value that
 * cannot be stored: a fixed-format id that does not match is the resource's 404, anything else unstorable 422.
 */
function guardPath(route: CompiledRoute, params: Record<string, string>): void {
  for (const [name, format] of route.ids) {
    if (!couldExist(name, params[name])) throw notFound(format.notFound(params), format.code)
  }
  let bad: ValidationIssue[] | undefined
  for (const name in params) {
    const msg = unstorable(params[name])
    if (msg) (bad ??= []).push(unstorableIssue(['path', name], msg))
  }
  if (bad) throw new ValidationError(bad)
}

export async function createApp(opts: AppOptions): Promise<App> {
  const { settings } = opts
  const log = opts.log ?? createLogger(settings.logging.level)
  const bootStarted = performance.now()
  const ownsAdapters = !opts.adapters
  const adapters = opts.adapters ?? (await createAdapters(settings, log))
  const router = new Router<CompiledRoute>()
  const routes: RouteInfo[] = []
  const staticRoutes: { method: Method; path: string; route: CompiledRoute }[] = []
  const compiledRoutes: CompiledRoute[] = []
  const hooks: RequestHook[] = []
  const validatedHooks: RequestHook[] = []
  const services = new Map<string, unknown>()
  const booted: { plugin: Plugin<unknown>; service: unknown }[] = []
  const jsonLimit = settings.server.json_body_limit_kb * 1024

  const addRoute = (spec: RouteSpec<TSchema | undefined, TSchema | undefined, TSchema | undefined>, pluginName: string) => {
    const info: RouteInfo = {
      method: spec.method,
      path: toOpenApiPath(spec.path),
      summary: spec.summary,
      description: spec.description,
      tags: spec.tags ?? [pluginName],
      operationId: spec.operationId ?? `${spec.method.toLowerCase()}_${spec.path.replace(/[{}]/g, '').replace(/[^a-zA-Z0-9]+/g, '_').replace(/^_|_$/g, '')}`,
      params: spec.params,
      query: spec.query,
      body: spec.body,
      bodyKind: spec.bodyKind ?? (spec.body ? 'json' : 'none'),
      status: spec.status ?? 200,
      responses: spec.responses ?? {},
      access: spec.access ?? { level: 'authenticated' },
      hidden: spec.hidden ?? false,
    }
    const routerPath = toRouterPath(spec.path)
    const compiled: CompiledRoute = {
      info,
      ids: pathIds(spec.path),
      params: spec.params ? compile(spec.params) : undefined,
      query: spec.query ? compile(spec.query) : undefined,
      body: spec.body ? compile(spec.body) : undefined,
      handler: spec.handler as CompiledRoute['handler'],
      memo: spec.repeatBodies === true,
      bodies: new Map(),
      bodyChars: 0,
    }
    compiledRoutes.push(compiled)
    router.add(spec.method, routerPath, compiled)
    if (!/\/[:*]/.test(routerPath)) staticRoutes.push({ method: spec.method, path: routerPath, route: compiled })
    routes.push(info)
  }

  // Boot in dependency order: a plugin registers after everything it depends on.
  const byName = new Map(opts.plugins.map((p) => [p.name, p]))
  const order: Plugin<unknown>[] = []
  const visiting = new Set<string>()
  const visit = (p: Plugin<unknown>, chain: string[]) => {
    if (order.includes(p)) return
    if (visiting.has(p.name)) throw new AppError('KERNEL_PLUGIN_CYCLE', 500, `plugin dependency cycle: ${[...chain, p.name].join(' -> ')}`)
    visiting.add(p.name)
    for (const dep of p.dependsOn ?? []) {
      const d = byName.get(dep)
      if (!d) throw new AppError('KERNEL_PLUGIN_MISSING_DEPENDENCY', 500, `plugin '${p.name}' depends on '${dep}', which is not loaded`)
      visit(d, [...chain, p.name])
    }
    visiting.delete(p.name)
    order.push(p)
  }
  for (const p of opts.plugins) visit(p, [])
  /** The port the HTTP server listens on, once it does (plugins read it through ctx.listeningPorts). */
  const listening: number[] = []

  try {
    for (const plugin of order) {
      const started = performance.now()
      const ctx: PluginContext = {
        mode: opts.mode ?? 'api',
        settings,
        log: log.child({ plugin: plugin.name }),
        adapters,
        route: (spec) => addRoute(spec as never, plugin.name),
        use: <T>(name: string): T => {
          if (!(plugin.dependsOn ?? []).includes(name)) {
            throw new AppError('KERNEL_PLUGIN_UNDECLARED_DEPENDENCY', 500, `plugin '${plugin.name}' uses '${name}' without listing it in dependsOn`)
          }
          return services.get(name) as T
        },
        hooks: { onRequest: (hook) => void hooks.push(hook), onValidated: (hook) => void validatedHooks.push(hook) },
        routes: () => routes,
        listeningPorts: () => listening,
      }
      const service = await plugin.register(ctx)
      services.set(plugin.name, service)
      booted.push({ plugin, service })
      log.info({ plugin: plugin.name, ms: +(performance.now() - started).toFixed(1) }, 'plugin registered')
    }
  } catch (err) {
    await closePlugins()
    if (ownsAdapters) await closeAdapters(adapters, log)
    throw err
  }
  log.info({ plugins: order.map((p) => p.name), routes: routes.length, ms: +(performance.now() - bootStarted).toFixed(1) }, 'kernel booted')

  async function closePlugins() {
    for (const { plugin, service } of booted.reverse()) {
      try {
        await plugin.close?.(service)
      } catch (err) {
        log.warn({ err, plugin: plugin.name }, 'plugin close failed')
      }
    }
    booted.length = 0
  }

  type Lookup = ReturnType<typeof router.find>
  interface RouteMatch extends Matched { lookup: Lookup }
  const DISCARD: BodyPlan = { kind: 'discard', limit: 0 }
  const STREAM: BodyPlan = { kind: 'stream', limit: Infinity }
  const BUFFER: BodyPlan = { kind: 'buffer', limit: jsonLimit }
  const planOf = (route: CompiledRoute): BodyPlan => route.info.bodyKind === 'json' ? BUFFER : route.info.bodyKind === 'none' ? DISCARD : STREAM
  // The routes without path parameters, by method and exact path (HEAD of a GET route goes through the router).
  const NO_PARAMS: Record<string, string> = Object.freeze({}) as Record<string, string>
  const staticMatches = new Map<Method, Map<string, RouteMatch>>()
  const statics: StaticMatch[] = []
  for (const { method, path, route } of staticRoutes) {
    let byPath = staticMatches.get(method)
    if (!byPath) staticMatches.set(method, (byPath = new Map()))
    const matched: RouteMatch = { lookup: { kind: 'found', value: route, params: NO_PARAMS }, plan: planOf(route) }
    byPath.set(path, matched)
    statics.push({ method, path, matched })
  }

  const match = (method: Method, path: string): RouteMatch => {
    // A path without parameters is one map lookup, to a match made once (no walk, nothing allocated).
    const fixed = staticMatches.get(method)?.get(path)
    if (fixed !== undefined) return fixed
    const lookup = router.find(method, path)
    if (lookup.kind !== 'found') return { lookup, plan: DISCARD }
    return { lookup, plan: planOf(lookup.value) }
  }

  const jsonResult = (status: number, body: unknown, headers?: Record<string, string>): HttpResult => ({
    status,
    headers: headers ? { 'content-type': 'application/json', ...headers } : JSON_HEADERS as Record<string, string>,
    body: body === undefined ? null : JSON.stringify(body),
    // present from the start, so that stamp() fills a slot instead of changing the object's shape
    requestId: undefined,
  })

  const refuse = (status: number, detail: string): HttpResult =>
    jsonResult(status, { detail }, status === 413 || status === 503 ? { connection: 'close' } : undefined)

  const debug = log.isLevelEnabled('debug')

  /** route: the template of the route matched, or null. */
  const stamp = (result: HttpResult, id: RequestId, ex: HttpExchange, route: string | null, started: number): HttpResult => {
    result.requestId = id
    if (debug) {
      log.debug({ reqId: requestIdText(id), method: ex.method, path: ex.path, route: route ?? undefined, status: result.status, ms: +(performance.now() - started).toFixed(2) }, 'request')
    }
    return result
  }

  /** The last step of every request: the metric, the request id, the debug line. */
  const done = (result: HttpResult, id: RequestId, ex: HttpExchange, route: string | null, started: number): HttpResult => {
    // Labelled by the route template, never the raw path: a metric's label set must stay bounded.
    telemetry.observeRequest(ex.method, route, started, result.status)
    return stamp(result, id, ex, route, started)
  }

  const unmatched = (found: Lookup): HttpResult => {
    if (found.kind === 'method_not_allowed') return jsonResult(405, { detail: 'Method Not Allowed' }, { allow: found.allowed.join(', ') })
    if (found.kind === 'bad_path') return jsonResult(400, { detail: 'Malformed percent-encoding in the path' })
    return jsonResult(404, { detail: 'Not Found' })
  }

  const dispatch = (ex: HttpExchange, matched: Matched): HttpResult | Promise<HttpResult> => {
    const started = performance.now()
    const headerId = ex.header('x-request-id')
    const id: RequestId = headerId !== undefined && REQUEST_ID.test(headerId) ? headerId : nextRequestId()
    const found = (matched as RouteMatch).lookup
    if (telemetry.tracing) {
      // the request's span must enclose the handler, so that the stages it calls nest under it
      const route = found.kind === 'found' ? found.value.info.path : null
      const out = telemetry.request(ex.method, route, () =>
        found.kind === 'found' ? run(found.value, found.params, ex, id, TRACED) : unmatched(found))
      if (out instanceof Promise) return out.then((result) => stamp(result, id, ex, route, started))
      return stamp(out, id, ex, route, started)
    }
    // Untraced (the usual case): no closure around the handler, and an asynchronous handler's answer is finished
    // in the same continuation that makes it a response (one promise per request, not one per layer).
    if (found.kind !== 'found') return done(unmatched(found), id, ex, null, started)
    return run(found.value, found.params, ex, id, started)
  }

  /** run()'s started when telemetry.request measures and finishes the request (tracing). */
  const TRACED = -1

  const failure = (err: unknown, id: RequestId, ex: HttpExchange): HttpResult => {
    const { status, body, headers } = errorBody(err)
    if (status >= 500) log.error({ err, reqId: requestIdText(id), method: ex.method, path: ex.path }, 'request failed')
    return jsonResult(status, body, headers)
  }

  /**
   * Synchronous all the way when nothing needs to wait: no hook, no body, a handler that returns a value.
   * started: the performance.now() of the request's start, when the result is finished here (done()); TRACED
   * when telemetry.request does it.
   */
  function run(route: CompiledRoute, rawParams: Record<string, string>, ex: HttpExchange, id: RequestId, started: number): HttpResult | Promise<HttpResult> {
    const { info } = route
    try {
      // a route without parameters has nothing to guard (its match carries the shared empty NO_PARAMS)
      if (rawParams !== NO_PARAMS) guardPath(route, rawParams)
    } catch (err) {
      return finished(failure(err, id, ex), id, ex, route, started)
    }
    const req = new KernelRequest(id, rawParams, ex, log)
    if (hooks.length > 0 || validatedHooks.length > 0 || (info.bodyKind === 'json' && ex.bodyBytes === undefined)) {
      const out = runAsync(route, req, ex)
      return started === TRACED ? out : out.then((result) => done(result, id, ex, info.path, started))
    }
    try {
      if (route.params) req.params = route.params.parse(rawParams, 'path')
      if (route.query || ex.rawQuery) req.query = parseQuery(ex.rawQuery, route.query)
      if (info.bodyKind === 'json') req.body = jsonBody(route, ex.bodyBytes!)
      const out = route.handler(req as never)
      if (out instanceof Promise) {
        return out.then((v) => finished(toResult(v, info.status), id, ex, route, started), (err) => finished(failure(err, id, ex), id, ex, route, started))
      }
      return finished(toResult(out, info.status), id, ex, route, started)
    } catch (err) {
      return finished(failure(err, id, ex), id, ex, route, started)
    }
  }

  const finished = (result: HttpResult, id: RequestId, ex: HttpExchange, route: CompiledRoute, started: number): HttpResult =>
    started === TRACED ? result : done(result, id, ex, route.info.path, started)

  async function runAsync(route: CompiledRoute, req: KernelRequest, ex: HttpExchange): Promise<HttpResult> {
    const { info } = route
    try {
      for (const hook of hooks) await hook(req, info)
      if (route.params) req.params = route.params.parse(req.params, 'path')
      if (route.query || ex.rawQuery) req.query = parseQuery(ex.rawQuery, route.query)
      if (info.bodyKind === 'json') {
        req.body = jsonBody(route, await ex.body.buffer())
      }
      for (const hook of validatedHooks) await hook(req, info)
      return toResult(await route.handler(req as never), info.status)
    } catch (err) {
      return failure(err, req.requestId, ex)
    }
  }

  const toResult = (out: unknown, status: number): HttpResult => {
    if (out instanceof Reply) {
      if (out.kind === 'json') return jsonResult(out.status, out.body, Object.keys(out.headers).length > 0 ? out.headers : undefined)
      // A frozen object (constant headers) is handed on as it is: nothing can change it, and the transport keeps its
      // bytes made once (kernel/http/uws.ts headerBlock).
      return { status: out.status, headers: Object.isFrozen(out.headers) ? out.headers : { ...out.headers }, body: out.body as string | Uint8Array | Readable }
    }
    return jsonResult(out === undefined ? 204 : status, out)
  }

  const dispatcher: Dispatcher = { match, statics, dispatch, refuse }
  let server: UwsServer | null = null
  let closed = false

  return {
    settings,
    log,
    adapters,
    routes,
    use: <T>(name: string) => services.get(name) as T,
    async listen(port = settings.server.port, host = settings.server.host) {
      server = await listenUws(dispatcher, { host, port, log })
      listening.push(server.port)
      log.info({ host, port: server.port }, 'listening')
      return server.port
    },
    async close() {
      if (closed) return
      closed = true
      await server?.close(settings.server.shutdown_grace_sec * 1000)
      for (const r of compiledRoutes) forgetBodies(r)
      await closePlugins()
      if (ownsAdapters) await closeAdapters(adapters, log)
      log.info('closed')
      log.flush?.()
    },
    async inject(r) {
      const [path, rawQuery = ''] = r.url.split(/\?(.*)/s, 2)
      const headers: Record<string, string> = {}
      for (const [k, v] of Object.entries(r.headers ?? {})) headers[k.toLowerCase()] = v
      let bytes: Buffer
      if (r.body === undefined) bytes = Buffer.alloc(0)
      else if (typeof r.body === 'string') bytes = Buffer.from(r.body)
      else if (r.body instanceof Uint8Array) bytes = Buffer.from(r.body)
      else {
        bytes = Buffer.from(JSON.stringify(r.body))
        headers['content-type'] ??= 'application/json'
      }
      const matched = match(r.method, path)
      const p = matched.plan
      const body: BodySource = {
        buffer: async () => {
          if (p.kind === 'buffer' && bytes.length > p.limit) {
            throw new AppError('BODY_TOO_LARGE', 413, `Request body too large: at most ${p.limit} bytes`)
          }
          return bytes
        },
        stream: () => Readable.from([bytes]),
      }
      const result = await dispatch({ method: r.method, path, rawQuery, headers, header: (name) => headers[name], remoteAddress: '127.0.0.1', body, signal: new AbortController().signal }, matched)
      let out: Buffer
      if (result.body instanceof Readable) {
        const parts: Buffer[] = []
        for await (const part of result.body) parts.push(Buffer.from(part as Buffer))
        out = Buffer.concat(parts)
      } else out = Buffer.from(result.body ?? '')
      return {
        status: result.status,
        headers: result.requestId === undefined ? { ...result.headers } : { ...result.headers, 'x-request-id': requestIdText(result.requestId) },
        body: out,
        text: () => out.toString('utf8'),
        json: () => JSON.parse(out.toString('utf8')),
      }
    },
  }
}

/** The request handlers see. A class, so that no closure is created per request. */
class KernelRequest implements Request<any, any, any> {
  readonly method: Method
  readonly path: string
  query: Record<string, unknown> = {}
  body: unknown = undefined
  caller: Caller | null = null

  constructor(readonly requestId: RequestId, public params: any, private readonly ex: HttpExchange, readonly log: Logger) {
    this.method = ex.method
    this.path = ex.path
  }

  /** A made id becomes a string only when read. */
  get id(): string {
    return requestIdText(this.requestId)
  }

  /** Read from the transport when first asked for (uWS copies them out of its request only then). */
  get headers(): Readonly<Record<string, string>> {
    return this.ex.headers
  }

  get remoteAddress(): string {
    return this.ex.remoteAddress
  }

  get signal(): AbortSignal {
    return this.ex.signal
  }

  stream(): Readable {
    return this.ex.body.stream()
  }
}

/**
 * Bodies of at most this many bytes are remembered; past MEMO_CHARS of their text in all (every route of every app
 * in the process), every memo is emptied.
 */
const MEMO_BODY_BYTES = 8 * 1024
const MEMO_CHARS = 1024 * 1024
let memoChars = 0
const memoRoutes = new Set<CompiledRoute>()

/**
 * A route's JSON body, parsed and validated. On a route that asks for it (RouteSpec.repeatBodies), a body already
 * seen (the same text: the same bytes, or bytes that decode to the same text) is not parsed or validated again, both
 * being functions of the text alone: its validated value is kept and each request gets a copy of its own (handlers
 * and hooks may change theirs, as the access hook narrows kb_ids). Only bodies that passed are kept; a refused one is
 * refused again each time.
 */
function jsonBody(route: CompiledRoute, buf: Buffer): unknown {
  if (!route.memo || buf.length === 0 || buf.length > MEMO_BODY_BYTES) return validBody(route, buf.length === 0 ? '' : buf.toString())
  // UTF-8; no argument, because Buffer's toString() then decodes at once, without looking the encoding up
  const text = buf.toString()
  const memo = route.bodies
  const seen = memo.get(text)
  if (seen !== undefined) return copyJson(seen)
  const value = validBody(route, text)
  if (value === undefined) return value
  if (memoChars + text.length > MEMO_CHARS) {
    for (const r of memoRoutes) forgetBodies(r)
  }
  memo.set(text, copyJson(value))
  memoRoutes.add(route)
  route.bodyChars += text.length
  memoChars += text.length
  return value
}

function forgetBodies(route: CompiledRoute): void {
  route.bodies.clear()
  memoChars -= route.bodyChars
  route.bodyChars = 0
  memoRoutes.delete(route)
}

function validBody(route: CompiledRoute, text: string): unknown {
  const value = parseJsonBody(text, route.body !== undefined)
  return route.body ? route.body.parse(value, 'body') : value
}

/** A parsed JSON value's own copy: objects and arrays copied all the way down, strings and numbers shared. */
function copyJson(v: unknown): unknown {
  if (typeof v !== 'object' || v === null) return v
  if (Array.isArray(v)) {
    const out = v.slice()
    for (let i = 0; i < out.length; i++) {
      const x = out[i]
      if (typeof x === 'object' && x !== null) out[i] = copyJson(x)
    }
    return out
  }
  // a spread copies the object's shape at once; only the values that are objects need more
  const out: Record<string, unknown> = { ...(v as Record<string, unknown>) }
  for (const k in out) {
    const x = out[k]
    if (typeof x === 'object' && x !== null) out[k] = copyJson(x)
  }
  return out
}

function parseJsonBody(text: string, required: boolean): unknown {
  if (text.length === 0) {
    if (required) throw new ValidationError([{ loc: ['body'], msg: 'Field required', type: 'missing' }])
    return undefined
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (err) {
    const pos = /position (\d+)/.exec((err as Error).message)
    throw new ValidationError([{ loc: ['body', pos ? Number(pos[1]) : 0], msg: `JSON decode error: ${clip((err as Error).message)}`, type: 'json_invalid' }])
  }
  // The walk is skipped when it cannot find anything: only a \u escape puts a NUL or a lone surrogate into a
  // parsed string (raw control characters are not JSON; invalid UTF-8 decodes to U+FFFD), and nesting past
  // MAX_JSON_DEPTH takes more than twice as many characters.
  if (text.length > 2 * MAX_JSON_DEPTH || text.includes('\\u')) {
    const bad = jsonIssues(value, 'body')
    if (bad.length > 0) throw new ValidationError(bad)
  }
  return value
}

/** Query strings: the last value of a key wins, except for keys the schema declares as arrays. */
function parseQuery(raw: string, schema?: CompiledSchema<TSchema>): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  if (raw) {
    const props = (schema?.schema as { properties?: Record<string, { type?: string }> } | undefined)?.properties ?? {}
    let bad: ValidationIssue[] | undefined
    for (const [k, v] of new URLSearchParams(raw)) {
      const msg = unstorable(k) ?? unstorable(v)
      if (msg) (bad ??= []).push(unstorableIssue(['query', clip(k)], msg))
      if (props[k]?.type === 'array') ((out[k] ??= []) as string[]).push(v)
      else out[k] = v
    }
    if (bad) throw new ValidationError(bad)
  }
  return schema ? (schema.parse(out, 'query') as Record<string, unknown>) : out
}
