// The CLI's HTTP client for a running Quarry: the public API only, with retries on the answers that mean
// "later" (429, 502, 503) and on connection failures, so that a bulk job rides out a restart or a rate limit.
import { setTimeout as sleep } from 'node:timers/promises'
import { retryAfterMs } from '../adapters/embedders/http.ts'

export interface ClientOptions {
  /** Base URL of the service, e.g. http://localhost:8000. */
  url: string
  /** Extra headers on every request (e.g. Authorization). */
  headers?: Record<string, string>
  /** Attempts after the first one. Default 5. */
  retries?: number
  /** First back-off delay; doubles per retry, with jitter. Default 250 ms. */
  retryBaseMs?: number
  /** Longest back-off delay, and the longest Retry-After honoured. Default 30 s. */
  retryMaxMs?: number
  onRetry?: (event: RetryEvent) => void
}

export interface RetryEvent {
  method: string
  path: string
  attempt: number
  delayMs: number
  reason: string
}

/** An answer outside 2xx, with the service's `detail` made readable. */
export class ApiError extends Error {
  readonly status: number
  readonly detail: string
  constructor(status: number, detail: string) {
    super(`${status}: ${detail}`)
    this.name = 'ApiError'
    this.status = status
    this.detail = detail
  }
}

/** The service could not be reached at all, retries included. */
class ConnectionError extends Error {
  override readonly name = 'ConnectionError'
}

export const isConnectionFailure = (err: unknown): boolean => err instanceof ConnectionError

export interface Client {
  readonly url: string
  /** Sends a request; `body` is a factory because a retried request needs a fresh body. Throws ApiError outside 2xx. */
  request(method: string, path: string, body?: () => Body, headers?: Record<string, string>): Promise<Response>
  json<T = unknown>(method: string, path: string, payload?: unknown): Promise<T>
}

/** What fetch accepts as a body (the DOM's BodyInit, which this project's lib settings leave out). */
type Body = NonNullable<RequestInit['body']>

const RETRY_STATUSES = new Set([429, 502, 503])

export function createClient(opts: ClientOptions): Client {
  let base: URL
  try {
    base = new URL(opts.url)
  } catch {
    throw new Error(`--url must be an http(s) URL, got ${JSON.stringify(opts.url)}`)
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new Error(`--url must be an http(s) URL, got ${JSON.stringify(opts.url)}`)
  const root = base.href.replace(/\/+$/, '')
  const retries = opts.retries ?? 5
  const baseMs = opts.retryBaseMs ?? 250
  const maxMs = opts.retryMaxMs ?? 30_000

  async function request(method: string, path: string, body?: () => Body, headers: Record<string, string> = {}): Promise<Response> {
    for (let attempt = 1; ; attempt++) {
      let res: Response
      try {
        // duplex: a body may be a stream (quarry import sends an archive as it reads it); fetch insists on the option then.
        res = await fetch(root + path, { method, headers: { ...opts.headers, ...headers }, body: body?.(), duplex: 'half' } as RequestInit)
      } catch (err) {
        if (attempt > retries) throw new ConnectionError(`cannot reach ${root}: ${networkDetail(err)} (${attempt} attempt${attempt > 1 ? 's' : ''})`)
        await pause(method, path, attempt, backoffMs(attempt - 1, baseMs, maxMs), networkDetail(err))
        continue
      }
      if (res.ok) return res
      const detail = await errorDetail(res)
      if (RETRY_STATUSES.has(res.status) && attempt <= retries) {
        const asked = retryAfterMs(res.headers)
        if (asked === undefined || asked <= maxMs) {
          await pause(method, path, attempt, asked ?? backoffMs(attempt - 1, baseMs, maxMs), `${res.status} ${detail}`)
          continue
        }
      }
      throw new ApiError(res.status, detail)
    }
  }

  async function pause(method: string, path: string, attempt: number, delayMs: number, reason: string): Promise<void> {
    opts.onRetry?.({ method, path, attempt, delayMs, reason })
    await sleep(delayMs)
  }

  return {
    url: root,
    request,
    async json<T>(method: string, path: string, payload?: unknown): Promise<T> {
      const res = payload === undefined
        ? await request(method, path)
        : await request(method, path, () => JSON.stringify(payload), { 'content-type': 'application/json' })
      return (await res.json()) as T
    },
  }
}

function backoffMs(retry: number, base: number, max: number): number {
  const d = Math.min(max, base * 2 ** retry)
  // Equal jitter: several CLIs (or workers of one) retrying together spread out, yet each still backs off.
  return Math.round(d / 2 + Math.random() * (d / 2))
}

/** `{"detail": "..."}` or FastAPI's list of validation problems, as one line. */
async function errorDetail(res: Response): Promise<string> {
  const text = await res.text().catch(() => '')
  try {
    const body = JSON.parse(text) as { detail?: unknown }
    if (typeof body.detail === 'string') return body.detail
    if (Array.isArray(body.detail)) {
      return body.detail.map((d: { loc?: unknown[]; msg?: string }) => `${(d.loc ?? []).join('.')}: ${d.msg ?? ''}`).join('; ')
    }
  } catch {
    // Not JSON: a proxy's or load balancer's page; its first line is the best we have.
  }
  return text.split('\n')[0].slice(0, 200) || res.statusText || 'no detail'
}

function networkDetail(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause
  return cause?.code ?? cause?.message ?? (err as Error).message
}

/** KB ids and doc ids go into paths; the service's own ids never need it, a user's typo might. */
export const seg = (s: string): string => encodeURIComponent(s)
