// Connector secrets (notes.md): literals stored AES-256-GCM-encrypted under CONNECTOR_SECRET_KEY, masked in
// every response, decrypted only for the sync's requests.
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { createSecretBox, MASK, resolveSecret, storeSecret } from '../../../plugins/connectors/secrets.ts'
import { startApp } from '../../helpers/app.ts'
import { startWebSite } from '../../helpers/web-site.ts'
import { CONNECTOR_TEST_SETTINGS, connectorDocs, createConnector, newKb, syncAndWait } from './connectors.suite.ts'

it('seals and opens literals; a wrong key fails with a reason, never the value; env:NAME and the mask', () => {
  const box = createSecretBox('a key of any length')
  const sealed = box.seal('p@ss w0rd')
  assert.match(sealed, /^enc:v1:/)
  assert.ok(!sealed.includes('p@ss'))
  assert.notEqual(box.seal('p@ss w0rd'), sealed, 'a fresh IV each time')
  assert.equal(resolveSecret(box, sealed, 'x'), 'p@ss w0rd')
  assert.throws(() => createSecretBox('another key').open(sealed), /CONNECTOR_SECRET_KEY changed/)
  assert.throws(() => createSecretBox(undefined).open(sealed), /CONNECTOR_SECRET_KEY is not set/)
  assert.equal(storeSecret(box, 'env:CONNECTOR_MY_VAR', undefined, ['f']), 'env:CONNECTOR_MY_VAR')
  assert.equal(storeSecret(box, MASK, sealed, ['f']), sealed)
  assert.throws(() => storeSecret(box, MASK, undefined, ['f']), (err: any) => err.status === 422)
  assert.throws(() => storeSecret(box, 'env:not valid', undefined, ['f']), (err: any) => err.status === 422)
  assert.throws(() => storeSecret(createSecretBox(undefined), 'literal', undefined, ['f']), (err: any) => err.status === 422 && !JSON.stringify(err.issues).includes('literal"'))
  assert.throws(() => resolveSecret(box, 'env:CONNECTOR_TEST_SURELY_UNSET', 'auth_basic.password'), /CONNECTOR_TEST_SURELY_UNSET is not set/)
})

it('with CONNECTOR_SECRET_KEY a literal password is accepted, stored encrypted, masked, and used by the sync', async (t) => {
  const site = await startWebSite({ articles: 2, basicUser: 'reader', basicPassword: 'literal-secret-42' })
  t.after(() => site.close())
  const previous = process.env.CONNECTOR_SECRET_KEY
  process.env.CONNECTOR_SECRET_KEY = 'test-connector-key'
  let svc
  try {
    svc = await startApp(t, { settings: CONNECTOR_TEST_SETTINGS })
  } finally {
    if (previous === undefined) delete process.env.CONNECTOR_SECRET_KEY
    else process.env.CONNECTOR_SECRET_KEY = previous
  }
  const kb = await newKb(svc)
  const c = await createConnector(svc, {
    kb_id: kb, name: 'members', source_type: 'web',
    config: { seed_urls: [`${site.url}/members`], auth_basic: { username: 'reader', password: 'literal-secret-42' }, request_delay_ms: 0 },
  })
  assert.deepEqual(c.config.auth_basic, { username: 'reader', password: MASK })
  const [row] = await svc.app.adapters.sql.query<{ config: any }>('SELECT config FROM connectors WHERE connector_id = $1::uuid', [c.connector_id])
  assert.match(row.config.auth_basic.password, /^enc:v1:/)
  assert.ok(!JSON.stringify(row.config).includes('literal-secret-42'), 'the literal is not stored in clear')
  const st = await syncAndWait(svc, c.connector_id)
  assert.equal(st.last_error, null)
  assert.deepEqual((await connectorDocs(svc, c.connector_id)).map((d) => d.source), [`${site.url}/members/guide`])
  const res = await svc.request(`/api/connectors/${c.connector_id}`, { method: 'PATCH', json: { config: { ...c.config, request_timeout_sec: 5 } } })
  assert.equal(res.status, 200)
  const [after] = await svc.app.adapters.sql.query<{ config: any }>('SELECT config FROM connectors WHERE connector_id = $1::uuid', [c.connector_id])
  assert.equal(after.config.auth_basic.password, row.config.auth_basic.password, 'the mask sent back keeps the stored value')
  for (const r of [await svc.request(`/api/connectors/${c.connector_id}`), await svc.request(`/api/connectors?kb_id=${kb}`)]) {
    assert.ok(!(await r.text()).includes('literal-secret-42'))
  }
})
