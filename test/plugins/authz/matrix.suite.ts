// The route x identity x frozen matrix of the access-controlled edition (issue 14), generated from the app's
// route table: every route, called as every identity (no token, a non-member, viewer, editor, admin, owner,
// super-admin, a non-member of a public KB), on an active and on a frozen KB, answers exactly the status the
// route's declared access and the design's rules give (and the success body's declared shape). A route without
// an entry in ENTRIES fails the run, so a new route cannot be forgotten; a second pass with kb_authz_enabled
// false checks that only token validity and the super-admin routes still matter. Beside the matrix: every KB
// route on an absent KB (404 before any role check), the removal rules the declarations cannot express
// (self-removal, owner removal, succession), and the MCP tools per identity. Cells that share nothing they
// change run concurrently; destructive ones get fresh rows (SQL clones) or a fresh KB.
import assert from 'node:assert/strict'
import { randomBytes, randomUUID } from 'node:crypto'
import { after, before, it } from 'node:test'
import { FormatRegistry } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import type { RouteAccess, RouteInfo } from '../../../kernel/plugin.ts'
import { atLeast, type Role } from '../../../plugins/authz/types.ts'
import { IDENTITIES, USER_OF, mcpRequest, startAuthzFixture, type AuthzFixture, type Identity, type RequestInitJson } from '../../helpers/authz-fixture.ts'
import type { StartOptions } from '../../helpers/app.ts'

type Json = any

// The response schemas name formats the service never registers (it does not validate its own answers).
if (!FormatRegistry.Has('uuid')) FormatRegistry.Set('uuid', (v) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(v))
if (!FormatRegistry.Has('date-time')) FormatRegistry.Set('date-time', (v) => !Number.isNaN(Date.parse(v)) && /^\d{4}-\d\d-\d\dT/.test(v))

/** The KBs every non-destructive cell shares: one per visibility x state, each with a document and a connector. */
interface SharedKb {
  kb: string
  doc: string
  connector: string
}

export interface Cell {
  f: AuthzFixture
  identity: Identity
  frozen: boolean
  authzOn: boolean
  /** The KB the cell aims at: public for the public-KB outsider, private otherwise. */
  kb: SharedKb
  /** The caller's effective role on that KB when kb_authz_enabled is on (super-admin: owner; public KB: viewer). */
  role: Role | null
}

interface Req extends RequestInitJson {
  path: string
}

interface Entry {
  /** The spec's rule (section 4 role columns); the declared access must be exactly this unless `handler` is set. */
  spec: RouteAccess
  /**
   * The route declares less than the spec (e.g. 'authenticated' + kb) because its handler enforces the rest
   * (self-removal, frozen transfer by a super-admin): expectations then come from `spec`, not the declaration.
   */
  handler?: boolean
  /**
   * A membership or ownership write: while kb_authz_enabled is false it needs a super-admin, so that rows written
   * unchecked do not stand once checks are switched on (lead's decision; self-removal excepted, not a matrix cell).
   */
  offSuperOnly?: boolean
  /** On a frozen KB this identity passes anyway (transfer-owner by a super-admin). */
  frozenPass?: (c: Cell) => boolean
  /** Status of a call that passes the access check. */
  ok: number
  request(c: Cell): Req | Promise<Req>
  /** More checks of a success body, past the declared response schema. */
  check?(body: Json, c: Cell): void
}

const hex = (n: number) => randomBytes(n).toString('hex')
const kbPath = (c: Cell) => `/api/kb/${c.kb.kb}`
const kbRole = (level: Role, from: 'params' | 'body' = 'params'): RouteAccess => ({ level, kb: { from, name: 'kb_id' } })
const viaConnector = (level: Role): RouteAccess => ({ level, kb: { from: 'params', name: 'connector_id', via: 'connector' } })
const AUTH: RouteAccess = { level: 'authenticated' }
const SUPER: RouteAccess = { level: 'super_admin' }
const PUBLIC: RouteAccess = { level: 'public' }

function uploadForm(field: string, names: string[]): FormData {
  const form = new FormData()
  for (const name of names) form.append(field, new Blob([`Matrix upload ${name}: leave policy.`], { type: 'text/plain' }), name)
  return form
}

/** One archive per fixture (a KB of one document, exported by its owner), imported by every import cell. */
const archives = new WeakMap<AuthzFixture, Promise<ArrayBuffer>>()
function matrixArchive(f: AuthzFixture): Promise<ArrayBuffer> {
  let a = archives.get(f)
  if (!a) {
    a = (async () => {
      const kb = await f.createKb()
      await f.uploadDoc(kb)
      const res = await f.as('owner', `/api/kb/${kb}/export`)
      if (res.status !== 200) throw new Error(`export for the import cells: ${res.status} ${await res.text()}`)
      return res.arrayBuffer()
    })()
    archives.set(f, a)
  }
  return a
}

/** KB ids in a list body, to check scoping. */
const listed = (items: Json[]) => new Set(items.map((k) => k.kb_id))

/** One entry per route of the service: how to call it with real fixtures and what success looks like. */
export const ENTRIES: Record<string, Entry> = {
  'GET /health': { spec: PUBLIC, ok: 200, request: () => ({ path: '/health' }) },
  'GET /ready': { spec: PUBLIC, ok: 200, request: () => ({ path: '/ready' }) },
  'GET /metrics': { spec: PUBLIC, ok: 200, request: () => ({ path: '/metrics' }) },
  'GET /openapi.json': { spec: PUBLIC, ok: 200, request: () => ({ path: '/openapi.json' }) },
  'GET /docs': { spec: PUBLIC, ok: 200, request: () => ({ path: '/docs' }) },
  'GET /redoc': { spec: PUBLIC, ok: 200, request: () => ({ path: '/redoc' }) },
  'GET /docs/static/{file}': { spec: PUBLIC, ok: 200, request: () => ({ path: '/docs/static/swagger-ui.css' }) },
  // The operator console's page and assets: public, the console signs in itself (its API calls carry the token).
  'GET /console': { spec: PUBLIC, ok: 200, request: () => ({ path: '/console' }) },
  'GET /console/assets/{file}': { spec: PUBLIC, ok: 200, request: () => ({ path: '/console/assets/main.js' }) },
  'GET /console/config.json': { spec: PUBLIC, ok: 200, request: () => ({ path: '/console/config.json' }) },

  // 4.2 knowledge bases
  'GET /api/kb': {
    spec: AUTH, ok: 200, request: () => ({ path: '/api/kb' }),
    check(body, c) {
      const ids = listed(body.knowledge_bases)
      // Scoped: the private KB only with a role; public KBs for everyone; all of them with authz off.
      assert.equal(ids.has(c.kb.kb), !c.authzOn || c.role !== null, `private/public KB ${c.kb.kb} listed`)
      const mine = body.knowledge_bases.find((k: Json) => k.kb_id === c.kb.kb)
      if (mine) assert.equal(mine.my_role, c.authzOn ? c.role ?? undefined : undefined, 'my_role in the list')
    },
  },
  'POST /api/kb': {
    spec: AUTH, ok: 201,
    request: () => ({ path: '/api/kb', method: 'POST', json: { kb_id: `kb-m-${hex(4)}`, kb_name: 'Matrix' } }),
    check: (body) => assert.equal(body.status, 'created'),
  },
  'GET /api/kb/{kb_id}': {
    spec: kbRole('viewer'), ok: 200, request: (c) => ({ path: kbPath(c) }),
    check(body, c) {
      assert.equal(body.kb_id, c.kb.kb)
      assert.equal(body.my_role, c.authzOn ? c.role : undefined, 'my_role')
      assert.equal(body.status, c.frozen ? 'frozen' : 'active')
    },
  },
  'PATCH /api/kb/{kb_id}': {
    spec: kbRole('admin'), ok: 200, request: (c) => ({ path: kbPath(c), method: 'PATCH', json: { description: `patched ${hex(2)}` } }),
  },
  'DELETE /api/kb/{kb_id}': {
    spec: kbRole('owner'), ok: 200,
    async request(c) {
      const kb = await c.f.createKb({ visibility: c.identity === 'public_outsider' ? 'public' : 'private', frozen: c.frozen })
      return { path: `/api/kb/${kb}`, method: 'DELETE' }
    },
    check: (body) => assert.equal(body.status, 'deleted'),
  },
  // 4.3 settings overrides
  'GET /api/kb/{kb_id}/settings': { spec: kbRole('viewer'), ok: 200, request: (c) => ({ path: `${kbPath(c)}/settings` }) },
  'GET /api/kb/{kb_id}/settings/schema': { spec: kbRole('viewer'), ok: 200, request: (c) => ({ path: `${kbPath(c)}/settings/schema` }) },
  'GET /api/kb/{kb_id}/settings/overrides': { spec: kbRole('viewer'), ok: 200, request: (c) => ({ path: `${kbPath(c)}/settings/overrides` }) },
  'PUT /api/kb/{kb_id}/settings/overrides': {
    spec: kbRole('owner'), ok: 200,
    request: (c) => ({ path: `${kbPath(c)}/settings/overrides`, method: 'PUT', json: { overrides: { 'chunking.chunk_size': 1024 } } }),
  },
  'PATCH /api/kb/{kb_id}/settings/overrides': {
    spec: kbRole('owner'), ok: 200,
    request: (c) => ({ path: `${kbPath(c)}/settings/overrides`, method: 'PATCH', json: { overrides: { 'chunking.chunk_size': 1024 } } }),
  },
  'DELETE /api/kb/{kb_id}/settings/overrides': {
    spec: kbRole('owner'), ok: 200, request: (c) => ({ path: `${kbPath(c)}/settings/overrides`, method: 'DELETE' }),
  },
  // KB export and import (issue 39): export and the import's state need the KB's admin; import a KB creator (every
  // identity of the fixture is one), who becomes the new KB's owner.
  'GET /api/kb/{kb_id}/export': { spec: kbRole('admin'), ok: 200, request: (c) => ({ path: `${kbPath(c)}/export` }) },
  'GET /api/kb/{kb_id}/import': {
    spec: kbRole('admin'), ok: 200, request: (c) => ({ path: `${kbPath(c)}/import` }),
    check: (body, c) => assert.deepEqual([body.kb_id, body.state], [c.kb.kb, 'none']),
  },
  'POST /api/kb/import': {
    spec: AUTH, ok: 201,
    request: async (c) => ({
      path: `/api/kb/import?kb_id=kb-i-${hex(4)}`, method: 'POST', body: new Uint8Array(await matrixArchive(c.f)), headers: { 'content-type': 'application/x-tar' },
    }),
    check: (body) => assert.deepEqual([body.status, body.documents.total], ['imported', 1]),
  },
  // 4.4 membership
  'GET /api/kb/{kb_id}/members': {
    spec: kbRole('admin'), ok: 200, request: (c) => ({ path: `${kbPath(c)}/members` }),
    check: (body) => assert.ok(Array.isArray(body.members) && Array.isArray(body.pending_invites)),
  },
  'POST /api/kb/{kb_id}/members': {
    spec: kbRole('admin'), offSuperOnly: true, ok: 201,
    // The directory is not configured: every e-mail is unknown, so the grant is an invite.
    request: (c) => ({ path: `${kbPath(c)}/members`, method: 'POST', json: { email: `new-${hex(4)}@example.com`, role: 'viewer' } }),
    check: (body) => assert.equal(body.status, 'invited'),
  },
  'PATCH /api/kb/{kb_id}/members/{user_id}': {
    spec: kbRole('admin'), offSuperOnly: true, ok: 200,
    async request(c) {
      const user = `u-target-${hex(4)}`
      await c.f.addMember(c.kb.kb, user, 'viewer')
      return { path: `${kbPath(c)}/members/${user}`, method: 'PATCH', json: { role: 'editor' } }
    },
  },
  // Someone else's removal needs admin; self-removal and owner removal are the handler's (tested in members tests).
  'DELETE /api/kb/{kb_id}/members/{user_id}': {
    spec: kbRole('admin'), handler: true, offSuperOnly: true, ok: 200,
    async request(c) {
      const user = `u-target-${hex(4)}`
      await c.f.addMember(c.kb.kb, user, 'viewer')
      return { path: `${kbPath(c)}/members/${user}`, method: 'DELETE' }
    },
    check: (body) => assert.equal(body.status, 'removed'),
  },
  'DELETE /api/kb/{kb_id}/invites/{invite_id}': {
    spec: kbRole('admin'), offSuperOnly: true, ok: 200,
    async request(c) {
      return { path: `${kbPath(c)}/invites/${await c.f.addInvite(c.kb.kb)}`, method: 'DELETE' }
    },
    check: (body) => assert.equal(body.status, 'revoked'),
  },
  // 4.5 ownership: owner or super-admin; a frozen KB only by a super-admin (which unfreezes it).
  'POST /api/kb/{kb_id}/transfer-owner': {
    spec: kbRole('owner'), handler: true, offSuperOnly: true, ok: 200,
    frozenPass: (c) => c.identity === 'super_admin',
    async request(c) {
      const kb = await c.f.createKb({ visibility: c.identity === 'public_outsider' ? 'public' : 'private', frozen: c.frozen })
      return { path: `/api/kb/${kb}/transfer-owner`, method: 'POST', json: { new_owner_user_id: USER_OF.admin } }
    },
    check: (body) => assert.equal(body.owner, USER_OF.admin),
  },
  // 4.6 users and system
  'GET /api/users/lookup': {
    spec: AUTH, ok: 200, request: () => ({ path: '/api/users/lookup?email=nobody@example.com' }),
    check: (body) => assert.equal(body.found, false),
  },
  'GET /api/me': {
    spec: AUTH, ok: 200, request: () => ({ path: '/api/me' }),
    check: (body, c) => assert.equal(body.user_id, USER_OF[c.identity as Exclude<Identity, 'none'>]),
  },
  'DELETE /api/users/{user_id}': {
    spec: SUPER, ok: 200,
    async request(c) {
      const user = `u-gone-${hex(4)}`
      await c.f.addProfile(user)
      await c.f.addMember(c.kb.kb, user, 'viewer')
      return { path: `/api/users/${user}`, method: 'DELETE' }
    },
    check: (body, c) => assert.deepEqual(body.kb_ids, [c.kb.kb]),
  },
  'DELETE /api/users': {
    spec: SUPER, ok: 200,
    async request(c) {
      const user = `u-gone-${hex(4)}`
      await c.f.addProfile(user)
      return { path: `/api/users?email=${user}@example.com`, method: 'DELETE' }
    },
    check: (body) => assert.equal(body.status, 'removed'),
  },
  'PATCH /api/users/{user_id}/quota': {
    spec: SUPER, ok: 200,
    async request(c) {
      await c.f.addProfile('u-quota')
      return { path: '/api/users/u-quota/quota', method: 'PATCH', json: { max_kb_count: 7 } }
    },
    check: (body) => assert.deepEqual(body, { user_id: 'u-quota', max_kb_count: 7 }),
  },
  'GET /api/admin/config': {
    spec: SUPER, ok: 200, request: () => ({ path: '/api/admin/config' }),
    check: (body, c) => assert.equal(body.kb_authz_enabled, c.authzOn),
  },
  'PATCH /api/admin/config': {
    // The value it already has: the matrix must not switch the mode under its own feet.
    spec: SUPER, ok: 200, request: (c) => ({ path: '/api/admin/config', method: 'PATCH', json: { kb_authz_enabled: c.authzOn } }),
    check: (body, c) => assert.equal(body.kb_authz_enabled, c.authzOn),
  },
  'POST /api/admin/check': {
    // Report only: a repair would change what other cells read.
    spec: SUPER, ok: 200, request: () => ({ path: '/api/admin/check', method: 'POST' }),
    check: (body) => assert.equal(body.repair, false),
  },
  // 4.7 documents
  'POST /api/kb/{kb_id}/docs/upload': {
    spec: kbRole('editor'), ok: 202,
    request: (c) => ({ path: `${kbPath(c)}/docs/upload`, method: 'POST', body: uploadForm('file', [`up-${hex(4)}.txt`]) }),
  },
  'POST /api/kb/{kb_id}/docs/upload/batch': {
    spec: kbRole('editor'), ok: 202,
    request: (c) => ({ path: `${kbPath(c)}/docs/upload/batch`, method: 'POST', body: uploadForm('files', [`b1-${hex(4)}.txt`, `b2-${hex(4)}.txt`]) }),
    check: (body) => assert.equal(body.results.length, 2),
  },
  'GET /api/kb/{kb_id}/docs': {
    // Searched by the template's name: cells add documents, which would push it off the first page.
    spec: kbRole('viewer'), ok: 200, request: (c) => ({ path: `${kbPath(c)}/docs?search=note-&page_size=100` }),
    check: (body, c) => assert.ok(body.items.some((d: Json) => d.doc_id === c.kb.doc), 'the KB\'s document listed'),
  },
  'GET /api/docs': { spec: SUPER, ok: 200, request: () => ({ path: '/api/docs' }) },
  'GET /api/kb/{kb_id}/docs/status': { spec: kbRole('viewer'), ok: 200, request: (c) => ({ path: `${kbPath(c)}/docs/status` }) },
  'GET /api/docs/status': { spec: SUPER, ok: 200, request: () => ({ path: '/api/docs/status' }) },
  'GET /api/kb/{kb_id}/docs/{doc_id}/status': {
    spec: kbRole('viewer'), ok: 200, request: (c) => ({ path: `${kbPath(c)}/docs/${c.kb.doc}/status` }),
  },
  'GET /api/kb/{kb_id}/docs/{doc_id}/download': {
    spec: kbRole('viewer'), ok: 200, request: (c) => ({ path: `${kbPath(c)}/docs/${c.kb.doc}/download` }),
  },
  'DELETE /api/kb/{kb_id}/docs/{doc_id}': {
    spec: kbRole('editor'), ok: 202,
    request: async (c) => ({ path: `${kbPath(c)}/docs/${await c.f.cloneDoc(c.kb.doc, { status: 'indexed' })}`, method: 'DELETE' }),
  },
  'POST /api/kb/{kb_id}/reindex': { spec: kbRole('editor'), ok: 202, request: (c) => ({ path: `${kbPath(c)}/reindex`, method: 'POST' }) },
  'POST /api/kb/{kb_id}/docs/{doc_id}/reindex': {
    spec: kbRole('editor'), ok: 202,
    request: async (c) => ({ path: `${kbPath(c)}/docs/${await c.f.cloneDoc(c.kb.doc, { status: 'indexed' })}/reindex`, method: 'POST' }),
  },
  'POST /api/kb/{kb_id}/docs/{doc_id}/recover': {
    spec: kbRole('editor'), ok: 202,
    request: async (c) => ({ path: `${kbPath(c)}/docs/${await c.f.cloneDoc(c.kb.doc, { status: 'running' })}/recover`, method: 'POST' }),
  },
  'POST /api/kb/{kb_id}/docs/{doc_id}/restore': {
    spec: kbRole('editor'), ok: 202,
    request: async (c) => ({ path: `${kbPath(c)}/docs/${await c.f.cloneDoc(c.kb.doc, { status: 'outdated', duplicate_of: c.kb.doc })}/restore`, method: 'POST' }),
  },
  'POST /api/kb/{kb_id}/docs/{doc_id}/fail': {
    spec: kbRole('editor'), ok: 200,
    request: async (c) => ({ path: `${kbPath(c)}/docs/${await c.f.cloneDoc(c.kb.doc, { status: 'pending' })}/fail`, method: 'POST' }),
  },
  // 4.8 connectors
  'POST /api/connectors': {
    spec: kbRole('admin', 'body'), ok: 201,
    request: (c) => ({
      path: '/api/connectors', method: 'POST',
      json: { kb_id: c.kb.kb, name: `m-${hex(3)}`, source_type: 'web', config: { seed_urls: [`http://127.0.0.1:9/${hex(4)}`] } },
    }),
  },
  'GET /api/connectors': {
    spec: AUTH, ok: 200, request: () => ({ path: '/api/connectors' }),
    check(body, c) {
      const seen = body.items.some((x: Json) => x.connector_id === c.kb.connector)
      assert.equal(seen, !c.authzOn || c.role !== null, 'connector list scoped to member and public KBs')
    },
  },
  'GET /api/connectors/{connector_id}': { spec: viaConnector('viewer'), ok: 200, request: (c) => ({ path: `/api/connectors/${c.kb.connector}` }) },
  'PATCH /api/connectors/{connector_id}': {
    spec: viaConnector('editor'), ok: 200, request: (c) => ({ path: `/api/connectors/${c.kb.connector}`, method: 'PATCH', json: { name: `renamed-${hex(2)}` } }),
  },
  'DELETE /api/connectors/{connector_id}': {
    spec: viaConnector('admin'), ok: 202,
    request: async (c) => ({ path: `/api/connectors/${await c.f.cloneConnector(c.kb.connector)}`, method: 'DELETE' }),
  },
  'POST /api/connectors/{connector_id}/sync': {
    spec: viaConnector('editor'), ok: 202,
    request: async (c) => ({ path: `/api/connectors/${await c.f.cloneConnector(c.kb.connector)}/sync`, method: 'POST' }),
  },
  'POST /api/connectors/{connector_id}/sync/abort': {
    spec: viaConnector('editor'), ok: 202,
    request: async (c) => ({
      path: `/api/connectors/${await c.f.cloneConnector(c.kb.connector, { sync_status: 'running', sync_started_at: new Date().toISOString() })}/sync/abort`,
      method: 'POST',
    }),
  },
  // Not in the spec (a compatibility route): it changes sync state like abort, so it needs what abort needs.
  'POST /api/connectors/{connector_id}/sync/reset': {
    spec: viaConnector('editor'), ok: 200,
    request: async (c) => ({ path: `/api/connectors/${await c.f.cloneConnector(c.kb.connector)}/sync/reset`, method: 'POST' }),
  },
  'GET /api/connectors/{connector_id}/sync/status': { spec: viaConnector('viewer'), ok: 200, request: (c) => ({ path: `/api/connectors/${c.kb.connector}/sync/status` }) },
  'GET /api/connectors/{connector_id}/docs': { spec: viaConnector('viewer'), ok: 200, request: (c) => ({ path: `/api/connectors/${c.kb.connector}/docs` }) },
  // 4.10 search: inaccessible KBs are dropped, none left is 200 with nothing.
  'POST /api/search': {
    spec: { level: 'viewer', kb: { from: 'body', name: 'kb_ids', filter: true } }, ok: 200,
    request: (c) => ({ path: '/api/search', method: 'POST', json: { query: 'leave policy', kb_ids: [c.kb.kb] } }),
    check(body, c) {
      if (c.authzOn && c.role === null) assert.deepEqual(body.results, [], 'nothing of a KB without access')
    },
  },
  'DELETE /api/search/cache': { spec: SUPER, ok: 200, request: () => ({ path: '/api/search/cache', method: 'DELETE' }) },
  // 4.11 MCP: the tools check roles themselves (mcp tests); the transport needs a token.
  'POST /mcp': {
    spec: AUTH, ok: 200,
    request: () => mcpRequest('tools/list'),
    check: (body) => assert.ok(body.result.tools.length > 0),
  },
  'GET /mcp': { spec: AUTH, ok: 405, request: () => ({ path: '/mcp' }) },
  'DELETE /mcp': { spec: AUTH, ok: 405, request: () => ({ path: '/mcp', method: 'DELETE' }) },
}

export const routeKey = (r: Pick<RouteInfo, 'method' | 'path'>) => `${r.method} ${r.path}`

/** Routes without a matrix entry, and entries that name no route: both must be empty. */
export function coverageGaps(routes: readonly Pick<RouteInfo, 'method' | 'path'>[]): string[] {
  const keys = new Set(routes.map(routeKey))
  return [
    ...[...keys].filter((k) => !ENTRIES[k]).map((k) => `route ${k} has no matrix entry`),
    ...Object.keys(ENTRIES).filter((k) => !keys.has(k)).map((k) => `matrix entry ${k} names no route`),
  ]
}

interface Expected {
  status: number
  detail?: string
}

/** The caller's role on the cell's KB as the design defines it, before kb_authz_enabled is considered. */
export function effectiveRole(identity: Identity): Role | null {
  switch (identity) {
    case 'none': case 'outsider': return null
    case 'public_outsider': return 'viewer'
    case 'super_admin': return 'owner'
    default: return identity
  }
}

/** What a cell must answer, from the access rule and the design's check order (404, no role, too low, frozen). */
export function expected(access: RouteAccess, entry: Entry, c: Cell, kb: string, viaValue?: string): Expected {
  const ok = { status: entry.ok }
  if (access.level === 'public') return ok
  if (c.identity === 'none') return { status: 401, detail: 'Not authenticated' }
  if (access.level === 'super_admin') return c.identity === 'super_admin' ? ok : { status: 403 }
  if (!c.authzOn && entry.offSuperOnly) return c.identity === 'super_admin' ? ok : { status: 403, detail: 'Requires super-admin while kb_authz_enabled is false' }
  if (access.level === 'authenticated' || !access.kb || !c.authzOn) return ok
  if (access.kb.filter) return ok
  // A KB reached through another id (a connector's) is not named to a caller without a role on it (BOLA suite):
  // the refusal names what the caller sent.
  const named = access.kb.via === undefined
  if (c.role === null) return { status: 403, detail: named ? `No access to KB: ${kb}` : `No access to ${access.kb.via}: ${viaValue}` }
  if (!atLeast(c.role, access.level)) return { status: 403, detail: named && !entry.handler ? `Requires role ${access.level} on KB: ${kb}` : undefined }
  if (c.frozen && access.level !== 'viewer' && !entry.frozenPass?.(c)) return { status: 403, detail: `KB is frozen: ${kb}` }
  return ok
}

const isKbRoute = (e: Entry) => e.spec.kb !== undefined

/** Runs `fn` over `items`, `limit` at a time. */
async function pool<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await fn(items[next++])
  }))
}

async function readBody(res: Response): Promise<{ text: string; json: Json }> {
  const text = await res.text()
  if (!(res.headers.get('content-type') ?? '').includes('json')) return { text: text.slice(0, 100), json: undefined }
  try {
    return { text: text.slice(0, 300), json: JSON.parse(text) }
  } catch {
    return { text: text.slice(0, 300), json: undefined }
  }
}

/** Calls one cell; returns a failure line or null. */
async function runCell(route: RouteInfo, entry: Entry, c: Cell): Promise<string | null> {
  const name = `${routeKey(route)} as ${c.identity}${c.frozen ? ' on a frozen KB' : ''}${c.authzOn ? '' : ' (authz off)'}`
  let req: Req
  try {
    req = await entry.request(c)
  } catch (err) {
    return `${name}: fixture failed: ${(err as Error).message}`
  }
  // Some builders aim at a fresh KB of their own (delete, transfer): the refusal texts name that one.
  const kb = /^\/api\/kb\/([^/?]+)/.exec(req.path)?.[1] ?? c.kb.kb
  const viaValue = /^\/api\/connectors\/([^/?]+)/.exec(req.path)?.[1]
  const exp = expected(entry.handler ? entry.spec : route.access, entry, c, kb, viaValue)
  const { path, ...init } = req
  const res = await c.f.as(c.identity, path, init)
  const { text, json } = await readBody(res)
  if (res.status !== exp.status) return `${name}: expected ${exp.status}${exp.detail ? ` "${exp.detail}"` : ''}, got ${res.status} ${text}`
  if (exp.detail !== undefined && json?.detail !== exp.detail) return `${name}: expected detail "${exp.detail}", got ${text}`
  if (exp.status === 401 && !/^Bearer/.test(res.headers.get('www-authenticate') ?? '')) return `${name}: 401 without a Bearer challenge`
  if (exp.status === 403 && typeof json?.detail !== 'string') return `${name}: 403 without a {detail} body: ${text}`
  if (exp.status !== entry.ok) return null
  try {
    const schema = route.responses[entry.ok]?.schema
    if (schema && json !== undefined && !Value.Check(schema, json)) {
      const first = [...Value.Errors(schema, json)][0]
      return `${name}: body does not match the declared ${entry.ok} schema at ${first?.path}: ${first?.message}: ${text}`
    }
    entry.check?.(json, c)
  } catch (err) {
    return `${name}: ${(err as Error).message}: ${text}`
  }
  return null
}

export interface MatrixOptions extends StartOptions {
  /** Cells run at once (they share nothing they change). */
  concurrency?: number
}

export function matrixSuite(label: string, opts: MatrixOptions = {}): void {
  const { concurrency = 6, ...start } = opts
  const cleanups: (() => unknown)[] = []
  let f: AuthzFixture
  const shared = new Map<string, SharedKb>()
  const kbFor = (visibility: 'private' | 'public', frozen: boolean) => shared.get(`${visibility}|${frozen}`)!

  before(async () => {
    f = await startAuthzFixture({ after: (fn) => void cleanups.push(fn) }, start)
    for (const visibility of ['private', 'public'] as const) {
      for (const frozen of [false, true]) {
        // Document and connector first: once frozen, the KB refuses both.
        const kb = await f.createKb({ visibility })
        const doc = await f.uploadDoc(kb)
        const connector = await f.createConnector(kb)
        if (frozen) await f.setKbState(kb, { frozen: true })
        shared.set(`${visibility}|${frozen}`, { kb, doc, connector })
      }
    }
  })
  after(async () => {
    for (const fn of cleanups.reverse()) await fn()
  })

  it(`${label}: every route has a matrix entry and every entry names a route`, () => {
    assert.deepEqual(coverageGaps(f.svc.app.routes), [])
  })

  it(`${label}: every route declares the spec's access rule`, () => {
    const wrong: string[] = []
    for (const route of f.svc.app.routes) {
      const entry = ENTRIES[routeKey(route)]
      if (!entry) continue
      if (entry.handler) {
        // The handler enforces the role; the declaration must still name the KB and never be public.
        if (route.access.level === 'public' || JSON.stringify(route.access.kb) !== JSON.stringify(entry.spec.kb)) {
          wrong.push(`${routeKey(route)} declares ${JSON.stringify(route.access)}; its KB must be ${JSON.stringify(entry.spec.kb)}`)
        }
      } else {
        try {
          assert.deepEqual(route.access, entry.spec)
        } catch {
          wrong.push(`${routeKey(route)} declares ${JSON.stringify(route.access)}, spec ${JSON.stringify(entry.spec)}`)
        }
      }
    }
    assert.deepEqual(wrong, [])
  })

  const cellsFor = (authzOn: boolean) => {
    const cells: { route: RouteInfo; entry: Entry; cell: Cell }[] = []
    for (const route of f.svc.app.routes) {
      const entry = ENTRIES[routeKey(route)]
      if (!entry) continue
      for (const identity of IDENTITIES) {
        // Frozen matters only on KB routes, with authz on, for a caller with a token.
        const states = authzOn && isKbRoute(entry) && identity !== 'none' ? [false, true] : [false]
        for (const frozen of states) {
          const kb = kbFor(identity === 'public_outsider' ? 'public' : 'private', frozen)
          cells.push({ route, entry, cell: { f, identity, frozen, authzOn, kb, role: effectiveRole(identity) } })
        }
      }
    }
    return cells
  }

  const runPass = async (authzOn: boolean) => {
    const cells = cellsFor(authzOn)
    const failures: string[] = []
    await pool(cells, concurrency, async ({ route, entry, cell }) => {
      const failure = await runCell(route, entry, cell)
      if (failure) failures.push(failure)
    })
    failures.sort()
    assert.deepEqual(failures, [], `${failures.length} of ${cells.length} cells failed`)
    return cells.length
  }

  it(`${label}: kb_authz_enabled true: every route x identity x frozen cell answers its status`, async () => {
    const n = await runPass(true)
    assert.ok(n > 500, `${n} cells`)
  })

  // Check order (design): an absent KB (or connector) is 404 before any role is looked at, for every caller with a
  // token; the search filter drops an unknown KB like an inaccessible one.
  it(`${label}: an absent KB or connector answers 404 to every caller before any role check`, async () => {
    const failures: string[] = []
    const absentKb = `kb-absent-${hex(4)}`
    const absentConnector = randomUUID()
    const cells = f.svc.app.routes.filter((r) => ENTRIES[routeKey(r)]?.spec.kb).flatMap((route) => IDENTITIES.map((identity) => ({ route, identity })))
    await pool(cells, concurrency, async ({ route, identity }) => {
      const entry = ENTRIES[routeKey(route)]
      const kb = kbFor('private', false)
      const req = await entry.request({ f, identity, frozen: false, authzOn: true, kb, role: effectiveRole(identity) })
      // The same request, its KB (or connector) swapped for one that does not exist.
      const path = req.path.replace(/^\/api\/kb\/[^/?]+/, `/api/kb/${absentKb}`).replace(/^\/api\/connectors\/[^/?]+/, `/api/connectors/${absentConnector}`)
      const json = req.json && typeof req.json === 'object' ? { ...req.json, ...('kb_id' in req.json ? { kb_id: absentKb } : {}), ...('kb_ids' in req.json ? { kb_ids: [absentKb] } : {}) } : req.json
      const { path: _, ...init } = req
      const res = await f.as(identity, path, { ...init, json })
      const body = (await res.json().catch(() => null)) as Json
      const notFound = entry.spec.kb!.via ? `Connector not found: ${absentConnector}` : `KB not found: ${absentKb}`
      const exp = identity === 'none' ? { status: 401 } : entry.spec.kb!.filter ? { status: 200 } : { status: 404, detail: notFound }
      if (res.status !== exp.status || (exp.detail && body?.detail !== exp.detail)) {
        failures.push(`${routeKey(route)} as ${identity} (${path}): expected ${exp.status} ${exp.detail ?? ''}, got ${res.status} ${JSON.stringify(body).slice(0, 200)}`)
      }
      if (entry.spec.kb!.filter && identity !== 'none' && body?.results?.length !== 0) failures.push(`${routeKey(route)} as ${identity}: results for an absent KB`)
    })
    assert.deepEqual(failures.sort(), [])
    assert.ok(cells.length > 250, `${cells.length} cells`)
  })

  // The removal rules a route declaration cannot express (spec 4.4): self-removal is always allowed to a member,
  // removing the owner needs a super-admin (or is the owner's own), and the owner's departure runs succession.
  it(`${label}: member removal: oneself always, the owner only by a super-admin or themself, with succession`, async () => {
    const failures: string[] = []
    const removal = async (identity: Identity, target: string, expect: number) => {
      const kb = await f.createKb()
      const res = await f.as(identity, `/api/kb/${kb}/members/${target}`, { method: 'DELETE' })
      const text = await res.text()
      const name = `DELETE member ${target} as ${identity}`
      if (res.status !== expect) return void failures.push(`${name}: expected ${expect}, got ${res.status} ${text}`)
      const roles = new Map((await f.sql.query<{ user_id: string; role: string }>('SELECT user_id, role FROM kb_members WHERE kb_id = $1', [kb])).map((r) => [r.user_id, r.role]))
      if (expect !== 200) {
        if (!roles.has(target)) failures.push(`${name}: refused, yet the member is gone`)
        return
      }
      if (roles.has(target)) failures.push(`${name}: 200, yet still a member`)
      // The only admin of the fixture KB is the oldest admin: the owner's successor.
      if (target === USER_OF.owner && roles.get(USER_OF.admin) !== 'owner') failures.push(`${name}: no succession, u-admin is ${roles.get(USER_OF.admin)}`)
    }
    const cells: [Identity, string, number][] = [
      ...(['viewer', 'editor', 'admin', 'owner'] as const).map((who): [Identity, string, number] => [who, USER_OF[who], 200]),
      ['none', USER_OF.owner, 401],
      ['outsider', USER_OF.owner, 403],
      ['viewer', USER_OF.owner, 403],
      ['editor', USER_OF.owner, 403],
      ['admin', USER_OF.owner, 403],
      ['super_admin', USER_OF.owner, 200],
      ['admin', USER_OF.editor, 200],
      ['editor', USER_OF.viewer, 403],
    ]
    await pool(cells, concurrency, ([identity, target, expect]) => removal(identity, target, expect))
    assert.deepEqual(failures.sort(), [])
  })

  // The MCP tools apply the same rules (spec 4.11): what each identity's tools show of a KB matches its role.
  it(`${label}: MCP tools: every identity sees a KB's documents and listing exactly as its role allows`, async () => {
    const failures: string[] = []
    const call = async (identity: Identity, name: string, args: Record<string, unknown>) => {
      const { path, ...init } = mcpRequest('tools/call', { name, arguments: args })
      const res = await f.as(identity, path, init)
      return { status: res.status, text: await res.text() }
    }
    const cells = IDENTITIES.flatMap((identity) => [false, true].map((frozen) => ({ identity, frozen })))
    await pool(cells, concurrency, async ({ identity, frozen }) => {
      const kb = kbFor(identity === 'public_outsider' ? 'public' : 'private', frozen)
      const source = ((await f.sql.query<{ source: string }>('SELECT source FROM documents WHERE doc_id = $1', [kb.doc]))[0]).source
      const sees = effectiveRole(identity) !== null
      const name = `as ${identity}${frozen ? ' on a frozen KB' : ''}`
      const doc = await call(identity, 'get_document', { kb_id: kb.kb, doc_id: kb.doc })
      const list = await call(identity, 'list_knowledge_bases', {})
      if (identity === 'none') {
        if (doc.status !== 401 || list.status !== 401) failures.push(`${name}: ${doc.status}/${list.status}, not 401`)
        return
      }
      if (doc.text.includes(source) !== sees) failures.push(`${name}: get_document ${sees ? 'hides' : 'shows'} the document: ${doc.text.slice(0, 300)}`)
      if (list.text.includes(kb.kb) !== sees) failures.push(`${name}: list_knowledge_bases ${sees ? 'omits' : 'lists'} ${kb.kb}: ${list.text.slice(0, 300)}`)
    })
    assert.deepEqual(failures.sort(), [])
  })

  it(`${label}: kb_authz_enabled false: only the token and the super-admin routes matter`, async () => {
    await f.setAuthzEnabled(false)
    try {
      await runPass(false)
    } finally {
      await f.setAuthzEnabled(true)
    }
  })
}
