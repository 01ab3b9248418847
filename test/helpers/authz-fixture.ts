// The access-controlled edition set up for route-by-role tests (the matrix, BOLA): a real
// in-process oidc-provider signs one token per identity, the service runs with kb_authz_enabled on, and KBs
// are populated with members, a document, a connector and invites. State is created through HTTP where that
// is the real path and cheap (KB creation, upload, connector creation), and through SQL where HTTP would be
// refused (anything on a frozen KB) or where a test needs many throw-away rows; every SQL change is followed
// by the cache invalidation a real change publishes, so the service never serves a stale role.
import { randomBytes, randomUUID } from 'node:crypto'
import type { Sql } from '../../adapters/ports.ts'
import type { AuthzService, Role } from '../../plugins/authz/types.ts'
import { startApp, uniqueId, type StartedApp, type StartOptions } from './app.ts'
import { startOidc, type OidcServer } from './oidc.ts'

/** Who calls: no token, a user without a role, a member of each role, a super-admin, a non-member of a public KB. */
export const IDENTITIES = ['none', 'outsider', 'public_outsider', 'viewer', 'editor', 'admin', 'owner', 'super_admin'] as const
export type Identity = (typeof IDENTITIES)[number]

export const MEMBER_ROLES = ['viewer', 'editor', 'admin', 'owner'] as const satisfies readonly Role[]

/** The user id behind each identity (the public-KB outsider is the outsider, aimed at a public KB). */
export const USER_OF: Record<Exclude<Identity, 'none'>, string> = {
  outsider: 'u-outsider',
  public_outsider: 'u-outsider',
  viewer: 'u-viewer',
  editor: 'u-editor',
  admin: 'u-admin',
  owner: 'u-owner',
  super_admin: 'u-super',
}

export const SUPER_ADMIN_GROUP = 'rag-super-admin'

export interface KbOptions {
  visibility?: 'private' | 'public'
  frozen?: boolean
  /** Add u-viewer, u-editor, u-admin as members (u-owner owns every KB it creates). Default true. */
  members?: boolean
}

export interface RequestInitJson extends RequestInit {
  json?: unknown
}

/** A JSON-RPC request to /mcp answered as plain JSON (no session). */
export const mcpRequest = (method: string, params?: Record<string, unknown>): RequestInitJson & { path: string } => ({
  path: '/mcp', method: 'POST', headers: { accept: 'application/json', 'content-type': 'application/json' },
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, ...(params ? { params } : {}) }),
})

export interface AuthzFixture {
  svc: StartedApp
  oidc: OidcServer
  sql: Sql
  /** A token for any user id (cached); super-admins carry the super-admin group. */
  token(userId: string, opts?: { superAdmin?: boolean }): Promise<string>
  /** A request as that identity ('none': no Authorization header). */
  as(identity: Identity, path: string, init?: RequestInitJson): Promise<Response>
  asUser(userId: string, path: string, init?: RequestInitJson, opts?: { superAdmin?: boolean }): Promise<Response>
  setAuthzEnabled(enabled: boolean): Promise<void>
  /** A KB owned by u-owner (created through HTTP), with members, visibility and state as asked. */
  createKb(opts?: KbOptions): Promise<string>
  setKbState(kbId: string, state: { frozen?: boolean; visibility?: 'private' | 'public' }): Promise<void>
  addMember(kbId: string, userId: string, role: Role, grantedAt?: Date): Promise<void>
  /** Uploads a small text file as u-owner; returns its doc_id. */
  uploadDoc(kbId: string, name?: string, text?: string): Promise<string>
  /** A copy of a document row under a new doc_id and source (same stored object), with fields overridden. */
  cloneDoc(docId: string, fields?: Record<string, unknown>): Promise<string>
  /** A web connector created through HTTP as u-owner (its seed is a closed local port: a sync fails fast). */
  createConnector(kbId: string): Promise<string>
  cloneConnector(connectorId: string, fields?: Record<string, unknown>): Promise<string>
  /** A pending invite inserted directly (no e-mail is sent). */
  addInvite(kbId: string, email?: string): Promise<string>
  /** A user profile row (what the service records at first sight of a user). */
  addProfile(userId: string, email?: string): Promise<void>
  invalidateKb(kbId: string): Promise<void>
  invalidateUser(userId: string): Promise<void>
}

export interface AuthzFixtureOptions extends StartOptions {
  /** Start with kb_authz_enabled (default true). */
  authzEnabled?: boolean
}

const now = () => Math.floor(Date.now() / 1000)
const hex = (n: number) => randomBytes(n).toString('hex')

/**
 * Starts oidc-provider and the service (queue worker off: documents stay where a test puts them). Settings: every
 * user may create KBs, no KB or document cap, 127.0.0.1 a connector destination (unless settings.connectors says
 * otherwise), so that fixtures never trip a limit they do not test.
 */
export async function startAuthzFixture(t: { after(fn: () => unknown): void }, opts: AuthzFixtureOptions = {}): Promise<AuthzFixture> {
  const oidc = await startOidc({ clients: [] })
  t.after(() => oidc.close())
  const { settings = {}, authzEnabled = true, ...rest } = opts
  const svc = await startApp(t, {
    ...rest,
    settings: {
      ...settings,
      oidc: { issuer_url: oidc.issuer, audience: oidc.audience, ...settings.oidc },
      authz: { kb_creator_roles: ['*'], max_kb_count: 0, max_docs_count: 0, super_admin_role: SUPER_ADMIN_GROUP, ...settings.authz },
      queue_worker: { enabled: false, ...settings.queue_worker },
      // The fixture's connectors point at a closed loopback port, which the egress policy refuses unless listed.
      connectors: settings.connectors ?? { egress: { allow: ['127.0.0.1/32'] } },
    },
  })
  const sql = svc.app.adapters.sql
  const authz = () => svc.app.use<AuthzService | null>('authz')

  const tokens = new Map<string, Promise<string>>()
  const token = (userId: string, o: { superAdmin?: boolean } = {}) => {
    const key = `${userId}|${o.superAdmin === true}`
    let tok = tokens.get(key)
    if (!tok) {
      tok = oidc.sign({
        sub: userId, iss: oidc.issuer, aud: oidc.audience, exp: now() + 3600,
        email: `${userId}@example.com`, preferred_username: userId, name: `User ${userId}`,
        groups: o.superAdmin ? [`/${SUPER_ADMIN_GROUP}`] : ['/staff'],
      })
      tokens.set(key, tok)
    }
    return tok
  }
  const asUser = async (userId: string, path: string, init: RequestInitJson = {}, o: { superAdmin?: boolean } = {}) => {
    const headers = new Headers(init.headers)
    headers.set('authorization', `Bearer ${await token(userId, o)}`)
    return svc.request(path, { ...init, headers })
  }
  const as = (identity: Identity, path: string, init: RequestInitJson = {}) =>
    identity === 'none' ? svc.request(path, init) : asUser(USER_OF[identity], path, init, { superAdmin: identity === 'super_admin' })

  const invalidateKb = async (kbId: string) => void (await authz()?.roles?.invalidateKb(kbId))
  const invalidateUser = async (userId: string) => void (await authz()?.roles?.invalidateUser(userId))

  const ok = async (res: Response, what: string, status: number) => {
    const body = await res.text()
    if (res.status !== status) throw new Error(`fixture: ${what}: HTTP ${res.status} ${body}`)
    return body ? JSON.parse(body) : null
  }

  const addMember = async (kbId: string, userId: string, role: Role, grantedAt = new Date()) => {
    await sql.query(
      `INSERT INTO kb_members (kb_id, user_id, role, granted_by, granted_at) VALUES ($1, $2, $3, 'u-owner', $4)
       ON CONFLICT (kb_id, user_id) DO UPDATE SET role = EXCLUDED.role`, [kbId, userId, role, grantedAt.toISOString()])
    await invalidateUser(userId)
    await invalidateKb(kbId)
  }
  const setKbState = async (kbId: string, state: { frozen?: boolean; visibility?: 'private' | 'public' }) => {
    if (state.frozen !== undefined) await sql.query('UPDATE knowledge_bases SET status = $2 WHERE kb_id = $1', [kbId, state.frozen ? 'frozen' : 'active'])
    if (state.visibility) await sql.query('UPDATE knowledge_bases SET visibility = $2 WHERE kb_id = $1', [kbId, state.visibility])
    await invalidateKb(kbId)
  }
  // jsonb_populate_record overlays the given fields on the copied row, so a clone survives columns added later.
  const cloneRow = async (table: string, idColumn: string, id: string, fields: Record<string, unknown>) => {
    const rows = await sql.query(
      `INSERT INTO ${table} SELECT (jsonb_populate_record(t, $2::text::jsonb)).* FROM ${table} t WHERE ${idColumn} = $1 RETURNING ${idColumn} AS id`,
      [id, JSON.stringify(fields)])
    if (rows.length !== 1) throw new Error(`fixture: no ${table} row ${id} to clone`)
    return String(rows[0].id)
  }

  const fixture: AuthzFixture = {
    svc, oidc, sql, token, as, asUser, invalidateKb, invalidateUser, addMember, setKbState,
    async setAuthzEnabled(enabled) {
      await ok(await as('super_admin', '/api/admin/config', { method: 'PATCH', json: { kb_authz_enabled: enabled } }), 'PATCH /api/admin/config', 200)
    },
    async createKb(o = {}) {
      const kbId = uniqueId('kb')
      await ok(await as('owner', '/api/kb', { method: 'POST', json: { kb_id: kbId, kb_name: `Fixture ${kbId}` } }), 'POST /api/kb', 201)
      // The creator is the owner already (kb creation rule); the upsert also covers a service that forgot it.
      await addMember(kbId, 'u-owner', 'owner')
      if (o.members !== false) for (const role of ['viewer', 'editor', 'admin'] as const) await addMember(kbId, USER_OF[role], role)
      if (o.visibility === 'public' || o.frozen) await setKbState(kbId, { visibility: o.visibility, frozen: o.frozen })
      return kbId
    },
    async uploadDoc(kbId, name = `note-${hex(4)}.txt`, text = 'Leave policy: twenty days a year. Quarry fixture document.') {
      const form = new FormData()
      form.append('file', new Blob([text], { type: 'text/plain' }), name)
      return (await ok(await as('owner', `/api/kb/${kbId}/docs/upload`, { method: 'POST', body: form }), 'upload', 202)).doc_id
    },
    cloneDoc(docId, fields = {}) {
      const name = `clone-${hex(6)}`
      return cloneRow('documents', 'doc_id', docId, { doc_id: hex(8), source: `${name}.txt`, title: name, ...fields })
    },
    async createConnector(kbId) {
      const body = { kb_id: kbId, name: `conn-${hex(3)}`, source_type: 'web', config: { seed_urls: [`http://127.0.0.1:9/${hex(4)}`] } }
      return (await ok(await as('owner', '/api/connectors', { method: 'POST', json: body }), 'POST /api/connectors', 201)).connector_id
    },
    // source_key (derived from the config) is unique per KB: a clone gets its own.
    cloneConnector: (connectorId, fields = {}) =>
      cloneRow('connectors', 'connector_id', connectorId, { connector_id: randomUUID(), name: `clone-${hex(3)}`, source_key: `clone-${hex(6)}`, ...fields }),
    async addInvite(kbId, email = `invitee-${hex(4)}@example.com`) {
      const id = randomUUID()
      await sql.query(
        `INSERT INTO kb_invites (invite_id, kb_id, email, role, granted_by, status, expires_at)
         VALUES ($1, $2, $3, 'viewer', 'u-owner', 'pending', now() + interval '7 days')`, [id, kbId, email.toLowerCase()])
      await invalidateKb(kbId)
      return id
    },
    async addProfile(userId, email = `${userId}@example.com`) {
      await sql.query(
        `INSERT INTO user_profiles (user_id, email, display_name, preferred_username) VALUES ($1, $2, $3, $1)
         ON CONFLICT (user_id) DO NOTHING`, [userId, email, `User ${userId}`])
    },
  }
  if (authzEnabled) await fixture.setAuthzEnabled(true)
  return fixture
}
