// Requests to the identity provider shared by authentication (its signing keys) and the user directory (its
// token endpoint): JSON over fetch with a timeout, and the issuer's discovery document.

/** A request that hangs must not hold the requests waiting on it for long. */
export const PROVIDER_TIMEOUT_MS = 5_000

/** The parsed JSON answer; an Error with the HTTP `status` for any other. */
export async function getJson<T>(url: string, what: string, init: RequestInit = {}, timeoutMs = PROVIDER_TIMEOUT_MS): Promise<T> {
  const res = await fetch(url, {
    ...init,
    headers: { accept: 'application/json', ...(init.headers as Record<string, string> | undefined) },
    signal: AbortSignal.timeout(timeoutMs),
  })
  if (!res.ok) {
    // Read to the end, so the connection goes back to the pool.
    await res.arrayBuffer().catch(() => undefined)
    throw Object.assign(new Error(`${what} at ${url}: HTTP ${res.status}`), { status: res.status })
  }
  return (await res.json()) as T
}

/** One URL of the issuer's discovery document (jwks_uri, token_endpoint); throws when it is missing. */
export async function discover(issuerUrl: string, field: 'jwks_uri' | 'token_endpoint', timeoutMs?: number): Promise<string> {
  const url = `${issuerUrl.replace(/\/+$/, '')}/.well-known/openid-configuration`
  const doc = await getJson<Record<string, unknown>>(url, 'discovery document', {}, timeoutMs)
  const value = doc[field]
  if (typeof value !== 'string' || value === '') throw new Error(`${url} has no ${field}`)
  return value
}
