// The [ENT] document cap (spec 4.7 batch rules 2-3, 8; notes.md): before every new document (upload, each batch
// entry, each connector document) a KB holding max_docs_count non-deleted documents refuses with 403
// `Document limit reached for KB '<kb>': <n>/<max>`. A replacement (same source) is not new, a deleted document
// coming back is; super-admins bypass; concurrent uploads at cap - 1 let exactly one through; a connector sync
// stops cleanly with that last_error; the base edition has no cap. One service per driver set, a KB per case.
import assert from 'node:assert/strict'
import { after, before, it } from 'node:test'
import { startApp, uniqueId, type StartOptions } from '../helpers/app.ts'
import { startAuthzFixture, type AuthzFixture } from '../helpers/authz-fixture.ts'
import { startWebSite, type WebSite } from '../helpers/web-site.ts'
import { waitFor } from '../helpers/wait.ts'
import { CONNECTOR_TEST_SETTINGS, connectorDocs, waitIdle } from './connectors/connectors.suite.ts'

type Json = any

const CAP = 2
const USER = 'cap-user'
const limitText = (kb: string, n: number, max = CAP) => `Document limit reached for KB '${kb}': ${n}/${max}`

export function docsCapSuite(label: string, opts: StartOptions): void {
  let f: AuthzFixture
  let site: WebSite
  const cleanups: (() => unknown)[] = []
  before(async () => {
    site = await startWebSite({ articles: 12, perPage: 20, slowMs: 50 })
    f = await startAuthzFixture({ after: (fn) => void cleanups.push(fn) }, {
      ...opts, authzEnabled: false,
      settings: { ...CONNECTOR_TEST_SETTINGS, authz: { max_docs_count: CAP }, queue_worker: { enabled: true } },
    })
  })
  after(async () => {
    for (const c of cleanups.reverse()) await c()
    await site.close()
  })

  const as = (path: string, init: RequestInit & { json?: unknown } = {}, superAdmin = false) => f.asUser(USER, path, init, { superAdmin })
  const newKb = async () => {
    const kb = uniqueId('cap')
    assert.equal((await as('/api/kb', { method: 'POST', json: { kb_id: kb } })).status, 201)
    return kb
  }
  const form = (...names: string[]) => {
    const fd = new FormData()
    for (const n of names) fd.append(names.length > 1 ? 'files' : 'file', new Blob([`Document ${n}: ${'words about the leave policy '.repeat(20)}`], { type: 'text/plain' }), n)
    return fd
  }
  const upload = (kb: string, name: string, superAdmin = false) => as(`/api/kb/${kb}/docs/upload`, { method: 'POST', body: form(name) }, superAdmin)
  const uploaded = async (kb: string, name: string, superAdmin = false): Promise<string> => {
    const res = await upload(kb, name, superAdmin)
    assert.equal(res.status, 202, await res.clone().text())
    return ((await res.json()) as Json).doc_id
  }
  const settle = (kb: string, docId: string, want = ['indexed', 'failed']) => waitFor(async () => {
    const res = await as(`/api/kb/${kb}/docs/${docId}/status`)
    const s = (await res.json()) as Json
    return want.includes(s.status) && s
  }, `document ${docId} ${want.join('|')}`)
  const sources = async (kb: string, status = '') =>
    (((await (await as(`/api/kb/${kb}/docs?page_size=100${status}`)).json()) as Json).items as Json[]).map((d) => d.source).sort()
  const stored = async (kb: string) => {
    let n = 0
    for await (const _ of f.svc.app.adapters.objects.list(`${kb}/`)) n++
    return n
  }
  const live = async (kb: string) => (await f.sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM documents WHERE kb_id = $1 AND status <> 'deleted'`, [kb]))[0].n

  it(`${label}: the upload over the cap is refused with 403 and nothing is stored; a replacement is not new; super-admins bypass`, async () => {
    const kb = await newKb()
    const a = await uploaded(kb, 'a.txt')
    await uploaded(kb, 'b.txt')
    const res = await upload(kb, 'c.txt')
    assert.equal(res.status, 403)
    assert.deepEqual(await res.json(), { detail: limitText(kb, 2) })
    assert.deepEqual(await sources(kb), ['a.txt', 'b.txt'], 'no row for the refused upload')
    assert.equal(await stored(kb), 2, 'no stored file for it')

    await settle(kb, a)
    const again = await upload(kb, 'a.txt')
    assert.equal(again.status, 202, 'same source: a replacement, not a new document')
    assert.equal(((await again.json()) as Json).doc_id, a)

    await uploaded(kb, 'c.txt', true)
    assert.equal(await live(kb), 3, 'a super-admin is not capped')
    const over = await upload(kb, 'd.txt')
    assert.equal(over.status, 403)
    assert.deepEqual(await over.json(), { detail: limitText(kb, 3) })
  })

  it(`${label}: deleted documents do not count; a deleted document coming back is a new one`, async () => {
    const kb = await newKb()
    const a = await uploaded(kb, 'a.txt')
    const b = await uploaded(kb, 'b.txt')
    await settle(kb, a)
    await settle(kb, b)
    assert.equal((await as(`/api/kb/${kb}/docs/${a}`, { method: 'DELETE' })).status, 202)
    await settle(kb, a, ['deleted'])
    await uploaded(kb, 'c.txt')
    const back = await upload(kb, 'a.txt')
    assert.equal(back.status, 403, 'back from deleted: a new document over the cap')
    assert.deepEqual(await back.json(), { detail: limitText(kb, 2) })
    assert.equal((await as(`/api/kb/${kb}/docs/${a}/status`).then((r) => r.json()) as Json).status, 'deleted', 'left as it was')
  })

  it(`${label}: a batch stops at the blocked entry: 403 {results, detail}, later entries skipped, earlier uploads stay`, async () => {
    const kb = await newKb()
    await uploaded(kb, 'x.txt')
    const res = await as(`/api/kb/${kb}/docs/upload/batch`, { method: 'POST', body: form('y.txt', 'z.txt', 'w.txt') })
    assert.equal(res.status, 403)
    const body = (await res.json()) as Json
    assert.equal(body.results.length, 3)
    assert.equal(body.results[0].source, 'y.txt')
    assert.match(body.results[0].doc_id, /^[0-9a-f]{16}$/)
    assert.deepEqual(body.results[1], { title: 'z.txt', error: limitText(kb, 2), status: 'error' })
    assert.deepEqual(body.results[2], { title: 'w.txt', error: 'Skipped: batch stopped at z.txt', status: 'error' })
    assert.equal(body.detail, limitText(kb, 2))
    assert.deepEqual(await sources(kb), ['x.txt', 'y.txt'])
  })

  it(`${label}: concurrent uploads at cap - 1: exactly one succeeds`, async () => {
    for (let round = 0; round < 2; round++) {
      const kb = await newKb()
      await uploaded(kb, 'first.txt')
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => upload(kb, `race-${i}.txt`)))
      const statuses = results.map((r) => r.status).sort()
      assert.deepEqual(statuses, [202, 403, 403, 403, 403, 403, 403, 403], `round ${round}`)
      for (const r of results) {
        const body = (await r.json()) as Json
        if (r.status === 403) assert.equal(body.detail, limitText(kb, 2))
      }
      assert.equal(await live(kb), CAP)
      assert.equal(await stored(kb), CAP, 'the refused uploads left no file behind')
    }
  })

  it(`${label}: a connector sync stops cleanly at the cap with that last_error; what it stored stays`, async () => {
    const kb = await newKb()
    const create = await as('/api/connectors', {
      method: 'POST', json: { kb_id: kb, name: 'capped site', source_type: 'web', config: { seed_urls: [`${site.url}/docs`], depth: 3, max_pages: 50, request_delay_ms: 0 } },
    })
    assert.equal(create.status, 201, await create.clone().text())
    const id = ((await create.json()) as Json).connector_id
    assert.equal((await as(`/api/connectors/${id}/sync`, { method: 'POST' })).status, 202)
    const st = await waitFor(async () => {
      const s = (await (await as(`/api/connectors/${id}/sync/status`)).json()) as Json
      return s.sync_status === 'idle' && s
    }, 'sync idle', 120_000, 100)
    const connector = (await (await as(`/api/connectors/${id}`)).json()) as Json
    assert.equal(connector.last_error, limitText(kb, 2))
    assert.equal(connector.status, 'error')
    assert.equal(st.last_sync?.outcome ?? 'failed', 'failed')
    const docs = await f.sql.query<{ status: string }>('SELECT status FROM documents WHERE kb_id = $1', [kb])
    assert.equal(docs.length, CAP, 'stored up to the cap')
    for (const d of docs) assert.ok(['indexed', 'failed'].includes(d.status), `no document left half-written: ${d.status}`)
  })

  it(`${label}: the runtime max_docs_count (PATCH /api/admin/config) replaces the file value; 0 = unlimited`, async () => {
    const kb = await newKb()
    await uploaded(kb, 'a.txt')
    await uploaded(kb, 'b.txt')
    const patch = (max: number) => as('/api/admin/config', { method: 'PATCH', json: { max_docs_count: max } }, true)
    assert.equal((await patch(0)).status, 200)
    try {
      await uploaded(kb, 'c.txt')
      await uploaded(kb, 'd.txt')
      assert.equal((await patch(3)).status, 200)
      const res = await upload(kb, 'e.txt')
      assert.equal(res.status, 403)
      assert.deepEqual(await res.json(), { detail: limitText(kb, 4, 3) })
    } finally {
      await patch(CAP)
    }
  })
}

/** The base edition has no document cap (authz.max_docs_count applies only with oidc.issuer_url set). */
export function baseEditionNoCap(label: string, opts: StartOptions): void {
  it(`${label}: the base edition has no document cap`, async (t) => {
    const svc = await startApp(t, { ...opts, settings: { authz: { max_docs_count: 1 }, queue_worker: { enabled: false } } })
    const kb = uniqueId('cap')
    assert.equal((await svc.request('/api/kb', { method: 'POST', json: { kb_id: kb } })).status, 201)
    for (const n of ['a.txt', 'b.txt', 'c.txt']) {
      const fd = new FormData()
      fd.append('file', new Blob([`text ${n}`]), n)
      assert.equal((await svc.request(`/api/kb/${kb}/docs/upload`, { method: 'POST', body: fd })).status, 202)
    }
  })
}
