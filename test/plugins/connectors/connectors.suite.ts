// Connectors through HTTP (spec 2.5, 3.3, 4.8, 4.9): the API and its validation, the web crawler against a
// generated site on loopback, the sync state machine, abort, pruning and schedules. One service per driver
// set is shared by the cases (each case makes its own KB): starting the service is most of the cost.
import { after, before, it } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, uniqueId, type StartOptions, type StartedApp } from '../../helpers/app.ts'
import { startWebSite, type WebSite } from '../../helpers/web-site.ts'
import { waitFor } from '../../helpers/wait.ts'
import type { ConnectorsService } from '../../../plugins/connectors/service.ts'

type Json = any

/**
 * Settings for connector tests: fast polling, dedup off (the generated pages are alike on purpose), and the test
 * servers' loopback address allowed as a destination (the egress policy refuses loopback unless listed).
 */
export const CONNECTOR_TEST_SETTINGS = {
  queue_poll: { poll_interval_sec: 0.05, retry_interval_sec: 0.2 }, dedup: { enabled: false }, connectors: { egress: { allow: ['127.0.0.1/32'] } },
}

export async function newKb(svc: StartedApp): Promise<string> {
  const kb = uniqueId()
  const res = await svc.request('/api/kb', { method: 'POST', json: { kb_id: kb } })
  assert.equal(res.status, 201)
  return kb
}

export async function createConnector(svc: StartedApp, body: Json): Promise<Json> {
  const res = await svc.request('/api/connectors', { method: 'POST', json: body })
  const json = await res.json() as Json
  assert.equal(res.status, 201, JSON.stringify(json))
  return json
}

export const webConfig = (site: WebSite, extra: Json = {}) => ({ seed_urls: [`${site.url}/docs`], depth: 8, max_pages: 200, request_delay_ms: 0, ...extra })

export async function syncStatus(svc: StartedApp, id: string): Promise<Json> {
  return (await svc.request(`/api/connectors/${id}/sync/status`)).json()
}

/** Starts a sync and waits until it is idle again; returns the sync status. */
export async function syncAndWait(svc: StartedApp, id: string, timeoutMs = 120_000): Promise<Json> {
  const res = await svc.request(`/api/connectors/${id}/sync`, { method: 'POST' })
  assert.equal(res.status, 202, await res.clone().text())
  assert.deepEqual(await res.json(), { connector_id: id, sync_status: 'running' })
  return waitIdle(svc, id, timeoutMs)
}

export async function waitIdle(svc: StartedApp, id: string, timeoutMs = 120_000): Promise<Json> {
  return waitFor(async () => {
    const s = await syncStatus(svc, id)
    return s.sync_status === 'idle' && s
  }, `connector ${id} idle`, timeoutMs, 100)
}

export async function connectorDocs(svc: StartedApp, id: string, query = ''): Promise<Json[]> {
  const out: Json[] = []
  for (let page = 1; ; page++) {
    const res = await svc.request(`/api/connectors/${id}/docs?page_size=100&page=${page}${query}`)
    assert.equal(res.status, 200)
    const body = await res.json() as Json
    out.push(...body.items)
    if (out.length >= body.total || body.items.length === 0) return out
  }
}

export function connectorsSuite(label: string, opts: StartOptions): void {
  let svc: StartedApp
  let site: WebSite
  const cleanups: (() => unknown)[] = []
  before(async () => {
    site = await startWebSite({ articles: 60, perPage: 20, slowMs: 300 })
    svc = await startApp({ after: (fn: () => unknown) => void cleanups.push(fn) }, { ...opts, settings: { ...CONNECTOR_TEST_SETTINGS, ...opts.settings } })
  })
  after(async () => {
    for (const c of cleanups) await c()
    await site.close()
  })

  it(`${label}: creates, reads, lists, patches and deletes connectors with the spec's shapes`, async () => {
    const kb = await newKb(svc)
    const c = await createConnector(svc, { kb_id: kb, name: 'Docs site', source_type: 'web', config: { seed_urls: [`${site.url}/docs`] } })
    assert.match(c.connector_id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
    assert.equal(c.kb_id, kb)
    assert.equal(c.source_type, 'web')
    assert.equal(c.sync_status, 'idle')
    assert.equal(c.status, 'active')
    assert.equal(c.schedule_enabled, false)
    assert.equal(c.sync_schedule, null)
    assert.equal(c.last_error, null)
    assert.equal(c.sync_started_at, null)
    assert.equal(c.last_synced_at, null)
    // Defaults of spec 4.9 are filled in.
    assert.equal(c.config.depth, 2)
    assert.equal(c.config.max_pages, 50)
    assert.equal(c.config.request_timeout_sec, 30)
    assert.equal(c.config.request_delay_ms, 100)
    assert.equal(c.config.skip_seed_pages, true)
    assert.deepEqual(c.config.include_patterns, [])

    assert.deepEqual(await (await svc.request(`/api/connectors/${c.connector_id}`)).json(), c)
    const gh = await createConnector(svc, { kb_id: kb, name: 'Repo', source_type: 'github', config: { owner: 'acme', repo: 'docs' }, sync_schedule: '0 3 * * *', schedule_enabled: true })
    assert.equal(gh.config.branch, 'main')
    assert.equal(gh.config.max_files, 200)
    assert.equal(gh.config.api_url, 'https://api.github.com')
    const wiki = await createConnector(svc, { kb_id: kb, name: 'Wiki', source_type: 'confluence', config: { base_url: 'https://acme.atlassian.net', space_key: 'ENG' } })
    assert.equal(wiki.config.max_attachment_mb, 10)

    let list = await (await svc.request(`/api/connectors?kb_id=${kb}&sort_by=name&sort_order=asc`)).json() as Json
    assert.deepEqual(list.items.map((x: Json) => x.name), ['Docs site', 'Repo', 'Wiki'])
    list = await (await svc.request(`/api/connectors?kb_id=${kb}&source_type=github`)).json() as Json
    assert.deepEqual(list.items.map((x: Json) => x.connector_id), [gh.connector_id])
    list = await (await svc.request(`/api/connectors?kb_id=${kb}&search=WIK`)).json() as Json
    assert.deepEqual(list.items.map((x: Json) => x.connector_id), [wiki.connector_id])
    assert.equal((await svc.request('/api/connectors?sort_by=color')).status, 422)
    assert.equal((await svc.request('/api/connectors?status=broken')).status, 422)

    let res = await svc.request(`/api/connectors/${c.connector_id}`, { method: 'PATCH', json: { name: 'Renamed', config: { seed_urls: [`${site.url}/docs`], depth: 3 }, sync_schedule: '*/15 * * * *', schedule_enabled: true } })
    assert.equal(res.status, 200)
    const patched = await res.json() as Json
    assert.equal(patched.name, 'Renamed')
    assert.equal(patched.config.depth, 3)
    assert.equal(patched.config.max_pages, 50, 'config is replaced whole: unspecified keys take their defaults')
    assert.equal(patched.sync_schedule, '*/15 * * * *')
    assert.equal(patched.kb_id, kb)
    const scheduler = svc.app.use<ConnectorsService>('connectors').scheduler
    assert.ok(scheduler.nextRun(c.connector_id), 'a schedule set by PATCH is registered at once')
    res = await svc.request(`/api/connectors/${c.connector_id}`, { method: 'PATCH', json: { sync_schedule: null } })
    assert.equal((await res.json() as Json).sync_schedule, null)
    assert.equal(scheduler.nextRun(c.connector_id), null, 'null removes the schedule at once')
    // kb_id and source_type cannot change.
    res = await svc.request(`/api/connectors/${c.connector_id}`, { method: 'PATCH', json: { kb_id: 'other', source_type: 'github' } })
    const after1 = await (await svc.request(`/api/connectors/${c.connector_id}`)).json() as Json
    assert.equal(after1.kb_id, kb)
    assert.equal(after1.source_type, 'web')

    res = await svc.request(`/api/connectors/${c.connector_id}`, { method: 'DELETE' })
    assert.equal(res.status, 202)
    assert.deepEqual(await res.json(), { connector_id: c.connector_id, status: 'deleting' })
    res = await svc.request(`/api/connectors/${c.connector_id}`)
    assert.equal(res.status, 404)
    assert.deepEqual(await res.json(), { detail: `Connector not found: ${c.connector_id}` })
    const spec = await (await svc.request('/openapi.json')).json() as Json
    for (const p of ['/api/connectors', '/api/connectors/{connector_id}', '/api/connectors/{connector_id}/sync', '/api/connectors/{connector_id}/sync/abort',
      '/api/connectors/{connector_id}/sync/reset', '/api/connectors/{connector_id}/sync/status', '/api/connectors/{connector_id}/docs']) {
      assert.ok(spec.paths[p], `${p} is in the API description`)
    }
    for (const [method, path] of [['GET', ''], ['PATCH', ''], ['DELETE', ''], ['POST', '/sync'], ['POST', '/sync/abort'], ['POST', '/sync/reset'], ['GET', '/sync/status'], ['GET', '/docs']]) {
      res = await svc.request(`/api/connectors/not-a-uuid${path}`, { method, ...(method === 'PATCH' ? { json: { name: 'x' } } : {}) })
      assert.equal(res.status, 404, `${method} ${path}`)
      assert.deepEqual(await res.json(), { detail: 'Connector not found: not-a-uuid' })
    }
  })

  it(`${label}: validates every config shape with the bounds of notes.md (422 naming the field)`, async () => {
    const kb = await newKb(svc)
    const post = (body: Json) => svc.request('/api/connectors', { method: 'POST', json: { kb_id: kb, name: 'x', ...body } })
    const web = (cfg: Json) => post({ source_type: 'web', config: { seed_urls: ['https://example.com/docs'], ...cfg } })
    const cases: [Json, (string | number)[]][] = [
      [{ depth: 11 }, ['body', 'config', 'depth']], [{ depth: -1 }, ['body', 'config', 'depth']],
      [{ max_pages: 0 }, ['body', 'config', 'max_pages']], [{ max_pages: 501 }, ['body', 'config', 'max_pages']],
      [{ request_timeout_sec: 0 }, ['body', 'config', 'request_timeout_sec']], [{ request_timeout_sec: 301 }, ['body', 'config', 'request_timeout_sec']],
      [{ request_delay_ms: 5001 }, ['body', 'config', 'request_delay_ms']], [{ min_content_chars: 10001 }, ['body', 'config', 'min_content_chars']],
      [{ seed_urls: [] }, ['body', 'config', 'seed_urls']], [{ seed_urls: ['ftp://example.com'] }, ['body', 'config', 'seed_urls', 0]],
      [{ depth: 'deep' }, ['body', 'config', 'depth']], [{ colour: 'blue' }, ['body', 'config', 'colour']],
      [{ auth_basic: { username: 'u' } }, ['body', 'config', 'auth_basic', 'password']],
    ]
    for (const [cfg, loc] of cases) {
      const res = await web(cfg)
      assert.equal(res.status, 422, JSON.stringify(cfg))
      const body = await res.json() as Json
      assert.ok(body.detail.some((d: Json) => JSON.stringify(d.loc) === JSON.stringify(loc)), `${JSON.stringify(cfg)} -> ${JSON.stringify(body.detail)}`)
    }
    for (const [cfg, loc] of [[{ repo: 'r' }, ['body', 'config', 'owner']], [{ owner: 'o', repo: 'r', max_files: 0 }, ['body', 'config', 'max_files']],
      [{ owner: 'o', repo: 'r', auth_token_secret: 'not a name' }, ['body', 'config', 'auth_token_secret']]] as [Json, string[]][]) {
      const res = await post({ source_type: 'github', config: cfg })
      assert.equal(res.status, 422)
      assert.ok(((await res.json()) as Json).detail.some((d: Json) => JSON.stringify(d.loc) === JSON.stringify(loc)))
    }
    let res = await post({ source_type: 'confluence', config: { base_url: 'https://wiki.example.com' } })
    assert.equal(res.status, 422)
    assert.deepEqual(((await res.json()) as Json).detail.map((d: Json) => d.loc), [['body', 'config', 'space_key']])
    res = await post({ source_type: 'ftp', config: {} })
    assert.equal(res.status, 422)
    res = await post({ source_type: 'web', config: { seed_urls: ['https://example.com'] }, sync_schedule: 'every day' })
    assert.equal(res.status, 422)
    let detail = ((await res.json()) as Json).detail
    assert.deepEqual(detail[0].loc, ['body', 'sync_schedule'])
    assert.match(detail[0].msg, /^Invalid cron expression 'every day'/)
    res = await post({ source_type: 'web', config: { seed_urls: ['https://example.com'] }, sync_schedule: '0 0 * * * *' })
    assert.equal(res.status, 422, 'six fields (seconds) are refused: spec 2.5 says 5-field')
    res = await post({ source_type: 'web', config: { seed_urls: ['https://example.com'] }, sync_schedule: '61 * * * *' })
    assert.equal(res.status, 422)
    res = await svc.request('/api/connectors', { method: 'POST', json: { kb_id: 'Bad KB', name: 'x', source_type: 'web', config: { seed_urls: ['https://example.com'] } } })
    assert.equal(res.status, 422)
    res = await svc.request('/api/connectors', { method: 'POST', json: { kb_id: 'absent-kb', name: 'x', source_type: 'web', config: { seed_urls: ['https://example.com'] } } })
    assert.equal(res.status, 404)
    res = await svc.request('/api/connectors', { method: 'POST', json: { kb_id: kb, source_type: 'web', config: { seed_urls: ['https://example.com'] } } })
    assert.equal(res.status, 422)
    detail = ((await res.json()) as Json).detail
    assert.deepEqual(detail[0].loc, ['body', 'name'])

    // Duplicate: same KB, source type and source (after URL normalisation); another KB may have it.
    await createConnector(svc, { kb_id: kb, name: 'one', source_type: 'web', config: { seed_urls: ['https://Example.com/docs/'] } })
    res = await post({ source_type: 'web', config: { seed_urls: ['https://example.com/docs#top'] } })
    assert.equal(res.status, 409)
    assert.deepEqual(await res.json(), { detail: `Connector already exists in KB: ${kb}` }, "the older service's text")
    await createConnector(svc, { kb_id: await newKb(svc), name: 'one', source_type: 'web', config: { seed_urls: ['https://example.com/docs'] } })
    await createConnector(svc, { kb_id: kb, name: 'gh', source_type: 'github', config: { owner: 'acme', repo: 'docs' } })
    res = await post({ source_type: 'github', config: { owner: 'ACME', repo: 'docs', branch: 'main' } })
    assert.equal(res.status, 409)
    const other = await createConnector(svc, { kb_id: kb, name: 'gh2', source_type: 'github', config: { owner: 'acme', repo: 'docs', branch: 'dev' } })
    res = await svc.request(`/api/connectors/${other.connector_id}`, { method: 'PATCH', json: { config: { owner: 'acme', repo: 'docs' } } })
    assert.equal(res.status, 409, 'a PATCH that makes a duplicate is refused too')
    assert.deepEqual(await res.json(), { detail: `Connector already exists in KB: ${kb}` })
    res = await svc.request(`/api/connectors/${other.connector_id}`, { method: 'PATCH', json: { status: 'error' } })
    assert.equal(res.status, 422, "status may only be set to 'active' or 'paused'")
  })

  it(`${label}: secrets: env:NAME kept, literals need CONNECTOR_SECRET_KEY, every secret masked, the mask keeps the stored value`, async () => {
    const kb = await newKb(svc)
    let res = await svc.request('/api/connectors', { method: 'POST', json: { kb_id: kb, name: 's', source_type: 'web', config: { seed_urls: [`${site.url}/members`], auth_basic: { username: 'reader', password: 'open-sesame' } } } })
    assert.equal(res.status, 422)
    const detail = ((await res.json()) as Json).detail
    assert.deepEqual(detail[0].loc, ['body', 'config', 'auth_basic', 'password'])
    assert.match(detail[0].msg, /CONNECTOR_SECRET_KEY/)
    assert.ok(!JSON.stringify(detail).includes('open-sesame'), 'the secret is not echoed')

    process.env.CONNECTOR_TEST_MEMBER_PASSWORD = 'open-sesame'
    process.env.CONNECTOR_TEST_HEADER = 'token-123'
    const c = await createConnector(svc, {
      kb_id: kb, name: 'members', source_type: 'web',
      config: { seed_urls: [`${site.url}/members`], auth_basic: { username: 'reader', password: 'env:CONNECTOR_TEST_MEMBER_PASSWORD' }, request_delay_ms: 0, skip_seed_pages: true },
    })
    assert.deepEqual(c.config.auth_basic, { username: 'reader', password: '********' })
    const listed = await (await svc.request(`/api/connectors?kb_id=${kb}`)).json() as Json
    assert.ok(!JSON.stringify(listed).includes('CONNECTOR_TEST_MEMBER_PASSWORD'))
    // Basic auth reaches the members area; the seed is used for links only.
    const st = await syncAndWait(svc, c.connector_id)
    assert.equal(st.last_error, null)
    const docs = await connectorDocs(svc, c.connector_id)
    assert.deepEqual(docs.map((d) => d.source), [`${site.url}/members/guide`])
    assert.ok(site.requests.some((r) => r.path === '/members/guide' && r.status === 200))

    // The mask sent back keeps the stored value; a new value replaces it.
    res = await svc.request(`/api/connectors/${c.connector_id}`, { method: 'PATCH', json: { config: { ...c.config, auth_headers: { 'X-Token': 'env:CONNECTOR_TEST_HEADER' } } } })
    assert.equal(res.status, 200)
    const p = await res.json() as Json
    assert.deepEqual(p.config.auth_headers, { 'X-Token': '********' })
    assert.deepEqual(p.config.auth_basic, { username: 'reader', password: '********' })
    const [row] = await svc.app.adapters.sql.query<{ config: Json }>('SELECT config FROM connectors WHERE connector_id = $1::uuid', [c.connector_id])
    assert.equal(row.config.auth_basic.password, 'env:CONNECTOR_TEST_MEMBER_PASSWORD')
    res = await svc.request(`/api/connectors/${c.connector_id}`, { method: 'PATCH', json: { config: { ...c.config, auth_headers: { 'X-Other': '********' } } } })
    assert.equal(res.status, 422, 'a mask under a name with nothing stored cannot keep anything')
  })

  it(`${label}: web sync: scope, robots.txt, redirects, seeds and pagination for links only, failures counted; statuses and counts`, async () => {
    const kb = await newKb(svc)
    const before = site.requests.length
    const c = await createConnector(svc, { kb_id: kb, name: 'site', source_type: 'web', config: webConfig(site) })
    const st = await syncAndWait(svc, c.connector_id)
    assert.equal(st.status, 'active')
    assert.equal(st.last_error, null)
    assert.ok(st.last_synced_at)
    assert.equal(st.last_sync.outcome, 'completed')
    assert.equal(st.last_sync.truncated, false)
    const docs = await connectorDocs(svc, c.connector_id)
    const sources = docs.map((d) => d.source).sort()
    const expected = [...Array.from({ length: 60 }, (_, i) => `${site.url}/docs/article/${i}`), `${site.url}/docs/moved`, `${site.url}/docs/slow`].sort()
    assert.deepEqual(sources, expected)
    // A manual sync stays running until what it queued is indexed: at idle, every document is settled.
    assert.equal(st.doc_counts.indexed, 62, JSON.stringify(st.doc_counts))
    assert.equal(st.doc_counts.total, 62)
    assert.match(st.last_sync.run_id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
    for (const d of docs) {
      assert.equal(d.source_type, 'web')
      assert.equal(d.connector_id, c.connector_id)
      assert.equal(d.run_id, st.last_sync.run_id, 'the run that fetched it')
      assert.equal(d.source_uri, d.source)
      assert.equal(d.status, 'indexed')
    }
    const a0 = docs.find((d) => d.source.endsWith('/article/0'))
    const a1 = docs.find((d) => d.source.endsWith('/article/1'))
    assert.match(a0.content_version, /^"a0-/, 'content_version is the ETag when the page has one')
    assert.match(a1.content_version, /^sha256:[0-9a-f]{64}$/, 'else a hash of the extracted text')
    assert.equal(a0.title, 'Open Graph 0')

    const mine = site.requests.slice(before)
    const paths = mine.map((r) => r.path)
    assert.ok(paths.includes('/robots.txt'))
    assert.ok(!paths.includes('/docs/private/secret'), 'robots.txt Disallow is honoured')
    assert.ok(!paths.some((p) => p.startsWith('/other')), 'links outside the seed scope are not followed')
    assert.equal(paths.filter((p) => p === '/docs/article/1').length, 1, 'a URL is fetched once (tracking parameters and fragments normalised away)')
    assert.ok(!paths.some((p) => p.includes('utm_')))
    assert.ok(paths.includes('/docs/broken') && paths.includes('/docs/binary') && paths.includes('/docs/short'))
    assert.ok(mine.every((r) => r.userAgent?.startsWith('Quarry-WebConnector/')))
    assert.ok(st.last_sync.failed >= 1, 'the 500 page is counted as failed')

    // Documents API and KB-wide filters see the connector's documents.
    const kbDocs = await (await svc.request(`/api/kb/${kb}/docs?source_type=web&page_size=1`)).json() as Json
    assert.equal(kbDocs.total, 62)
    assert.equal(kbDocs.items[0].run_id, st.last_sync.run_id)
    // An upload has no run.
    const form = new FormData()
    form.append('file', new Blob(['# Upload\n\nA document uploaded directly, beside the synced ones.']), 'upload.md')
    const up = await (await svc.request(`/api/kb/${kb}/docs/upload`, { method: 'POST', body: form })).json() as Json
    const upStatus = await (await svc.request(`/api/kb/${kb}/docs/${up.doc_id}/status`)).json() as Json
    assert.ok('run_id' in upStatus)
    assert.equal(upStatus.run_id, null)
    // The connector's documents come 10 to a page unless asked (the older service's default); a page_size above
    // 100 is clamped, not refused.
    let page = await (await svc.request(`/api/connectors/${c.connector_id}/docs`)).json() as Json
    assert.deepEqual([page.items.length, page.total, page.page, page.page_size], [10, 62, 1, 10])
    page = await (await svc.request(`/api/connectors/${c.connector_id}/docs?page=7`)).json() as Json
    assert.deepEqual([page.items.length, page.page], [2, 7])
    const wide = await svc.request(`/api/connectors/${c.connector_id}/docs?page_size=1000`)
    assert.equal(wide.status, 200)
    page = await wide.json() as Json
    assert.deepEqual([page.items.length, page.page_size], [62, 100])
  })

  it(`${label}: second sync of an unchanged site uses conditional requests and re-ingests nothing; changes re-ingest under the same doc_id; vanished pages are pruned`, async (t) => {
    const changing = await startWebSite({ articles: 30, perPage: 10, slowMs: 10 })
    t.after(() => changing.close())
    const kb = await newKb(svc)
    const c = await createConnector(svc, { kb_id: kb, name: 'site', source_type: 'web', config: webConfig(changing) })
    const st1 = await syncAndWait(svc, c.connector_id)
    const first = await connectorDocs(svc, c.connector_id)
    const byId = new Map(first.map((d) => [d.source, d]))
    assert.ok(first.every((d) => d.run_id === st1.last_sync.run_id))

    const before2 = changing.requests.length
    const st2 = await syncAndWait(svc, c.connector_id)
    assert.equal(st2.last_sync.stored, 0)
    assert.equal(st2.last_sync.pruned, 0)
    const second = changing.requests.slice(before2).filter((r) => r.path.startsWith('/docs/article/'))
    assert.equal(second.length, 30)
    assert.ok(second.every((r) => r.status === 304), 'every article answered 304 to the conditional request')
    assert.ok(second.filter((r) => r.ifNoneMatch).length === 15 && second.filter((r) => r.ifModifiedSince).length === 15)
    for (const d of await connectorDocs(svc, c.connector_id)) assert.equal(d.updated_at, byId.get(d.source).updated_at, `${d.source} untouched`)

    changing.setArticle(4, `${changing.articleText(4)} A new paragraph about incremental synchronisation was added to this article.`)
    changing.setArticle(5, `${changing.articleText(5)} Another new paragraph about last-modified validators.`)
    changing.removeArticle(7)
    const st3 = await syncAndWait(svc, c.connector_id)
    assert.equal(st3.last_sync.stored, 2)
    assert.equal(st3.last_sync.pruned, 1)
    const third = new Map((await connectorDocs(svc, c.connector_id, '&status=indexed')).map((d) => [d.source, d]))
    const a4 = third.get(`${changing.url}/docs/article/4`)
    assert.equal(a4.doc_id, byId.get(`${changing.url}/docs/article/4`).doc_id, 'same source: same doc_id')
    assert.notEqual(st3.last_sync.run_id, st1.last_sync.run_id)
    assert.equal(a4.run_id, st3.last_sync.run_id, 'a changed page: the run that fetched its new content')
    assert.equal(third.get(`${changing.url}/docs/article/6`).run_id, st1.last_sync.run_id, 'an unchanged page keeps the run that fetched it')
    assert.notEqual(a4.content_version, byId.get(`${changing.url}/docs/article/4`).content_version)
    assert.notEqual(third.get(`${changing.url}/docs/article/5`).content_version, byId.get(`${changing.url}/docs/article/5`).content_version)
    const deleted = await connectorDocs(svc, c.connector_id, '&status=deleted')
    assert.deepEqual(deleted.map((d) => d.source), [`${changing.url}/docs/article/7`], 'the vanished page is soft-deleted')
    assert.equal(st3.doc_counts.deleted, 1)
  })

  it(`${label}: depth, include/exclude patterns, min_content_chars, max_pages (no pruning after a cut run)`, async () => {
    const kb = await newKb(svc)
    const d0 = await createConnector(svc, { kb_id: kb, name: 'depth0', source_type: 'web', config: webConfig(site, { seed_urls: [`${site.url}/docs/article/3`], depth: 0, skip_seed_pages: false }) })
    await syncAndWait(svc, d0.connector_id)
    assert.deepEqual((await connectorDocs(svc, d0.connector_id)).map((d) => d.source), [`${site.url}/docs/article/3`], 'depth 0: the seed only')

    // Each connector in a KB of its own: one seed per KB is the duplicate rule.
    const pat = await createConnector(svc, {
      kb_id: await newKb(svc), name: 'patterns', source_type: 'web',
      config: webConfig(site, { include_patterns: ['*/docs/page/*', '*/docs/article/1?'], exclude_patterns: ['*/article/15'], min_content_chars: 0 }),
    })
    await syncAndWait(svc, pat.connector_id)
    const got = (await connectorDocs(svc, pat.connector_id)).map((d) => d.source.replace(site.url, '')).sort()
    assert.deepEqual(got, ['10', '11', '12', '13', '14', '16', '17', '18', '19'].map((n) => `/docs/article/${n}`).sort())

    const big = await createConnector(svc, { kb_id: await newKb(svc), name: 'minchars', source_type: 'web', config: webConfig(site, { seed_urls: [`${site.url}/docs/article/3`], depth: 0, skip_seed_pages: false, min_content_chars: 5000 }) })
    const stBig = await syncAndWait(svc, big.connector_id)
    assert.equal(stBig.doc_counts.total, 0, 'below min_content_chars: not stored')

    const cut = await createConnector(svc, { kb_id: await newKb(svc), name: 'cut', source_type: 'web', config: webConfig(site, { max_pages: 12 }) })
    const st = await syncAndWait(svc, cut.connector_id)
    assert.equal(st.last_sync.truncated, true)
    assert.ok(st.last_sync.fetched + st.last_sync.failed <= 12, 'max_pages counts every page processed')
    const docsBefore = await connectorDocs(svc, cut.connector_id)
    assert.ok(docsBefore.length > 0)
    // A later cut run that reaches other pages must not prune the earlier ones.
    await svc.request(`/api/connectors/${cut.connector_id}`, { method: 'PATCH', json: { config: webConfig(site, { max_pages: 3 }) } })
    const st2 = await syncAndWait(svc, cut.connector_id)
    assert.equal(st2.last_sync.pruned, 0)
    assert.equal((await connectorDocs(svc, cut.connector_id, '&status=deleted')).length, 0)
  })

  it(`${label}: sync state machine of spec 3.3: 409s, paused, errors, retry, 30-minute window, reset, delete while running`, async () => {
    const kb = await newKb(svc)
    const c = await createConnector(svc, { kb_id: kb, name: 'sm', source_type: 'web', config: webConfig(site, { seed_urls: [`${site.url}/docs/article/1`], depth: 0, skip_seed_pages: false }) })
    const id = c.connector_id
    let res = await svc.request(`/api/connectors/${id}/sync/abort`, { method: 'POST' })
    assert.equal(res.status, 409)
    assert.deepEqual(await res.json(), { detail: `No sync in progress: ${id}` })

    // paused: manual sync refused; PATCH back to active works and clears last_error.
    res = await svc.request(`/api/connectors/${id}`, { method: 'PATCH', json: { status: 'paused' } })
    assert.equal(((await res.json()) as Json).status, 'paused')
    res = await svc.request(`/api/connectors/${id}/sync`, { method: 'POST' })
    assert.equal(res.status, 409)
    assert.deepEqual(await res.json(), { detail: `Connector is paused: ${id}` })
    await svc.request(`/api/connectors/${id}`, { method: 'PATCH', json: { status: 'active' } })

    // running: a second sync inside the window is refused; delete is refused; the KB cannot be deleted.
    const release = site.hold()
    try {
      res = await svc.request(`/api/connectors/${id}/sync`, { method: 'POST' })
      assert.equal(res.status, 202)
      const running = await syncStatus(svc, id)
      assert.equal(running.sync_status, 'running')
      assert.ok(running.sync_started_at)
      res = await svc.request(`/api/connectors/${id}/sync`, { method: 'POST' })
      assert.equal(res.status, 409)
      assert.deepEqual(await res.json(), { detail: `Sync already in progress: ${id}` })
      res = await svc.request(`/api/connectors/${id}`, { method: 'DELETE' })
      assert.equal(res.status, 409)
      assert.deepEqual(await res.json(), { detail: `Cannot delete connector while sync is running: ${id}` })
      await assert.rejects(svc.app.use<ConnectorsService>('connectors').kbDeleteGuard(kb, svc.app.adapters.sql), (err: Error) => {
        assert.equal(err.message, `Cannot delete KB while connector sync is running: kb_id=${kb} connectors=['${id}']`)
        return true
      })
      // 30 minutes later the run counts as dead: a new sync takes over (and the old run can no longer write).
      await svc.app.adapters.sql.query(`UPDATE connectors SET sync_started_at = now() - interval '31 minutes' WHERE connector_id = $1::uuid`, [id])
      res = await svc.request(`/api/connectors/${id}/sync`, { method: 'POST' })
      assert.equal(res.status, 202)
    } finally {
      release()
    }
    let st = await waitIdle(svc, id)
    assert.equal(st.status, 'active')
    // The superseded run stops quietly: the page one of the two runs stored is indexed, not failed.
    await waitFor(async () => (await syncStatus(svc, id)).doc_counts.indexed === 1, 'the page indexed').catch(async (err) => {
      throw new Error(`${err.message}: ${JSON.stringify(await syncStatus(svc, id))} ${JSON.stringify((await connectorDocs(svc, id)).map((d) => [d.status, d.last_error]))}`)
    })
    await svc.app.use<ConnectorsService>('connectors').kbDeleteGuard(kb, svc.app.adapters.sql)

    // A failing sync sets status error with last_error; a later successful one restores active.
    const down = await startWebSite({ articles: 1 })
    const downUrl = down.url
    await down.close()
    res = await svc.request(`/api/connectors/${id}`, { method: 'PATCH', json: { config: { seed_urls: [`${downUrl}/docs`], request_delay_ms: 0, request_timeout_sec: 2 } } })
    assert.equal(res.status, 200)
    st = await syncAndWait(svc, id)
    assert.equal(st.status, 'error')
    assert.match(st.last_error, /^No seed URL could be fetched/)
    assert.ok(st.last_error.length <= 500)
    assert.equal(st.last_sync.outcome, 'failed')
    assert.equal(st.last_sync.pruned, 0, 'a failed sync prunes nothing')
    assert.equal((await connectorDocs(svc, id)).length, 1)
    await svc.request(`/api/connectors/${id}`, { method: 'PATCH', json: { config: webConfig(site, { seed_urls: [`${site.url}/docs/article/1`], depth: 0, skip_seed_pages: false }) } })
    st = await syncAndWait(svc, id)
    assert.equal(st.status, 'active')
    assert.equal(st.last_error, null)

    // PATCH status clears last_error; reset answers the older service's shape.
    await svc.app.adapters.sql.query(`UPDATE connectors SET status = 'error', last_error = 'boom' WHERE connector_id = $1::uuid`, [id])
    res = await svc.request(`/api/connectors/${id}`, { method: 'PATCH', json: { status: 'active' } })
    assert.equal(((await res.json()) as Json).last_error, null)
    await svc.app.adapters.sql.query(`UPDATE connectors SET sync_status = 'running', sync_started_at = now() WHERE connector_id = $1::uuid`, [id])
    res = await svc.request(`/api/connectors/${id}/sync/reset`, { method: 'POST' })
    assert.equal(res.status, 200)
    assert.deepEqual(await res.json(), { connector_id: id, sync_status: 'idle' })

    // Delete: the connector and every document it collected go; a directly uploaded document stays.
    const form = new FormData()
    form.append('file', new Blob(['# Kept\n\nThis document was uploaded directly and belongs to no connector at all.']), 'kept.md')
    assert.equal((await svc.request(`/api/kb/${kb}/docs/upload`, { method: 'POST', body: form })).status, 202)
    res = await svc.request(`/api/connectors/${id}`, { method: 'DELETE' })
    assert.equal(res.status, 202)
    await waitFor(async () => {
      const rows = await svc.app.adapters.sql.query('SELECT 1 FROM documents WHERE connector_id = $1::uuid', [id])
      return rows.length === 0
    }, 'connector documents removed')
    const left = await (await svc.request(`/api/kb/${kb}/docs`)).json() as Json
    assert.deepEqual(left.items.map((d: Json) => d.source), ['kept.md'])
  })

  it(`${label}: DELETE /api/kb/{kb} while one of its connectors syncs answers 409`, async () => {
    const kb = await newKb(svc)
    const c = await createConnector(svc, { kb_id: kb, name: 'guard', source_type: 'web', config: webConfig(site, { seed_urls: [`${site.url}/docs/article/9`], depth: 0, skip_seed_pages: false }) })
    const release = site.hold()
    try {
      assert.equal((await svc.request(`/api/connectors/${c.connector_id}/sync`, { method: 'POST' })).status, 202)
      const res = await svc.request(`/api/kb/${kb}`, { method: 'DELETE' })
      assert.equal(res.status, 409)
      assert.deepEqual(await res.json(), { detail: `Cannot delete KB while connector sync is running: kb_id=${kb} connectors=['${c.connector_id}']` })
    } finally {
      release()
    }
    await waitIdle(svc, c.connector_id)
    // Once idle, the delete (guard and row in one transaction) goes through and takes the connector with it.
    assert.equal((await svc.request(`/api/kb/${kb}`, { method: 'DELETE' })).status, 200)
    assert.equal((await svc.request(`/api/connectors/${c.connector_id}`)).status, 404)
  })

  it(`${label}: abort mid-sync: idle at once, pending and running documents failed 'Aborted', no new requests; error stays error`, async () => {
    const kb = await newKb(svc)
    const c = await createConnector(svc, { kb_id: kb, name: 'abort', source_type: 'web', config: webConfig(site) })
    const id = c.connector_id
    await svc.app.adapters.sql.query(`UPDATE connectors SET status = 'error', last_error = 'earlier failure' WHERE connector_id = $1::uuid`, [id])
    const release = site.hold()
    const start = site.requests.length
    let res = await svc.request(`/api/connectors/${id}/sync`, { method: 'POST' })
    assert.equal(res.status, 202)
    // The crawl reaches the articles (held by the site): some documents are stored and queued before that.
    await waitFor(async () => (await syncStatus(svc, id)).doc_counts.total > 0, 'documents stored')
    await new Promise((r) => setTimeout(r, 200))
    res = await svc.request(`/api/connectors/${id}/sync/abort`, { method: 'POST' })
    assert.equal(res.status, 202)
    assert.deepEqual(await res.json(), { connector_id: id, status: 'abort_requested' })
    const abortedAt = Date.now()
    const st = await syncStatus(svc, id)
    assert.equal(st.sync_status, 'idle', 'idle immediately')
    release()
    await new Promise((r) => setTimeout(r, 500))
    const docs = await connectorDocs(svc, id)
    for (const d of docs) {
      assert.ok(!['pending', 'running', 'fetching'].includes(d.status), `${d.source} is ${d.status}`)
      if (d.status === 'failed') assert.equal(d.last_error, 'Aborted')
    }
    const later = site.requests.slice(start).filter((r) => r.at > abortedAt + 50)
    assert.deepEqual(later.map((r) => r.path), [], 'no source request starts after the abort')
    const final = await waitFor(async () => {
      const s = await syncStatus(svc, id)
      return s.last_sync?.outcome === 'aborted' && s
    }, 'the aborted run recorded')
    assert.equal(final.status, 'error', 'spec 3.3: an aborted sync leaves error as it is')
    assert.equal(final.last_error, 'earlier failure')
  })

  it(`${label}: schedules: a firing is claimed once by its run key; schedule_enabled false and paused skip it`, async () => {
    const kb = await newKb(svc)
    const service = svc.app.use<ConnectorsService>('connectors')
    const c = await createConnector(svc, { kb_id: kb, name: 'sched', source_type: 'web', sync_schedule: '*/5 * * * *', schedule_enabled: true, config: webConfig(site, { seed_urls: [`${site.url}/docs/article/2`], depth: 0, skip_seed_pages: false }) })
    const next = service.scheduler.nextRun(c.connector_id)
    assert.ok(next && next.getTime() > Date.now() && next.getUTCMinutes() % 5 === 0 && next.getUTCSeconds() === 0, 'croner in UTC, 5-minute steps')
    const at = new Date(Date.UTC(2026, 0, 1, 3, 5))
    assert.equal(await service.fireSchedule(c.connector_id, at), 'started')
    assert.equal(await service.fireSchedule(c.connector_id, at), 'claimed_elsewhere', 'the same scheduled time runs once')
    let st = await waitIdle(svc, c.connector_id)
    assert.equal(st.last_sync.trigger, 'schedule')
    await svc.request(`/api/connectors/${c.connector_id}`, { method: 'PATCH', json: { schedule_enabled: false } })
    assert.equal(await service.fireSchedule(c.connector_id, new Date(Date.UTC(2026, 0, 1, 3, 10))), 'skipped')
    await svc.request(`/api/connectors/${c.connector_id}`, { method: 'PATCH', json: { schedule_enabled: true, status: 'paused' } })
    assert.equal(await service.fireSchedule(c.connector_id, new Date(Date.UTC(2026, 0, 1, 3, 15))), 'skipped')
    st = await syncStatus(svc, c.connector_id)
    assert.equal(st.sync_status, 'idle')
    // POST sync works regardless of schedule settings (but not while paused).
    await svc.request(`/api/connectors/${c.connector_id}`, { method: 'PATCH', json: { schedule_enabled: false, status: 'active' } })
    st = await syncAndWait(svc, c.connector_id)
    assert.equal(st.last_sync.trigger, 'manual')
  })
}
