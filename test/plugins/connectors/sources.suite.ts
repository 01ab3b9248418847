// The GitHub and Confluence sources against local servers speaking those services' published REST shapes
// (test/helpers/github-server.ts, confluence-server.ts): neither service can be reached from here.
import { after, before, it } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, type StartOptions, type StartedApp } from '../../helpers/app.ts'
import { startConfluenceServer, type WikiPage } from '../../helpers/confluence-server.ts'
import { startGithubServer } from '../../helpers/github-server.ts'
import { waitFor } from '../../helpers/wait.ts'
import { confluenceApiBase, confluenceLink } from '../../../plugins/connectors/sources/confluence.ts'
import { CONNECTOR_TEST_SETTINGS, connectorDocs, createConnector, newKb, syncAndWait, syncStatus } from './connectors.suite.ts'

type Json = any

const CODE = Array.from({ length: 8 }, (_, i) =>
  `export function handler${i}(input: number): number {\n  const doubled = input * 2\n  const shifted = doubled + ${i}\n  return shifted > 100 ? shifted - 100 : shifted\n}\n`).join('\n')

const REPO_FILES = () => ({
  'README.md': '# Handbook\n\nThe handbook repository holds the engineering guides of the team, one topic per file.',
  'docs/guide.md': '# Guide\n\nHow to set up the development environment, run the tests and ship a release safely.',
  'docs/deep/notes.txt': 'Notes about the deployment pipeline, the staging servers and the rollback procedure.',
  'src/handlers.ts': CODE,
  'src/tool.py': 'def main():\n    """Entry point of the maintenance tool used by the operations team."""\n    print("running maintenance")\n',
  'assets/logo.png': Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0]),
  'Makefile': 'all:\n\techo build\n',
  'big.txt': 'x'.repeat(1024 * 1024 + 10),
})

export function sourcesSuite(label: string, opts: StartOptions): void {
  let svc: StartedApp
  const cleanups: (() => unknown)[] = []
  before(async () => {
    svc = await startApp({ after: (fn: () => unknown) => void cleanups.push(fn) }, {
      ...opts, settings: { ...CONNECTOR_TEST_SETTINGS, chunking: { code_max_chars: 200 }, ...opts.settings },
    })
  })
  after(async () => {
    for (const c of cleanups) await c()
  })

  it(`${label}: github: tree, extensions, size cap, code splitter, headers and token; unchanged blobs not fetched; changes and removals`, async (t) => {
    process.env.CONNECTOR_TEST_GH_TOKEN = 'ghp_test_token'
    const gh = await startGithubServer({ files: REPO_FILES(), token: 'ghp_test_token' })
    t.after(() => gh.close())
    const kb = await newKb(svc)
    const c = await createConnector(svc, {
      kb_id: kb, name: 'repo', source_type: 'github',
      config: { owner: 'acme', repo: 'handbook', api_url: gh.url, auth_token_secret: 'CONNECTOR_TEST_GH_TOKEN', max_file_size_mb: 1, request_delay_ms: 0 },
    })
    assert.equal(c.config.auth_token_secret, 'CONNECTOR_TEST_GH_TOKEN', 'the NAME of the variable, never its value')
    const st = await syncAndWait(svc, c.connector_id)
    assert.equal(st.last_error, null)
    assert.equal(st.status, 'active')
    const docs = await connectorDocs(svc, c.connector_id)
    const sources = docs.map((d) => d.source).sort()
    assert.deepEqual(sources, ['README.md', 'docs/deep/notes.txt', 'docs/guide.md', 'src/handlers.ts', 'src/tool.py'].map((p) => `github://acme/handbook/main/${p}`))
    for (const d of docs) {
      assert.equal(d.source_type, 'github')
      assert.equal(d.status, 'indexed', `${d.source}: ${d.last_error}`)
      assert.equal(d.content_version, gh.blobSha(d.source.replace('github://acme/handbook/main/', '')))
    }
    const code = docs.find((d) => d.source.endsWith('handlers.ts'))
    assert.ok(code.chunk_count >= 4, `the code splitter cut at code_max_chars 200: ${code.chunk_count} chunks`)
    assert.ok(gh.requests.every((r) => r.authorization === 'Bearer ghp_test_token' && r.accept === 'application/vnd.github+json' && r.apiVersion === '2022-11-28'))
    const blobRequests = () => gh.requests.filter((r) => r.path.includes('/git/blobs/')).length
    assert.equal(blobRequests(), 5)

    // Unchanged: no blob is downloaded again, nothing re-ingested.
    const st2 = await syncAndWait(svc, c.connector_id)
    assert.equal(blobRequests(), 5)
    assert.equal(st2.last_sync.unchanged, 5)
    assert.equal(st2.last_sync.stored, 0)

    gh.setFile('docs/guide.md', '# Guide\n\nHow to set up the development environment, with the new container-based workflow described here.')
    gh.removeFile('src/tool.py')
    const st3 = await syncAndWait(svc, c.connector_id)
    assert.equal(blobRequests(), 6)
    assert.equal(st3.last_sync.stored, 1)
    assert.equal(st3.last_sync.pruned, 1)
    const after3 = new Map((await connectorDocs(svc, c.connector_id, '&status=indexed')).map((d) => [d.source, d]))
    const guide = after3.get('github://acme/handbook/main/docs/guide.md')
    assert.equal(guide.doc_id, docs.find((d) => d.source.endsWith('guide.md')).doc_id)
    assert.equal(guide.content_version, gh.blobSha('docs/guide.md'))
    assert.deepEqual((await connectorDocs(svc, c.connector_id, '&status=deleted')).map((d) => d.source), ['github://acme/handbook/main/src/tool.py'])
  })

  it(`${label}: github: path_prefix, max_files (cut: no pruning), a truncated tree walked directory by directory`, async (t) => {
    const gh = await startGithubServer({ files: REPO_FILES(), truncateTree: true })
    t.after(() => gh.close())
    const prefixed = await createConnector(svc, { kb_id: await newKb(svc), name: 'docs', source_type: 'github', config: { owner: 'acme', repo: 'handbook', api_url: gh.url, path_prefix: '/docs/', request_delay_ms: 0 } })
    await syncAndWait(svc, prefixed.connector_id)
    assert.deepEqual((await connectorDocs(svc, prefixed.connector_id)).map((d) => d.source).sort(),
      ['github://acme/handbook/main/docs/deep/notes.txt', 'github://acme/handbook/main/docs/guide.md'])
    const trees = gh.requests.filter((r) => r.path.includes('/git/trees/'))
    assert.ok(trees.some((r) => r.path.endsWith('?recursive=1')) && trees.some((r) => !r.path.includes('recursive')), 'the truncated listing was walked')
    assert.ok(!trees.some((r) => r.path.includes('/src')), 'directories off the prefix are not opened')

    const cut = await createConnector(svc, { kb_id: await newKb(svc), name: 'cut', source_type: 'github', config: { owner: 'acme', repo: 'handbook', api_url: gh.url, max_files: 2, request_delay_ms: 0 } })
    const st = await syncAndWait(svc, cut.connector_id)
    assert.equal(st.last_sync.truncated, true)
    assert.equal((await connectorDocs(svc, cut.connector_id)).length, 2)
  })

  it(`${label}: github: rate limits waited out (403 reset, 429 Retry-After) within request_timeout_sec x 10, else the sync fails; missing branch, token and variable`, async (t) => {
    const gh = await startGithubServer({ files: { 'README.md': REPO_FILES()['README.md'] } })
    t.after(() => gh.close())
    const c = await createConnector(svc, { kb_id: await newKb(svc), name: 'rl', source_type: 'github', config: { owner: 'acme', repo: 'handbook', api_url: gh.url, request_delay_ms: 0, request_timeout_sec: 1 } })
    gh.rateLimit('403', 1, 1)
    let st = await syncAndWait(svc, c.connector_id)
    assert.equal(st.last_error, null)
    assert.equal(st.doc_counts.indexed, 1)
    assert.ok(gh.requests.some((r) => r.status === 403))
    gh.setFile('README.md', '# Handbook\n\nChanged so that the blob is fetched again after a secondary rate limit answer.')
    gh.rateLimit('429', 2, 1)
    st = await syncAndWait(svc, c.connector_id)
    assert.equal(st.last_error, null)
    assert.equal(st.last_sync.stored, 1)
    gh.rateLimit('429', 1, 60)
    st = await syncAndWait(svc, c.connector_id)
    assert.equal(st.status, 'error')
    assert.match(st.last_error, /^GitHub rate limit: asked to wait 60 s, more than the 10 s allowed/)
    assert.equal(st.doc_counts.deleted, 0, 'a failed sync prunes nothing')

    let res = await svc.request(`/api/connectors/${c.connector_id}`, { method: 'PATCH', json: { config: { owner: 'acme', repo: 'handbook', api_url: gh.url, branch: 'nope', request_delay_ms: 0 } } })
    assert.equal(res.status, 200)
    st = await syncAndWait(svc, c.connector_id)
    assert.equal(st.last_error, 'GitHub repository or branch not found: acme/handbook@nope')
    res = await svc.request(`/api/connectors/${c.connector_id}`, { method: 'PATCH', json: { config: { owner: 'acme', repo: 'handbook', api_url: gh.url, auth_token_secret: 'CONNECTOR_TEST_UNSET_VARIABLE' } } })
    st = await syncAndWait(svc, c.connector_id)
    assert.equal(st.last_error, 'GitHub (auth_token_secret): environment variable CONNECTOR_TEST_UNSET_VARIABLE is not set')

    const locked = await startGithubServer({ files: { 'a.md': 'text' }, token: 'right' })
    t.after(() => locked.close())
    process.env.CONNECTOR_TEST_GH_WRONG = 'wrong-token-value'
    const w = await createConnector(svc, { kb_id: await newKb(svc), name: 'w', source_type: 'github', config: { owner: 'acme', repo: 'handbook', api_url: locked.url, auth_token_secret: 'CONNECTOR_TEST_GH_WRONG' } })
    st = await syncAndWait(svc, w.connector_id)
    assert.match(st.last_error, /HTTP 401/)
    assert.ok(!st.last_error.includes('wrong-token-value'), 'the credential never appears in an error')
  })

  it(`${label}: confluence: server and cloud API paths, paging by start, labels, attachments under the cap, version skipping`, async (t) => {
    const pages: WikiPage[] = Array.from({ length: 55 }, (_, i) => ({
      id: String(1000 + i), title: `Runbook ${i}`, version: 1,
      html: `<p>Runbook ${i} describes how to restart service number ${i}, check its health endpoint and page the owner team.</p>`,
    }))
    pages[0].attachments = [
      { title: 'checklist.md', body: '# Checklist\n\nVerify the backups, rotate the keys and update the status page after every incident.', mediaType: 'text/markdown' },
      { title: 'diagram.png', body: Buffer.from([1, 2, 3]), mediaType: 'image/png' },
      { title: 'huge.txt', body: 'y'.repeat(1024 * 1024 + 1), mediaType: 'text/plain' },
    ]
    pages[1].labels = ['archived']
    pages[1].attachments = [{ title: 'old.md', body: '# Old\n\nThis attachment belongs to an archived page and must be skipped.' }]
    process.env.CONNECTOR_TEST_WIKI = 'me@example.com:api-token'
    const wiki = await startConfluenceServer({ pages, authorization: `Basic ${Buffer.from('me@example.com:api-token').toString('base64')}` })
    t.after(() => wiki.close())
    assert.equal(confluenceApiBase('https://acme.atlassian.net'), 'https://acme.atlassian.net/wiki/rest/api')
    assert.equal(confluenceApiBase('https://wiki.example.com/confluence/'), 'https://wiki.example.com/confluence/rest/api')

    const kb = await newKb(svc)
    const c = await createConnector(svc, {
      kb_id: kb, name: 'wiki', source_type: 'confluence',
      config: { base_url: wiki.url, space_key: 'ENG', auth_token_secret: 'CONNECTOR_TEST_WIKI', exclude_labels: ['archived'], max_attachment_mb: 1, max_pages: 100, request_delay_ms: 0 },
    })
    const st = await syncAndWait(svc, c.connector_id)
    assert.equal(st.last_error, null)
    const docs = await connectorDocs(svc, c.connector_id)
    assert.equal(docs.length, 55, '54 pages (one excluded by label) and one attachment')
    assert.ok(wiki.requests.some((r) => r.path.includes('start=50')), 'paged by start')
    assert.ok(wiki.requests.every((r) => r.path.startsWith('/rest/api/') || r.path.startsWith('/download/')), 'server API path')
    const page0 = docs.find((d) => d.source === `${wiki.url}/spaces/ENG/pages/1000/Runbook+0`)
    assert.ok(page0, `a page is stored under its web URL: ${docs.slice(0, 3).map((d) => d.source)}`)
    assert.equal(page0.content_version, '1')
    assert.equal(page0.source_type, 'confluence')
    assert.equal(page0.title, 'Runbook 0')
    assert.ok(docs.some((d) => d.source.startsWith(`${wiki.url}/download/attachments/1000/checklist.md`)))
    assert.ok(!docs.some((d) => d.source.includes('1001')), 'the labelled page and its attachment are skipped')
    await waitFor(async () => (await syncStatus(svc, c.connector_id)).doc_counts.indexed === 55, 'all indexed')

    // Unchanged versions: no download; attachments still listed. A new version is fetched again.
    const downloads = () => wiki.requests.filter((r) => r.path.startsWith('/download/')).length
    const listings = () => wiki.requests.filter((r) => r.path.includes('/child/attachment')).length
    const [d0, l0] = [downloads(), listings()]
    let st2 = await syncAndWait(svc, c.connector_id)
    assert.equal(downloads(), d0)
    assert.ok(listings() >= l0 + 54, 'attachments are always traversed')
    assert.equal(st2.last_sync.stored, 0)
    wiki.setPage({ ...pages[0], version: 2, html: '<p>Runbook 0 was rewritten: restart through the orchestrator, never by hand.</p>', attachments: [{ ...pages[0].attachments![0], version: 2, body: '# Checklist v2\n\nNew steps.' }] })
    wiki.removePage('1054')
    st2 = await syncAndWait(svc, c.connector_id)
    assert.equal(st2.last_sync.stored, 2)
    assert.equal(st2.last_sync.pruned, 1)
    assert.equal(downloads(), d0 + 1)

    // Cloud path: a base URL with .atlassian.net uses /wiki/rest/api; bearer for a token without ':'.
    process.env.CONNECTOR_TEST_WIKI_BEARER = 'personal-token'
    const bearer = await startConfluenceServer({ pages: pages.slice(2, 4), authorization: 'Bearer personal-token', context: '/acme.atlassian.net/wiki' })
    t.after(() => bearer.close())
    const cloud = await createConnector(svc, { kb_id: await newKb(svc), name: 'cloud', source_type: 'confluence', config: { base_url: `${bearer.url}/acme.atlassian.net`, space_key: 'ENG', auth_token_secret: 'CONNECTOR_TEST_WIKI_BEARER', request_delay_ms: 0, max_pages: 1 } })
    const st3 = await syncAndWait(svc, cloud.connector_id)
    assert.equal(st3.last_error, null)
    assert.ok(bearer.requests.every((r) => r.path.startsWith('/acme.atlassian.net/wiki/rest/api/')))
    assert.equal(st3.last_sync.truncated, true, 'max_pages 1 of 2 pages')
    assert.equal((await connectorDocs(svc, cloud.connector_id)).length, 1)
  })
  it(`${label}: confluence as Atlassian documents it: a Cloud-shaped site (/wiki, listings capped below the limit when bodies are expanded) and a server with its own context path; _links.next followed to the end, every link joined to _links.base`, async (t) => {
    // Links are relative to _links.base, the site with its context path: appended, never resolved as a URL reference.
    assert.equal(confluenceLink('/download/attachments/1/a.pdf?version=2', 'https://acme.atlassian.net/wiki'), 'https://acme.atlassian.net/wiki/download/attachments/1/a.pdf?version=2')
    assert.equal(confluenceLink('/spaces/ENG/pages/1/A', 'https://wiki.example.com/confluence/'), 'https://wiki.example.com/confluence/spaces/ENG/pages/1/A')
    assert.equal(confluenceLink('/rest/api/content?start=25', 'https://wiki.example.com'), 'https://wiki.example.com/rest/api/content?start=25')
    assert.equal(confluenceLink('/wiki/api/v2/pages?cursor=x', 'https://acme.atlassian.net/wiki'), 'https://acme.atlassian.net/wiki/api/v2/pages?cursor=x', 'a link that carries the context already')
    assert.equal(confluenceLink('https://other.example.com/x', 'https://acme.atlassian.net/wiki'), 'https://other.example.com/x')

    process.env.CONNECTOR_TEST_WIKI_SHAPES = 'me@example.com:api-token'
    const pages = (): WikiPage[] => Array.from({ length: 7 }, (_, i) => ({
      id: String(3000 + i), title: `Guide ${i}`, version: 1,
      html: `<p>Guide ${i} explains how team ${i} deploys, monitors and rolls back its services without paging anyone.</p>`,
      attachments: i === 2 ? Array.from({ length: 5 }, (_, j) => ({ title: `notes-${j}.md`, body: `# Notes ${j}\n\nThe notes of guide 2, part ${j}, about the release checklist of the team.`, mediaType: 'text/markdown' })) : [],
    }))
    const shapes = [
      // Cloud: base_url names the site, the API and every link live under /wiki; listings with bodies hold 3.
      { name: 'cloud', context: '/acme.atlassian.net/wiki', baseUrl: (url: string) => `${url}/acme.atlassian.net`, maxLimit: 4, bodyLimit: 3, pageListings: 3 },
      // A server under its own context path; every listing holds 4.
      { name: 'server', context: '/confluence', baseUrl: (url: string) => `${url}/confluence/`, maxLimit: 4, bodyLimit: undefined, pageListings: 2 },
    ]
    const authorization = `Basic ${Buffer.from('me@example.com:api-token').toString('base64')}`
    for (const shape of shapes) {
      const wiki = await startConfluenceServer({ pages: pages(), context: shape.context, maxLimit: shape.maxLimit, bodyLimit: shape.bodyLimit, authorization })
      t.after(() => wiki.close())
      const c = await createConnector(svc, {
        kb_id: await newKb(svc), name: shape.name, source_type: 'confluence',
        config: { base_url: shape.baseUrl(wiki.url), space_key: 'ENG', auth_token_secret: 'CONNECTOR_TEST_WIKI_SHAPES', request_delay_ms: 0 },
      })
      const st = await syncAndWait(svc, c.connector_id)
      assert.equal(st.last_error, null, shape.name)
      assert.deepEqual(wiki.requests.filter((r) => r.status !== 200), [], `${shape.name}: no request missed the context path`)
      assert.ok(wiki.requests.every((r) => r.path.startsWith(`${shape.context}/`)), shape.name)

      const listings = wiki.requests.filter((r) => r.path.startsWith(`${shape.context}/rest/api/content?`))
      assert.equal(listings.length, shape.pageListings, `${shape.name}: the space's pages in ${shape.pageListings} answers, each next link followed`)
      assert.ok(listings.every((r) => new URL(r.path, wiki.url).searchParams.get('expand')?.includes('body.view')), 'the next link keeps the expansion')
      assert.equal(wiki.requests.filter((r) => r.path.startsWith(`${shape.context}/rest/api/content/3002/child/attachment`)).length, 2, `${shape.name}: 5 attachments, 4 to an answer`)

      const docs = await connectorDocs(svc, c.connector_id)
      const pageSources = docs.filter((d) => !d.source.includes('/download/')).map((d) => d.source).sort()
      assert.deepEqual(pageSources, Array.from({ length: 7 }, (_, i) => `${wiki.site}/spaces/ENG/pages/${3000 + i}/Guide+${i}`).sort(), `${shape.name}: 7 of 7 pages, under _links.base`)
      const attachmentSources = docs.filter((d) => d.source.includes('/download/')).map((d) => d.source).sort()
      assert.deepEqual(attachmentSources, Array.from({ length: 5 }, (_, j) => `${wiki.site}/download/attachments/3002/notes-${j}.md`))
      assert.equal(wiki.requests.filter((r) => r.path.startsWith(`${shape.context}/download/attachments/`)).length, 5, `${shape.name}: every attachment downloaded`)
      // A stored page URL is the page on the site.
      assert.equal((await fetch(pageSources[0], { headers: { authorization } })).status, 200, pageSources[0])
      await waitFor(async () => (await syncStatus(svc, c.connector_id)).doc_counts.indexed === 12, `${shape.name}: all indexed`)

      const again = await syncAndWait(svc, c.connector_id)
      assert.deepEqual([again.last_sync.unchanged, again.last_sync.stored, again.last_sync.pruned], [12, 0, 0], `${shape.name}: the same sources on the next sync`)
    }
  })
}
