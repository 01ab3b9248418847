// Two service processes on one PostgreSQL + Redis: an invite created through one is activated at the invited
// user's first request to the other (its pending-invite e-mails were loaded before the invite existed, and an
// 'invites' event over Redis makes it reload), and a user deprovisioned through one has their profile recorded
// again at their next request to the other. Needs the services, so there is no embedded variant.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { startApp, uniqueId, type StartedApp } from '../../helpers/app.ts'
import { startOidc, type OidcServer } from '../../helpers/oidc.ts'
import { skipUnless } from '../../helpers/services.ts'

describe('authz: membership across processes (PostgreSQL + Redis)', { skip: skipUnless('postgres') || skipUnless('redis') }, () => {
  let oidc: OidcServer
  let a: StartedApp
  let b: StartedApp
  const cleanups: (() => unknown)[] = []
  const t = { after: (fn: () => unknown) => void cleanups.push(fn) }

  before(async () => {
    oidc = await startOidc({ clients: [{ client_id: 'root', client_secret: 'r', claims: { groups: ['rag-super-admin'] } }] })
    const settings = { oidc: { issuer_url: oidc.issuer, audience: oidc.audience }, authz: { kb_creator_roles: ['*'], max_kb_count: 0 }, smtp: { port: 9 } }
    a = await startApp(t, { services: true, settings })
    const { postgres, redis, s3 } = a.app.settings
    b = await startApp(t, { services: true, settings: { ...settings, postgres, redis, s3 } })
  })
  after(async () => {
    for (const c of cleanups.reverse()) await c()
    await oidc.close()
  })

  const token = (sub: string, email: string) =>
    oidc.sign({ sub, email, iss: oidc.issuer, aud: oidc.audience, exp: Math.floor(Date.now() / 1000) + 600 })
  const call = async (app: StartedApp, bearer: string, method: string, path: string, json?: unknown) => {
    const res = await app.request(path, { method, json, headers: { authorization: `Bearer ${bearer}` } })
    return { status: res.status, body: (await res.json()) as any }
  }

  it('an invite made through A is activated at the first request to B', async () => {
    const root = await oidc.clientToken('root')
    assert.equal((await call(a, root, 'PATCH', '/api/admin/config', { kb_authz_enabled: true })).status, 200)
    const owner = await token('olga', 'olga@example.com')
    const kb = uniqueId()
    assert.equal((await call(a, owner, 'POST', '/api/kb', { kb_id: kb })).status, 201)
    // B loads its pending-invite e-mails now, before the invite exists.
    assert.equal((await call(b, owner, 'GET', `/api/kb/${kb}`)).status, 200)

    const inv = await call(a, owner, 'POST', `/api/kb/${kb}/members`, { email: 'newcomer@example.com', role: 'editor' })
    assert.deepEqual([inv.status, inv.body.status], [201, 'invited'])
    const first = await call(b, await token('newcomer', 'newcomer@example.com'), 'GET', `/api/kb/${kb}`)
    assert.deepEqual([first.status, first.body.my_role], [200, 'editor'])
    assert.equal((await call(a, owner, 'GET', `/api/kb/${kb}/members`)).body.members.find((m: any) => m.user_id === 'newcomer')?.role, 'editor')
  })

  it('a user deprovisioned through A has their profile recorded again at their next request to B', async () => {
    const root = await oidc.clientToken('root')
    const user = await token('wanderer', 'wanderer@example.com')
    assert.equal((await call(b, user, 'GET', '/api/me')).status, 200)
    const profile = () => a.app.adapters.sql.query(`SELECT email FROM user_profiles WHERE user_id = 'wanderer'`)
    assert.equal((await profile()).length, 1)
    assert.equal((await call(a, root, 'DELETE', '/api/users/wanderer')).status, 200)
    assert.equal((await profile()).length, 0)
    assert.equal((await call(b, user, 'GET', '/api/me')).status, 200)
    assert.deepEqual(await profile(), [{ email: 'wanderer@example.com' }])
  })
})
