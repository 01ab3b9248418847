// Ownership (spec 3.2, 4.5): transfer by the owner (the former owner becomes admin), succession when the owner
// is removed (oldest admin, else the KB is frozen), and a super-admin's transfer of a frozen KB.
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { onDriverSets } from './membership-env.ts'

onDriverSets('authz: ownership', (w) => {
  const roles = async (kb: string) =>
    Object.fromEntries((await w.sql.query<{ user_id: string; role: string }>('SELECT user_id, role FROM kb_members WHERE kb_id = $1', [kb])).map((r) => [r.user_id, r.role]))
  const status = async (kb: string) => (await w.sql.query<{ status: string }>('SELECT status FROM knowledge_bases WHERE kb_id = $1', [kb]))[0].status
  const transfer = (who: Parameters<typeof w.call>[0], kb: string, to: string) => w.call(who, 'POST', `/api/kb/${kb}/transfer-owner`, { new_owner_user_id: to })

  it('the owner transfers to an admin: the former owner becomes admin, both effective at once', async () => {
    const kb = await w.newKb('olivia')
    await w.grant(kb, 'adam', 'admin')
    const res = await transfer('olivia', kb, 'adam')
    assert.deepEqual([res.status, res.body], [200, { kb_id: kb, owner: 'adam' }])
    assert.deepEqual(await roles(kb), { olivia: 'admin', adam: 'owner' })
    assert.equal((await w.call('adam', 'GET', `/api/kb/${kb}`)).body.my_role, 'owner')
    assert.equal((await w.call('olivia', 'GET', `/api/kb/${kb}`)).body.my_role, 'admin')
    const back = await transfer('olivia', kb, 'olivia')
    assert.deepEqual([back.status, back.body], [403, { detail: `Requires role owner on KB: ${kb}` }])
  })

  it('re-checks the owner under the KB lock: an ownership change the role cache has not seen yet refuses the transfer', async () => {
    const kb = await w.newKb('olivia')
    await w.grant(kb, 'adam', 'admin')
    assert.equal((await w.call('olivia', 'GET', `/api/kb/${kb}`)).body.my_role, 'owner')
    // A concurrent transfer to adam committed behind the cache's back: olivia is admin now.
    await w.sql.query(`UPDATE kb_members SET role = 'admin' WHERE kb_id = $1 AND user_id = 'olivia'`, [kb])
    await w.sql.query(`UPDATE kb_members SET role = 'owner' WHERE kb_id = $1 AND user_id = 'adam'`, [kb])
    const res = await transfer('olivia', kb, 'oscar')
    assert.deepEqual([res.status, res.body], [403, { detail: `Requires role owner on KB: ${kb}` }])
    assert.deepEqual(await roles(kb), { olivia: 'admin', adam: 'owner' })
  })

  it('a transfer to a non-member makes them owner; to the current owner changes nothing', async () => {
    const kb = await w.newKb('olivia')
    assert.deepEqual((await transfer('olivia', kb, 'olivia')).body, { kb_id: kb, owner: 'olivia' })
    assert.deepEqual(await roles(kb), { olivia: 'owner' })
    const res = await transfer('olivia', kb, 'oscar')
    assert.deepEqual([res.status, res.body], [200, { kb_id: kb, owner: 'oscar' }])
    assert.deepEqual(await roles(kb), { olivia: 'admin', oscar: 'owner' })
    assert.equal((await w.call('oscar', 'GET', `/api/kb/${kb}`)).body.my_role, 'owner')
  })

  it('a user id that starts with U+FEFF is kept as given: that owner hands the KB on (the fuzz run found a 500)', async () => {
    const kb = await w.newKb('olivia')
    for (const to of ['\uFEFF', '\uFEFFbom']) {
      const res = await transfer('root', kb, to)
      assert.deepEqual([res.status, res.body], [200, { kb_id: kb, owner: to }])
    }
    const res = await transfer('root', kb, 'oscar')
    assert.deepEqual([res.status, res.body], [200, { kb_id: kb, owner: 'oscar' }])
    assert.deepEqual(await roles(kb), { olivia: 'admin', '\uFEFF': 'admin', '\uFEFFbom': 'admin', oscar: 'owner' })
  })

  it('only the owner or a super-admin: 403 for an admin and an outsider, 404 for an absent KB, 422 without a user id', async () => {
    const kb = await w.newKb('olivia')
    await w.grant(kb, 'adam', 'admin')
    const byAdmin = await transfer('adam', kb, 'adam')
    assert.deepEqual([byAdmin.status, byAdmin.body], [403, { detail: `Requires role owner on KB: ${kb}` }])
    const byOutsider = await transfer('oscar', kb, 'oscar')
    assert.deepEqual([byOutsider.status, byOutsider.body], [403, { detail: `No access to KB: ${kb}` }])
    const absent = await transfer('olivia', 'no-such-kb', 'adam')
    assert.deepEqual([absent.status, absent.body], [404, { detail: 'KB not found: no-such-kb' }])
    for (const body of [{}, { new_owner_user_id: '' }, { new_owner_user_id: 7 }]) {
      assert.equal((await w.call('olivia', 'POST', `/api/kb/${kb}/transfer-owner`, body)).status, 422, JSON.stringify(body))
    }
    assert.deepEqual(await roles(kb), { olivia: 'owner', adam: 'admin' })
    const bySuper = await transfer('root', kb, 'adam')
    assert.deepEqual([bySuper.status, bySuper.body], [200, { kb_id: kb, owner: 'adam' }])
    assert.deepEqual(await roles(kb), { olivia: 'admin', adam: 'owner' })
  })

  it('the super-admin removes the owner: the oldest admin becomes owner, the KB stays active', async () => {
    const kb = await w.newKb('olivia')
    await w.grant(kb, 'eve', 'editor')
    await w.grant(kb, 'dora', 'admin')
    await w.grant(kb, 'adam', 'admin')
    // dora was granted first, so she is the oldest admin whatever the clock's resolution.
    await w.sql.query(`UPDATE kb_members SET granted_at = granted_at - interval '1 hour' WHERE kb_id = $1 AND user_id = 'dora'`, [kb])
    const res = await w.call('root', 'DELETE', `/api/kb/${kb}/members/olivia`)
    assert.deepEqual([res.status, res.body], [200, { kb_id: kb, user_id: 'olivia', status: 'removed' }])
    assert.deepEqual(await roles(kb), { eve: 'editor', dora: 'owner', adam: 'admin' })
    assert.equal(await status(kb), 'active')
    assert.equal((await w.call('dora', 'GET', `/api/kb/${kb}`)).body.my_role, 'owner')
    assert.equal((await w.call('olivia', 'GET', `/api/kb/${kb}`)).status, 403)
  })

  it('the owner leaves a KB without admins: frozen (writes refused to all), until a super-admin transfers it', async () => {
    const kb = await w.newKb('olivia')
    await w.grant(kb, 'eve', 'editor')
    const leave = await w.call('olivia', 'DELETE', `/api/kb/${kb}/members/olivia`)
    assert.deepEqual([leave.status, leave.body], [200, { kb_id: kb, user_id: 'olivia', status: 'removed' }])
    assert.deepEqual(await roles(kb), { eve: 'editor' })
    assert.equal(await status(kb), 'frozen')
    // Reads pass; writes above viewer are refused, for the super-admin too.
    const read = await w.call('eve', 'GET', `/api/kb/${kb}`)
    assert.deepEqual([read.status, read.body.status], [200, 'frozen'])
    const patch = await w.call('root', 'PATCH', `/api/kb/${kb}`, { kb_name: 'x' })
    assert.deepEqual([patch.status, patch.body], [403, { detail: `KB is frozen: ${kb}` }])
    const members = await w.call('root', 'GET', `/api/kb/${kb}/members`)
    assert.deepEqual([members.status, members.body], [403, { detail: `KB is frozen: ${kb}` }])
    // Nobody but a super-admin may transfer a frozen KB.
    assert.equal((await transfer('eve', kb, 'eve')).status, 403)
    const revive = await transfer('root', kb, 'eve')
    assert.deepEqual([revive.status, revive.body], [200, { kb_id: kb, owner: 'eve' }])
    assert.equal(await status(kb), 'active')
    assert.deepEqual(await roles(kb), { eve: 'owner' })
    const write = await w.call('eve', 'PATCH', `/api/kb/${kb}`, { kb_name: 'revived' })
    assert.equal(write.status, 200, 'active again, at once')
    assert.equal((await w.call('eve', 'GET', `/api/kb/${kb}`)).body.status, 'active')
  })
})
