// What the API sources (GitHub, Confluence) share: JSON requests with the connector's credential, error
// texts that name the request but never the credential, and waits on rate-limit answers.
import { SyncFailure, type SourceResponse, type SyncContext } from '../engine.ts'

/** The credential named by auth_token_secret (spec 4.9: the NAME of an environment variable), or null. */
export function tokenFrom(ctx: SyncContext, name: string | null | undefined, what: string): string | null {
  if (!name) return null
  try {
    return ctx.secrets.credentials.read(name, `${what} (auth_token_secret)`)
  } catch (err) {
    throw new SyncFailure((err as Error).message)
  }
}

/** Rate limit outlasting the allowed wait: fails the whole sync, unlike a failure of one file. */
export class RateLimited extends SyncFailure {}

export interface ApiClientOptions {
  /** Label for error texts: 'GitHub', 'Confluence'. */
  name: string
  headers: Record<string, string>
  /** How long one rate-limit wait may last before the sync fails: spec says request_timeout_sec x 10. */
  maxWaitMs: number
  /** Largest answer read (a listing, a blob in base64, an attachment). */
  maxBytes: number
}

/** ms to wait for a rate-limit answer (403/429 with Retry-After, or X-RateLimit-Remaining 0), else null. */
export function rateLimitWait(res: { status: number; headers: Headers }, now = Date.now()): number | null {
  if (res.status !== 429 && res.status !== 403) return null
  const retryAfter = res.headers.get('retry-after')
  if (retryAfter !== null) {
    const secs = Number(retryAfter)
    if (Number.isFinite(secs)) return Math.max(0, secs * 1000)
    const at = Date.parse(retryAfter)
    if (Number.isFinite(at)) return Math.max(0, at - now)
  }
  const reset = res.headers.get('x-ratelimit-reset')
  if (res.headers.get('x-ratelimit-remaining') === '0' && reset !== null && Number.isFinite(Number(reset))) return Math.max(0, Number(reset) * 1000 - now)
  return res.status === 429 ? 1000 : null
}

export function createApiClient(ctx: SyncContext, o: ApiClientOptions) {
  /** GET with rate-limit waits; any other answer is returned for the caller to judge. */
  async function get(url: string, accept?: string): Promise<SourceResponse> {
    let waited = 0
    for (;;) {
      const res = await ctx.fetch(url, { headers: { ...o.headers, ...(accept ? { accept } : {}) } }, { maxBytes: o.maxBytes })
      const wait = rateLimitWait(res)
      if (wait === null) return res
      if (waited + wait > o.maxWaitMs) {
        throw new RateLimited(`${o.name} rate limit: asked to wait ${Math.ceil(wait / 1000)} s, more than the ${Math.round(o.maxWaitMs / 1000)} s allowed (request_timeout_sec x 10)`)
      }
      waited += wait
      await ctx.wait(wait)
    }
  }

  const failure = (res: SourceResponse, what: string) => new SyncFailure(res.tooLarge
    ? `${o.name} answer for ${what} is larger than ${Math.round(o.maxBytes / 1048576)} MB`
    : `${o.name} answered HTTP ${res.status} for ${what}${res.status === 401 ? ' (check the credential in auth_token_secret)' : ''}`)

  async function json<T>(url: string, what: string): Promise<T> {
    const res = await get(url)
    if (!res.ok || !res.body) throw failure(res, what)
    return JSON.parse(new TextDecoder().decode(res.body)) as T
  }

  /** A whole body (callers check sizes from the listing before asking). */
  async function bytes(url: string, what: string, accept?: string): Promise<Uint8Array> {
    const res = await get(url, accept)
    if (!res.ok || !res.body) throw failure(res, what)
    return res.body
  }

  return { get, json, bytes }
}
