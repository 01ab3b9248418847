// A real OpenID provider in-process (oidc-provider, the certified implementation): discovery, JWKS and a
// token endpoint issuing JWT access tokens, with the client-credentials grant and with a user's
// authorization-code flow (PKCE, through the provider's own login and consent pages). Its signing keys can
// be rotated while it runs, and every request to its key set is counted, so tests can see when the service
// re-reads it.
import { createHash, randomBytes } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { exportJWK, generateKeyPair, importJWK, SignJWT, type JWK, type JWTPayload } from 'jose'
import Provider from 'oidc-provider'

export interface OidcClient {
  client_id: string
  client_secret: string
  /** Claims added to this client's access tokens (groups, realm_access, email, …). */
  claims?: Record<string, unknown>
}

export interface OidcServer {
  readonly issuer: string
  readonly audience: string
  /** GETs of the key set so far. */
  readonly jwksRequests: number
  /** The kids the provider publishes, the signing one first. */
  kids(): string[]
  /** An access token from the token endpoint (client-credentials grant). */
  clientToken(clientId: string): Promise<string>
  /** A user's access token: the authorization-code flow a browser would run, login and consent included. */
  userToken(userId: string): Promise<string>
  /**
   * Registers a public client for a browser (the console): authorization code with PKCE, no secret, its token
   * endpoint open to CORS requests from `origins`. The provider is rebuilt with it (as a rotation does).
   */
  addBrowserClient(client: BrowserClient): void
  /** A token signed by one of the provider's own published keys, as if it issued it (for claims it would not issue). */
  sign(payload: JWTPayload, opts?: { alg?: 'RS256' | 'PS256' | 'ES256'; kid?: string }): Promise<string>
  /** A new RSA key signs from now on; the previous keys stay published. Returns the new kid. */
  rotate(): Promise<string>
  /** Stops publishing a key. */
  retire(kid: string): void
  close(): Promise<void>
}

export interface BrowserClient {
  client_id: string
  redirect_uris: string[]
  post_logout_redirect_uris?: string[]
  /** Origins whose pages may call the token endpoint (CORS). */
  origins: string[]
}

type PrivateJwk = JWK & { kid: string; alg: string }

async function newKey(alg: 'RS256' | 'PS256' | 'ES256', kid: string): Promise<PrivateJwk> {
  const { privateKey } = await generateKeyPair(alg, { extractable: true })
  return { ...(await exportJWK(privateKey)), kid, alg, use: 'sig' }
}

const WEB_CLIENT = { client_id: 'quarry-web', client_secret: 'web-secret', redirect_uri: 'http://127.0.0.1:9/callback' }

export async function startOidc(opts: { clients: OidcClient[]; users?: Record<string, Record<string, unknown>>; audience?: string }): Promise<OidcServer> {
  const audience = opts.audience ?? 'quarry-api'
  // oidc-provider names a resource server by URI; the token's aud is what the service checks.
  const resource = 'urn:quarry:api'
  // Unique kids per provider: another issuer's token must not name one of ours by chance.
  const tag = randomBytes(3).toString('hex')
  let serial = 0
  // The provider signs with the first RS256 key; the others let tests sign PS256 and ES256 tokens with a
  // published key (a JWK that names its alg is used with that alg only).
  let keys: PrivateJwk[] = [await newKey('RS256', `${tag}-rsa-${++serial}`), await newKey('PS256', `${tag}-ps`), await newKey('ES256', `${tag}-ec`)]
  let jwksRequests = 0
  let handler: ReturnType<Provider['callback']>
  const server: Server = createServer((req, res) => {
    if (req.url?.startsWith('/jwks')) jwksRequests++
    void handler(req, res)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const claimsOf = new Map(opts.clients.map((c) => [c.client_id, c.claims ?? {}]))
  const users = opts.users ?? {}
  const browserClients: BrowserClient[] = []

  // oidc-provider reads its keys at construction: a rotation builds a new provider behind the same server.
  const build = () => {
    const provider = new Provider(issuer, {
      clients: [
        ...opts.clients.map((c) => ({
          client_id: c.client_id, client_secret: c.client_secret,
          grant_types: ['client_credentials'], redirect_uris: [], response_types: [],
        })),
        {
          client_id: WEB_CLIENT.client_id, client_secret: WEB_CLIENT.client_secret,
          grant_types: ['authorization_code'], response_types: ['code'], redirect_uris: [WEB_CLIENT.redirect_uri],
        },
        ...browserClients.map((c) => ({
          client_id: c.client_id, token_endpoint_auth_method: 'none' as const, grant_types: ['authorization_code'], response_types: ['code' as const],
          redirect_uris: c.redirect_uris, post_logout_redirect_uris: c.post_logout_redirect_uris ?? [],
        })),
      ],
      // Only the browser clients' own pages may call the token endpoint from another origin.
      clientBasedCORS: (_ctx, origin, client) => browserClients.some((c) => c.client_id === client.clientId && c.origins.includes(origin)),
      jwks: { keys: keys as never },
      cookies: { keys: [tag] },
      findAccount: (_ctx, sub) => (users[sub] ? { accountId: sub, claims: () => ({ sub, ...users[sub] }) } : undefined),
      features: {
        // The provider's own login (any password) and consent pages: the user flow runs through real HTTP.
        devInteractions: { enabled: true },
        clientCredentials: { enabled: true },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => resource,
          useGrantedResource: () => true,
          getResourceServerInfo: () => ({ scope: '', audience, accessTokenFormat: 'jwt', accessTokenTTL: 300, jwt: { sign: { alg: 'RS256' } } }),
        },
      },
      ttl: { ClientCredentials: 300, AccessToken: 300, AuthorizationCode: 60, IdToken: 300, Grant: 300, Interaction: 300, Session: 300 },
      // Keycloak puts the user's profile and groups in its access tokens; so does this provider.
      extraTokenClaims: (_ctx, token) => {
        const t = token as { accountId?: string; clientId?: string }
        return t.accountId ? users[t.accountId] ?? {} : claimsOf.get(t.clientId ?? '') ?? {}
      },
    })
    handler = provider.callback()
  }
  build()

  const token = async (client: { client_id: string; client_secret: string }, form: Record<string, string>) => {
    const res = await fetch(`${issuer}/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${client.client_id}:${client.client_secret}`).toString('base64')}`,
      },
      body: new URLSearchParams(form),
    })
    const body = (await res.json()) as { access_token?: string }
    if (!res.ok || !body.access_token) throw new Error(`token endpoint: HTTP ${res.status} ${JSON.stringify(body)}`)
    return body.access_token
  }

  return {
    issuer,
    audience,
    get jwksRequests() {
      return jwksRequests
    },
    kids: () => keys.map((k) => k.kid),
    clientToken: (clientId) => token(opts.clients.find((c) => c.client_id === clientId)!, { grant_type: 'client_credentials', resource }),
    async userToken(userId) {
      const jar = new Map<string, string>()
      const go = async (url: string, body?: Record<string, string>) => {
        const res = await fetch(new URL(url, issuer), {
          method: body ? 'POST' : 'GET',
          redirect: 'manual',
          headers: {
            cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; '),
            ...(body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
          },
          body: body ? new URLSearchParams(body) : undefined,
        })
        for (const c of res.headers.getSetCookie()) {
          const [pair] = c.split(';')
          const i = pair.indexOf('=')
          jar.set(pair.slice(0, i), pair.slice(i + 1))
        }
        await res.arrayBuffer()
        const location = res.headers.get('location')
        if (res.status < 300 || res.status >= 400 || !location) throw new Error(`${url}: HTTP ${res.status}, no redirect`)
        return location
      }
      const verifier = randomBytes(32).toString('base64url')
      let next = await go(`/auth?${new URLSearchParams({
        client_id: WEB_CLIENT.client_id, response_type: 'code', redirect_uri: WEB_CLIENT.redirect_uri,
        scope: 'openid email profile', resource, state: 's', nonce: 'n',
        code_challenge: createHash('sha256').update(verifier).digest('base64url'), code_challenge_method: 'S256',
      })}`)
      // login, then consent: each page is submitted and the flow resumes at /auth until it reaches the client.
      for (const prompt of ['login', 'consent']) next = await go(await go(next, { prompt, login: userId, password: 'any' }))
      const code = new URL(next).searchParams.get('code')
      if (!code) throw new Error(`no code in ${next}`)
      return token(WEB_CLIENT, { grant_type: 'authorization_code', code, redirect_uri: WEB_CLIENT.redirect_uri, code_verifier: verifier })
    },
    addBrowserClient(client) {
      browserClients.push(client)
      build()
    },
    async sign(payload, o = {}) {
      const alg = o.alg ?? 'RS256'
      const key = o.kid ? keys.find((k) => k.kid === o.kid)! : keys.find((k) => k.alg === alg)!
      return new SignJWT(payload).setProtectedHeader({ alg, kid: key.kid, typ: 'JWT' }).sign(await importJWK(key, alg))
    },
    async rotate() {
      const key = await newKey('RS256', `${tag}-rsa-${++serial}`)
      keys = [key, ...keys]
      build()
      return key.kid
    },
    retire(kid) {
      keys = keys.filter((k) => k.kid !== kid)
      build()
    },
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve())
      // The service's fetch keeps connections open; the provider must really go away (outage tests).
      server.closeAllConnections()
    }),
  }
}
