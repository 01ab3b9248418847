// The user directory port against Keycloak's admin API shapes (test/helpers/keycloak.ts: no Keycloak can run
// here), with tokens from a real OpenID provider by client credentials; and the mailer against a real SMTP
// server. Nothing is stored, so there is no driver-set variant.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { createUserDirectory, nullDirectory } from '../../../plugins/authz/directory.ts'
import { createMailer, grantMessage, inviteMessage } from '../../../plugins/authz/mail.ts'
import { createLogger } from '../../../kernel/log.ts'
import { startKeycloak, type KeycloakServer } from '../../helpers/keycloak.ts'
import { startOidc, type OidcServer } from '../../helpers/oidc.ts'
import { startSmtpSink, type SmtpSink } from '../../helpers/smtp.ts'

const log = createLogger('SILENT')
const ADMIN = { client_id: 'quarry-admin', client_secret: 's3cret:with/odd+chars' }

describe('authz: user directory (Keycloak admin API)', () => {
  let oidc: OidcServer
  let kc: KeycloakServer
  before(async () => {
    oidc = await startOidc({ clients: [ADMIN, { client_id: 'someone-else', client_secret: 'x' }] })
    kc = await startKeycloak({
      issuer: oidc.issuer, adminClientId: ADMIN.client_id,
      users: [
        { id: 'u-ann', username: 'ann', email: 'ann@example.com', firstName: 'Ann', lastName: 'Lee' },
        { id: 'u-bob', username: 'bob', email: 'bob@example.com' },
        { id: 'u-off', username: 'off', email: 'off@example.com', enabled: false },
        { id: 'u-annex', username: 'annex', email: 'xann@example.com' },
      ],
    })
  })
  after(async () => {
    await kc.close()
    await oidc.close()
  })

  const directory = (over: Partial<Parameters<typeof createUserDirectory>[0]> = {}) => createUserDirectory({
    issuerUrl: oidc.issuer, adminUrl: kc.adminUrl, clientId: ADMIN.client_id, clientSecret: ADMIN.client_secret, log, ...over,
  })

  test('finds an enabled user by exact e-mail (any case), with a display name; others are not found', async () => {
    const d = directory()
    assert.deepEqual(await d.lookupByEmail('Ann@Example.com'), { user_id: 'u-ann', email: 'ann@example.com', display_name: 'Ann Lee' })
    assert.deepEqual(await d.lookupByEmail('bob@example.com'), { user_id: 'u-bob', email: 'bob@example.com', display_name: 'bob' })
    assert.equal(await d.lookupByEmail('off@example.com'), null, 'disabled user')
    assert.equal(await d.lookupByEmail('nobody@example.com'), null)
    assert.equal(await d.lookupByEmail('  '), null)
    assert.ok(kc.requests.every((r) => r.path.includes('exact=true')))
  })

  test('one client-credentials token serves many look-ups until near its expiry', async () => {
    const d = directory()
    const before = kc.tokens.size
    for (const e of ['ann@example.com', 'bob@example.com', 'nobody@example.com']) await d.lookupByEmail(e)
    assert.equal(kc.tokens.size, before + 1)
    await Promise.all(['ann@example.com', 'bob@example.com'].map((e) => directory().lookupByEmail(e)))
    assert.equal(kc.tokens.size, before + 3, 'each directory instance has its own token')
  })

  test('a token the admin API refuses (revoked before its expiry) is renewed once', async () => {
    const d = directory()
    assert.ok(await d.lookupByEmail('ann@example.com'))
    kc.revokeTokens()
    const refusals = kc.requests.filter((r) => r.status === 401).length
    assert.equal((await d.lookupByEmail('ann@example.com'))?.user_id, 'u-ann')
    assert.equal(kc.requests.filter((r) => r.status === 401).length, refusals + 1)
  })

  test('wrong client credentials, a client the admin API does not accept, an unreachable API: not found, never a throw', async () => {
    assert.equal(await directory({ clientSecret: 'wrong' }).lookupByEmail('ann@example.com'), null)
    assert.equal(await directory({ clientId: 'someone-else', clientSecret: 'x' }).lookupByEmail('ann@example.com'), null)
    assert.equal(await directory({ adminUrl: 'http://127.0.0.1:9/admin/realms/quarry' }).lookupByEmail('ann@example.com'), null)
    assert.equal(await directory({ issuerUrl: 'http://127.0.0.1:9' }).lookupByEmail('ann@example.com'), null)
  })

  test('no admin_url: the null directory, for which nobody is registered', async () => {
    assert.equal(directory({ adminUrl: '' }), nullDirectory)
    assert.equal(await nullDirectory.lookupByEmail('ann@example.com'), null)
  })
})

describe('authz: invite and role-grant e-mail over SMTP', () => {
  let sink: SmtpSink
  before(async () => {
    sink = await startSmtpSink({ username: 'mailer', password: 'pw' })
  })
  after(() => sink.close())

  const smtp = (over: Record<string, unknown> = {}) => ({ host: sink.host, port: sink.port, username: 'mailer', password: 'pw', from_address: 'kb@quarry.test', ...over })

  test('an invite and a grant arrive with sender, recipient and the KB, sent with AUTH', async () => {
    const mailer = createMailer(smtp(), log)
    mailer.send(inviteMessage({ to: 'new@example.com', kbId: 'handbook', kbName: 'Handbook', role: 'editor', invitedBy: 'ann', expiresAt: '2030-01-01T00:00:00.000Z' }))
    mailer.send(grantMessage({ to: 'bob@example.com', kbId: 'handbook', kbName: 'handbook', role: 'viewer', grantedBy: 'ann' }))
    await mailer.close()
    const invite = await sink.waitFor('new@example.com', 'Invitation')
    assert.equal(invite.from, 'kb@quarry.test')
    assert.equal(invite.user, 'mailer')
    assert.equal(invite.subject, 'Invitation to knowledge base handbook')
    assert.match(invite.text, /ann invited you to the knowledge base "Handbook" \(handbook\) as editor/)
    assert.match(invite.text, /before 2030-01-01T00:00:00.000Z/)
    const grant = await sink.waitFor('bob@example.com', 'Role viewer')
    assert.equal(grant.text, 'ann granted you the role viewer on the knowledge base handbook.')
  })

  test('a refused login or an unreachable server: send returns at once, nothing throws, close still resolves', async () => {
    const count = sink.messages.length
    const bad = createMailer(smtp({ password: 'wrong' }), log)
    bad.send(grantMessage({ to: 'x@example.com', kbId: 'k', kbName: 'k', role: 'viewer', grantedBy: 'a' }))
    await bad.close()
    const down = createMailer(smtp({ port: 9 }), log)
    down.send(grantMessage({ to: 'x@example.com', kbId: 'k', kbName: 'k', role: 'viewer', grantedBy: 'a' }))
    await down.close()
    assert.equal(sink.messages.length, count)
  })
})
