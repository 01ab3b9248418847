// Users (spec 4.6): e-mail look-up (never an error), deprovisioning by id and by e-mail with succession, the
// per-user KB cap; and, last, the directory going away: look-up found false and members POST invites.
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { onDriverSets, PEOPLE } from './membership-env.ts'

onDriverSets('authz: users', (w) => {
  const roles = async (kb: string) =>
    Object.fromEntries((await w.sql.query<{ user_id: string; role: string }>('SELECT user_id, role FROM kb_members WHERE kb_id = $1', [kb])).map((r) => [r.user_id, r.role]))
  const status = async (kb: string) => (await w.sql.query<{ status: string }>('SELECT status FROM knowledge_bases WHERE kb_id = $1', [kb]))[0].status
  const profile = async (id: string) => (await w.sql.query('SELECT user_id, email, display_name, max_kb_count FROM user_profiles WHERE user_id = $1', [id]))[0]

  it('looks up an e-mail in the directory for any authenticated caller; anything else is found false', async () => {
    const found = await w.call('oscar', 'GET', `/api/users/lookup?email=${encodeURIComponent('Adam@Example.com')}`)
    assert.deepEqual([found.status, found.body], [200, { found: true, user_id: 'adam', display_name: 'Adam Admin' }])
    for (const q of ['?email=nobody%40example.com', '?email=', '', '?email=%0Aa%40b', `?email=${'x'.repeat(5000)}`]) {
      const res = await w.call('oscar', 'GET', `/api/users/lookup${q}`)
      assert.deepEqual([res.status, res.body], [200, { found: false, user_id: null, display_name: null }], q)
    }
    assert.equal((await w.s.request('/api/users/lookup?email=adam%40example.com')).status, 401)
  })

  it('deprovisions by id: memberships gone, succession on owned KBs (admin promoted, or frozen), profile gone', async () => {
    const asMember = await w.newKb('olivia')
    await w.grant(asMember, 'adam', 'admin')
    const withAdmin = await w.newKb('adam')
    await w.grant(withAdmin, 'dora', 'admin', 'adam')
    await w.grant(withAdmin, 'eve', 'editor', 'adam')
    const alone = await w.newKb('adam')
    await w.grant(alone, 'vic', 'viewer', 'adam')
    assert.ok(await profile('adam'))

    const res = await w.call('root', 'DELETE', '/api/users/adam')
    assert.equal(res.status, 200, JSON.stringify(res.body))
    assert.deepEqual(res.body, { user_id: 'adam', status: 'removed', kb_ids: [asMember, withAdmin, alone].sort() })
    assert.deepEqual(await roles(asMember), { olivia: 'owner' })
    assert.deepEqual(await roles(withAdmin), { dora: 'owner', eve: 'editor' })
    assert.equal(await status(withAdmin), 'active')
    assert.deepEqual(await roles(alone), { vic: 'viewer' })
    assert.equal(await status(alone), 'frozen')
    assert.equal(await profile('adam'), undefined)
    // At once: adam's token still authenticates but gives no role; dora owns withAdmin.
    assert.equal((await w.call('adam', 'GET', `/api/kb/${asMember}`)).status, 403)
    assert.equal((await w.call('dora', 'GET', `/api/kb/${withAdmin}`)).body.my_role, 'owner')
    // adam's next request records his profile again (he still exists at the provider).
    assert.equal((await profile('adam'))?.email, PEOPLE.adam.email)

    const unknown = await w.call('root', 'DELETE', '/api/users/nobody')
    assert.deepEqual([unknown.status, unknown.body], [404, { detail: 'User not found: nobody' }])
  })

  it('deprovisions by e-mail (any case); 404 for an unknown e-mail, 422 without one', async () => {
    const kb = await w.newKb('olivia')
    await w.grant(kb, 'eve', 'editor')
    const res = await w.call('root', 'DELETE', `/api/users?email=${encodeURIComponent('EVE@example.com')}`)
    assert.equal(res.status, 200, JSON.stringify(res.body))
    assert.equal(res.body.user_id, 'eve')
    assert.ok(res.body.kb_ids.includes(kb))
    assert.deepEqual(await roles(kb), { olivia: 'owner' })
    assert.equal((await w.sql.query(`SELECT 1 FROM kb_members WHERE user_id = 'eve'`)).length, 0)
    const unknown = await w.call('root', 'DELETE', '/api/users?email=ghost%40example.com')
    assert.deepEqual([unknown.status, unknown.body], [404, { detail: 'User not found: ghost@example.com' }])
    assert.equal((await w.call('root', 'DELETE', '/api/users')).status, 422)
  })

  it('deprovisions every profile with an e-mail at once: all their KBs locked together, succession on each', async () => {
    // Two accounts share an e-mail (a re-created account at the provider); each owns a KB the other is admin of.
    await w.sql.query(`INSERT INTO user_profiles (user_id, email) VALUES ('twin-a', 'twin@example.com'), ('twin-b', 'twin@example.com')`)
    const kbs = [await w.newKb('olivia'), await w.newKb('olivia')]
    await w.sql.query(`INSERT INTO kb_members (kb_id, user_id, role, granted_by) VALUES ($1, 'twin-a', 'admin', 'olivia'), ($2, 'twin-b', 'admin', 'olivia')`, kbs)
    const [a, b] = await Promise.all([
      w.call('root', 'DELETE', '/api/users?email=twin%40example.com'),
      w.call('root', 'DELETE', '/api/users/twin-b'),
    ])
    // The two deprovisionings overlap on twin-b's KBs and ran one after the other (no deadlock).
    assert.equal(a.status, 200, JSON.stringify(a.body))
    assert.ok([200, 404].includes(b.status), JSON.stringify(b.body))
    assert.deepEqual(a.body.user_id, 'twin-a')
    for (const kb of kbs) assert.deepEqual(await roles(kb), { olivia: 'owner' })
    assert.equal((await w.sql.query(`SELECT 1 FROM user_profiles WHERE email = 'twin@example.com'`)).length, 0)
  })

  it('an e-mail the provider says is unverified is neither recorded nor matched', async () => {
    const token = await w.oidc.sign({
      sub: 'mallory', iss: w.oidc.issuer, aud: w.oidc.audience, exp: Math.floor(Date.now() / 1000) + 600,
      email: PEOPLE.vic.email, email_verified: false, preferred_username: 'mallory',
    })
    const me = await w.s.request('/api/me', { headers: { authorization: `Bearer ${token}` } })
    assert.equal(me.status, 200)
    assert.equal((await profile('mallory'))?.email, null, 'not recorded')
    // mallory, a member, does not pass for vic: granting vic's address finds vic, not an existing member.
    const kb = await w.newKb('olivia')
    await w.sql.query(`INSERT INTO kb_members (kb_id, user_id, role, granted_by) VALUES ($1, 'mallory', 'viewer', 'olivia')`, [kb])
    const byMail = await w.call('olivia', 'POST', `/api/kb/${kb}/members`, { email: PEOPLE.vic.email, role: 'viewer' })
    assert.deepEqual([byMail.status, byMail.body], [201, { status: 'granted', user_id: 'vic', role: 'viewer' }])
    // A token with email_verified true (or without the claim, as before) is recorded.
    const verified = await w.oidc.sign({
      sub: 'trent', iss: w.oidc.issuer, aud: w.oidc.audience, exp: Math.floor(Date.now() / 1000) + 600, email: 'trent@example.com', email_verified: true,
    })
    assert.equal((await w.s.request('/api/me', { headers: { authorization: `Bearer ${verified}` } })).status, 200)
    assert.equal((await profile('trent'))?.email, 'trent@example.com')
  })

  it('deprovisioning needs a super-admin and never removes the caller', async () => {
    await w.call('root', 'GET', '/api/me')
    const self = await w.call('root', 'DELETE', '/api/users/root')
    assert.deepEqual([self.status, self.body], [403, { detail: 'Cannot delete yourself' }])
    const selfByEmail = await w.call('root', 'DELETE', '/api/users?email=root%40example.com')
    assert.deepEqual([selfByEmail.status, selfByEmail.body], [403, { detail: 'Cannot delete yourself' }])
    const notSuper = await w.call('olivia', 'DELETE', '/api/users/vic')
    assert.equal(notSuper.status, 403)
    assert.equal((await w.call('olivia', 'DELETE', `/api/users?email=${encodeURIComponent(PEOPLE.vic.email)}`)).status, 403)
    assert.ok(await profile('root'))
  })

  it('sets, lifts (0) and clears (null) a user KB cap; 404 without a profile; 422 for bad values; super-admin only', async () => {
    await w.call('oscar', 'GET', '/api/me')
    const set = await w.call('root', 'PATCH', '/api/users/oscar/quota', { max_kb_count: 1 })
    assert.deepEqual([set.status, set.body], [200, { user_id: 'oscar', max_kb_count: 1 }])
    assert.equal((await w.call('oscar', 'GET', '/api/me')).body.max_kb_count, 1)
    await w.newKb('oscar')
    const capped = await w.call('oscar', 'POST', '/api/kb', { kb_id: 'oscar-second' })
    assert.deepEqual([capped.status, capped.body], [403, { detail: 'KB limit reached: 1/1' }])

    const unlimited = await w.call('root', 'PATCH', '/api/users/oscar/quota', { max_kb_count: 0 })
    assert.deepEqual(unlimited.body, { user_id: 'oscar', max_kb_count: 0 })
    await w.newKb('oscar')
    const cleared = await w.call('root', 'PATCH', '/api/users/oscar/quota', { max_kb_count: null })
    assert.deepEqual([cleared.status, cleared.body], [200, { user_id: 'oscar', max_kb_count: null }])
    assert.equal((await profile('oscar')).max_kb_count, null)
    // The global authz.max_kb_count (0 here: unlimited) applies again.
    assert.equal((await w.call('oscar', 'GET', '/api/me')).body.max_kb_count, 0)

    const missing = await w.call('root', 'PATCH', '/api/users/never-seen/quota', { max_kb_count: 2 })
    assert.deepEqual([missing.status, missing.body], [404, { detail: 'User profile not found: never-seen' }])
    for (const body of [{ max_kb_count: -1 }, { max_kb_count: 1.5 }, { max_kb_count: '2' }, {}]) {
      assert.equal((await w.call('root', 'PATCH', '/api/users/oscar/quota', body)).status, 422, JSON.stringify(body))
    }
    assert.equal((await w.call('oscar', 'PATCH', '/api/users/oscar/quota', { max_kb_count: 9 })).status, 403)
    assert.equal((await profile('oscar')).max_kb_count, null)
  })

  // Last: stops the directory for the rest of this world.
  it('with the directory unreachable: look-up found false, members POST invites (a known member still 409)', async () => {
    const kb = await w.newKb('olivia')
    await w.kc.close()
    const lookup = await w.call('olivia', 'GET', `/api/users/lookup?email=${encodeURIComponent(PEOPLE.vic.email)}`)
    assert.deepEqual([lookup.status, lookup.body], [200, { found: false, user_id: null, display_name: null }])
    const add = await w.call('olivia', 'POST', `/api/kb/${kb}/members`, { email: PEOPLE.vic.email, role: 'viewer' })
    assert.equal(add.status, 201)
    assert.equal(add.body.status, 'invited')
    await w.smtp.waitFor(PEOPLE.vic.email, `Invitation to knowledge base ${kb}`)
    const self = await w.call('olivia', 'POST', `/api/kb/${kb}/members`, { email: PEOPLE.olivia.email, role: 'viewer' })
    assert.deepEqual([self.status, self.body], [409, { detail: `User is already a member of KB: ${kb}` }])
    // vic's next request accepts it: his token's e-mail matches.
    assert.equal((await w.call('vic', 'GET', `/api/kb/${kb}`)).body.my_role, 'viewer')
  })
})
