// The boundary between a transport (uWS, or in-process inject) and the kernel's dispatcher.
import type { Readable } from 'node:stream'
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
  headers: Record<string, string>
  remoteAddress: string
  body: BodySource
  signal: AbortSignal
}

export interface HttpResult {
  status: number
  headers: Record<string, string>
  body: string | Uint8Array | Readable | null
}

/** Decided synchronously from method and path, before any body byte is read. */
export interface BodyPlan {
  kind: 'buffer' | 'stream' | 'discard'
  /** For 'buffer': the cap in bytes. */
  limit: number
}

export interface Dispatcher {
  plan(method: Method, path: string): BodyPlan
  dispatch(ex: HttpExchange): Promise<HttpResult>
  /** A response for a request refused before dispatch (body over the cap, shutting down). */
  refuse(status: number, detail: string): HttpResult
}
