// Broken object-level authorisation (issue 15, item 3), generated from the route table: a user who owns KB A
// and holds nothing on KB B calls every route at B's objects (KB, document, connector, invite, members), by
// B's own path and by id guessing (B's doc_id, invite_id and member ids under A's path, B in bodies and
// queries, B through the MCP tools). Every cell must be refused (403/404), or answer a list or search with
// nothing of B; no body may carry anything of B the caller did not send; and B's rows are unchanged after
// each call. The request builders are the matrix's (test/plugins/authz/matrix.suite.ts), so a new route is
// covered here as soon as it has a matrix entry (and the matrix fails until it has one).
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import type { RouteInfo } from '../../kernel/plugin.ts'
import { mcpRequest, startAuthzFixture, type AuthzFixture, type RequestInitJson } from '../helpers/authz-fixture.ts'
import type { StartOptions } from '../helpers/app.ts'
import { skipUnless } from '../helpers/services.ts'
import { waitFor } from '../helpers/wait.ts'
import { ENTRIES, routeKey, type Cell } from '../plugins/authz/matrix.suite.ts'

type Json = any

interface Attempt {
  route: RouteInfo
  /** Which way B is reached: its own path, a guess under A's path, a body, a query, an MCP tool. */
  how: string
  req: RequestInitJson & { path: string }
  /** The KB whose rows must not change (B, or a fresh KB the builder made). */
  target: string
  /** A list or search answer is allowed, empty of B. */
  listing: boolean
  /** What the answer must hold of A: the filter hides B, not everything. */
  mustName?: string
}

const hex = (n: number) => randomBytes(n).toString('hex')

const mcpCall = (name: string, args: Record<string, unknown>) => mcpRequest('tools/call', { name, arguments: args })

function bolaSuite(label: string, opts: StartOptions): void {
  const cleanups: (() => unknown)[] = []
  let f: AuthzFixture
  const A = `kb-a-${hex(4)}`
  let B: string
  let docA: string
  let docB: string
  let connB: string
  let inviteB: string
  const secret = `bsecret${hex(6)}`
  /** Strings of B that no answer to the attacker may contain. */
  let markers: string[] = []
  /** B's identifiers: allowed in an answer only when the request itself carried them (an echo in a 404 text). */
  let ids: string[] = []

  before(async () => {
    // The worker runs so that B's document is really indexed: an empty search must mean filtered, not empty.
    f = await startAuthzFixture({ after: (fn) => void cleanups.push(fn) }, { ...opts, settings: { queue_worker: { enabled: true } } })
    assert.equal((await f.as('outsider', '/api/kb', { method: 'POST', json: { kb_id: A, kb_name: 'Attacker KB' } })).status, 201)
    await f.addMember(A, 'u-outsider', 'owner')
    const form = new FormData()
    form.append('file', new Blob(['Leave policy of the attacker: ten days.'], { type: 'text/plain' }), 'a-policy.txt')
    docA = ((await (await f.as('outsider', `/api/kb/${A}/docs/upload`, { method: 'POST', body: form })).json()) as Json).doc_id

    B = await f.createKb()
    const res = await f.as('owner', `/api/kb/${B}`, { method: 'PATCH', json: { kb_name: `${secret}-name`, description: `${secret}-description` } })
    assert.equal(res.status, 200)
    docB = await f.uploadDoc(B, `${secret}-file.txt`, `Leave policy: twenty days a year. ${secret}-content.`)
    connB = await f.createConnector(B)
    inviteB = await f.addInvite(B, `${secret}-invitee@example.com`)
    for (const user of ['u-owner', 'u-viewer', 'u-editor', 'u-admin']) await f.addProfile(user)
    const connName = ((await (await f.as('owner', `/api/connectors/${connB}`)).json()) as Json).name
    markers = [secret, connName, 'u-owner@example.com', 'u-viewer@example.com']
    ids = [B, docB, connB, inviteB, 'u-owner', 'u-viewer', 'u-editor', 'u-admin']

    for (const [kb, doc, who] of [[A, docA, 'outsider'], [B, docB, 'owner']] as const) {
      await waitFor(async () => ((await (await f.as(who, `/api/kb/${kb}/docs/${doc}/status`)).json()) as Json).status === 'indexed', `${kb}'s document indexed`)
    }
    // The same search by B's owner finds B's document: the attacker's empty answers below are the filter's doing.
    const own = (await (await f.as('owner', '/api/search', { method: 'POST', json: { query: 'leave policy', kb_ids: [B] } })).json()) as Json
    assert.ok(own.results.some((r: Json) => r.doc_id === docB), 'B is searchable by its owner')
  })
  after(async () => {
    for (const fn of cleanups.reverse()) await fn()
  })

  /** B's rows (or a fresh target KB's) that a refused request must leave as they were. */
  const snapshot = async (kb: string) => {
    const q = (text: string) => f.sql.query(text, [kb])
    return JSON.stringify([
      await q('SELECT kb_name, description, tags, status, visibility FROM knowledge_bases WHERE kb_id = $1'),
      await q('SELECT overrides FROM kb_settings_overrides WHERE kb_id = $1'),
      await q('SELECT user_id, role FROM kb_members WHERE kb_id = $1 ORDER BY user_id'),
      await q('SELECT doc_id, status FROM documents WHERE kb_id = $1 ORDER BY doc_id'),
      await q('SELECT connector_id, name, status, sync_status, config FROM connectors WHERE kb_id = $1 ORDER BY connector_id'),
      await q('SELECT invite_id, status FROM kb_invites WHERE kb_id = $1 ORDER BY invite_id'),
    ])
  }

  /** Every way to reach B through one route, built with the matrix's request builders. */
  const attemptsFor = async (route: RouteInfo): Promise<Attempt[]> => {
    const entry = ENTRIES[routeKey(route)]
    const cell: Cell = { f, identity: 'outsider', frozen: false, authzOn: true, kb: { kb: B, doc: docB, connector: connB }, role: null }
    const listing = !entry.spec.kb || entry.spec.kb.filter === true
    const direct = await entry.request(cell)
    const targetOf = (path: string) => /^\/api\/kb\/([^/?]+)/.exec(path)?.[1] ?? B
    const out: Attempt[] = [{ route, how: 'own path', req: direct, target: targetOf(direct.path), listing }]
    // B's object ids under A's path: the KB check passes (A is the caller's), the object must still be B's.
    const params = route.path.match(/\{\w+\}/g) ?? []
    if (direct.path.startsWith(`/api/kb/${B}/`) && params.length > 1) {
      out.push({ route, how: "B's id under A's path", req: { ...direct, path: direct.path.replace(`/api/kb/${B}/`, `/api/kb/${A}/`) }, target: B, listing })
    }
    const key = routeKey(route)
    const more = (how: string, req: Attempt['req'], mustName?: string) => out.push({ route, how, req, target: B, listing: true, mustName })
    if (key === 'GET /api/kb') out[0].mustName = A
    if (key === 'POST /api/search') {
      more('A and B in kb_ids', { path: '/api/search', method: 'POST', json: { query: 'leave policy', kb_ids: [A, B] } }, docA)
      more('B twice and an unknown KB', { path: '/api/search', method: 'POST', json: { query: 'twenty days a year', kb_ids: [B, B, 'kb-none'] } })
    }
    if (key === 'GET /api/connectors') more('kb_id=B query', { path: `/api/connectors?kb_id=${B}` })
    if (key === 'GET /api/kb') more('sorted and searched', { path: '/api/kb?sort_by=kb_id&sort_order=desc' })
    if (key === 'POST /mcp') {
      more('MCP search of B', mcpCall('search', { query: 'leave policy', kb_ids: [B] }))
      more('MCP search of every KB', mcpCall('search', { query: 'leave policy' }), docA)
      more('MCP list_knowledge_bases', mcpCall('list_knowledge_bases', {}), A)
      more("MCP get_document of B's document", mcpCall('get_document', { kb_id: B, doc_id: docB }))
      more("MCP get_document of B's document under A", mcpCall('get_document', { kb_id: A, doc_id: docB }))
      more("MCP get_document_status of B's document", mcpCall('get_document_status', { kb_id: B, doc_id: docB }))
    }
    if (key === 'POST /api/connectors') {
      more("B's kb_id in the body", { path: '/api/connectors', method: 'POST', json: { kb_id: B, name: `x-${hex(2)}`, source_type: 'web', config: { seed_urls: [`http://127.0.0.1:9/${hex(3)}`] } } })
    }
    return out
  }

  it(`${label}: the owner of KB A reaches nothing of KB B through any route`, async () => {
    const failures: string[] = []
    let n = 0
    for (const route of f.svc.app.routes) {
      if (route.access.level === 'public') continue
      if (!ENTRIES[routeKey(route)]) {
        failures.push(`${routeKey(route)} has no matrix entry (test/plugins/authz/matrix.suite.ts)`)
        continue
      }
      // One at a time: the snapshot around each call must see only that call's effect.
      for (const a of await attemptsFor(route)) {
        n++
        const name = `${routeKey(route)} (${a.how}: ${a.req.method ?? 'GET'} ${a.req.path})`
        const before = await snapshot(a.target)
        const { path, ...init } = a.req
        const res = await f.as('outsider', path, init)
        const text = await res.text()
        const sent = `${path} ${typeof init.body === 'string' ? init.body : ''} ${JSON.stringify(init.json ?? null)}`
        const refused = res.status === 403 || res.status === 404
        const allowed = refused || (a.listing && res.status >= 200 && res.status < 300) || (a.listing && res.status === 405)
        if (!allowed) failures.push(`${name}: HTTP ${res.status} ${text.slice(0, 200)}`)
        for (const m of markers) if (text.includes(m)) failures.push(`${name}: the answer leaks "${m}": ${text.slice(0, 300)}`)
        for (const id of ids) if (text.includes(id) && !sent.includes(id)) failures.push(`${name}: the answer names ${id}, which the caller never sent: ${text.slice(0, 300)}`)
        if (a.mustName && !text.includes(a.mustName)) failures.push(`${name}: the caller's own ${a.mustName} is missing: ${text.slice(0, 300)}`)
        if ((await snapshot(a.target)) !== before) failures.push(`${name}: KB ${a.target} changed`)
      }
    }
    assert.deepEqual(failures, [], `${failures.length} failures in ${n} attempts`)
    assert.ok(n > 60, `${n} attempts`)
  })
}

describe('BOLA on the embedded default', () => bolaSuite('embedded', {}))

describe('BOLA on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  bolaSuite('services', { services: true }))
