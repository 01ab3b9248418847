// What every HTTP embedding provider shares: batching, a timeout per attempt, retries with backoff,
// and errors a user can act on. A protocol (ollama.ts, openai.ts) only says how a batch becomes a request
// and how the answer becomes vectors.
import { setTimeout as sleep } from 'node:timers/promises'
import { AppError, serviceUnavailable } from '../../kernel/errors.ts'
import type { Embedder } from '../ports.ts'

export interface HttpEmbedderOptions {
  /** Per attempt, body included. Default 60 s. */
  timeoutMs?: number
  /** Retries after the first attempt, on 408, 429, 5xx, network errors and timeouts. Default 3. */
  maxRetries?: number
  /** Texts per request. Default 32. */
  batchSize?: number
  /** First backoff delay; doubles per retry, with jitter. Default 500 ms. */
  retryBaseMs?: number
  /** Longest backoff delay. Default 20 s. */
  retryMaxMs?: number
  /** The longest Retry-After we wait for; a longer one ends the retries (503 carrying the Retry-After). Default 60 s. */
  retryAfterMaxMs?: number
  /** Called before each retry (logging, tests). */
  onRetry?: (event: RetryEvent) => void
}

export interface RetryEvent {
  /** The attempt that failed, from 1. */
  attempt: number
  delayMs: number
  /** `status 429`, `timeout` or `network error: ECONNRESET ...` */
  reason: string
  status?: number
}

/** How one provider API speaks; everything else is shared. */
export interface EmbeddingProtocol {
  /** provider.name, for messages and Embedder.name. */
  name: string
  model: string
  dimensions: number
  /** The URL each batch is POSTed to. */
  endpoint: string
  headers: Record<string, string>
  body(batch: readonly string[]): unknown
  /** The vectors of the batch, in input order. Throws an Error whose message says what is wrong with the answer. */
  parse(answer: unknown, count: number): ArrayLike<number>[]
  /** Tried in order by ping(): the first 2xx means ready; a 404 moves to the next URL; anything else means not ready. */
  pingUrls: string[]
  /** Strings that must never appear in an error message (the API key). */
  secrets: string[]
}

const DEFAULTS = {
  timeoutMs: 60_000,
  maxRetries: 3,
  batchSize: 32,
  retryBaseMs: 500,
  retryMaxMs: 20_000,
  retryAfterMaxMs: 60_000,
}

const PING_TIMEOUT_MS = 5_000

export function checkHttpOptions(opts: HttpEmbedderOptions): Required<Omit<HttpEmbedderOptions, 'onRetry'>> & Pick<HttpEmbedderOptions, 'onRetry'> {
  const o = { ...DEFAULTS, ...stripUndefined(opts) }
  const rule = (ok: boolean, msg: string) => {
    if (!ok) throw new AppError('EMBEDDING_CONFIG', 500, `embedding provider: ${msg}`)
  }
  rule(Number.isFinite(o.timeoutMs) && o.timeoutMs > 0, `timeoutMs must be a positive number, got ${o.timeoutMs}`)
  rule(Number.isInteger(o.maxRetries) && o.maxRetries >= 0, `maxRetries must be an integer >= 0, got ${o.maxRetries}`)
  rule(Number.isInteger(o.batchSize) && o.batchSize >= 1, `batchSize must be an integer >= 1, got ${o.batchSize}`)
  rule(Number.isFinite(o.retryBaseMs) && o.retryBaseMs >= 0, `retryBaseMs must be a number >= 0, got ${o.retryBaseMs}`)
  rule(Number.isFinite(o.retryMaxMs) && o.retryMaxMs >= o.retryBaseMs, `retryMaxMs must be a number >= retryBaseMs, got ${o.retryMaxMs}`)
  rule(Number.isFinite(o.retryAfterMaxMs) && o.retryAfterMaxMs >= 0, `retryAfterMaxMs must be a number >= 0, got ${o.retryAfterMaxMs}`)
  return o
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>
}

/** Scheme, host and path only: never userinfo or a query string, which may hold credentials. */
export function displayUrl(url: string): string {
  try {
    const u = new URL(url)
    return `${u.protocol}//${u.host}${u.pathname}`
  } catch {
    return '(invalid URL)'
  }
}

/** A provider URL from the settings; a bad one is a configuration error (shown without credentials). */
export function parseUrl(url: string, what: string): URL {
  let u: URL | undefined
  try {
    u = new URL(url)
  } catch {
    // reported below
  }
  if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:')) {
    const shown = url.replace(/\/\/[^@/]*@/, '//***@').split('?')[0]
    throw new AppError('EMBEDDING_CONFIG', 500, `${what} is not a valid http(s) URL: ${JSON.stringify(shown)}`)
  }
  return u
}

/** Retry-After (seconds or an HTTP date) or OpenAI's retry-after-ms, in ms; undefined when absent or unreadable. */
export function retryAfterMs(headers: Headers, now = Date.now()): number | undefined {
  const ms = headers.get('retry-after-ms')
  if (ms !== null && ms.trim() !== '' && Number.isFinite(Number(ms)) && Number(ms) >= 0) return Number(ms)
  const ra = headers.get('retry-after')
  if (ra === null || ra.trim() === '') return undefined
  if (/^\s*\d+(\.\d+)?\s*$/.test(ra)) return Number(ra) * 1000
  const at = Date.parse(ra)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}

function backoffMs(retry: number, base: number, max: number): number {
  const d = Math.min(max, base * 2 ** retry)
  // Equal jitter: never less than half the delay, so retries still back off, but clients spread out.
  return Math.round(d / 2 + Math.random() * (d / 2))
}

/** A short, single-line, secret-free rendering of what the provider said. */
export function providerMessage(body: string, secrets: readonly string[]): string {
  let msg = body
  try {
    const j = JSON.parse(body) as unknown
    const pick = (v: unknown): string | undefined => {
      if (typeof v === 'string') return v
      if (v && typeof v === 'object') {
        const o = v as Record<string, unknown>
        return pick(o.message) ?? pick(o.error) ?? pick(o.detail) ?? (Array.isArray(o.detail) ? JSON.stringify(o.detail) : undefined)
      }
      return undefined
    }
    msg = pick(j) ?? body
  } catch {
    // not JSON: the text itself
  }
  return redact(msg.replace(/\s+/g, ' ').trim().slice(0, 300) || '(empty body)', secrets)
}

export function redact(text: string, secrets: readonly string[]): string {
  let out = text
  for (const s of secrets) if (s) out = out.split(s).join('***')
  return out.replace(/(bearer\s+)\S+/gi, '$1***')
}

function networkDetail(err: unknown): string {
  const cause = (err as { cause?: unknown })?.cause
  const parts: string[] = []
  for (const e of [cause, err]) {
    if (e && typeof e === 'object') {
      const code = (e as { code?: unknown }).code
      const message = (e as { message?: unknown }).message
      if (typeof code === 'string' && !parts.includes(code)) parts.push(code)
      if (typeof message === 'string' && message !== 'fetch failed') {
        parts.push(message)
        break
      }
    }
  }
  return parts.join(' ') || 'fetch failed'
}

/**
 * One attempt's signal: aborted by its own timer or by any parent, and detached from the parents when done.
 * AbortSignal.any would keep a dependant on the embedder's long-lived close signal per request (nodejs/node#55351).
 */
function attemptSignal(timeoutMs: number | undefined, parents: readonly (AbortSignal | undefined)[]) {
  const ctl = new AbortController()
  let timedOut = false
  const onAbort = () => ctl.abort()
  const timer =
    timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          timedOut = true
          ctl.abort()
        }, timeoutMs)
  for (const p of parents) {
    if (!p) continue
    if (p.aborted) ctl.abort()
    else p.addEventListener('abort', onAbort, { once: true })
  }
  return {
    signal: ctl.signal,
    timedOut: () => timedOut,
    done() {
      clearTimeout(timer)
      for (const p of parents) p?.removeEventListener('abort', onAbort)
    },
  }
}

/** Copies into a Float32Array and scales to unit length; a zero vector stays zero. */
export function normalise(values: ArrayLike<number>): Float32Array {
  const v = Float32Array.from(values)
  let norm = 0
  for (let i = 0; i < v.length; i++) norm += v[i] * v[i]
  if (norm > 0 && Number.isFinite(norm)) {
    const inv = 1 / Math.sqrt(norm)
    for (let i = 0; i < v.length; i++) v[i] *= inv
  }
  return v
}

export function createHttpEmbedder(protocol: EmbeddingProtocol, options: HttpEmbedderOptions = {}): Embedder {
  const opts = checkHttpOptions(options)
  const { name, model, dimensions, endpoint, secrets } = protocol
  const where = displayUrl(endpoint)
  const closing = new AbortController()
  let closed = false

  const failed = (message: string, cause?: unknown) => new AppError('EMBEDDING_FAILED', 500, redact(message, secrets), { cause })

  /** Stops at once (no retry) when the caller aborts or the embedder closes. */
  function stopIfCancelled(signal: AbortSignal | undefined): void {
    signal?.throwIfAborted()
    if (closed) throw serviceUnavailable(`embedding provider '${name}' is closed`)
  }

  async function wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
    if (ms <= 0) return stopIfCancelled(signal)
    const a = attemptSignal(undefined, [signal, closing.signal])
    try {
      await sleep(ms, undefined, { signal: a.signal })
    } catch {
      stopIfCancelled(signal)
    } finally {
      a.done()
    }
  }

  async function postBatch(batch: readonly string[], signal: AbortSignal | undefined): Promise<ArrayLike<number>[]> {
    const body = JSON.stringify(protocol.body(batch))
    const attempts = opts.maxRetries + 1
    for (let attempt = 1; ; attempt++) {
      stopIfCancelled(signal)
      const a = attemptSignal(opts.timeoutMs, [signal, closing.signal])
      let status: number
      let text: string
      let headers: Headers
      try {
        const res = await fetch(endpoint, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json', ...protocol.headers },
          body,
          signal: a.signal,
        })
        status = res.status
        headers = res.headers
        text = await res.text()
      } catch (err) {
        stopIfCancelled(signal)
        const timedOut = a.timedOut()
        const reason = timedOut ? `timed out after ${opts.timeoutMs} ms` : `network error: ${networkDetail(err)}`
        if (attempt < attempts) {
          const delayMs = backoffMs(attempt - 1, opts.retryBaseMs, opts.retryMaxMs)
          opts.onRetry?.({ attempt, delayMs, reason: timedOut ? 'timeout' : reason })
          await wait(delayMs, signal)
          continue
        }
        throw serviceUnavailable(
          redact(`embedding provider '${name}' is unreachable at ${where}: ${reason} (${attempt} attempt${attempt > 1 ? 's' : ''})`, secrets),
          err,
        )
      } finally {
        a.done()
      }

      if (status >= 200 && status < 300) return decode(text, batch.length)

      const message = providerMessage(text, secrets)
      if (status === 408 || status === 429 || status >= 500) {
        const asked = retryAfterMs(headers)
        const tooLong = asked !== undefined && asked > opts.retryAfterMaxMs
        if (attempt < attempts && !tooLong) {
          const delayMs = asked ?? backoffMs(attempt - 1, opts.retryBaseMs, opts.retryMaxMs)
          opts.onRetry?.({ attempt, delayMs, reason: `status ${status}`, status })
          await wait(delayMs, signal)
          continue
        }
        const after = asked !== undefined ? { headers: { 'Retry-After': String(Math.ceil(asked / 1000)) } } : {}
        throw new AppError(
          'SERVICE_UNAVAILABLE',
          503,
          redact(`embedding provider '${name}' at ${where} answered ${status} (${attempt} attempt${attempt > 1 ? 's' : ''}): ${message}`, secrets),
          after,
        )
      }
      throw failed(`embedding provider '${name}' at ${where} rejected the request with ${status}: ${message}`)
    }
  }

  function decode(text: string, count: number): ArrayLike<number>[] {
    let answer: unknown
    try {
      answer = JSON.parse(text)
    } catch (err) {
      throw failed(`embedding provider '${name}' at ${where} answered with malformed JSON: ${JSON.stringify(text.slice(0, 80))}`, err)
    }
    let vectors: ArrayLike<number>[]
    try {
      vectors = protocol.parse(answer, count)
    } catch (err) {
      throw failed(`embedding provider '${name}' at ${where} answered in an unexpected shape: ${(err as Error).message}`, err)
    }
    for (const v of vectors) {
      if (v.length !== dimensions) {
        throw new AppError(
          'EMBEDDING_DIMENSION_MISMATCH',
          500,
          `embedding model '${model}' returned vectors of ${v.length} dimensions, but embedding.vector_size is ${dimensions}`,
        )
      }
      for (let i = 0; i < v.length; i++) {
        if (typeof v[i] !== 'number' || !Number.isFinite(v[i])) {
          throw failed(`embedding provider '${name}' at ${where} answered a vector with a non-numeric value at position ${i}`)
        }
      }
    }
    return vectors
  }

  return {
    name,
    model,
    dimensions,
    async embed(texts, embedOpts) {
      const signal = embedOpts?.signal
      stopIfCancelled(signal)
      const out: Float32Array[] = new Array(texts.length)
      for (let start = 0; start < texts.length; start += opts.batchSize) {
        const batch = texts.slice(start, start + opts.batchSize)
        const vectors = await postBatch(batch, signal)
        for (let i = 0; i < batch.length; i++) out[start + i] = normalise(vectors[i])
      }
      return out
    },
    async ping() {
      if (closed) return false
      for (const url of protocol.pingUrls) {
        const a = attemptSignal(Math.min(opts.timeoutMs, PING_TIMEOUT_MS), [closing.signal])
        try {
          const res = await fetch(url, { headers: { accept: 'application/json', ...protocol.headers }, signal: a.signal })
          await res.arrayBuffer().catch(() => undefined)
          if (res.ok) return true
          if (res.status !== 404) return false
        } catch {
          return false
        } finally {
          a.done()
        }
      }
      return false
    },
    async close() {
      closed = true
      closing.abort()
    },
  }
}

/**
 * fetch refuses URLs with userinfo, so `http://user:pass@host` becomes the bare URL plus a Basic
 * Authorization header (a reverse proxy in front of the provider often wants exactly that).
 */
export function takeCredentials(u: URL): { url: URL; authorization?: string; password?: string } {
  if (!u.username && !u.password) return { url: u }
  const user = decodeURIComponent(u.username)
  const pass = decodeURIComponent(u.password)
  const bare = new URL(u.href)
  bare.username = ''
  bare.password = ''
  return { url: bare, authorization: `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`, password: pass }
}

/** Joins a base URL (no trailing slash in its path) and a path, keeping the base's query string. */
export function joinUrl(base: URL, path: string): string {
  const u = new URL(base.href)
  u.pathname = u.pathname.replace(/\/+$/, '') + path
  return u.href
}
