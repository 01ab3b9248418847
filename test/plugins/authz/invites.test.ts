// Invites (spec 2.3, 3.4, 4.4): an e-mail the directory does not know is invited (e-mail sent), listed while
// pending, becomes a membership at the invited user's first authenticated request (a real login through the
// provider's pages), can be revoked, and lapses after invite_expiry_days.
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { IVY, onDriverSets } from './membership-env.ts'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const DAY_MS = 86_400_000

onDriverSets('authz: invites', (w) => {
  const invite = async (kb: string, email: string, role = 'editor') => {
    const res = await w.call('olivia', 'POST', `/api/kb/${kb}/members`, { email, role })
    assert.equal(res.status, 201, JSON.stringify(res.body))
    assert.equal(res.body.status, 'invited')
    assert.deepEqual(Object.keys(res.body).sort(), ['invite_id', 'status'])
    assert.match(res.body.invite_id, UUID)
    return res.body.invite_id as string
  }
  const inviteStatus = async (id: string) =>
    (await w.sql.query<{ status: string }>('SELECT status FROM kb_invites WHERE invite_id = $1', [id]))[0]?.status

  it('invites an unknown e-mail (listed, e-mailed); the first request of that user activates every pending invite', async () => {
    const kb1 = await w.newKb()
    const kb2 = await w.newKb()
    const before = Date.now()
    const id1 = await invite(kb1, 'Ivy@Example.com', 'editor')
    const id2 = await invite(kb2, IVY.email, 'viewer')

    const { members, pending_invites } = await w.members(kb1)
    assert.deepEqual(members.map((m: any) => m.user_id), ['olivia'])
    assert.equal(pending_invites.length, 1)
    const [p] = pending_invites
    assert.deepEqual({ ...p, expires_at: undefined }, {
      invite_id: id1, kb_id: kb1, email: IVY.email, role: 'editor', granted_by: 'olivia', expires_at: undefined, status: 'pending',
    })
    // invite_expiry_days (7 by default) from now.
    const expires = Date.parse(p.expires_at)
    assert.ok(expires >= before + 7 * DAY_MS - 60_000 && expires <= Date.now() + 7 * DAY_MS + 60_000, p.expires_at)

    const mail = await w.smtp.waitFor(IVY.email, kb1)
    assert.equal(mail.subject, `Invitation to knowledge base ${kb1}`)
    assert.match(mail.text, new RegExp(`olivia invited you to the knowledge base "KB ${kb1}" \\(${kb1}\\) as editor`))
    await w.smtp.waitFor(IVY.email, kb2)

    // Ivy logs in at the provider (its login and consent pages) and calls the service: her first request
    // already carries the roles the invites gave.
    const read = await w.call('ivy', 'GET', `/api/kb/${kb1}`)
    assert.deepEqual([read.status, read.body.my_role], [200, 'editor'])
    assert.equal((await w.call('ivy', 'GET', `/api/kb/${kb2}`)).body.my_role, 'viewer')
    assert.deepEqual([await inviteStatus(id1), await inviteStatus(id2)], ['accepted', 'accepted'])
    const after = await w.members(kb1)
    assert.deepEqual(after.pending_invites, [])
    const ivy = after.members.find((m: any) => m.user_id === 'ivy')
    assert.deepEqual({ ...ivy, granted_at: undefined }, {
      user_id: 'ivy', role: 'editor', granted_by: 'olivia', granted_at: undefined, email: IVY.email, display_name: 'Ivy Invitee',
    })
  })

  it('an invite is not claimed by a token whose provider marks the e-mail unverified', async () => {
    const kb = await w.newKb()
    const id = await invite(kb, 'mallory-target@example.com')
    const forged = await w.oidc.sign({
      sub: 'mallory', iss: w.oidc.issuer, aud: w.oidc.audience, exp: Math.floor(Date.now() / 1000) + 600,
      email: 'mallory-target@example.com', email_verified: false,
    })
    const res = await w.s.request(`/api/kb/${kb}`, { headers: { authorization: `Bearer ${forged}` } })
    assert.equal(res.status, 403)
    assert.equal(await inviteStatus(id), 'pending')
  })

  it('revokes a pending invite: 200, then 404; 404 for an unknown, malformed or other KB id; needs admin', async () => {
    const kb = await w.newKb()
    const other = await w.newKb()
    const id = await invite(kb, 'revoked@example.com')
    await w.grant(kb, 'eve', 'editor')
    const byEditor = await w.call('eve', 'DELETE', `/api/kb/${kb}/invites/${id}`)
    assert.deepEqual([byEditor.status, byEditor.body], [403, { detail: `Requires role admin on KB: ${kb}` }])
    const wrongKb = await w.call('olivia', 'DELETE', `/api/kb/${other}/invites/${id}`)
    assert.deepEqual([wrongKb.status, wrongKb.body], [404, { detail: `Invite not found: ${id}` }])

    const res = await w.call('olivia', 'DELETE', `/api/kb/${kb}/invites/${id}`)
    assert.deepEqual([res.status, res.body], [200, { invite_id: id, status: 'revoked' }])
    assert.equal(await inviteStatus(id), 'revoked')
    assert.deepEqual((await w.members(kb)).pending_invites, [])
    const again = await w.call('olivia', 'DELETE', `/api/kb/${kb}/invites/${id}`)
    assert.deepEqual([again.status, again.body], [404, { detail: `Invite not found: ${id}` }])
    for (const bad of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
      const r = await w.call('olivia', 'DELETE', `/api/kb/${kb}/invites/${bad}`)
      assert.deepEqual([r.status, r.body], [404, { detail: `Invite not found: ${bad}` }])
    }
    // A revoked invite gives nothing at login, and the e-mail can be invited again.
    const login = await w.oidc.sign({ sub: 'revoked-user', iss: w.oidc.issuer, aud: w.oidc.audience, exp: Math.floor(Date.now() / 1000) + 600, email: 'revoked@example.com' })
    assert.equal((await w.s.request(`/api/kb/${kb}`, { headers: { authorization: `Bearer ${login}` } })).status, 403)
    await invite(kb, 'revoked@example.com')
  })

  it('an invite past its expiry is expired: not listed, not revocable, not activated; the e-mail can be invited again', async () => {
    const kb = await w.newKb()
    const id = await invite(kb, 'late@example.com', 'viewer')
    await w.sql.query(`UPDATE kb_invites SET expires_at = now() - interval '1 minute' WHERE invite_id = $1`, [id])
    assert.deepEqual((await w.members(kb)).pending_invites, [])
    assert.equal(await inviteStatus(id), 'expired')
    const revoke = await w.call('olivia', 'DELETE', `/api/kb/${kb}/invites/${id}`)
    assert.deepEqual([revoke.status, revoke.body], [404, { detail: `Invite not found: ${id}` }])
    const late = await w.oidc.sign({ sub: 'late-user', iss: w.oidc.issuer, aud: w.oidc.audience, exp: Math.floor(Date.now() / 1000) + 600, email: 'late@example.com' })
    assert.equal((await w.s.request(`/api/kb/${kb}`, { headers: { authorization: `Bearer ${late}` } })).status, 403)
    assert.equal(await inviteStatus(id), 'expired')
    const fresh = await invite(kb, 'late@example.com', 'viewer')
    assert.notEqual(fresh, id)
  })

  it('an invite that lapses while its e-mail is cached as pending is not activated at login', async () => {
    const kb = await w.newKb()
    const id = await invite(kb, 'lapsing@example.com')
    // Any request loads the pending e-mails (this one included); no listing afterwards: only activation sees the lapse.
    assert.equal((await w.call('olivia', 'GET', '/api/me')).status, 200)
    await w.sql.query(`UPDATE kb_invites SET expires_at = now() - interval '1 second' WHERE invite_id = $1`, [id])
    const token = await w.oidc.sign({ sub: 'lapsing-user', iss: w.oidc.issuer, aud: w.oidc.audience, exp: Math.floor(Date.now() / 1000) + 600, email: 'lapsing@example.com' })
    assert.equal((await w.s.request(`/api/kb/${kb}`, { headers: { authorization: `Bearer ${token}` } })).status, 403)
    assert.equal(await inviteStatus(id), 'expired')
  })
})
