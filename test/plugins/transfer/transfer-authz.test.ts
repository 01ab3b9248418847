// KB export and import in the access-controlled edition: export needs the KB's admin, import a KB creator (who owns
// the new KB), going on with an import into an existing KB its admin. Only KB creators of the group 'makers' here,
// so the fixture's staff users are not creators.
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { startAuthzFixture, USER_OF } from '../../helpers/authz-fixture.ts'

type Json = any

it('export needs the KB\'s admin; import a KB creator, who owns the new KB; the same archive again needs its admin', { timeout: 120_000 }, async (t) => {
  const f = await startAuthzFixture(t, { settings: { authz: { kb_creator_roles: ['makers'] } } })
  const kb = 'authz-src'
  assert.equal((await f.as('super_admin', '/api/kb', { method: 'POST', json: { kb_id: kb } })).status, 201)
  for (const role of ['viewer', 'editor', 'admin'] as const) await f.addMember(kb, USER_OF[role], role)
  const form = new FormData()
  form.append('file', new Blob(['Leave policy: twenty days a year.']), 'leave.txt')
  assert.equal((await f.as('super_admin', `/api/kb/${kb}/docs/upload`, { method: 'POST', body: form })).status, 202)

  const editor = await f.as('editor', `/api/kb/${kb}/export`)
  assert.deepEqual([editor.status, ((await editor.json()) as Json).detail], [403, `Requires role admin on KB: ${kb}`])
  const exported = await f.as('admin', `/api/kb/${kb}/export`)
  assert.equal(exported.status, 200)
  assert.equal(exported.headers.get('content-type'), 'application/x-tar')
  const archive = new Uint8Array(await exported.arrayBuffer())
  const post = (identity: 'admin' | 'super_admin', kbId: string) =>
    f.as(identity, `/api/kb/import?kb_id=${kbId}`, { method: 'POST', body: archive, headers: { 'content-type': 'application/x-tar' } })

  // The KB's admin is not a KB creator: refused before anything is written.
  const refused = await post('admin', 'authz-copy')
  assert.deepEqual([refused.status, ((await refused.json()) as Json).detail], [403, 'Not allowed to create knowledge bases'])
  assert.equal((await f.as('super_admin', '/api/kb/authz-copy')).status, 404)

  const made = await post('super_admin', 'authz-copy')
  assert.equal(made.status, 201, await made.clone().text())
  assert.equal(((await made.json()) as Json).documents.total, 1)
  const owners = await f.sql.query<Json>(`SELECT user_id FROM kb_members WHERE kb_id = 'authz-copy' AND role = 'owner'`)
  assert.deepEqual(owners.map((r: Json) => r.user_id), [USER_OF.super_admin])
  assert.equal((await f.sql.query<Json>(`SELECT created_by FROM knowledge_bases WHERE kb_id = 'authz-copy'`))[0].created_by, USER_OF.super_admin)
  // The source's members are not the copy's: the admin of the source has no role on it.
  const again = await post('admin', 'authz-copy')
  assert.deepEqual([again.status, ((await again.json()) as Json).detail], [403, 'No access to KB: authz-copy'])
  const done = await post('super_admin', 'authz-copy')
  assert.deepEqual([done.status, ((await done.json()) as Json).status], [200, 'already_imported'])
})
