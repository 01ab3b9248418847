// Connector hardening after review (spec 4.8, 4.9, notes.md "Connectors (decisions)"): "directory" URLs and
// redirects, redirects out of scope that must not prune, robots.txt redirects and auth, which environment
// variables a connector may read, the mask after a change of target, a run that fails before its source
// starts, Confluence attachment names and links, connector titles and types kept by the pipeline, and KB
// delete against sync start.
import { after, before, it } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, uniqueId, type StartOptions, type StartedApp } from '../../helpers/app.ts'
import { startConfluenceServer, type WikiPage } from '../../helpers/confluence-server.ts'
import { startGithubServer } from '../../helpers/github-server.ts'
import { waitFor } from '../../helpers/wait.ts'
import { startWebSite } from '../../helpers/web-site.ts'
import type { KbService } from '../../../plugins/kb/service.ts'
import type { ConnectorsService } from '../../../plugins/connectors/service.ts'
import { CONNECTOR_TEST_SETTINGS, connectorDocs, createConnector, newKb, syncAndWait, syncStatus } from './connectors.suite.ts'

type Json = any

export function hardeningSuite(label: string, opts: StartOptions & { pgLocks?: boolean }): void {
  let svc: StartedApp
  const cleanups: (() => unknown)[] = []
  before(async () => {
    svc = await startApp({ after: (fn: () => unknown) => void cleanups.push(fn) }, { ...opts, settings: { ...CONNECTOR_TEST_SETTINGS, ...opts.settings } })
  })
  after(async () => {
    for (const c of cleanups) await c()
  })

  const site = async (t: { after(fn: () => unknown): void }, articles = 3) => {
    const s = await startWebSite({ articles, slowMs: 10 })
    t.after(() => s.close())
    return s
  }

  it(`${label}: web: a page answering 301 to its trailing-slash form is crawled (the seed too), relative links resolve against the slash, titles follow notes.md`, async (t) => {
    const s = await site(t)
    const c = await createConnector(svc, { kb_id: await newKb(svc), name: 'dir', source_type: 'web', config: { seed_urls: [`${s.url}/guide`], depth: 2, request_delay_ms: 0, skip_seed_pages: false } })
    const st = await syncAndWait(svc, c.connector_id)
    assert.equal(st.last_error, null)
    const docs = await connectorDocs(svc, c.connector_id)
    assert.deepEqual(docs.map((d) => d.source).sort(), [`${s.url}/guide`, `${s.url}/guide/intro`])
    assert.ok(s.requests.some((r) => r.path === '/guide/intro/' && r.status === 200), 'intro/ on /guide/ is /guide/intro/')
    assert.ok(!s.requests.some((r) => r.path.startsWith('/intro')))
    // notes.md: og:title, then h1, then <title> (the page's <title> is 'Intro', its h1 'Introduction'); indexing keeps it.
    await waitFor(async () => (await syncStatus(svc, c.connector_id)).doc_counts.indexed === 2, 'both indexed')
    const intro = (await connectorDocs(svc, c.connector_id)).find((d) => d.source.endsWith('/intro'))
    assert.equal(intro.title, 'Introduction')
    // The next run finds the same pages: nothing pruned.
    const st2 = await syncAndWait(svc, c.connector_id)
    assert.equal(st2.last_error, null)
    assert.equal(st2.last_sync.pruned, 0)
    assert.equal(st2.doc_counts.deleted, 0)
  })

  it(`${label}: web: pages redirected out of scope (an expired login) fail and keep their documents; a seed sent away fails the sync`, async (t) => {
    const s = await site(t)
    const crawl = await createConnector(svc, { kb_id: await newKb(svc), name: 'crawl', source_type: 'web', config: { seed_urls: [`${s.url}/docs`], depth: 3, max_pages: 100, request_delay_ms: 0 } })
    const seed = await createConnector(svc, { kb_id: await newKb(svc), name: 'seed', source_type: 'web', config: { seed_urls: [`${s.url}/docs/article/0`], depth: 0, request_delay_ms: 0, skip_seed_pages: false } })
    await syncAndWait(svc, crawl.connector_id)
    await syncAndWait(svc, seed.connector_id)
    const articles = (await connectorDocs(svc, crawl.connector_id)).filter((d) => d.source.includes('/docs/article/'))
    assert.equal(articles.length, 3)
    assert.equal((await connectorDocs(svc, seed.connector_id)).length, 1)

    s.redirectArticles('/login?next=/docs')
    const st = await syncAndWait(svc, crawl.connector_id)
    assert.equal(st.last_error, null, 'the seed itself answered')
    assert.ok(st.last_sync.failed >= 3, JSON.stringify(st.last_sync))
    assert.equal(st.last_sync.pruned, 0)
    assert.equal(st.doc_counts.deleted, 0)
    assert.ok(!s.requests.some((r) => r.path.startsWith('/login')), 'out of scope: never requested')
    const st2 = await syncAndWait(svc, seed.connector_id)
    assert.equal(st2.status, 'error')
    assert.match(st2.last_error, /^No seed URL could be fetched \(.*redirect out of scope\)$/)
    assert.equal(st2.doc_counts.deleted, 0)
  })

  it(`${label}: web: a page nested thousands of elements deep fails before any DOM is built; the other pages are stored`, async (t) => {
    const s = await site(t)
    s.setArticle(1, `${'<div>'.repeat(5000)}deep${'</div>'.repeat(5000)}`)
    const c = await createConnector(svc, { kb_id: await newKb(svc), name: 'deep', source_type: 'web', config: { seed_urls: [`${s.url}/docs`], depth: 3, max_pages: 100, request_delay_ms: 0 } })
    const st = await syncAndWait(svc, c.connector_id)
    assert.equal(st.last_error, null)
    assert.ok(st.last_sync.failed >= 1, JSON.stringify(st.last_sync))
    const sources = (await connectorDocs(svc, c.connector_id)).map((d) => d.source)
    assert.ok(sources.includes(`${s.url}/docs/article/0`) && sources.includes(`${s.url}/docs/article/2`), sources.join(' '))
    assert.ok(!sources.includes(`${s.url}/docs/article/1`), 'the deep page is not stored')
  })

  it(`${label}: web: robots.txt redirects are followed by hand on its origin only; the auth headers never go to another host`, async (t) => {
    const s = await site(t, 2)
    const elsewhere = await site(t, 1)
    process.env.CONNECTOR_TEST_ROBOTS_TOKEN = 'robots-token'
    const c = await createConnector(svc, {
      kb_id: await newKb(svc), name: 'robots', source_type: 'web',
      config: { seed_urls: [`${s.url}/docs`], depth: 2, request_delay_ms: 0, auth_headers: { 'X-Token': 'env:CONNECTOR_TEST_ROBOTS_TOKEN' } },
    })
    s.moveRobots('/robots-moved.txt')
    await syncAndWait(svc, c.connector_id)
    assert.ok(s.requests.some((r) => r.path === '/robots-moved.txt' && r.status === 200))
    assert.ok(!s.requests.some((r) => r.path.startsWith('/docs/private/')), 'the rules found at the moved address apply')

    s.moveRobots(`${elsewhere.url}/robots.txt`)
    const st = await syncAndWait(svc, c.connector_id)
    assert.equal(st.last_error, null)
    assert.equal(elsewhere.requests.length, 0, 'no request (so no X-Token) reached the other host')
  })

  it(`${label}: credentials come only from variables connectors.secret_env_names admits, never the service's own (422 naming the field, and at sync time)`, async (t) => {
    const s = await site(t, 1)
    const kb = await newKb(svc)
    const web = (extra: Json) => ({ seed_urls: [`${s.url}/members`], request_delay_ms: 0, ...extra })
    const refused: [string, Json, (string | number)[]][] = [
      ['web', web({ auth_headers: { Authorization: 'env:S3_SECRET_KEY' } }), ['body', 'config', 'auth_headers', 'Authorization']],
      ['web', web({ auth_basic: { username: 'u', password: 'env:POSTGRES_PASSWORD' } }), ['body', 'config', 'auth_basic', 'password']],
      ['web', web({ auth_headers: { 'X-Key': 'env:CONNECTOR_SECRET_KEY' } }), ['body', 'config', 'auth_headers', 'X-Key']],
      ['web', web({ auth_headers: { 'X-Key': 'env:HOME' } }), ['body', 'config', 'auth_headers', 'X-Key']],
      ['web', web({ auth_headers: { 'X-Key': 'env:GITHUB_TOKENS' } }), ['body', 'config', 'auth_headers', 'X-Key']],
      ['github', { owner: 'acme', repo: 'r3', api_url: s.url, auth_token_secret: 'PGPASSWORD' }, ['body', 'config', 'auth_token_secret']],
      ['github', { owner: 'acme', repo: 'r', api_url: s.url, auth_token_secret: 'REDIS_PASSWORD' }, ['body', 'config', 'auth_token_secret']],
      ['github', { owner: 'acme', repo: 'r2', api_url: s.url, auth_token_secret: 'CONNECTOR_SECRET_KEY' }, ['body', 'config', 'auth_token_secret']],
      ['confluence', { base_url: s.url, space_key: 'ENG', auth_token_secret: 'PATH' }, ['body', 'config', 'auth_token_secret']],
    ]
    for (const [type, config, loc] of refused) {
      const res = await svc.request('/api/connectors', { method: 'POST', json: { kb_id: kb, name: 'x', source_type: type, config } })
      const body = await res.json() as Json
      assert.equal(res.status, 422, JSON.stringify(config))
      assert.deepEqual(body.detail[0].loc, loc)
      assert.equal(body.detail[0].type, 'env_name_not_allowed')
    }
    // On a PATCH too.
    const gh = await createConnector(svc, { kb_id: kb, name: 'gh', source_type: 'github', config: { owner: 'acme', repo: 'ok', api_url: s.url, auth_token_secret: 'CONNECTOR_TEST_GH' } })
    const res = await svc.request(`/api/connectors/${gh.connector_id}`, { method: 'PATCH', json: { config: { ...gh.config, auth_token_secret: 'S3_SECRET_KEY' } } })
    assert.equal(res.status, 422)

    // A config stored before the rule: the sync refuses it before any request.
    process.env.CONNECTOR_TEST_MEMBER_PASSWORD = 'open-sesame'
    const c = await createConnector(svc, { kb_id: kb, name: 'members', source_type: 'web', config: web({ auth_basic: { username: 'reader', password: 'env:CONNECTOR_TEST_MEMBER_PASSWORD' } }) })
    await svc.app.adapters.sql.query(`UPDATE connectors SET config = jsonb_set(config, '{auth_basic,password}', '"env:POSTGRES_PASSWORD"') WHERE connector_id = $1::uuid`, [c.connector_id])
    const before = s.requests.length
    const st = await syncAndWait(svc, c.connector_id)
    assert.equal(st.status, 'error')
    assert.match(st.last_error, /POSTGRES_PASSWORD is read by the service itself/)
    assert.equal(s.requests.length, before)
  })

  it(`${label}: the older service's GITHUB_TOKEN and CONFLUENCE_* work by default (the sync sends the token); a custom connectors.secret_env_names admits exactly what it names`, async (t) => {
    const gh = await startGithubServer({ files: { 'README.md': '# Handbook\n\nHow the team works, written down at some length.\n' }, token: 'ghp_from_the_environment' })
    t.after(() => gh.close())
    const saved = { GITHUB_TOKEN: process.env.GITHUB_TOKEN, ACME_1_TOKEN: process.env.ACME_1_TOKEN }
    t.after(() => {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k]
        else process.env[k] = v
      }
    })
    process.env.GITHUB_TOKEN = 'ghp_from_the_environment'
    const kb = await newKb(svc)
    // The older service's setup script, unchanged.
    const c = await createConnector(svc, { kb_id: kb, name: 'handbook', source_type: 'github', config: { owner: 'acme', repo: 'handbook', api_url: gh.url, auth_token_secret: 'GITHUB_TOKEN', request_delay_ms: 0 } })
    assert.equal(c.config.auth_token_secret, 'GITHUB_TOKEN')
    const st = await syncAndWait(svc, c.connector_id)
    assert.equal(st.last_error, null)
    assert.equal(st.doc_counts.indexed, 1)
    assert.ok(gh.requests.length > 0 && gh.requests.every((r) => r.authorization === 'Bearer ghp_from_the_environment'))
    await createConnector(svc, { kb_id: kb, name: 'wiki', source_type: 'confluence', config: { base_url: gh.url, space_key: 'ENG', auth_token_secret: 'CONFLUENCE_API_TOKEN' } })
    const post = (name: string, repo: string) =>
      svc.request('/api/connectors', { method: 'POST', json: { kb_id: kb, name: 'x', source_type: 'github', config: { owner: 'acme', repo, api_url: gh.url, auth_token_secret: name } } })
    for (const name of ['POSTGRES_PASSWORD', 'ACME_1_TOKEN']) {
      const res = await post(name, `refused-${name}`)
      assert.equal(res.status, 422, name)
      const body = await res.json() as Json
      assert.deepEqual(body.detail[0].loc, ['body', 'config', 'auth_token_secret'])
      assert.match(body.detail[0].msg, name === 'POSTGRES_PASSWORD' ? /read by the service itself/ : /connectors\.secret_env_names \(CONNECTOR_\*, GITHUB_TOKEN, CONFLUENCE_\*\)/)
    }

    // An operator's own list: a glob that would admit a service variable still does not.
    const custom = await startApp(t, { ...opts, settings: { ...CONNECTOR_TEST_SETTINGS, ...opts.settings, connectors: { ...CONNECTOR_TEST_SETTINGS.connectors, secret_env_names: ['ACME_?_TOKEN', 'POSTGRES_*'] } } })
    const customKb = uniqueId()
    assert.equal((await custom.request('/api/kb', { method: 'POST', json: { kb_id: customKb } })).status, 201)
    const admitted: string[] = []
    for (const name of ['ACME_1_TOKEN', 'ACME_X_TOKEN', 'ACME_12_TOKEN', 'acme_1_token', 'POSTGRES_TOKEN', 'POSTGRES_PASSWORD', 'GITHUB_TOKEN', 'CONNECTOR_GH', 'CONFLUENCE_API_TOKEN']) {
      const res = await custom.request('/api/connectors', { method: 'POST', json: { kb_id: customKb, name, source_type: 'github', config: { owner: 'acme', repo: name === 'ACME_1_TOKEN' ? 'handbook' : name, api_url: gh.url, auth_token_secret: name, request_delay_ms: 0 } } })
      assert.ok(res.status === 201 || res.status === 422, `${name}: ${res.status}`)
      if (res.status === 201) admitted.push(name)
    }
    assert.deepEqual(admitted, ['ACME_1_TOKEN', 'ACME_X_TOKEN', 'POSTGRES_TOKEN'])
    // And at sync time: the variable is read through the same list.
    process.env.ACME_1_TOKEN = 'ghp_from_the_environment'
    const listed = await (await custom.request(`/api/connectors?kb_id=${customKb}&search=ACME_1_TOKEN`)).json() as Json
    const st2 = await syncAndWait(custom, listed.items[0].connector_id)
    assert.equal(st2.last_error, null)
    assert.equal(st2.doc_counts.indexed, 1)
  })

  it(`${label}: the mask cannot keep a secret once the config sends it to a new origin (seed URLs)`, async (t) => {
    const s = await site(t, 1)
    process.env.CONNECTOR_TEST_MEMBER_PASSWORD = 'open-sesame'
    const c = await createConnector(svc, {
      kb_id: await newKb(svc), name: 'm', source_type: 'web',
      config: { seed_urls: [`${s.url}/members`], auth_basic: { username: 'reader', password: 'env:CONNECTOR_TEST_MEMBER_PASSWORD' }, auth_headers: {} },
    })
    const patch = (config: Json) => svc.request(`/api/connectors/${c.connector_id}`, { method: 'PATCH', json: { config } })
    // Same origin, another path: the mask keeps the stored value.
    let res = await patch({ ...c.config, seed_urls: [`${s.url}/members/guide`] })
    assert.equal(res.status, 200)
    // Another origin (or one more): refused, naming the field.
    for (const seeds of [['http://attacker.invalid/'], [`${s.url}/members`, 'http://attacker.invalid/']]) {
      res = await patch({ ...c.config, seed_urls: seeds })
      const body = await res.json() as Json
      assert.equal(res.status, 422)
      assert.deepEqual(body.detail[0].loc, ['body', 'config', 'auth_basic', 'password'])
      assert.match(body.detail[0].msg, /re-enter the secret when the source changes/)
    }
    // Re-entered: accepted.
    res = await patch({ ...c.config, seed_urls: ['http://attacker.invalid/'], auth_basic: { username: 'reader', password: 'env:CONNECTOR_TEST_MEMBER_PASSWORD' } })
    assert.equal(res.status, 200)
    const [row] = await svc.app.adapters.sql.query<{ config: Json }>('SELECT config FROM connectors WHERE connector_id = $1::uuid', [c.connector_id])
    assert.equal(row.config.auth_basic.password, 'env:CONNECTOR_TEST_MEMBER_PASSWORD')
  })

  it(`${label}: a run that fails before its source starts ends idle with the error, and frees its slot`, async (t) => {
    const s = await site(t, 1)
    const service = svc.app.use<ConnectorsService>('connectors')
    const c = await createConnector(svc, { kb_id: await newKb(svc), name: 'early', source_type: 'web', config: { seed_urls: [`${s.url}/docs`], request_delay_ms: 0 } })
    // The run is claimed here, not by the consumer: its row names a KB that does not exist, so reading the
    // KB's settings (the run's first step) fails.
    const runId = crypto.randomUUID()
    assert.ok(await service.repo.startSync(c.connector_id, runId))
    const claimed = await service.repo.claim(c.connector_id, runId, 'test')
    assert.ok(claimed)
    await service.engine.run({ ...claimed, kb_id: 'no-such-kb' }, runId, 'manual')
    assert.equal(service.engine.isRunningHere(c.connector_id), false)
    const st = await syncStatus(svc, c.connector_id)
    assert.equal(st.sync_status, 'idle')
    assert.equal(st.status, 'error')
    assert.equal(st.last_error, 'Sync failed: KB not found: no-such-kb')
    assert.equal(st.last_sync.outcome, 'failed')
  })

  it(`${label}: confluence: attachment titles are reduced to a file name; download links off the site are never requested`, async (t) => {
    process.env.CONNECTOR_TEST_WIKI_TOKEN = 'wiki-token'
    const elsewhere = await startConfluenceServer({ pages: [] })
    t.after(() => elsewhere.close())
    const pages: WikiPage[] = [{
      id: '2000', title: 'Handbook', html: '<p>The handbook page describes the on-call rotation, escalation paths and paging rules.</p>',
      attachments: [
        { title: '../../escape.md', body: '# Escape\n\nAn attachment whose title tries to leave the object key of its document.', mediaType: 'text/markdown' },
        { title: 'stolen.md', body: '# Stolen\n\nNever downloaded.', mediaType: 'text/markdown', download: `${elsewhere.url}/download/attachments/2000/stolen.md` },
      ],
    }]
    const wiki = await startConfluenceServer({ pages, authorization: 'Bearer wiki-token' })
    t.after(() => wiki.close())
    const c = await createConnector(svc, { kb_id: await newKb(svc), name: 'wiki', source_type: 'confluence', config: { base_url: wiki.url, space_key: 'ENG', auth_token_secret: 'CONNECTOR_TEST_WIKI_TOKEN', request_delay_ms: 0 } })
    const st = await syncAndWait(svc, c.connector_id)
    assert.equal(st.last_error, null)
    assert.equal(st.last_sync.failed, 1, 'the off-site attachment')
    assert.equal(elsewhere.requests.length, 0, 'the credential never went to the other host')
    await waitFor(async () => (await syncStatus(svc, c.connector_id)).doc_counts.indexed === 2, 'page and attachment indexed')
    const att = (await connectorDocs(svc, c.connector_id)).find((d) => d.source.includes('/download/'))
    assert.equal(att.storage_key, `${att.kb_id}/${att.doc_id}-escape.md`)
    assert.equal(att.title, 'escape')
  })

  it(`${label}: github: a source file keeps doc_type code after a reindex`, async (t) => {
    const gh = await startGithubServer({ files: { 'src/app.ts': Array.from({ length: 6 }, (_, i) => `export function step${i}(x: number): number {\n  return x * ${i + 2} + ${i}\n}\n`).join('\n') } })
    t.after(() => gh.close())
    const kb = await newKb(svc)
    const c = await createConnector(svc, { kb_id: kb, name: 'code', source_type: 'github', config: { owner: 'acme', repo: 'handbook', api_url: gh.url, request_delay_ms: 0 } })
    const st = await syncAndWait(svc, c.connector_id)
    assert.equal(st.last_error, null)
    await waitFor(async () => (await syncStatus(svc, c.connector_id)).doc_counts.indexed === 1, 'indexed', 30_000).catch(async (err) => {
      throw new Error(`${err.message}: ${JSON.stringify(st)} ${JSON.stringify(await connectorDocs(svc, c.connector_id))}`)
    })
    const [doc] = await connectorDocs(svc, c.connector_id)
    assert.equal(doc.doc_type, 'code')
    const res = await svc.request(`/api/kb/${kb}/docs/${doc.doc_id}/reindex?force=true`, { method: 'POST' })
    assert.equal(res.status, 202)
    const again = await waitFor(async () => {
      const [d] = await connectorDocs(svc, c.connector_id)
      return d.status === 'indexed' && d.process_finished_at !== doc.process_finished_at && d
    }, 'reindexed')
    assert.equal(again.doc_type, 'code')
  })

  if (opts.pgLocks) {
    it(`${label}: a sync cannot start while its KB is being deleted (the start waits on the KB row, then finds it gone)`, async (t) => {
      const s = await site(t, 1)
      const kb = await newKb(svc)
      const c = await createConnector(svc, { kb_id: kb, name: 'race', source_type: 'web', config: { seed_urls: [`${s.url}/docs`], request_delay_ms: 0 } })
      let syncAnswer: Promise<Response> | null = null
      // A guard after the connectors' own: the delete has passed its check and holds the KB row.
      svc.app.use<KbService>('kb').addDeleteGuard(async (kbId) => {
        if (kbId !== kb) return
        syncAnswer = svc.request(`/api/connectors/${c.connector_id}/sync`, { method: 'POST' })
        let answered = false
        void syncAnswer.then(() => void (answered = true), () => void (answered = true))
        // Until the sync has answered, or its start is seen waiting for a lock (another connection reads that).
        await waitFor(async () => answered || (await svc.app.adapters.sql.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%UPDATE connectors SET sync_status = ''running''%'`))[0].n > 0,
        'the sync answered or waits for the KB row')
      })
      const res = await svc.request(`/api/kb/${kb}`, { method: 'DELETE' })
      assert.equal(res.status, 200, await res.clone().text())
      const sync = await syncAnswer!
      assert.equal(sync.status, 404, 'the sync found its KB (and connector) gone')
      const rows = await svc.app.adapters.sql.query('SELECT 1 FROM connectors WHERE connector_id = $1::uuid', [c.connector_id])
      assert.equal(rows.length, 0)
    })
  }
}
