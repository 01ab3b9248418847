// Membership (spec 2.3, 4.4): listing with profile fields, granting through the directory, the 409s, role
// changes (403 on the owner), removal and self-removal, each effective on the very next request.
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { onDriverSets, PEOPLE } from './membership-env.ts'

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/

onDriverSets('authz: members', (w) => {
  it('lists the owner with the profile observed at login; a grant adds the member with the directory profile', async () => {
    const kb = await w.newKb('olivia')
    const first = await w.members(kb)
    assert.deepEqual(first.pending_invites, [])
    assert.equal(first.members.length, 1)
    const [owner] = first.members
    assert.deepEqual(Object.keys(owner).sort(), ['display_name', 'email', 'granted_at', 'granted_by', 'role', 'user_id'])
    assert.deepEqual({ ...owner, granted_at: undefined }, {
      user_id: 'olivia', role: 'owner', granted_by: 'olivia', granted_at: undefined, email: PEOPLE.olivia.email, display_name: 'Olivia Owner',
    })
    assert.match(owner.granted_at, ISO)

    // vic never sent a request: his profile comes from the directory at the grant.
    const res = await w.call('olivia', 'POST', `/api/kb/${kb}/members`, { email: 'Vic@Example.com', role: 'viewer' })
    assert.deepEqual([res.status, res.body], [201, { status: 'granted', user_id: 'vic', role: 'viewer' }])
    const vic = (await w.members(kb)).members.find((m: any) => m.user_id === 'vic')
    assert.deepEqual({ ...vic, granted_at: undefined }, {
      user_id: 'vic', role: 'viewer', granted_by: 'olivia', granted_at: undefined, email: PEOPLE.vic.email, display_name: 'Vic Viewer',
    })
    // Effective at once: vic reads the KB with his role.
    const read = await w.call('vic', 'GET', `/api/kb/${kb}`)
    assert.deepEqual([read.status, read.body.my_role], [200, 'viewer'])
    // The role-grant e-mail went out.
    const mail = await w.smtp.waitFor(PEOPLE.vic.email, kb)
    assert.equal(mail.from, 'kb@quarry.test')
    assert.equal(mail.subject, `Role viewer on knowledge base ${kb}`)
    assert.match(mail.text, new RegExp(`olivia granted you the role viewer on the knowledge base "KB ${kb}" \\(${kb}\\)`))
  })

  it('409 for an existing member (by the directory, or by the profile e-mail) and for a pending invite', async () => {
    const kb = await w.newKb()
    await w.grant(kb, 'eve', 'editor')
    for (const email of [PEOPLE.eve.email, 'EVE@example.com', PEOPLE.olivia.email]) {
      const dup = await w.call('olivia', 'POST', `/api/kb/${kb}/members`, { email, role: 'viewer' })
      assert.deepEqual([dup.status, dup.body], [409, { detail: `User is already a member of KB: ${kb}` }], email)
    }
    const invited = await w.call('olivia', 'POST', `/api/kb/${kb}/members`, { email: 'pending@example.com', role: 'viewer' })
    assert.equal(invited.status, 201)
    const again = await w.call('olivia', 'POST', `/api/kb/${kb}/members`, { email: 'Pending@Example.com', role: 'editor' })
    assert.deepEqual([again.status, again.body], [409, { detail: `An invite is already pending for pending@example.com on KB: ${kb}` }])
    // Nothing half-written: still one member row for eve and one invite.
    const list = await w.members(kb)
    assert.deepEqual(list.members.map((m: any) => m.user_id).sort(), ['eve', 'olivia'])
    assert.equal(list.pending_invites.length, 1)
  })

  it('two concurrent POSTs for the same e-mail: exactly one 201, the other 409 (grant and invite alike)', async () => {
    const kb = await w.newKb()
    for (const email of [PEOPLE.dora.email, 'racer@example.com']) {
      const both = await Promise.all([0, 1].map(() => w.call('olivia', 'POST', `/api/kb/${kb}/members`, { email, role: 'viewer' })))
      assert.deepEqual(both.map((r) => r.status).sort(), [201, 409], email)
    }
    const list = await w.members(kb)
    assert.deepEqual(list.members.map((m: any) => m.user_id).sort(), ['dora', 'olivia'])
    assert.deepEqual(list.pending_invites.map((i: any) => i.email), ['racer@example.com'])
  })

  it('422 for owner or an unknown role, a bad or missing e-mail', async () => {
    const kb = await w.newKb()
    for (const body of [
      { email: PEOPLE.adam.email, role: 'owner' }, { email: PEOPLE.adam.email, role: 'god' }, { email: PEOPLE.adam.email },
      { email: 'not-an-email', role: 'viewer' }, { role: 'viewer' }, { email: 42, role: 'viewer' },
      { email: 'a@example.com,b@example.com', role: 'viewer' }, { email: 'Eve <eve@example.com>', role: 'viewer' }, { email: 'a b@example.com', role: 'viewer' },
    ]) {
      const res = await w.call('olivia', 'POST', `/api/kb/${kb}/members`, body)
      assert.equal(res.status, 422, JSON.stringify(body))
      assert.ok(Array.isArray(res.body.detail) && res.body.detail[0].loc[0] === 'body', JSON.stringify(res.body))
    }
    const patch = await w.call('olivia', 'PATCH', `/api/kb/${kb}/members/olivia`, { role: 'owner' })
    assert.equal(patch.status, 422)
    assert.equal((await w.members(kb)).members.length, 1)
  })

  it('needs admin: 403 for an editor and an outsider, 404 for an absent KB', async () => {
    const kb = await w.newKb()
    await w.grant(kb, 'eve', 'editor')
    const asEditor = await w.call('eve', 'GET', `/api/kb/${kb}/members`)
    assert.deepEqual([asEditor.status, asEditor.body], [403, { detail: `Requires role admin on KB: ${kb}` }])
    const add = await w.call('eve', 'POST', `/api/kb/${kb}/members`, { email: PEOPLE.oscar.email, role: 'viewer' })
    assert.equal(add.status, 403)
    const outsider = await w.call('oscar', 'GET', `/api/kb/${kb}/members`)
    assert.deepEqual([outsider.status, outsider.body], [403, { detail: `No access to KB: ${kb}` }])
    const absent = await w.call('olivia', 'GET', '/api/kb/no-such-kb/members')
    assert.deepEqual([absent.status, absent.body], [404, { detail: 'KB not found: no-such-kb' }])
    // An admin may manage members; the super-admin may on every KB.
    await w.grant(kb, 'adam', 'admin')
    await w.grant(kb, 'vic', 'viewer', 'adam')
    assert.equal((await w.call('root', 'GET', `/api/kb/${kb}/members`)).status, 200)
  })

  it("changes a role (effective at once, e-mailed), 403 on the owner's role, 404 for a non-member", async () => {
    const kb = await w.newKb()
    await w.grant(kb, 'eve', 'editor')
    assert.equal((await w.call('eve', 'GET', `/api/kb/${kb}/members`)).status, 403)
    const up = await w.call('olivia', 'PATCH', `/api/kb/${kb}/members/eve`, { role: 'admin' })
    assert.deepEqual([up.status, up.body], [200, { kb_id: kb, user_id: 'eve', role: 'admin', status: 'updated' }])
    assert.equal((await w.call('eve', 'GET', `/api/kb/${kb}/members`)).status, 200, 'the role cache was invalidated')
    await w.smtp.waitFor(PEOPLE.eve.email, `Role admin on knowledge base ${kb}`)
    // An admin may demote another admin, or itself.
    const down = await w.call('eve', 'PATCH', `/api/kb/${kb}/members/eve`, { role: 'viewer' })
    assert.equal(down.status, 200)
    assert.equal((await w.call('eve', 'GET', `/api/kb/${kb}/members`)).status, 403)
    assert.equal((await w.call('eve', 'GET', `/api/kb/${kb}`)).body.my_role, 'viewer')

    for (const who of ['olivia', 'root'] as const) {
      const owner = await w.call(who, 'PATCH', `/api/kb/${kb}/members/olivia`, { role: 'admin' })
      assert.deepEqual([owner.status, owner.body], [403, { detail: "Cannot change the owner's role" }], who)
    }
    const missing = await w.call('olivia', 'PATCH', `/api/kb/${kb}/members/oscar`, { role: 'viewer' })
    assert.deepEqual([missing.status, missing.body], [404, { detail: 'Member not found: oscar' }])
    const roles = Object.fromEntries((await w.members(kb)).members.map((m: any) => [m.user_id, m.role]))
    assert.deepEqual(roles, { olivia: 'owner', eve: 'viewer' })
  })

  it('re-checks the caller under the KB lock: a demotion or freeze the role cache has not seen yet still refuses', async () => {
    const kb = await w.newKb()
    await w.grant(kb, 'adam', 'admin')
    await w.grant(kb, 'vic', 'viewer')
    // adam's admin role is now cached in this process; it changes in the store behind the cache's back (as a
    // concurrent demotion that commits between the cached check and the transaction would).
    assert.equal((await w.call('adam', 'GET', `/api/kb/${kb}/members`)).status, 200)
    await w.sql.query(`UPDATE kb_members SET role = 'editor' WHERE kb_id = $1 AND user_id = 'adam'`, [kb])
    const refused = { status: 403, body: { detail: `Requires role admin on KB: ${kb}` } }
    const patch = await w.call('adam', 'PATCH', `/api/kb/${kb}/members/vic`, { role: 'editor' })
    assert.deepEqual(patch, refused)
    const remove = await w.call('adam', 'DELETE', `/api/kb/${kb}/members/vic`)
    assert.deepEqual(remove, refused)
    const add = await w.call('adam', 'POST', `/api/kb/${kb}/members`, { email: PEOPLE.dora.email, role: 'viewer' })
    assert.deepEqual(add, refused)
    await w.sql.query(`DELETE FROM kb_members WHERE kb_id = $1 AND user_id = 'adam'`, [kb])
    assert.deepEqual(await w.call('adam', 'DELETE', `/api/kb/${kb}/members/vic`), { status: 403, body: { detail: `No access to KB: ${kb}` } })
    // Frozen behind the cache: the owner's write is refused too.
    await w.sql.query(`UPDATE knowledge_bases SET status = 'frozen' WHERE kb_id = $1`, [kb])
    assert.deepEqual(await w.call('olivia', 'PATCH', `/api/kb/${kb}/members/vic`, { role: 'editor' }), { status: 403, body: { detail: `KB is frozen: ${kb}` } })
    await w.sql.query(`UPDATE knowledge_bases SET status = 'active' WHERE kb_id = $1`, [kb])
    assert.deepEqual(Object.fromEntries((await w.members(kb)).members.map((m: any) => [m.user_id, m.role])), { olivia: 'owner', vic: 'viewer' })
  })

  it('with kb_authz_enabled false, membership writes need a super-admin (leaving excepted); reads stay open', async () => {
    const kb = await w.newKb()
    await w.grant(kb, 'eve', 'editor')
    const invite = await w.call('olivia', 'POST', `/api/kb/${kb}/members`, { email: 'later@example.com', role: 'viewer' })
    assert.equal(invite.status, 201)
    assert.equal((await w.call('root', 'PATCH', '/api/admin/config', { kb_authz_enabled: false })).status, 200)
    try {
      const refused = { status: 403, body: { detail: 'Requires super-admin while kb_authz_enabled is false' } }
      // Not even the owner: a membership written now would stand unreviewed once checks are on again.
      for (const who of ['olivia', 'oscar'] as const) {
        assert.deepEqual(await w.call(who, 'POST', `/api/kb/${kb}/members`, { email: PEOPLE.oscar.email, role: 'admin' }), refused, who)
        assert.deepEqual(await w.call(who, 'PATCH', `/api/kb/${kb}/members/eve`, { role: 'admin' }), refused, who)
        assert.deepEqual(await w.call(who, 'DELETE', `/api/kb/${kb}/members/eve`), refused, who)
        assert.deepEqual(await w.call(who, 'DELETE', `/api/kb/${kb}/invites/${invite.body.invite_id}`), refused, who)
        assert.deepEqual(await w.call(who, 'POST', `/api/kb/${kb}/transfer-owner`, { new_owner_user_id: 'oscar' }), refused, who)
      }
      // Reads stay open to any token; leaving is allowed; the super-admin writes.
      const read = await w.call('oscar', 'GET', `/api/kb/${kb}/members`)
      assert.equal(read.status, 200)
      assert.deepEqual(read.body.members.map((m: any) => [m.user_id, m.role]).sort(), [['eve', 'editor'], ['olivia', 'owner']])
      assert.equal((await w.call('eve', 'DELETE', `/api/kb/${kb}/members/eve`)).status, 200)
      const granted = await w.call('root', 'POST', `/api/kb/${kb}/members`, { email: PEOPLE.vic.email, role: 'viewer' })
      assert.deepEqual([granted.status, granted.body], [201, { status: 'granted', user_id: 'vic', role: 'viewer' }])
      assert.equal((await w.call('root', 'DELETE', `/api/kb/${kb}/invites/${invite.body.invite_id}`)).status, 200)
    } finally {
      assert.equal((await w.call('root', 'PATCH', '/api/admin/config', { kb_authz_enabled: true })).status, 200)
    }
    const list = await w.members(kb)
    assert.deepEqual(list.members.map((m: any) => [m.user_id, m.role]).sort(), [['olivia', 'owner'], ['vic', 'viewer']])
    assert.deepEqual(list.pending_invites, [])
  })

  it('removes a member (admin), lets anyone leave, 403 for others and for the owner without super-admin, 404 for a non-member', async () => {
    const kb = await w.newKb()
    await w.grant(kb, 'adam', 'admin')
    await w.grant(kb, 'eve', 'editor')
    await w.grant(kb, 'vic', 'viewer')

    const byEditor = await w.call('eve', 'DELETE', `/api/kb/${kb}/members/vic`)
    assert.deepEqual([byEditor.status, byEditor.body], [403, { detail: `Requires role admin on KB: ${kb}` }])
    const byOutsider = await w.call('oscar', 'DELETE', `/api/kb/${kb}/members/vic`)
    assert.deepEqual([byOutsider.status, byOutsider.body], [403, { detail: `No access to KB: ${kb}` }])
    const outsiderLeaves = await w.call('oscar', 'DELETE', `/api/kb/${kb}/members/oscar`)
    assert.deepEqual([outsiderLeaves.status, outsiderLeaves.body], [403, { detail: `No access to KB: ${kb}` }])
    const owner = await w.call('adam', 'DELETE', `/api/kb/${kb}/members/olivia`)
    assert.deepEqual([owner.status, owner.body], [403, { detail: `Only a super-admin can remove the owner of KB: ${kb}` }])

    const removed = await w.call('adam', 'DELETE', `/api/kb/${kb}/members/eve`)
    assert.deepEqual([removed.status, removed.body], [200, { kb_id: kb, user_id: 'eve', status: 'removed' }])
    assert.deepEqual((await w.call('eve', 'GET', `/api/kb/${kb}`)).status, 403, 'no role left, at once')
    const again = await w.call('adam', 'DELETE', `/api/kb/${kb}/members/eve`)
    assert.deepEqual([again.status, again.body], [404, { detail: 'Member not found: eve' }])

    const leaves = await w.call('vic', 'DELETE', `/api/kb/${kb}/members/vic`)
    assert.deepEqual([leaves.status, leaves.body], [200, { kb_id: kb, user_id: 'vic', status: 'removed' }])
    assert.equal((await w.call('vic', 'GET', `/api/kb/${kb}`)).status, 403)
    const absent = await w.call('adam', 'DELETE', '/api/kb/no-such-kb/members/vic')
    assert.deepEqual([absent.status, absent.body], [404, { detail: 'KB not found: no-such-kb' }])
    assert.deepEqual((await w.members(kb)).members.map((m: any) => m.user_id).sort(), ['adam', 'olivia'])
  })
})
