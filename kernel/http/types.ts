// The boundary between a transport (uWS, or in-process inject) and the kernel's dispatcher.
import type { Readable } from 'node:stream'
import type { RequestId } from '../request-id.ts'
import type { Method } from '../router.ts'

export interface BodySource {
  /** The whole body; rejects with AppError 413 past the limit the transport was given. */
  buffer(): Promise<Buffer>
  stream(): Readable
}

export interface HttpExchange {
  method: Method
  path: string
  rawQuery: string
  /** Every request header, names in lower case. A transport may read them only when this is first asked for. */
  readonly headers: Record<string, string>
  /** One header (name in lower case), without reading them all. */
  header(name: string): string | undefined
  /** Getters: transports compute them only when a handler reads them. */
  readonly remoteAddress: string
  readonly body: BodySource
  readonly signal: AbortSignal
  /** The whole body, when the transport read it before dispatching (small JSON bodies): no await needed. */
  readonly bodyBytes?: Buffer
}

export interface HttpResult {
  status: number
  headers: Record<string, string>
  body: string | Uint8Array | Readable | null
  /**
   * Sent as the x-request-id header (kept apart, so that the shared JSON_HEADERS are never written to): the client's
   * id, or the count of one the kernel made (kernel/request-id.ts).
   */
  requestId?: RequestId
}

/**
 * The headers of a plain JSON answer, one object for all of them: never written to (frozen). Transports write
 * `content-type: application/json` for it without walking it.
 */
export const JSON_HEADERS: Readonly<Record<string, string>> = Object.freeze({ 'content-type': 'application/json' })

/** Decided synchronously from method and path, before any body byte is read. */
export interface BodyPlan {
  kind: 'buffer' | 'stream' | 'discard'
  /** For 'buffer': the cap in bytes. */
  limit: number
}

/** The route lookup, done once per request; opaque to transports. */
export interface Matched {
  readonly plan: BodyPlan
}

/** A route without path parameters, matched once at boot: a transport may route it by itself. */
export interface StaticMatch {
  readonly method: Method
  readonly path: string
  readonly matched: Matched
}

export interface Dispatcher {
  match(method: Method, path: string): Matched
  /** What match() answers for each route without path parameters (the same object each time). */
  readonly statics: readonly StaticMatch[]
  /** Synchronous when the handler is (no hook, no body, no await): the transport answers in the same tick. */
  dispatch(ex: HttpExchange, matched: Matched): HttpResult | Promise<HttpResult>
  /** A response for a request refused before dispatch (body over the cap, shutting down). */
  refuse(status: number, detail: string): HttpResult
}
