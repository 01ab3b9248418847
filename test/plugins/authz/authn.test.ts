// Authentication of the access-controlled edition against a real OpenID provider in-process (oidc-provider):
// tokens from its token endpoint, keys from its discovery document, rotated while the service runs, and every
// kind of bad token forged with jose. Nothing is stored, so the embedded driver set is enough.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { base64url, generateKeyPair, SignJWT } from 'jose'
import { definePlugin } from '../../../kernel/plugin.ts'
import { defaultPlugins } from '../../../kernel/plugins.ts'
import { startApp, type StartedApp } from '../../helpers/app.ts'
import { jwtAttacks } from '../../helpers/jwt-attacks.ts'
import { startOidc, type OidcServer } from '../../helpers/oidc.ts'

// Shows the caller the hook set, so the claim mapping is checked end to end.
const whoami = definePlugin({
  name: 'whoami',
  register(ctx) {
    ctx.route({ method: 'GET', path: '/test/whoami', summary: 'caller', handler: (req) => ({ caller: req.caller }) })
  },
})

const CLIENTS = [
  { client_id: 'svc-plain', client_secret: 'plain-secret', claims: { email: 'plain@example.com', preferred_username: 'plain' } },
  {
    client_id: 'svc-admin', client_secret: 'admin-secret',
    claims: { groups: ['/rag-super-admin', '/team/sub', 'flat'], realm_access: { roles: ['offline_access', 'flat'] } },
  },
  { client_id: 'svc-realm-admin', client_secret: 'realm-secret', claims: { realm_access: { roles: ['rag-super-admin'] } } },
]

const USERS = {
  alice: { email: 'alice@example.com', preferred_username: 'alice', groups: ['/engineering'], realm_access: { roles: ['default-roles-quarry'] } },
}

const startEnt = (t: { after(fn: () => unknown): void }, oidc: OidcServer, extra: Record<string, unknown> = {}) =>
  startApp(t, {
    settings: { oidc: { issuer_url: oidc.issuer, audience: oidc.audience, ...extra } },
    plugins: [...defaultPlugins(), whoami],
  })

const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } })
const now = () => Math.floor(Date.now() / 1000)

async function expect401(res: Response, detail: string, error: 'invalid_token' | null = 'invalid_token') {
  assert.equal(res.status, 401, `status for "${detail}"`)
  assert.deepEqual(await res.json(), { detail })
  const challenge = res.headers.get('www-authenticate') ?? ''
  assert.match(challenge, /^Bearer realm="quarry"/)
  if (error) assert.match(challenge, new RegExp(`error="${error}"`))
  else assert.doesNotMatch(challenge, /error=/)
}

describe('authz: authentication (access-controlled edition)', () => {
  let oidc: OidcServer
  let other: OidcServer
  let s: StartedApp
  const ctx = { fns: [] as (() => unknown)[], after(fn: () => unknown) { this.fns.push(fn) } }

  before(async () => {
    oidc = await startOidc({ clients: CLIENTS, users: USERS })
    other = await startOidc({ clients: CLIENTS })
    s = await startEnt(ctx, oidc)
  })
  after(async () => {
    for (const fn of ctx.fns.reverse()) await fn()
    await oidc.close()
    await other.close()
  })

  /** The caller the service made of a token, without its raw claims. */
  const callerFor = async (token: string) => {
    const res = await s.request('/test/whoami', bearer(token))
    assert.equal(res.status, 200)
    const { caller } = (await res.json()) as { caller: Record<string, unknown> & { claims: Record<string, unknown> } }
    assert.equal(caller.claims.iss, oidc.issuer)
    const { claims: _, ...rest } = caller
    return rest
  }

  test('a client-credentials token from the provider is accepted and becomes the caller', async () => {
    assert.deepEqual(await callerFor(await oidc.clientToken('svc-plain')), {
      user_id: 'svc-plain', email: 'plain@example.com', preferred_username: 'plain', groups: [], is_super_admin: false,
    })
    // RFC 7235: the scheme is case-insensitive.
    assert.equal((await s.request('/api/kb', { headers: { authorization: `bearer ${await oidc.clientToken('svc-plain')}` } })).status, 200)
  })

  test('groups drop the leading slash of full paths, realm roles join them, the super-admin group is recognised', async () => {
    assert.deepEqual(await callerFor(await oidc.clientToken('svc-admin')), {
      user_id: 'svc-admin', email: null, preferred_username: null,
      groups: ['rag-super-admin', 'team/sub', 'flat', 'offline_access'], is_super_admin: true,
    })
    assert.equal((await callerFor(await oidc.clientToken('svc-realm-admin'))).is_super_admin, true)
  })

  test('a user token from the authorization-code flow (login and consent pages, PKCE) is accepted', async () => {
    assert.deepEqual(await callerFor(await oidc.userToken('alice')), {
      user_id: 'alice', email: 'alice@example.com', preferred_username: 'alice',
      groups: ['engineering', 'default-roles-quarry'], is_super_admin: false,
    })
  })

  test('RS256, PS256 and ES256 are accepted; 30 s of clock skew are tolerated', async () => {
    const claims = { sub: 'u1', iss: oidc.issuer, aud: oidc.audience, exp: now() + 60 }
    for (const alg of ['RS256', 'PS256', 'ES256'] as const) {
      assert.equal((await s.request('/test/whoami', bearer(await oidc.sign(claims, { alg })))).status, 200, alg)
    }
    const skewed = await oidc.sign({ ...claims, exp: now() - 10, nbf: now() + 10 })
    assert.equal((await s.request('/test/whoami', bearer(skewed))).status, 200)
  })

  test('no token: 401 with a plain Bearer challenge (RFC 6750 3.1: no error code)', async () => {
    await expect401(await s.request('/api/kb'), 'Not authenticated', null)
    await expect401(await s.request('/api/kb', { headers: { authorization: 'Basic dXNlcjpwYXNz' } }), 'Not authenticated', null)
  })

  test('every bad token: 401 invalid_token with a reason', async (t) => {
    // The forged and broken tokens of the security suite (test/security/jwt.test.ts sends them to every route).
    for (const a of await jwtAttacks(oidc, await oidc.clientToken('svc-plain'), await other.clientToken('svc-plain'))) {
      await t.test(a.name, async () => expect401(await s.request('/api/kb', bearer(a.token)), a.detail))
    }
  })

  test('open paths need no token; /metrics stays open for scrapers', async () => {
    for (const path of ['/health', '/ready', '/openapi.json', '/docs', '/redoc', '/metrics']) {
      const res = await s.request(path)
      assert.notEqual(res.status, 401, path)
      await res.arrayBuffer()
    }
  })

  test('/mcp needs the token too', async () => {
    const init = { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }) }
    await expect401(await s.request('/mcp', init), 'Not authenticated', null)
    const res = await s.request('/mcp', { ...init, headers: { ...init.headers, authorization: `Bearer ${await oidc.clientToken('svc-plain')}` } })
    assert.equal(res.status, 200)
    assert.ok(((await res.json()) as any).result.tools.length > 0)
  })

  test('the API description declares the bearer scheme on protected operations only', async () => {
    const doc = (await (await s.request('/openapi.json')).json()) as any
    assert.deepEqual(doc.components.securitySchemes.bearer, { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'Access-controlled edition only.' })
    assert.deepEqual(doc.paths['/api/kb'].get.security, [{ bearer: [] }], 'the token is required, not optional')
    assert.deepEqual(doc.paths['/api/search'].post.security?.[0], { bearer: [] })
    assert.equal(doc.paths['/health'].get.security, undefined)
    assert.equal(doc.paths['/openapi.json'].get.security, undefined)
  })
})

describe('authz: signing keys', () => {
  test('a rotated-in key is read after one refresh; the old key works while it is published', async (t) => {
    const oidc = await startOidc({ clients: CLIENTS })
    t.after(() => oidc.close())
    const s = await startEnt(t, oidc)
    const oldToken = await oidc.clientToken('svc-plain')
    assert.equal((await s.request('/api/kb', bearer(oldToken))).status, 200)
    const fetched = oidc.jwksRequests
    assert.equal(fetched, 1, 'keys read once at the first request')
    assert.equal((await s.request('/api/kb', bearer(oldToken))).status, 200)
    assert.equal(oidc.jwksRequests, 1, 'then served from the cache')

    const newKid = await oidc.rotate()
    const newToken = await oidc.clientToken('svc-plain')
    assert.equal(JSON.parse(new TextDecoder().decode(base64url.decode(newToken.split('.')[0]))).kid, newKid)
    assert.equal((await s.request('/api/kb', bearer(newToken))).status, 200)
    assert.equal(oidc.jwksRequests, 2, 'the unknown kid refreshed the keys once')
    assert.equal((await s.request('/api/kb', bearer(newToken))).status, 200)
    assert.equal((await s.request('/api/kb', bearer(oldToken))).status, 200, 'old key still published')
    assert.equal(oidc.jwksRequests, 2)
  })

  test('a flood of unknown kids costs the issuer one request', async (t) => {
    const oidc = await startOidc({ clients: CLIENTS })
    t.after(() => oidc.close())
    const s = await startEnt(t, oidc)
    assert.equal((await s.request('/api/kb', bearer(await oidc.clientToken('svc-plain')))).status, 200)
    const before = oidc.jwksRequests
    const stranger = await generateKeyPair('RS256')
    const claims = { sub: 'u1', iss: oidc.issuer, aud: oidc.audience, exp: now() + 60 }
    const forged = await Promise.all(Array.from({ length: 20 }, (_, i) =>
      new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: `made-up-${i}` }).sign(stranger.privateKey)))
    const statuses = await Promise.all(forged.map(async (tok) => (await s.request('/api/kb', bearer(tok))).status))
    assert.deepEqual(new Set(statuses), new Set([401]))
    assert.equal(oidc.jwksRequests - before, 1)
  })

  test('jwks_cache_ttl_seconds 0: keys re-read at every request, a retired key refused, stale keys kept through an outage', async (t) => {
    const oidc = await startOidc({ clients: CLIENTS })
    t.after(() => oidc.close())
    const s = await startEnt(t, oidc, { jwks_cache_ttl_seconds: 0 })
    const oldToken = await oidc.clientToken('svc-plain')
    for (let i = 0; i < 3; i++) assert.equal((await s.request('/api/kb', bearer(oldToken))).status, 200)
    assert.equal(oidc.jwksRequests, 3)

    const oldKid = oidc.kids()[0]
    await oidc.rotate()
    oidc.retire(oldKid)
    await expect401(await s.request('/api/kb', bearer(oldToken)), 'Token signing key is unknown')

    // An outage of the identity provider must not turn valid tokens into 401s while their keys are known.
    const newToken = await oidc.clientToken('svc-plain')
    assert.equal((await s.request('/api/kb', bearer(newToken))).status, 200)
    await oidc.close()
    assert.equal((await s.request('/api/kb', bearer(newToken))).status, 200)
  })

  test('an unreachable issuer with no keys yet: 503, not a 401 that would make clients drop a valid token', async (t) => {
    const oidc = await startOidc({ clients: CLIENTS })
    const token = await oidc.clientToken('svc-plain')
    await oidc.close()
    const s = await startEnt(t, oidc)
    const res = await s.request('/api/kb', bearer(token))
    assert.equal(res.status, 503)
    assert.deepEqual(await res.json(), { detail: 'Identity provider unavailable: its signing keys could not be read' })
  })
})

describe('authz: base edition', () => {
  test('no issuer: no plugin effect, no token needed, caller null', async (t) => {
    const s = await startApp(t, { plugins: [...defaultPlugins(), whoami] })
    assert.equal(s.app.use('authz'), null)
    const res = await s.request('/test/whoami', bearer('anything'))
    assert.equal(res.status, 200)
    assert.deepEqual(await res.json(), { caller: null })
    assert.equal((await s.request('/api/kb')).status, 200)
  })
})
