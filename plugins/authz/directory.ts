// The user directory port (notes.md "Access-controlled edition"): who an e-mail address belongs to at the
// identity provider. Members POST grants a role when the directory knows the address and invites otherwise;
// GET /api/users/lookup shows the answer. One driver today, Keycloak's admin REST API; an empty
// oidc.admin_url gives the null directory, for which nobody is registered.
import type { Logger } from '../../kernel/log.ts'
import { discover, getJson, PROVIDER_TIMEOUT_MS } from './issuer.ts'

export interface DirectoryUser {
  user_id: string
  email: string
  display_name: string | null
}

export interface UserDirectory {
  /** The enabled user with exactly this e-mail (case-insensitive); null when none or on any failure (logged). */
  lookupByEmail(email: string): Promise<DirectoryUser | null>
}

export interface KeycloakDirectoryOptions {
  issuerUrl: string
  /** {keycloak}/admin/realms/{realm} */
  adminUrl: string
  clientId: string
  clientSecret: string
  log: Logger
  /** Per request to the provider (discovery, token, admin API). */
  timeoutMs?: number
}

/** Keycloak's UserRepresentation, the fields read here. */
interface KeycloakUser {
  id?: unknown
  username?: unknown
  email?: unknown
  firstName?: unknown
  lastName?: unknown
  enabled?: unknown
}

/** A token is renewed this long before it expires, so a request never carries one that lapses in flight. */
const EXPIRY_MARGIN_MS = 30_000

const text = (v: unknown): string => (typeof v === 'string' ? v.trim() : '')

export const nullDirectory: UserDirectory = { lookupByEmail: async () => null }

export function createUserDirectory(opts: KeycloakDirectoryOptions): UserDirectory {
  if (!opts.adminUrl) return nullDirectory
  const timeoutMs = opts.timeoutMs ?? PROVIDER_TIMEOUT_MS
  const base = opts.adminUrl.replace(/\/+$/, '')
  let tokenEndpoint: string | null = null
  let cached: { token: string; until: number } | null = null
  // Concurrent look-ups with no valid token share one token request.
  let pending: Promise<string> | null = null

  async function fetchToken(): Promise<string> {
    tokenEndpoint ??= await discover(opts.issuerUrl, 'token_endpoint', timeoutMs)
    const body = await getJson<{ access_token?: unknown; expires_in?: unknown }>(tokenEndpoint, 'token endpoint', {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        // client_secret_basic (RFC 6749 2.3.1): both parts form-encoded first.
        authorization: `Basic ${Buffer.from(`${encodeURIComponent(opts.clientId)}:${encodeURIComponent(opts.clientSecret)}`).toString('base64')}`,
      },
      body: new URLSearchParams({ grant_type: 'client_credentials' }),
    }, timeoutMs)
    const token = text(body.access_token)
    if (!token) throw new Error('token endpoint answered no access_token')
    const lifetimeMs = typeof body.expires_in === 'number' && body.expires_in > 0 ? body.expires_in * 1000 : 60_000
    cached = { token, until: Date.now() + Math.max(0, lifetimeMs - EXPIRY_MARGIN_MS) }
    return token
  }

  function token(): Promise<string> {
    if (cached && Date.now() < cached.until) return Promise.resolve(cached.token)
    pending ??= fetchToken().finally(() => { pending = null })
    return pending
  }

  async function search(email: string): Promise<KeycloakUser[]> {
    const url = `${base}/users?${new URLSearchParams({ email, exact: 'true' })}`
    for (let attempt = 0; ; attempt++) {
      const bearer = await token()
      try {
        const found = await getJson<unknown>(url, 'admin API', { headers: { authorization: `Bearer ${bearer}` } }, timeoutMs)
        return Array.isArray(found) ? (found as KeycloakUser[]) : []
      } catch (err) {
        // A token revoked or the provider's keys rotated: one fresh token, then give up.
        if ((err as { status?: number }).status !== 401 || attempt > 0) throw err
        if (cached?.token === bearer) cached = null
      }
    }
  }

  return {
    async lookupByEmail(email) {
      const wanted = email.trim().toLowerCase()
      if (!wanted) return null
      try {
        const user = (await search(wanted)).find((u) => u.enabled !== false && text(u.email).toLowerCase() === wanted && text(u.id))
        if (!user) return null
        const name = [text(user.firstName), text(user.lastName)].filter(Boolean).join(' ')
        return { user_id: text(user.id), email: wanted, display_name: name || text(user.username) || null }
      } catch (err) {
        opts.log.warn({ err: (err as Error).message, admin_url: base }, 'user directory look-up failed; treated as not registered')
        return null
      }
    },
  }
}
