// The runtime system config of the access-controlled edition (spec 2.8, 4.6): GET/PATCH /api/admin/config
// (super-admin only, partial, validated), the switch on that makes the caller owner of ownerless KBs (once, even
// when two super-admins switch at the same moment), and GET /api/me. Run on both driver sets by config.test.ts.
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { startAuthzFixture } from '../../helpers/authz-fixture.ts'
import { uniqueId, type StartOptions } from '../../helpers/app.ts'
import { detail, json, patch } from './http.ts'

export function configSuite(label: string, base: StartOptions): void {
  const start = (t: { after(fn: () => unknown): void }, o: Parameters<typeof startAuthzFixture>[1] = {}) =>
    startAuthzFixture(t, { ...base, ...o, settings: { ...o.settings } })

  it(`${label}: GET/PATCH /api/admin/config: super-admin only, partial, validated; switching on claims ownerless KBs; /api/me`, async (t) => {
    const f = await start(t, { authzEnabled: false, settings: { authz: { max_docs_count: 7 } } })
    assert.deepEqual(await json(await f.as('super_admin', '/api/admin/config'), 200), { kb_authz_enabled: false, max_docs_count: 7 })
    await detail(await f.as('owner', '/api/admin/config'), 403, 'Requires super-admin')
    await detail(await f.as('owner', '/api/admin/config', patch({ max_docs_count: 1 })), 403, 'Requires super-admin')
    for (const bad of [{ extra: 1 }, { max_docs_count: -1 }, { max_docs_count: 1.5 }, { kb_authz_enabled: 'yes' }]) {
      assert.equal((await f.as('super_admin', '/api/admin/config', patch(bad))).status, 422, JSON.stringify(bad))
    }
    assert.deepEqual(await json(await f.as('super_admin', '/api/admin/config', patch({ max_docs_count: 0 })), 200), { kb_authz_enabled: false, max_docs_count: 0 })

    // KBs made while off: one with an owner, one without (pre-registered or made in the base edition), one frozen.
    const owned = await f.createKb({ members: false })
    const orphan = uniqueId()
    const frozen = uniqueId()
    await f.sql.query("INSERT INTO knowledge_bases (kb_id) VALUES ($1), ($2)", [orphan, frozen])
    await f.sql.query("UPDATE knowledge_bases SET status = 'frozen' WHERE kb_id = $1", [frozen])
    assert.deepEqual(await json(await f.as('super_admin', '/api/admin/config', patch({ kb_authz_enabled: true })), 200), { kb_authz_enabled: true, max_docs_count: 0 })
    const owners = await f.sql.query<{ kb_id: string; user_id: string }>(
      "SELECT kb_id, user_id FROM kb_members WHERE role = 'owner' AND kb_id = ANY($1::text[]) ORDER BY kb_id", [[owned, orphan, frozen]])
    assert.deepEqual(owners.map((r) => [r.kb_id, r.user_id]).sort(), [[orphan, 'u-super'], [frozen, 'u-super'], [owned, 'u-owner']].sort())
    // The claimed frozen KB is active again (spec 4.6 "every KB without an owner", as after a super-admin's transfer).
    const states = await f.sql.query<{ kb_id: string; status: string }>('SELECT kb_id, status FROM knowledge_bases WHERE kb_id = ANY($1::text[])', [[orphan, frozen]])
    assert.deepEqual(states.map((r) => r.status), ['active', 'active'])
    assert.equal((await f.as('super_admin', `/api/kb/${frozen}`, patch({ kb_name: 'writable again' }))).status, 200)
    assert.deepEqual(await json(await f.as('owner', '/api/me'), 200), {
      user_id: 'u-owner', email: 'u-owner@example.com', preferred_username: 'u-owner', is_super_admin: false, can_create_kb: true,
      kb_authz_enabled: true, max_kb_count: 0, kb_count: 1,
    })
    const su = await json(await f.as('super_admin', '/api/me'), 200)
    assert.deepEqual([su.is_super_admin, su.kb_count], [true, 2])
    // Switching on again claims nothing more.
    await f.setAuthzEnabled(true)
    assert.equal((await f.sql.query("SELECT 1 FROM kb_members WHERE user_id = 'u-super'")).length, 2)
  })

  it(`${label}: two super-admins switching on at once: one owner per ownerless KB, both answers say on`, async (t) => {
    const f = await start(t, { authzEnabled: false })
    const orphans = [uniqueId(), uniqueId(), uniqueId()]
    for (const id of orphans) await f.sql.query('INSERT INTO knowledge_bases (kb_id) VALUES ($1)', [id])
    const token2 = await f.token('u-super-2', { superAdmin: true })
    const [r1, r2] = await Promise.all([
      f.as('super_admin', '/api/admin/config', patch({ kb_authz_enabled: true })),
      f.svc.request('/api/admin/config', { ...patch({ kb_authz_enabled: true }), headers: { authorization: `Bearer ${token2}` } }),
    ])
    assert.equal((await json(r1, 200)).kb_authz_enabled, true)
    assert.equal((await json(r2, 200)).kb_authz_enabled, true)
    const owners = await f.sql.query<{ kb_id: string; n: number; who: string }>(
      "SELECT kb_id, count(*)::int AS n, min(user_id) AS who FROM kb_members WHERE role = 'owner' AND kb_id = ANY($1::text[]) GROUP BY kb_id", [orphans])
    assert.equal(owners.length, 3)
    assert.ok(owners.every((o) => o.n === 1))
    assert.equal(new Set(owners.map((o) => o.who)).size, 1, 'all claimed by the first switch')
    // The owner's role is effective at once (the switch invalidated every cache).
    const who = owners[0].who
    const other = who === 'u-super' ? 'u-super-2' : 'u-super'
    assert.equal((await json(await f.asUser(who, `/api/kb/${orphans[0]}`, {}, { superAdmin: false }), 200)).my_role, 'owner')
    await detail(await f.asUser(other, `/api/kb/${orphans[0]}`, {}, { superAdmin: false }), 403, `No access to KB: ${orphans[0]}`)
  })
}
