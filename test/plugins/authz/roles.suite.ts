// Roles and the KB rules of the access-controlled edition (issue 14 parts 2 and 3, spec 2.1-2.2, 3.2, 4.2, 4.6,
// 4.10, 5) through HTTP with tokens a real oidc-provider signs: role levels, frozen and public KBs, my_role,
// GET /api/kb scoping, search filtering, creation rules and caps, KB deletion, connectors. The runtime config: config.suite.ts.
// Run on both driver sets by roles.test.ts.
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { startAuthzFixture, type AuthzFixture, type AuthzFixtureOptions } from '../../helpers/authz-fixture.ts'
import { startApp, uniqueId, type StartOptions } from '../../helpers/app.ts'
import { waitFor } from '../../helpers/wait.ts'
import { createAccessHook } from '../../../plugins/authz/access.ts'
import type { AccessControl } from '../../../plugins/authz/types.ts'

import { detail, json, patch, post } from './http.ts'

type Json = any

export function rolesSuite(label: string, base: StartOptions): void {
  const start = (t: { after(fn: () => unknown): void }, o: AuthzFixtureOptions = {}) =>
    startAuthzFixture(t, { ...base, ...o, settings: { ...o.settings } })

  it(`${label}: each role reaches its routes and no further; absent KB 404, no role 403, role too low 403`, async (t) => {
    const f = await start(t)
    const kb = await f.createKb()
    await detail(await f.as('outsider', `/api/kb/${kb}`), 403, `No access to KB: ${kb}`)
    await detail(await f.as('outsider', '/api/kb/no-such-kb'), 404, 'KB not found: no-such-kb')
    await detail(await f.as('viewer', '/api/kb/no-such-kb', patch({ kb_name: 'x' })), 404, 'KB not found: no-such-kb')
    for (const who of ['viewer', 'editor', 'admin', 'owner', 'super_admin'] as const) {
      assert.equal((await f.as(who, `/api/kb/${kb}`)).status, 200, `${who} reads`)
      assert.equal((await f.as(who, `/api/kb/${kb}/docs`)).status, 200, `${who} lists documents`)
    }
    await detail(await f.as('viewer', `/api/kb/${kb}`, patch({ kb_name: 'v' })), 403, `Requires role admin on KB: ${kb}`)
    await detail(await f.as('editor', `/api/kb/${kb}`, patch({ kb_name: 'e' })), 403, `Requires role admin on KB: ${kb}`)
    assert.equal((await f.as('admin', `/api/kb/${kb}`, patch({ kb_name: 'a' }))).status, 200)
    await detail(await f.as('admin', `/api/kb/${kb}/settings/overrides`, { method: 'DELETE' }), 403, `Requires role owner on KB: ${kb}`)
    await detail(await f.as('admin', `/api/kb/${kb}`, { method: 'DELETE' }), 403, `Requires role owner on KB: ${kb}`)
    // Editor: document writes; viewer: none.
    await detail(await f.as('viewer', `/api/kb/${kb}/reindex`, { method: 'POST' }), 403, `Requires role editor on KB: ${kb}`)
    assert.equal((await f.as('editor', `/api/kb/${kb}/reindex`, { method: 'POST' })).status, 202)
    // Super-admin routes: the group in this request's token, nothing else.
    await detail(await f.as('owner', '/api/docs/status'), 403, 'Requires super-admin')
    assert.equal((await f.as('super_admin', '/api/docs/status')).status, 200)
    assert.equal((await f.as('none', `/api/kb/${kb}`)).status, 401)
    assert.equal((await f.as('super_admin', `/api/kb/${kb}`, { method: 'DELETE' })).status, 200)
  })

  it(`${label}: a frozen KB refuses every write above viewer, to everyone including a super-admin; reads pass`, async (t) => {
    const f = await start(t)
    const kb = await f.createKb({ frozen: true })
    for (const who of ['viewer', 'owner', 'super_admin'] as const) assert.equal((await f.as(who, `/api/kb/${kb}`)).status, 200, `${who} reads`)
    for (const who of ['admin', 'owner', 'super_admin'] as const) {
      await detail(await f.as(who, `/api/kb/${kb}`, patch({ kb_name: 'x' })), 403, `KB is frozen: ${kb}`)
    }
    await detail(await f.as('super_admin', `/api/kb/${kb}`, { method: 'DELETE' }), 403, `KB is frozen: ${kb}`)
    await detail(await f.as('editor', `/api/kb/${kb}/reindex`, { method: 'POST' }), 403, `KB is frozen: ${kb}`)
    // Check order: no role comes before frozen.
    await detail(await f.as('outsider', `/api/kb/${kb}`, patch({ kb_name: 'x' })), 403, `No access to KB: ${kb}`)
    const got = await json(await f.as('viewer', `/api/kb/${kb}`), 200)
    assert.equal(got.status, 'frozen')
    // Active again: writes pass at once (the state change invalidated the cache).
    await f.setKbState(kb, { frozen: false })
    assert.equal((await f.as('admin', `/api/kb/${kb}`, patch({ kb_name: 'x' }))).status, 200)
  })

  it(`${label}: a public KB is read as viewer by every authenticated caller, listed and searched; writes need membership`, async (t) => {
    const f = await start(t)
    const kb = await f.createKb({ visibility: 'public' })
    const got = await json(await f.as('public_outsider', `/api/kb/${kb}`), 200)
    assert.equal(got.visibility, 'public')
    assert.equal(got.my_role, 'viewer')
    const list = await json(await f.as('public_outsider', '/api/kb'), 200)
    assert.deepEqual(list.knowledge_bases.map((k: Json) => [k.kb_id, k.my_role]), [[kb, 'viewer']])
    await detail(await f.as('public_outsider', `/api/kb/${kb}`, patch({ kb_name: 'x' })), 403, `Requires role admin on KB: ${kb}`)
    await detail(await f.as('public_outsider', `/api/kb/${kb}/reindex`, { method: 'POST' }), 403, `Requires role editor on KB: ${kb}`)
    assert.equal((await f.as('none', `/api/kb/${kb}`)).status, 401)
    // Made private by its admin (PATCH visibility): the outsider loses it at once.
    assert.equal((await f.as('admin', `/api/kb/${kb}`, patch({ visibility: 'private' }))).status, 200)
    await detail(await f.as('public_outsider', `/api/kb/${kb}`), 403, `No access to KB: ${kb}`)
    assert.deepEqual((await json(await f.as('public_outsider', '/api/kb'), 200)).knowledge_bases, [])
    assert.equal((await f.as('admin', `/api/kb/${kb}`, patch({ visibility: 'secret' }))).status, 422)
  })

  it(`${label}: GET /api/kb lists the caller's KBs and public ones with my_role; a super-admin sees all; off: all, no my_role`, async (t) => {
    const f = await start(t)
    const mine = await f.createKb()
    const other = await f.createKb({ members: false })
    const pub = await f.createKb({ visibility: 'public', members: false })
    const listOf = async (who: Parameters<AuthzFixture['as']>[0]) =>
      (await json(await f.as(who, '/api/kb'), 200)).knowledge_bases.map((k: Json) => [k.kb_id, k.my_role])
    const sorted = (rows: [string, string | undefined][]) => rows.sort((a, b) => a[0].localeCompare(b[0]))
    assert.deepEqual(await listOf('editor'), sorted([[mine, 'editor'], [pub, 'viewer']]))
    assert.deepEqual(await listOf('owner'), sorted([[mine, 'owner'], [other, 'owner'], [pub, 'owner']]))
    assert.deepEqual(await listOf('super_admin'), sorted([[mine, 'owner'], [other, 'owner'], [pub, 'owner']]))
    assert.deepEqual(await listOf('outsider'), [[pub, 'viewer']])
    assert.equal((await json(await f.as('viewer', `/api/kb/${mine}`), 200)).my_role, 'viewer')
    assert.equal((await json(await f.as('super_admin', `/api/kb/${other}`), 200)).my_role, 'owner')

    await f.setAuthzEnabled(false)
    assert.deepEqual(await listOf('outsider'), sorted([[mine, undefined], [other, undefined], [pub, undefined]]))
    const single = await json(await f.as('outsider', `/api/kb/${other}`), 200)
    assert.equal('my_role' in single, false)
    // Off: any valid token passes KB routes; the super-admin routes still need the group.
    assert.equal((await f.as('outsider', `/api/kb/${other}`, patch({ kb_name: 'x' }))).status, 200)
    await detail(await f.as('outsider', '/api/admin/config'), 403, 'Requires super-admin')
    assert.equal((await f.as('none', `/api/kb/${other}`)).status, 401)
  })

  it(`${label}: search drops the KBs the caller cannot read; none left is 200 with empty results, none named is 422`, async (t) => {
    const f = await start(t, { settings: { queue_worker: { enabled: true } } })
    const mine = await f.createKb()
    const theirs = await f.createKb({ members: false })
    const pub = await f.createKb({ visibility: 'public', members: false })
    const text = 'Quarry retention policy: invoices are kept for ten years in the archive.'
    const docs = [[mine, await f.uploadDoc(mine, 'a.txt', text)], [theirs, await f.uploadDoc(theirs, 'b.txt', text)], [pub, await f.uploadDoc(pub, 'c.txt', text)]]
    for (const [kb, doc] of docs) {
      await waitFor(async () => (await json(await f.as('owner', `/api/kb/${kb}/docs/${doc}/status`), 200)).status === 'indexed', `${doc} indexed`)
    }
    const search = async (who: Parameters<AuthzFixture['as']>[0], kbIds: string[]) =>
      json(await f.as(who, '/api/search', post({ query: 'invoice retention archive', kb_ids: kbIds })), 200)
    const kbsOf = (out: Json) => [...new Set(out.results.map((r: Json) => r.kb_id))].sort()

    assert.deepEqual(kbsOf(await search('viewer', [mine, theirs, pub])), [mine, pub].sort())
    assert.deepEqual(kbsOf(await search('owner', [mine, theirs, pub])), [mine, theirs, pub].sort())
    assert.deepEqual(kbsOf(await search('super_admin', [theirs])), [theirs])
    const none = await search('viewer', [theirs, 'no-such-kb'])
    assert.deepEqual(none.results, [])
    assert.equal(none.meta.returned, 0)
    assert.equal(none.meta.total_candidates, 0)
    assert.equal(none.meta.search_mode, 'hybrid')
    // The filtered answer never comes from (or goes to) another caller's cache entry.
    assert.deepEqual(kbsOf(await search('outsider', [mine, theirs, pub])), [pub])
    // The client named no KB: the same 422 as the base edition (notes.md), for everyone, on or off.
    const noneNamed = async () => {
      for (const who of ['viewer', 'outsider', 'super_admin'] as const) {
        for (const body of [{ query: 'invoice', kb_ids: [] }, { query: 'invoice' }]) {
          await detail(await f.as(who, '/api/search', post(body)), 422, 'kb_ids must contain at least one entry.')
        }
      }
    }
    await noneNamed()
    await f.setAuthzEnabled(false)
    assert.deepEqual(kbsOf(await search('outsider', [mine, theirs, pub])), [mine, theirs, pub].sort())
    await noneNamed()
  })

  it(`${label}: creation needs a creator group ('*' = all, a string is one group); the creator owns it; super-admin bypasses`, async (t) => {
    const f = await start(t, { settings: { authz: { kb_creator_roles: 'makers', max_kb_count: 0 } } })
    const maker = await f.oidc.sign({
      sub: 'u-maker', iss: f.oidc.issuer, aud: f.oidc.audience, exp: Math.floor(Date.now() / 1000) + 600, groups: ['/makers'],
    })
    await detail(await f.as('outsider', '/api/kb', post({ kb_id: uniqueId() })), 403, 'Not allowed to create knowledge bases')
    const kb = uniqueId()
    const res = await f.svc.request('/api/kb', { method: 'POST', json: { kb_id: kb, visibility: 'public' }, headers: { authorization: `Bearer ${maker}` } })
    assert.deepEqual(await json(res, 201), { kb_id: kb, status: 'created' })
    const got = await json(await f.svc.request(`/api/kb/${kb}`, { headers: { authorization: `Bearer ${maker}` } }), 200)
    assert.equal(got.my_role, 'owner')
    assert.equal(got.visibility, 'public')
    assert.deepEqual(await f.sql.query("SELECT user_id, role FROM kb_members WHERE kb_id = $1", [kb]), [{ user_id: 'u-maker', role: 'owner' }])
    assert.equal((await f.as('super_admin', '/api/kb', post({ kb_id: uniqueId() }))).status, 201)
    // Checked regardless of kb_authz_enabled.
    await f.setAuthzEnabled(false)
    await detail(await f.as('outsider', '/api/kb', post({ kb_id: uniqueId() })), 403, 'Not allowed to create knowledge bases')
    const me = await json(await f.as('outsider', '/api/me'), 200)
    assert.equal(me.can_create_kb, false)
  })

  it(`${label}: the KB cap (global, then the user's own, 0 = unlimited) counts owned KBs; a concurrent pair at cap-1 gives one 201`, async (t) => {
    const f = await start(t, { settings: { authz: { kb_creator_roles: ['*'], max_kb_count: 2 } } })
    const create = (who: Parameters<AuthzFixture['as']>[0]) => f.as(who, '/api/kb', post({ kb_id: uniqueId() }))
    assert.equal((await create('editor')).status, 201)
    // cap-1: two at once, exactly one passes.
    const pair = await Promise.all([create('editor'), create('editor')])
    assert.deepEqual(pair.map((r) => r.status).sort(), [201, 403])
    await detail(pair.find((r) => r.status === 403)!, 403, 'KB limit reached: 2/2')
    await detail(await create('editor'), 403, 'KB limit reached: 2/2')
    let me = await json(await f.as('editor', '/api/me'), 200)
    assert.deepEqual({ max: me.max_kb_count, count: me.kb_count, can: me.can_create_kb }, { max: 2, count: 2, can: true })
    // The user's own cap wins; 0 = unlimited for that user.
    await f.addProfile('u-editor')
    await f.sql.query('UPDATE user_profiles SET max_kb_count = 3 WHERE user_id = $1', ['u-editor'])
    assert.equal((await create('editor')).status, 201)
    await detail(await create('editor'), 403, 'KB limit reached: 3/3')
    await f.sql.query('UPDATE user_profiles SET max_kb_count = 0 WHERE user_id = $1', ['u-editor'])
    assert.equal((await create('editor')).status, 201)
    me = await json(await f.as('editor', '/api/me'), 200)
    assert.deepEqual({ max: me.max_kb_count, count: me.kb_count }, { max: 0, count: 4 })
    // Super-admin bypasses the cap.
    for (let i = 0; i < 3; i++) assert.equal((await create('super_admin')).status, 201)
  })

  it(`${label}: deleting a KB drops its roles: a KB re-created under the same id starts with only its new owner`, async (t) => {
    const f = await start(t)
    const kb = await f.createKb()
    assert.equal((await f.as('viewer', `/api/kb/${kb}`)).status, 200)
    assert.equal((await f.as('owner', `/api/kb/${kb}`, { method: 'DELETE' })).status, 200)
    await detail(await f.as('viewer', `/api/kb/${kb}`), 404, `KB not found: ${kb}`)
    assert.equal((await f.as('outsider', '/api/kb', post({ kb_id: kb }))).status, 201)
    await detail(await f.as('viewer', `/api/kb/${kb}`), 403, `No access to KB: ${kb}`)
    await detail(await f.as('owner', `/api/kb/${kb}`), 403, `No access to KB: ${kb}`)
    assert.equal((await json(await f.as('outsider', `/api/kb/${kb}`), 200)).my_role, 'owner')
  })

  it(`${label}: a sync of a connector whose KB is frozen ingests and prunes nothing: it ends with 'KB is frozen' (status error)`, async (t) => {
    const f = await start(t, { settings: { queue_worker: { enabled: true } } })
    const kb = await f.createKb()
    const id = await f.createConnector(kb)
    // A document of the connector that a sync would prune (its source is not among what the seed yields).
    const doc = await f.uploadDoc(kb, 'kept.txt')
    await waitFor(async () => (await json(await f.as('owner', `/api/kb/${kb}/docs/${doc}/status`), 200)).status === 'indexed', `${doc} indexed`)
    await f.sql.query('UPDATE documents SET connector_id = $1::uuid WHERE doc_id = $2', [id, doc])
    await f.setKbState(kb, { frozen: true })
    // With role checks off the route lets the sync start (a scheduled firing needs no route at all): the engine refuses.
    await f.setAuthzEnabled(false)
    assert.equal((await f.as('owner', `/api/connectors/${id}/sync`, { method: 'POST' })).status, 202)
    const st = await waitFor(async () => {
      const s = await json(await f.as('owner', `/api/connectors/${id}/sync/status`), 200)
      return s.sync_status === 'idle' && s
    }, `connector ${id} idle`)
    assert.equal(st.last_error, `KB is frozen: ${kb}`)
    assert.equal((await json(await f.as('owner', `/api/connectors/${id}`), 200)).status, 'error')
    const rows = await f.sql.query<{ doc_id: string; status: string }>('SELECT doc_id, status FROM documents WHERE kb_id = $1', [kb])
    assert.deepEqual(rows.map((r) => r.doc_id), [doc], 'nothing stored')
    assert.notEqual(rows[0].status, 'deleted', 'nothing pruned')
  })

  it(`${label}: a role route whose KB field is missing or not a string is a misdeclared route: 500, never passed`, async () => {
    const passAll: AccessControl = { require: async () => 'owner', myRole: async () => 'owner', readable: async (_c, ids) => [...(ids ?? [])] }
    const hook = createAccessHook({ sql: null as never, access: passAll, resolvers: new Map() })
    const caller = { user_id: 'u', email: null, preferred_username: null, groups: [], is_super_admin: false, claims: {} }
    const route = { method: 'POST', path: '/api/x', access: { level: 'editor', kb: { from: 'body', name: 'kb_id' } } } as never
    for (const body of [{}, { kb_id: 7 }, { kb_id: null }, { kb_id: ['a'] }]) {
      await assert.rejects(Promise.resolve(hook({ caller, body, params: {}, query: {} } as never, route)),
        (err: any) => err.status === 500 && err.message === 'Route POST /api/x names no KB in body.kb_id', JSON.stringify(body))
    }
    await hook({ caller, body: { kb_id: 'kb-1' }, params: {}, query: {} } as never, route)
  })

  it(`${label}: connectors take their KB's role; GET /api/connectors lists member and public KBs' connectors only`, async (t) => {
    const f = await start(t)
    const mine = await f.createKb()
    const theirs = await f.createKb({ members: false })
    const pub = await f.createKb({ visibility: 'public', members: false })
    const [c1, c2, c3] = [await f.createConnector(mine), await f.createConnector(theirs), await f.createConnector(pub)]
    const ids = async (who: Parameters<AuthzFixture['as']>[0]) =>
      (await json(await f.as(who, '/api/connectors'), 200)).items.map((c: Json) => c.connector_id).sort()
    assert.deepEqual(await ids('viewer'), [c1, c3].sort())
    assert.deepEqual(await ids('owner'), [c1, c2, c3].sort())
    assert.deepEqual(await ids('outsider'), [c3])
    assert.equal((await f.as('viewer', `/api/connectors/${c1}`)).status, 200)
    // Named by its id only: the refusal does not tell which KB it belongs to.
    await detail(await f.as('viewer', `/api/connectors/${c2}`), 403, `No access to connector: ${c2}`)
    await detail(await f.as('viewer', `/api/connectors/${c2}/sync`, { method: 'POST' }), 403, `No access to connector: ${c2}`)
    assert.equal((await f.as('outsider', `/api/connectors/${c3}`)).status, 200)
    await detail(await f.as('viewer', `/api/connectors/${c1}`, patch({ name: 'x' })), 403, `Requires role editor on KB: ${mine}`)
    assert.equal((await f.as('editor', `/api/connectors/${c1}`, patch({ name: 'renamed' }))).status, 200)
    await detail(await f.as('editor', `/api/connectors/${c1}`, { method: 'DELETE' }), 403, `Requires role admin on KB: ${mine}`)
    await detail(await f.as('editor', '/api/connectors', post({ kb_id: mine, name: 'n', source_type: 'web', config: { seed_urls: ['http://127.0.0.1:9/'] } })),
      403, `Requires role admin on KB: ${mine}`)
    const absent = '00000000-0000-4000-8000-000000000000'
    assert.equal((await f.as('viewer', `/api/connectors/${absent}`)).status, 404)
  })

  it(`${label}: base edition: visibility is stored and shown, no token, no my_role, no KB is hidden, search 422 unchanged`, async (t) => {
    const svc = await startApp(t, base)
    const kb = uniqueId()
    assert.equal((await svc.request('/api/kb', post({ kb_id: kb, visibility: 'public' }))).status, 201)
    const other = uniqueId()
    assert.equal((await svc.request('/api/kb', post({ kb_id: other }))).status, 201)
    const got = await json(await svc.request(`/api/kb/${kb}`), 200)
    assert.equal(got.visibility, 'public')
    assert.equal('my_role' in got, false)
    assert.equal((await svc.request(`/api/kb/${kb}`, patch({ visibility: 'private' }))).status, 200)
    assert.equal((await json(await svc.request(`/api/kb/${kb}`), 200)).visibility, 'private')
    assert.equal((await json(await svc.request(`/api/kb/${other}`), 200)).visibility, 'private', 'default')
    assert.equal((await svc.request('/api/kb', post({ kb_id: uniqueId(), visibility: 'everyone' }))).status, 422)
    const list = await json(await svc.request('/api/kb'), 200)
    assert.deepEqual(list.knowledge_bases.map((k: Json) => k.kb_id).sort(), [kb, other].sort())
    assert.equal((await svc.request('/api/search', post({ query: 'x', kb_ids: [] }))).status, 422)
    assert.equal((await svc.request('/api/me')).status, 404, 'no [ENT] route')
    assert.equal((await svc.request('/api/admin/config')).status, 404)
    assert.equal(svc.app.use('authz'), null)
  })
}
