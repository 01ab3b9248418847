// A plugin is a function with metadata: it registers routes and returns the service other plugins may `use`.
// The kernel boots plugins in dependency order, times each, and closes them in reverse order.
import type { Readable } from 'node:stream'
import type { Static, TSchema } from '@sinclair/typebox'
import type { Adapters } from '../adapters/ports.ts'
import type { Settings } from './config/schema.ts'
import type { Logger } from './log.ts'
import type { Method } from './router.ts'

export type { Method }
export type Role = 'viewer' | 'editor' | 'admin' | 'owner'

/**
 * Who may call a route. The base edition checks nothing; the access-controlled edition installs an
 * onRequest hook that reads this: 'public' needs no token, 'authenticated' any valid token, a Role needs
 * that role on the KB named by `kb`.
 */
export interface RouteAccess {
  level: 'public' | 'authenticated' | 'super_admin' | Role
  /**
   * Where the KB the role applies to is named. `via` names a resolver another plugin registered with the authz
   * plugin (for example 'connector': the value is a connector_id, the KB is that connector's). `filter`: the
   * value is a list of KB ids; the inaccessible ones are removed instead of refusing the request (search).
   */
  kb?: { from: 'params' | 'body' | 'query'; name: string; via?: string; filter?: boolean }
}

/** The authenticated caller ([ENT]); null in the base edition. */
export interface Caller {
  user_id: string
  email: string | null
  preferred_username: string | null
  groups: readonly string[]
  is_super_admin: boolean
  claims: Readonly<Record<string, unknown>>
}

export interface ResponseSpec {
  description: string
  schema?: TSchema
  /** Defaults to application/json. */
  contentType?: string
}

type Out<S> = S extends TSchema ? Static<S> : undefined

export interface Request<P = Record<string, string>, Q = Record<string, unknown>, B = unknown> {
  readonly id: string
  readonly method: Method
  readonly path: string
  params: P
  query: Q
  body: B
  readonly headers: Readonly<Record<string, string>>
  readonly remoteAddress: string
  /** Aborted when the client goes away. */
  readonly signal: AbortSignal
  caller: Caller | null
  readonly log: Logger
  /** The raw request body as a stream (routes with bodyKind 'multipart' or 'stream'). */
  stream(): Readable
}

export type BodyKind = 'json' | 'multipart' | 'stream' | 'none'

export interface RouteSpec<P extends TSchema | undefined = undefined, Q extends TSchema | undefined = undefined, B extends TSchema | undefined = undefined> {
  method: Method
  /** OpenAPI style: /api/kb/{kb_id} */
  path: string
  summary: string
  description?: string
  tags?: string[]
  operationId?: string
  params?: P
  query?: Q
  body?: B
  /** Default: 'json' when a body schema is given, else 'none'. */
  bodyKind?: BodyKind
  /**
   * JSON bodies this route's clients send again and again (searches repeated by many clients): the kernel keeps each
   * body it validated, by its text, and a repeat gets its own copy without JSON.parse or validation (kernel/app.ts
   * jsonBody). Default false: a route whose bodies do not repeat would only pay for keeping them.
   */
  repeatBodies?: boolean
  /** Success status when the handler returns a plain value. Default 200. */
  status?: number
  responses?: Record<number, ResponseSpec>
  /** Default: { level: 'authenticated' }. */
  access?: RouteAccess
  /** Hidden from the API description (pages such as /docs). */
  hidden?: boolean
  handler: (req: Request<Out<P> extends undefined ? Record<string, string> : Out<P>, Out<Q> extends undefined ? Record<string, unknown> : Out<Q>, Out<B>>) => unknown
}

/** What hooks and the API description see of a route. */
export interface RouteInfo {
  method: Method
  path: string
  summary: string
  description?: string
  tags: string[]
  operationId: string
  params?: TSchema
  query?: TSchema
  body?: TSchema
  bodyKind: BodyKind
  status: number
  responses: Record<number, ResponseSpec>
  access: RouteAccess
  hidden: boolean
}

/**
 * onRequest hooks run after routing, before params, query and body are parsed (authentication plugs in here);
 * onValidated hooks run after they are parsed and validated, before the handler (role checks that read a KB id
 * from the body or the query plug in here). A hook throws an AppError to refuse the request.
 */
export type RequestHook = (req: Request, route: RouteInfo) => void | Promise<void>

export interface PluginContext {
  /** 'api' serves HTTP (and runs the built-in worker when enabled); 'worker' only consumes the queue. */
  readonly mode: 'api' | 'worker'
  readonly settings: Readonly<Settings>
  readonly log: Logger
  readonly adapters: Adapters
  route<P extends TSchema | undefined = undefined, Q extends TSchema | undefined = undefined, B extends TSchema | undefined = undefined>(spec: RouteSpec<P, Q, B>): void
  /** The service another plugin returned from register; it must be listed in dependsOn. */
  use<T>(name: string): T
  readonly hooks: {
    onRequest(hook: RequestHook): void
    onValidated(hook: RequestHook): void
  }
  /** Every route registered so far (the API description reads this). */
  routes(): readonly RouteInfo[]
  /** The ports the HTTP server listens on: none until app.listen, nor in worker mode (connectors never reach them). */
  listeningPorts(): readonly number[]
}

export interface Plugin<S = unknown> {
  name: string
  dependsOn?: readonly string[]
  register(ctx: PluginContext): S | Promise<S>
  close?(service: S): void | Promise<void>
}

export const definePlugin = <S>(plugin: Plugin<S>): Plugin<S> => plugin

/** A response with a status, headers or a body other than JSON. Handlers may return one. */
export class Reply {
  constructor(
    readonly status: number,
    readonly body: unknown,
    readonly headers: Record<string, string> = {},
    readonly kind: 'json' | 'raw' | 'stream' = 'json',
  ) {}
}

export const reply = (status: number, body: unknown, headers?: Record<string, string>) => new Reply(status, body, headers, 'json')
export const rawReply = (status: number, body: string | Uint8Array, contentType: string, headers: Record<string, string> = {}) =>
  new Reply(status, body, { 'content-type': contentType, ...headers }, 'raw')
export const streamReply = (body: Readable, contentType: string, headers: Record<string, string> = {}, status = 200) =>
  new Reply(status, body, { 'content-type': contentType, ...headers }, 'stream')
