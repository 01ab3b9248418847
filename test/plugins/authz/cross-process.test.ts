// Two service processes (two apps) on one PostgreSQL and one Redis: a change made through one is effective in
// the other on its very next request, although the other had the old value cached (role_cache_ttl_seconds is
// an hour here, so only the Redis pub/sub invalidation can explain it). Services driver set only: with the
// embedded engines one process owns data_dir, and its bus is in process.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Redis } from 'ioredis'
import { startApp } from '../../helpers/app.ts'
import { startAuthzFixture } from '../../helpers/authz-fixture.ts'
import { serviceUrl, skipUnless } from '../../helpers/services.ts'
import { waitFor } from '../../helpers/wait.ts'
import type { AuthzService } from '../../../plugins/authz/types.ts'

type Json = any

describe('authz caches across processes (PostgreSQL + Redis)', { skip: skipUnless('postgres') || skipUnless('redis') }, () => {
  it('roles, KB state, visibility, deletion and the runtime config reach the other process at once', async (t) => {
    const settings = { authz: { role_cache_ttl_seconds: 3600 } }
    const a = await startAuthzFixture(t, { services: true, settings })
    const s = a.svc.app.settings
    // Process B: the same database, Redis (and key prefix), object store and issuer.
    const b = await startApp(t, {
      services: true,
      settings: {
        postgres: { host: s.postgres.host, port: s.postgres.port, user: s.postgres.user, dbname: s.postgres.dbname },
        redis: { host: s.redis.host, port: s.redis.port, db: s.redis.db, key_prefix: s.redis.key_prefix },
        s3: { endpoint: s.s3.endpoint, access_key: s.s3.access_key, secret_key: s.s3.secret_key, rag_bucket: s.s3.rag_bucket, insecure: true },
        oidc: { issuer_url: s.oidc.issuer_url, audience: s.oidc.audience },
        authz: { ...s.authz },
        queue_worker: { enabled: false },
      },
    })
    const onB = async (userId: string, path: string, init: RequestInit & { json?: unknown } = {}, superAdmin = false) =>
      b.request(path, { ...init, headers: { authorization: `Bearer ${await a.token(userId, { superAdmin })}` } })
    const status = async (p: Promise<Response>) => (await p).status

    const kb = await a.createKb({ members: false })
    // B caches: u-viewer has no role, the KB is active, private, and role checks are on.
    assert.equal(await status(onB('u-viewer', `/api/kb/${kb}`)), 403)
    assert.equal(await status(onB('u-owner', `/api/kb/${kb}`, { method: 'PATCH', json: { kb_name: 'b' } })), 200)
    assert.equal(await status(onB('u-outsider', `/api/kb/${kb}`)), 403)

    await a.addMember(kb, 'u-viewer', 'viewer') // SQL, then the invalidation a real grant publishes, through A
    assert.equal(await status(onB('u-viewer', `/api/kb/${kb}`)), 200, 'a role granted in A is effective in B')
    assert.equal((await (await onB('u-viewer', `/api/kb/${kb}`)).json() as Json).my_role, 'viewer')

    // A KB state change (frozen) and a visibility change made over HTTP on A.
    await a.setKbState(kb, { frozen: true })
    assert.equal(await status(onB('u-owner', `/api/kb/${kb}`, { method: 'PATCH', json: { kb_name: 'b' } })), 403, 'frozen in A is frozen in B')
    await a.setKbState(kb, { frozen: false })
    assert.equal((await a.as('owner', `/api/kb/${kb}`, { method: 'PATCH', json: { visibility: 'public' } })).status, 200)
    assert.equal(await status(onB('u-outsider', `/api/kb/${kb}`)), 200, 'made public in A is public in B')

    // The runtime config: B has kb_authz_enabled true cached.
    assert.equal(await status(onB('u-outsider', `/api/kb/${kb}`, { method: 'PATCH', json: { kb_name: 'x' } })), 403)
    assert.equal((await a.as('super_admin', '/api/admin/config', { method: 'PATCH', json: { kb_authz_enabled: false, max_docs_count: 9 } })).status, 200)
    assert.equal(await status(onB('u-outsider', `/api/kb/${kb}`, { method: 'PATCH', json: { kb_name: 'x' } })), 200, 'role checks off in B')
    assert.deepEqual(await (await onB('u-super', '/api/admin/config', {}, true)).json(), { kb_authz_enabled: false, max_docs_count: 9 })
    assert.deepEqual(await b.app.use<AuthzService>('authz').config.get(), { kb_authz_enabled: false, max_docs_count: 9 })
    await a.setAuthzEnabled(true)
    assert.equal(await status(onB('u-outsider', `/api/kb/${kb}`, { method: 'PATCH', json: { kb_name: 'x' } })), 403, 'and on again')

    // Deletion in A: B answers 404, and a KB re-created under the id in B does not inherit the old members.
    assert.equal((await a.as('owner', `/api/kb/${kb}`, { method: 'DELETE' })).status, 200)
    assert.equal(await status(onB('u-viewer', `/api/kb/${kb}`)), 404)
    assert.equal(await status(onB('u-editor', '/api/kb', { method: 'POST', json: { kb_id: kb } })), 201)
    assert.equal(await status(onB('u-viewer', `/api/kb/${kb}`)), 403)
    assert.equal(await status(a.as('viewer', `/api/kb/${kb}`)), 403)
    assert.equal((await (await a.as('editor', `/api/kb/${kb}`)).json() as Json).my_role, 'owner', 'the creator in B is owner in A')
  })

  it('a subscriber that lost its connection drops every cache: a change made meanwhile is not served stale', async (t) => {
    const f = await startAuthzFixture(t, { services: true, settings: { authz: { role_cache_ttl_seconds: 3600 } } })
    const kb = await f.createKb({ members: false })
    assert.equal((await f.as('viewer', `/api/kb/${kb}`)).status, 403) // cached: no role
    const name = `${f.svc.app.settings.redis.key_prefix}-authz-events`
    const admin = new Redis(serviceUrl('redis')!)
    t.after(() => admin.quit())
    const clients = String(await admin.client('LIST')).split('\n').filter((l) => l.includes(` name=${name} `))
    assert.equal(clients.length, 1, 'one named subscriber')
    const id = /\bid=(\d+)/.exec(clients[0])![1]
    // A grant whose invalidation this process cannot hear (written while its subscriber is gone, and not published).
    await admin.client('KILL', 'ID', id)
    await f.sql.query("INSERT INTO kb_members (kb_id, user_id, role) VALUES ($1, 'u-viewer', 'viewer')", [kb])
    await waitFor(async () => (await f.as('viewer', `/api/kb/${kb}`)).status === 200, 'the grant visible after the reconnect', 15_000)
    await waitFor(async () => String(await admin.client('LIST')).split('\n').some((l) => l.includes(` name=${name} `)), 'the subscriber back', 15_000)
    // Back and caching again: a later grant is heard as before.
    await f.addMember(kb, 'u-editor', 'editor')
    assert.equal((await f.as('editor', `/api/kb/${kb}/reindex`, { method: 'POST' })).status, 202)
  })
})
