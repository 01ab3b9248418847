// A local server speaking the part of Keycloak's admin REST API the user directory uses (no Keycloak can run
// on the build machines): `GET /admin/realms/{realm}/users?email=<e>&exact=true` answering Keycloak's
// UserRepresentation shape. Like Keycloak it needs a bearer access token, here one the test OpenID provider
// issued to the admin client by client credentials: signature checked against the provider's published keys,
// issuer and client checked. Every request is recorded, with the token it carried.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { createRemoteJWKSet, jwtVerify } from 'jose'
import { listenLoopback } from './web-site.ts'

/** Keycloak's UserRepresentation, the fields the directory reads and a few it does not. */
export interface KeycloakUser {
  id: string
  username: string
  email?: string
  firstName?: string
  lastName?: string
  enabled?: boolean
}

export interface KeycloakServer {
  /** The admin API base as oidc.admin_url takes it: {url}/admin/realms/{realm}. */
  readonly adminUrl: string
  readonly requests: { path: string; status: number; token: string | null }[]
  /** Distinct bearer tokens that were accepted. */
  readonly tokens: Set<string>
  addUser(user: KeycloakUser): void
  /** Every token accepted so far is refused from now on (Keycloak's "not before" revocation). */
  revokeTokens(): void
  close(): Promise<void>
}

export async function startKeycloak(opts: { issuer: string; adminClientId: string; realm?: string; users?: KeycloakUser[] }): Promise<KeycloakServer> {
  const realm = opts.realm ?? 'quarry'
  const users = new Map((opts.users ?? []).map((u) => [u.id, u]))
  const jwks = createRemoteJWKSet(new URL(`${opts.issuer}/jwks`))
  const requests: KeycloakServer['requests'] = []
  const tokens = new Set<string>()
  const revoked = new Set<string>()

  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' })
    res.end(JSON.stringify(body))
  }

  /** Keycloak answers 401 `{"error":"HTTP 401 Unauthorized"}` for a missing or bad token. */
  async function authorized(req: IncomingMessage): Promise<string | null> {
    const m = /^Bearer (.+)$/i.exec(req.headers.authorization ?? '')
    if (!m || revoked.has(m[1])) return null
    try {
      const { payload } = await jwtVerify(m[1], jwks, { issuer: opts.issuer })
      return payload.client_id === opts.adminClientId ? m[1] : null
    } catch {
      return null
    }
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<{ status: number; token: string | null }> {
    const token = await authorized(req)
    if (!token) {
      json(res, 401, { error: 'HTTP 401 Unauthorized' })
      return { status: 401, token: null }
    }
    tokens.add(token)
    const u = new URL(req.url ?? '/', 'http://x')
    if (req.method !== 'GET' || u.pathname !== `/admin/realms/${realm}/users`) {
      json(res, 404, { error: 'HTTP 404 Not Found' })
      return { status: 404, token }
    }
    const email = (u.searchParams.get('email') ?? '').toLowerCase()
    const exact = u.searchParams.get('exact') === 'true'
    // Keycloak stores e-mails lower-cased; without exact it matches a substring.
    const found = [...users.values()].filter((x) => {
      const e = (x.email ?? '').toLowerCase()
      return email === '' || (exact ? e === email : e.includes(email))
    })
    json(res, 200, found.map((x) => ({
      id: x.id, username: x.username, email: x.email, firstName: x.firstName, lastName: x.lastName,
      enabled: x.enabled ?? true, emailVerified: true, createdTimestamp: 1_700_000_000_000,
    })))
    return { status: 200, token }
  }

  const server = createServer((req, res) => {
    route(req, res).then(
      ({ status, token }) => requests.push({ path: req.url ?? '', status, token }),
      (err: unknown) => json(res, 500, { error: String(err) }),
    )
  })
  const listening = await listenLoopback(server)
  return {
    adminUrl: `${listening.url}/admin/realms/${realm}`,
    requests,
    tokens,
    addUser: (user) => void users.set(user.id, user),
    revokeTokens: () => tokens.forEach((t) => revoked.add(t)),
    close: listening.close,
  }
}
