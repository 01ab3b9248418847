// The operator console in the access-controlled edition (issue 41), in Chromium: sign-in at a real OpenID
// provider (oidc-provider in process, its own login and consent pages) with the authorization-code flow and PKCE
// run by the browser, the token kept in memory only, sign-out at the provider; members, invites and ownership
// transfer; and for each role (owner, admin, editor, viewer) views that offer only what the role may do: no
// request the console makes answers 403.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { Browser, Page } from 'playwright-core'
import { startApp, type StartedApp } from '../../helpers/app.ts'
import { startOidc, type OidcServer } from '../../helpers/oidc.ts'
import { skipUnless } from '../../helpers/services.ts'
import { waitFor } from '../../helpers/wait.ts'
import { assertAccessible, assertClean, dropFiles, launchChromium, openPage, screenshot, skipWithoutChromium, type Watched } from './browser.ts'

// Browser globals of the functions run in the page (page.evaluate): the project compiles without DOM typings.
declare const sessionStorage: any, localStorage: any, document: any

type Json = any
const SUPER_GROUP = 'rag-super-admin'
const USERS: Record<string, Record<string, unknown>> = {
  'u-owner': { email: 'owner@example.com', preferred_username: 'owner', name: 'Olivia Owner', groups: ['/staff'] },
  'u-admin': { email: 'admin@example.com', preferred_username: 'admin', name: 'Adam Admin', groups: ['/staff'] },
  'u-editor': { email: 'editor@example.com', preferred_username: 'editor', name: 'Edith Editor', groups: ['/staff'] },
  'u-viewer': { email: 'viewer@example.com', preferred_username: 'viewer', name: 'Victor Viewer', groups: ['/staff'] },
  'u-super': { email: 'super@example.com', preferred_username: 'super', groups: [`/${SUPER_GROUP}`] },
}
const JWT = /eyJ[\w-]{10,}\.[\w-]{10,}\.[\w-]{10,}/

interface Env {
  oidc: OidcServer
  svc: StartedApp
  /** A bearer token for a user, signed by the provider's key (set-up through the API, not the console). */
  token(userId: string): Promise<string>
}

async function startEnt(holder: { after(fn: () => unknown): void }, services: boolean): Promise<Env> {
  const oidc = await startOidc({ clients: [], users: USERS })
  holder.after(() => oidc.close())
  const svc = await startApp(holder, {
    services,
    settings: {
      queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 },
      oidc: { issuer_url: oidc.issuer, audience: oidc.audience },
      authz: { kb_creator_roles: ['*'], max_kb_count: 0, max_docs_count: 0, super_admin_role: SUPER_GROUP },
      connectors: { egress: { allow: ['127.0.0.1/32'] } },
    },
  })
  oidc.addBrowserClient({ client_id: 'quarry-console', redirect_uris: [`${svc.url}/console`], post_logout_redirect_uris: [`${svc.url}/console`], origins: [svc.url] })
  const token = (userId: string) => oidc.sign({
    sub: userId, iss: oidc.issuer, aud: oidc.audience, exp: Math.floor(Date.now() / 1000) + 3600, ...USERS[userId],
  })
  const res = await svc.request('/api/admin/config', { method: 'PATCH', json: { kb_authz_enabled: true }, headers: { authorization: `Bearer ${await token('u-super')}` } })
  assert.equal(res.status, 200, await res.text())
  return { oidc, svc, token }
}

/** Signs in through the console's button and the provider's own login and consent pages. */
async function signIn(env: Env, w: Watched, userId: string): Promise<void> {
  const { page } = w
  await page.goto(`${env.svc.url}/console`)
  await page.getByRole('button', { name: 'Sign in', exact: true }).click()
  await page.waitForURL((u) => u.origin === env.oidc.issuer)
  await page.locator('input[name=login]').fill(userId)
  await page.locator('input[name=password]').fill('any password')
  await page.locator('button[type=submit]', { hasText: 'Sign-in' }).click()
  await page.locator('button[type=submit]', { hasText: 'Continue' }).click()
  await page.getByRole('button', { name: 'Sign out' }).waitFor()
  await page.getByRole('heading', { name: 'Knowledge bases', level: 1 }).waitFor()
}

const kbRow = (page: Page, kb: string) => page.locator(`tr[data-kb="${kb}"]`)
const no403 = (w: Watched, label: string) => assert.deepEqual(w.responses.filter((r) => r.status === 403), [], `${label}: the console offered something the role cannot do`)

describe('operator console, access-controlled edition (embedded)', { skip: skipWithoutChromium }, () => {
  const cleanups: (() => unknown)[] = []
  const holder = { after: (fn: () => unknown) => void cleanups.push(fn) }
  let env: Env
  let browser: Browser
  const pages: Watched[] = []
  const open = async () => {
    const w = await openPage(browser, env.svc.url, { allow: [env.oidc.issuer] })
    pages.push(w)
    return w
  }
  let owner: Watched

  before(async () => {
    env = await startEnt(holder, false)
    browser = await launchChromium()
  })
  after(async () => {
    await browser?.close()
    for (const c of cleanups.reverse()) await c()
  })

  it('the page allows fetches to the issuer only; config.json names the sign-in endpoints', async () => {
    const res = await env.svc.request('/console')
    assert.equal(res.status, 200)
    const csp = res.headers.get('content-security-policy') ?? ''
    assert.match(csp, new RegExp(`connect-src 'self' ${env.oidc.issuer.replace(/[.]/g, '\\.')};`))
    assert.match(csp, /script-src 'self';/)
    const config = (await (await env.svc.request('/console/config.json')).json()) as Json
    assert.equal(config.edition, 'access-controlled')
    assert.equal(config.oidc.client_id, 'quarry-console')
    assert.equal(config.oidc.issuer, env.oidc.issuer)
    assert.equal(config.oidc.authorization_endpoint, `${env.oidc.issuer}/auth`)
    assert.equal(config.oidc.token_endpoint, `${env.oidc.issuer}/token`)
    assert.match(config.oidc.end_session_endpoint, /^http:\/\/127\.0\.0\.1:\d+\/session\/end$/)
    assert.equal(JSON.stringify(config).includes('secret'), false)
  })

  it('sign-in: authorization code with PKCE in the browser; the token only in memory, never in the URL; a reload signs in again; sign-out at the issuer', async () => {
    const w = await open()
    const { page } = w
    await page.goto(`${env.svc.url}/console`)
    await page.getByRole('button', { name: 'Sign in', exact: true }).waitFor()
    await assertAccessible(page, 'sign-in screen')
    await screenshot(page, 'ent-sign-in')
    assert.deepEqual(w.responses.map((r) => r.path).filter((p) => p.startsWith('/api/')), [], 'nothing asked of the API before sign-in')
    const authRequests: string[] = []
    page.on('request', (r) => {
      if (r.url().startsWith(`${env.oidc.issuer}/auth?`)) authRequests.push(r.url())
    })
    await signIn(env, w, 'u-owner')
    const auth = new URL(authRequests[0])
    assert.equal(auth.searchParams.get('code_challenge_method'), 'S256')
    assert.match(auth.searchParams.get('code_challenge') ?? '', /^[\w-]{43}$/)
    assert.equal(auth.searchParams.get('redirect_uri'), `${env.svc.url}/console`)
    assert.equal(auth.searchParams.get('client_id'), 'quarry-console')
    assert.equal(page.url(), `${env.svc.url}/console`, 'no code or state left in the address')
    assert.match((await page.locator('#user').textContent()) ?? '', /owner@example\.com/)
    const storage = await page.evaluate(() => ({ session: { ...sessionStorage }, local: { ...localStorage }, cookie: document.cookie }))
    assert.deepEqual(storage, { session: { 'quarry.console.signed-in': '1' }, local: {}, cookie: '' }, 'no token in any storage another page could read')
    assert.doesNotMatch(JSON.stringify(await w.context.cookies(env.svc.url)), JWT)
    // Every API call carried the token from memory.
    assert.ok(w.responses.some((r) => r.path === '/api/me' && r.status === 200))

    await page.reload()
    await page.getByRole('button', { name: 'Sign out' }).waitFor()
    assert.equal(page.url(), `${env.svc.url}/console`)

    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.waitForURL((u) => u.origin === env.oidc.issuer)
    await page.locator('button', { hasText: 'Yes, sign me out' }).click()
    await page.getByRole('button', { name: 'Sign in', exact: true }).waitFor()
    assert.equal(new URL(page.url()).origin + new URL(page.url()).pathname, `${env.svc.url}/console`)
    assert.deepEqual(await page.evaluate(() => ({ ...sessionStorage })), {})
    // The issuer's session ended too: signing in asks for the login again.
    await page.getByRole('button', { name: 'Sign in', exact: true }).click()
    await page.locator('input[name=login]').waitFor()
    assertClean(w, 'sign-in flow')
  })

  it('owner: creates a KB; members: invites by e-mail, revokes one; uploads; the views an owner has', async () => {
    owner = await open()
    const { page } = owner
    await signIn(env, owner, 'u-owner')
    await page.getByRole('button', { name: 'New knowledge base' }).click()
    const dlg = page.getByRole('dialog', { name: 'New knowledge base' })
    await dlg.getByLabel('ID', { exact: true }).fill('ent-kb')
    await dlg.getByLabel('Name', { exact: true }).fill('Team handbook')
    await dlg.getByRole('button', { name: 'Create' }).click()
    await kbRow(page, 'ent-kb').waitFor()
    assert.match((await kbRow(page, 'ent-kb').textContent()) ?? '', /owner/)
    assert.equal(await kbRow(page, 'ent-kb').getByRole('button', { name: /^Delete/ }).count(), 1)

    await kbRow(page, 'ent-kb').getByRole('link', { name: 'Team handbook' }).click()
    await page.getByRole('link', { name: 'Members' }).click()
    await page.getByRole('heading', { name: 'Pending invites' }).waitFor()
    const add = async (email: string, role: string) => {
      await page.getByLabel('E-mail').fill(email)
      await page.getByLabel('Role', { exact: true }).selectOption(role)
      await page.getByRole('button', { name: 'Add member' }).click()
      await page.locator(`tr[data-invite]`, { hasText: email }).waitFor()
    }
    await add('someone@example.com', 'viewer')
    await page.locator('tr[data-invite]', { hasText: 'someone@example.com' }).getByRole('button', { name: /^Revoke/ }).click()
    await page.locator('tr[data-invite]', { hasText: 'someone@example.com' }).waitFor({ state: 'detached' })
    await add('editor@example.com', 'editor')
    await add('viewer@example.com', 'viewer')
    await add('admin@example.com', 'admin')
    // a bad address is refused at the field
    await page.getByLabel('E-mail').fill('two@example.com, three@example.com')
    await page.getByRole('button', { name: 'Add member' }).click()
    await waitFor(async () => (await page.getByLabel('E-mail').getAttribute('aria-invalid')) === 'true', 'the e-mail refused at its field')
    assert.equal(await page.getByRole('form', { name: 'Transfer ownership' }).count(), 1, 'the owner may transfer')
    await assertAccessible(page, 'members (owner)')
    await screenshot(page, 'ent-members')

    await page.getByRole('link', { name: 'Documents' }).click()
    await dropFiles(page, '.dropzone', [{ name: 'handbook.txt', content: 'Team handbook: leave is twenty days a year, travel is booked through the office.' }])
    await page.locator('table.docs tbody tr[data-doc]').waitFor()
    // a web connector for the role checks below
    const res = await env.svc.request('/api/connectors', {
      method: 'POST', headers: { authorization: `Bearer ${await env.token('u-owner')}` },
      json: { kb_id: 'ent-kb', name: 'Intranet', source_type: 'web', config: { seed_urls: ['http://127.0.0.1:9/intranet/'] } },
    })
    assert.equal(res.status, 201, await res.text())
    await page.getByRole('link', { name: 'Connectors' }).first().click()
    await page.getByRole('button', { name: 'New connector' }).waitFor()
    no403(owner, 'owner')
    assertClean(owner, 'owner')
  })

  it('editor: the invite becomes a role at sign-in; documents can be changed, the KB, its members, settings and connectors cannot', async () => {
    const w = await open()
    const { page } = w
    await signIn(env, w, 'u-editor')
    const row = kbRow(page, 'ent-kb')
    await row.waitFor()
    assert.match((await row.textContent()) ?? '', /editor/)
    assert.equal(await row.getByRole('button').count(), 0, 'no edit or delete of the KB')
    assert.equal(await page.getByRole('button', { name: 'New knowledge base' }).count(), 1, 'every user may create KBs here (kb_creator_roles *)')
    await row.getByRole('link').click()
    await page.locator('.dropzone').waitFor()
    const doc = page.locator('table.docs tbody tr[data-doc]').first()
    await doc.waitFor()
    for (const a of ['Download', 'Delete']) assert.equal(await doc.getByRole('button', { name: new RegExp(`^${a}`) }).count(), 1, a)
    assert.equal(await page.getByRole('link', { name: 'Members' }).count(), 0, 'no members tab')
    await page.getByRole('link', { name: 'Settings' }).click()
    const form = page.getByRole('form', { name: 'Overrides' })
    await form.waitFor()
    assert.equal(await form.getByLabel('Chunk Size', { exact: true }).isDisabled(), true, 'settings are read-only below owner')
    assert.equal(await form.getByRole('button', { name: 'Save overrides' }).isDisabled(), true)
    assert.match((await page.locator('main').textContent()) ?? '', /Only the owner of this knowledge base can change them/)
    await page.getByRole('link', { name: 'Connectors' }).first().click()
    await page.locator('tr[data-connector]').waitFor()
    assert.equal(await page.getByRole('button', { name: 'New connector' }).count(), 0, 'creating a connector needs admin')
    await page.getByRole('link', { name: 'Intranet' }).click()
    await page.getByRole('button', { name: 'Sync now' }).waitFor()
    assert.equal(await page.getByRole('button', { name: 'Edit', exact: true }).count(), 1)
    assert.equal(await page.getByRole('button', { name: 'Delete', exact: true }).count(), 0, 'deleting a connector needs admin')
    await assertAccessible(page, 'connector (editor)')
    no403(w, 'editor')
    assertClean(w, 'editor')
  })

  it('viewer: reads and searches; nothing to change anywhere', async () => {
    const w = await open()
    const { page } = w
    await signIn(env, w, 'u-viewer')
    const row = kbRow(page, 'ent-kb')
    await row.waitFor()
    assert.match((await row.textContent()) ?? '', /viewer/)
    await row.getByRole('link').click()
    const doc = page.locator('table.docs tbody tr[data-doc]').first()
    await doc.waitFor()
    assert.equal(await page.locator('.dropzone').count(), 0, 'no upload')
    assert.deepEqual(await doc.locator('td:last-child').getByRole('button').allTextContents(), ['Download handbook'], 'only the download')
    await assertAccessible(page, 'documents (viewer)')
    await screenshot(page, 'ent-viewer-documents')
    await page.getByRole('link', { name: 'Connectors' }).first().click()
    await page.getByRole('link', { name: 'Intranet' }).click()
    await page.getByRole('heading', { name: 'Intranet', level: 1 }).waitFor()
    await page.locator('[aria-label="Sync status"] dl').waitFor()
    assert.equal(await page.locator('.toolbar button').count(), 0, 'no sync, edit or delete')
    await page.getByRole('link', { name: 'Search', exact: true }).click()
    await page.getByLabel('Query').fill('leave travel')
    await page.getByLabel('ent-kb').check()
    await page.getByRole('button', { name: 'Search', exact: true }).click()
    await page.locator('ol.results > li').first().waitFor()
    assert.match((await page.getByRole('button', { name: 'Copy as curl' }).evaluate(() => document.querySelector('pre.curl')?.textContent)) ?? '', /authorization: Bearer \$QUARRY_TOKEN/, 'the curl names the token, never holds it')
    assert.doesNotMatch((await page.locator('pre.curl').textContent()) ?? '', JWT)
    no403(w, 'viewer')
    assertClean(w, 'viewer')
  })

  it('admin: edits the KB and changes roles, but neither deletes the KB nor transfers it', async () => {
    const w = await open()
    const { page } = w
    await signIn(env, w, 'u-admin')
    const row = kbRow(page, 'ent-kb')
    await row.waitFor()
    assert.equal(await row.getByRole('button', { name: /^Edit/ }).count(), 1)
    assert.equal(await row.getByRole('button', { name: /^Delete/ }).count(), 0)
    await row.getByRole('link').click()
    await page.getByRole('link', { name: 'Members' }).click()
    const viewerRole = page.getByLabel('Role of viewer@example.com')
    await viewerRole.selectOption('editor')
    await page.locator('.notice', { hasText: 'viewer@example.com is now editor' }).waitFor()
    const members = (await (await env.svc.request('/api/kb/ent-kb/members', { headers: { authorization: `Bearer ${await env.token('u-owner')}` } })).json()) as Json
    assert.equal(members.members.find((m: Json) => m.user_id === 'u-viewer').role, 'editor')
    assert.equal(await page.getByRole('form', { name: 'Transfer ownership' }).count(), 0, 'an admin cannot transfer')
    assert.equal(await page.getByLabel('Role of owner@example.com').count(), 0, "the owner's role is not offered for change")
    await assertAccessible(page, 'members (admin)')
    no403(w, 'admin')
    assertClean(w, 'admin')
  })

  it('owner transfers ownership to the admin and becomes admin: the views follow', async () => {
    const { page } = owner
    await page.goto(`${env.svc.url}/console#/kb/ent-kb/members`)
    const form = page.getByRole('form', { name: 'Transfer ownership' })
    await form.waitFor()
    await form.getByLabel('New owner').selectOption('u-admin')
    await form.getByRole('button', { name: 'Transfer ownership' }).click()
    await page.getByRole('dialog', { name: /Make admin@example\.com owner of ent-kb/ }).getByRole('button', { name: 'Transfer ownership' }).click()
    await page.locator('.notice', { hasText: 'admin@example.com now owns ent-kb' }).waitFor()
    await page.getByRole('form', { name: 'Transfer ownership' }).waitFor({ state: 'detached' })
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Knowledge bases' }).click()
    const row = kbRow(page, 'ent-kb')
    await row.waitFor()
    assert.match((await row.textContent()) ?? '', /admin/)
    assert.equal(await row.getByRole('button', { name: /^Delete/ }).count(), 0, 'no longer the owner: no delete')
    no403(owner, 'owner after the transfer')
    assertClean(owner, 'owner after the transfer')
  })

  it('no page of any role made a request outside the service and the issuer, or logged a script error', () => {
    assert.ok(pages.length >= 5)
    for (const w of pages) assertClean(w, w.page.url())
  })
})

describe('operator console, access-controlled edition (services: PostgreSQL, Redis, S3)', { skip: skipWithoutChromium || skipUnless('postgres') || skipUnless('redis') }, () => {
  it('smoke: sign in at the issuer, create a KB, see it with its role', async (t) => {
    const env = await startEnt(t, true)
    const browser = await launchChromium()
    t.after(() => browser.close())
    const w = await openPage(browser, env.svc.url, { allow: [env.oidc.issuer] })
    await signIn(env, w, 'u-owner')
    const { page } = w
    await page.getByRole('button', { name: 'New knowledge base' }).click()
    const dlg = page.getByRole('dialog', { name: 'New knowledge base' })
    await dlg.getByLabel('ID', { exact: true }).fill('svc-kb')
    await dlg.getByRole('button', { name: 'Create' }).click()
    await kbRow(page, 'svc-kb').waitFor()
    assert.match((await kbRow(page, 'svc-kb').textContent()) ?? '', /owner/)
    await screenshot(page, 'ent-services-kbs')
    no403(w, 'services smoke')
    assertClean(w, 'services smoke')
  })
})
