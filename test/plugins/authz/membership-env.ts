// The world the membership tests run in, on both driver sets: the service in its access-controlled edition
// with kb_authz_enabled on, a real OpenID provider issuing the tokens (client credentials for the super-admin,
// the provider's own keys for the other people, the browser flow for the invited user), the Keycloak admin
// API fake as the user directory, and a real SMTP server receiving the e-mails.
import assert from 'node:assert/strict'
import { after, before, describe } from 'node:test'
import type { Sql } from '../../../adapters/ports.ts'
import { startApp, uniqueId, type StartedApp, type StartOptions } from '../../helpers/app.ts'
import { startKeycloak, type KeycloakServer } from '../../helpers/keycloak.ts'
import { startOidc, type OidcServer } from '../../helpers/oidc.ts'
import { skipUnless } from '../../helpers/services.ts'
import { startSmtpSink, type SmtpSink } from '../../helpers/smtp.ts'

type Json = any

/** People with an account at the identity provider (and so in the directory), by user id (= token sub). */
export const PEOPLE = {
  olivia: { name: 'Olivia Owner', email: 'olivia@example.com' },
  adam: { name: 'Adam Admin', email: 'adam@example.com' },
  dora: { name: 'Dora Admin', email: 'dora@example.com' },
  eve: { name: 'Eve Editor', email: 'eve@example.com' },
  vic: { name: 'Vic Viewer', email: 'vic@example.com' },
  oscar: { name: 'Oscar Outsider', email: 'oscar@example.com' },
} as const
export type Person = keyof typeof PEOPLE | 'root' | 'ivy'

/** The super-admin: a service client whose tokens carry the super-admin group. */
const ROOT = { client_id: 'root', client_secret: 'root-secret', claims: { groups: ['rag-super-admin'], email: 'root@example.com', preferred_username: 'root' } }
const DIRECTORY_CLIENT = { client_id: 'quarry-directory', client_secret: 'directory-secret' }
/** Not in the directory at first: invited by e-mail, then logs in through the provider's pages. */
export const IVY = { email: 'ivy@example.com', preferred_username: 'ivy', name: 'Ivy Invitee' }

export interface World {
  s: StartedApp
  oidc: OidcServer
  kc: KeycloakServer
  smtp: SmtpSink
  sql: Sql
  token(who: Person): Promise<string>
  /** A request as that person; body parsed. */
  call(who: Person, method: string, path: string, json?: unknown): Promise<{ status: number; body: Json }>
  /** A KB created by `owner` (who becomes its owner). */
  newKb(owner?: Person): Promise<string>
  /** Grants a role through POST members (the directory knows every person of PEOPLE). */
  grant(kb: string, who: keyof typeof PEOPLE, role: 'admin' | 'editor' | 'viewer', by?: Person): Promise<void>
  members(kb: string, by?: Person): Promise<Json>
}

const now = () => Math.floor(Date.now() / 1000)

/** Registers `cases` once per driver set: embedded, and PostgreSQL + Redis + S3 when their URLs are set. */
export function onDriverSets(title: string, cases: (w: World) => void, extraSettings: Record<string, unknown> = {}): void {
  describe(`${title} on the embedded default`, () => world({}, cases, extraSettings))
  describe(`${title} on PostgreSQL + Redis + S3`, { skip: skipUnless('postgres') || skipUnless('redis') }, () => world({ services: true }, cases, extraSettings))
}

function world(opts: StartOptions, cases: (w: World) => void, extraSettings: Record<string, unknown>): void {
  const w = {} as World
  const cleanups: (() => unknown)[] = []
  const tokens = new Map<Person, string>()

  before(async () => {
    w.oidc = await startOidc({ clients: [ROOT, DIRECTORY_CLIENT], users: { ivy: IVY } })
    cleanups.push(() => w.oidc.close())
    w.kc = await startKeycloak({
      issuer: w.oidc.issuer, adminClientId: DIRECTORY_CLIENT.client_id,
      users: Object.entries(PEOPLE).map(([id, p]) => ({ id, username: id, email: p.email, firstName: p.name.split(' ')[0], lastName: p.name.split(' ')[1] })),
    })
    cleanups.push(() => w.kc.close())
    w.smtp = await startSmtpSink()
    cleanups.push(() => w.smtp.close())
    w.s = await startApp({ after: (fn: () => unknown) => void cleanups.push(fn) }, {
      ...opts,
      settings: {
        oidc: {
          issuer_url: w.oidc.issuer, audience: w.oidc.audience, admin_url: w.kc.adminUrl,
          admin_client_id: DIRECTORY_CLIENT.client_id, admin_client_secret: DIRECTORY_CLIENT.client_secret,
        },
        authz: { kb_creator_roles: ['*'], max_kb_count: 0 },
        smtp: { host: w.smtp.host, port: w.smtp.port, from_address: 'kb@quarry.test' },
        ...extraSettings,
      },
    })
    w.sql = w.s.app.adapters.sql
    w.token = async (who) => {
      let t = tokens.get(who)
      if (!t) {
        if (who === 'root') t = await w.oidc.clientToken('root')
        else if (who === 'ivy') t = await w.oidc.userToken('ivy')
        else {
          const p = PEOPLE[who]
          t = await w.oidc.sign({ sub: who, iss: w.oidc.issuer, aud: w.oidc.audience, exp: now() + 3600, email: p.email, name: p.name, preferred_username: who })
        }
        tokens.set(who, t)
      }
      return t
    }
    w.call = async (who, method, path, json) => {
      const res = await w.s.request(path, { method, json, headers: { authorization: `Bearer ${await w.token(who)}` } })
      const text = await res.text()
      return { status: res.status, body: text ? JSON.parse(text) : null }
    }
    w.newKb = async (owner = 'olivia') => {
      const kb = uniqueId()
      const res = await w.call(owner, 'POST', '/api/kb', { kb_id: kb, kb_name: `KB ${kb}` })
      assert.equal(res.status, 201, JSON.stringify(res.body))
      return kb
    }
    w.grant = async (kb, who, role, by = 'olivia') => {
      const res = await w.call(by, 'POST', `/api/kb/${kb}/members`, { email: PEOPLE[who].email, role })
      assert.deepEqual([res.status, res.body], [201, { status: 'granted', user_id: who, role }])
    }
    w.members = async (kb, by = 'olivia') => {
      const res = await w.call(by, 'GET', `/api/kb/${kb}/members`)
      assert.equal(res.status, 200, JSON.stringify(res.body))
      return res.body
    }
    const on = await w.call('root', 'PATCH', '/api/admin/config', { kb_authz_enabled: true })
    assert.equal(on.status, 200, JSON.stringify(on.body))
  })
  after(async () => {
    for (const c of cleanups.reverse()) await c()
  })

  cases(w)
}
