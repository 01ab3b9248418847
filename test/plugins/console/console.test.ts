// The operator console (issue 41) in the base edition, in Chromium: the page and its headers, then every flow
// through the browser as an operator uses it (knowledge bases, documents, settings, search, connectors), on the
// embedded driver set; a smoke flow on the services driver set. Every page is watched: no request outside the
// service's origin, no script error, no dialog, no CSP violation; axe-core finds no serious or critical violation.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { createServer } from 'node:http'
import { promisify } from 'node:util'
import { after, before, describe, it } from 'node:test'
import type { Browser, Page } from 'playwright-core'
import { CONNECTOR_SCHEMAS_ASSET, loadAssets } from '../../../plugins/console/index.ts'
import { startApp, type StartedApp } from '../../helpers/app.ts'
import { startFakeRerankServer } from '../../helpers/fake-rerank-server.ts'
import { skipUnless } from '../../helpers/services.ts'
import { waitFor } from '../../helpers/wait.ts'
import { listenLoopback } from '../../helpers/web-site.ts'
import { assertAccessible, assertClean, dropFiles, launchChromium, openPage, screenshot, skipWithoutChromium, type Watched } from './browser.ts'

// Browser globals of the functions run in the page (page.evaluate): the project compiles without DOM typings.
declare const window: any, document: any, navigator: any, location: any, getComputedStyle: any

type Json = any
const FAST = { queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 } }
const EVIL_FILE = '<img src=x onerror=alert(1)>.txt'
const EVIL_TITLE = '<script>alert(1)</script> Evil <img src=x onerror=alert(2)>'
const WORDS = ('leave travel expense budget harbor lantern orchard meadow crystal compass glacier summit canyon river forest desert ' +
  'engine turbine circuit voltage sensor signal packet router kernel thread buffer cache ledger invoice payroll audit ' +
  'contract tenant lease permit license patent trademark verdict appeal statute clause vaccine protein enzyme genome ' +
  'neuron tissue plasma orbit comet nebula quasar photon prism optics violin cello sonata chorus rhythm tempo ballad').split(' ')
/** A text of n sentences whose words depend on the seed: documents of different seeds share little (dedup keeps them). */
function prose(seed: string, n: number): string {
  let x = [...seed].reduce((a, c) => (a * 31 + c.charCodeAt(0)) >>> 0, 7)
  const next = () => (x = (x * 1103515245 + 12345) >>> 0) % WORDS.length
  return Array.from({ length: n }, () => `${Array.from({ length: 12 }, () => WORDS[next()]).join(' ')} ${seed}.`).join(' ')
}

async function upload(svc: StartedApp, kb: string, name: string, text: string): Promise<string> {
  const form = new FormData()
  form.append('file', new Blob([text], { type: 'text/plain' }), name)
  const res = await svc.request(`/api/kb/${kb}/docs/upload`, { method: 'POST', body: form })
  assert.equal(res.status, 202, await res.clone().text())
  return ((await res.json()) as Json).doc_id
}

const docStatus = async (svc: StartedApp, kb: string, id: string) => ((await (await svc.request(`/api/kb/${kb}/docs/${id}/status`)).json()) as Json)
const settled = (svc: StartedApp, kb: string, id: string, want = ['indexed', 'failed', 'outdated']) =>
  waitFor(async () => {
    const s = await docStatus(svc, kb, id)
    return want.includes(s.status) ? s : null
  }, `document ${id} to reach ${want.join('|')}`)

async function createKb(svc: StartedApp, kb: string, overrides?: Record<string, unknown>) {
  assert.equal((await svc.request('/api/kb', { method: 'POST', json: { kb_id: kb, kb_name: kb } })).status, 201)
  if (overrides) assert.equal((await svc.request(`/api/kb/${kb}/settings/overrides`, { method: 'PUT', json: { overrides } })).status, 200)
}

/** Text of a locator once it matches `re` (the console refreshes by itself: no reload). */
async function textUntil(page: Page, selector: string, re: RegExp, what: string): Promise<string> {
  return waitFor(async () => {
    const text = (await page.locator(selector).first().textContent({ timeout: 1000 }).catch(() => null)) ?? ''
    return re.test(text) ? text : null
  }, what, 30_000, 100)
}

const rowOf = (page: Page, docTitle: string) => page.locator('table.docs tbody tr', { has: page.getByRole('button', { name: docTitle, exact: true }) })

describe('operator console, base edition (embedded)', { skip: skipWithoutChromium }, () => {
  const cleanups: (() => unknown)[] = []
  const holder = { after: (fn: () => unknown) => void cleanups.push(fn) }
  let svc: StartedApp
  let browser: Browser
  const pages: Watched[] = []
  const open = async (colorScheme: 'light' | 'dark' = 'light') => {
    const w = await openPage(browser, svc.url, { colorScheme })
    pages.push(w)
    return w
  }

  before(async () => {
    const rr = await startFakeRerankServer()
    cleanups.push(() => rr.close())
    svc = await startApp(holder, {
      settings: {
        ...FAST,
        retrieval: { rerank: { enabled: true, url: rr.url, model: 'rerank-test', top_n: 5 } },
        connectors: { egress: { allow: ['127.0.0.1/32'] } },
      },
    })
    browser = await launchChromium()
  })
  after(async () => {
    await browser?.close()
    for (const c of cleanups.reverse()) await c()
  })

  it('serves /console from the service: a CSP without inline script or other origin, no remote reference, gzip under 150 KB', async (t) => {
    const res = await svc.request('/console', { headers: { 'accept-encoding': 'identity' } })
    assert.equal(res.status, 200)
    assert.match(res.headers.get('content-type') ?? '', /text\/html/)
    const csp = res.headers.get('content-security-policy') ?? ''
    for (const d of ["default-src 'self'", "script-src 'self'", "style-src 'self'", "connect-src 'self';", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'", "object-src 'none'"]) {
      assert.ok(csp.includes(d), `CSP has ${d}: ${csp}`)
    }
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:|\*/, 'no inline script, no eval, no other origin')
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff')
    const html = await res.text()
    assert.doesNotMatch(html, /https?:\/\//, 'no remote reference')
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script')
    assert.doesNotMatch(html, /\son[a-z]+=|\sstyle=/i, 'no inline handler or style')
    for (const [, src] of html.matchAll(/(?:src|href)="(\/[^"]+)"/g)) {
      const a = await svc.request(src, { headers: { 'accept-encoding': 'gzip' } })
      assert.equal(a.status, 200, src)
      assert.ok(a.headers.get('content-security-policy'), `${src} carries the CSP`)
    }

    // Every asset, gzipped as served: the console's whole weight.
    const assets = loadAssets()
    let gzipTotal = 0
    let rawTotal = 0
    for (const [name, a] of assets) {
      gzipTotal += a.gzip.length
      rawTotal += a.body.length
      if (name.endsWith('.js')) {
        // The rendering rule the untrusted-content guarantee rests on: no markup sink anywhere.
        assert.doesNotMatch(a.body.toString(), /innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function/, `${name} writes no markup`)
        assert.doesNotMatch(a.body.toString(), /localStorage/, `${name} keeps nothing in localStorage`)
      }
    }
    t.diagnostic(`console assets: ${assets.size} files, ${(rawTotal / 1024).toFixed(1)} KB, ${(gzipTotal / 1024).toFixed(1)} KB gzipped`)
    assert.ok(gzipTotal < 150 * 1024, `assets gzip to ${gzipTotal} bytes`)
    const main = await svc.request('/console/assets/main.js', { headers: { 'accept-encoding': 'gzip, br' } })
    assert.equal(main.status, 200)
    assert.match(main.headers.get('content-type') ?? '', /text\/javascript/)
    const etag = main.headers.get('etag')!
    assert.equal((await svc.request('/console/assets/main.js', { headers: { 'if-none-match': etag } })).status, 304)
    const schemas = (await (await svc.request(`/console/assets/${CONNECTOR_SCHEMAS_ASSET}`)).json()) as Json
    assert.deepEqual(Object.keys(schemas), ['web', 'confluence', 'github'])
    assert.ok(schemas.web.properties.seed_urls && schemas.github.required.includes('owner'))
    for (const bad of ['/console/assets/nope.js', '/console/assets/..%2Fconsole%2Findex.ts', '/console/assets/index.html']) {
      assert.equal((await svc.request(bad)).status, 404, bad)
    }
    assert.deepEqual(await (await svc.request('/console/config.json')).json(), { edition: 'base', oidc: null })
  })

  it('POST /api/search splits its latency in a Server-Timing header: cache, embed, each KB, fusion, rerank', async () => {
    await createKb(svc, 'timing-a')
    await createKb(svc, 'timing-b')
    await settled(svc, 'timing-a', await upload(svc, 'timing-a', 'a.txt', prose('ta', 6)))
    await settled(svc, 'timing-b', await upload(svc, 'timing-b', 'b.txt', prose('tb', 6)))
    const body = { query: 'travel expense rules', kb_ids: ['timing-a', 'timing-b'] }
    const miss = await svc.request('/api/search', { method: 'POST', json: body })
    assert.equal(miss.status, 200)
    const timing = miss.headers.get('server-timing') ?? ''
    assert.match(timing, /^cache;desc="miss", embed;dur=\d+\.\d, /)
    assert.match(timing, /kb;desc="timing-a";dur=\d+\.\d/)
    assert.match(timing, /kb;desc="timing-b";dur=\d+\.\d/)
    assert.match(timing, /fusion;dur=\d+\.\d, rerank;dur=\d+\.\d$/)
    assert.equal(((await miss.json()) as Json).meta.cache_status, 'miss')
    const hit = await svc.request('/api/search', { method: 'POST', json: body })
    assert.equal(hit.headers.get('server-timing'), 'cache;desc="hit"', 'a cached answer ran no stage')
    assert.equal(((await hit.json()) as Json).meta.cache_status, 'hit')
  })

  it('knowledge bases: the list with counts by status, tags and role; create (422 at the field), edit, delete naming what it removes', async () => {
    const w = await open()
    const { page } = w
    await page.goto(`${svc.url}/console`)
    await page.getByRole('heading', { name: 'Knowledge bases', level: 1 }).waitFor()
    await page.getByRole('button', { name: 'New knowledge base' }).click()
    const dlg = page.getByRole('dialog', { name: 'New knowledge base' })
    await dlg.getByLabel('ID', { exact: true }).fill('Bad Id!')
    await dlg.getByRole('button', { name: 'Create' }).click()
    const idError = dlg.locator('#' + (await dlg.getByLabel('ID', { exact: true }).getAttribute('id')) + '-err')
    await idError.waitFor({ state: 'visible' })
    assert.match((await idError.textContent()) ?? '', /kb_id must be/)
    assert.equal(await dlg.getByLabel('ID', { exact: true }).getAttribute('aria-invalid'), 'true')
    await assertAccessible(page, 'KB create dialog with an error')
    await dlg.getByLabel('ID', { exact: true }).fill('console-kb')
    await dlg.getByLabel('Name', { exact: true }).fill('Console KB')
    await dlg.getByLabel('Tags').fill('hr, policies')
    await dlg.getByRole('button', { name: 'Create' }).click()
    const row = page.locator('tr[data-kb="console-kb"]')
    await row.waitFor()
    assert.deepEqual(await row.locator('.tag').allTextContents(), ['hr', 'policies'])
    assert.equal(await page.getByRole('columnheader', { name: 'My role' }).count(), 0, 'no role column in the base edition')

    // Counts refresh by themselves: documents uploaded elsewhere show up without a reload.
    await page.evaluate(() => ((window as Json).__noReload = true))
    const ids = [await upload(svc, 'console-kb', 'one.txt', prose('k1', 5)), await upload(svc, 'console-kb', 'two.txt', prose('k2', 5))]
    for (const id of ids) await settled(svc, 'console-kb', id)
    await textUntil(page, 'tr[data-kb="console-kb"] td[data-count="indexed"]', /^2$/, 'the indexed count to reach 2')
    assert.equal(await row.locator('td[data-count="total"]').textContent(), '2')
    assert.equal(await page.evaluate(() => (window as Json).__noReload), true, 'the page was not reloaded')
    await assertAccessible(page, 'KB list')
    await screenshot(page, 'base-kbs')

    await row.getByRole('button', { name: 'Edit console-kb' }).click()
    const edit = page.getByRole('dialog', { name: 'Edit console-kb' })
    await edit.getByLabel('Name', { exact: true }).fill('Console KB renamed')
    await edit.getByLabel('Description').fill('Policies for the console test')
    await edit.getByRole('button', { name: 'Save' }).click()
    await row.getByRole('link', { name: 'Console KB renamed' }).waitFor()
    const kb = (await (await svc.request('/api/kb/console-kb')).json()) as Json
    assert.equal(kb.description, 'Policies for the console test')

    assert.equal((await svc.request('/api/kb/console-kb/settings/overrides', { method: 'PUT', json: { overrides: { 'chunking.chunk_size': 2048 } } })).status, 200)
    await row.getByRole('button', { name: 'Delete console-kb' }).click()
    const del = page.getByRole('dialog', { name: 'Delete console-kb?' })
    await del.waitFor()
    const said = (await del.textContent()) ?? ''
    for (const part of ['2 documents', 'stored original files', 'search index', 'settings overrides', '0 connectors', 'cannot be undone']) {
      assert.ok(said.includes(part), `the confirmation names ${part}: ${said}`)
    }
    const confirmBtn = del.getByRole('button', { name: 'Delete knowledge base' })
    assert.equal(await confirmBtn.isDisabled(), true, 'the delete waits for the id to be typed')
    await assertAccessible(page, 'KB delete confirmation')
    await del.getByRole('textbox').fill('console-kb')
    await confirmBtn.click()
    await row.waitFor({ state: 'detached' })
    assert.equal((await svc.request('/api/kb/console-kb')).status, 404)
    assertClean(w, 'KB flow')
  })

  it('documents: drop many files with progress and an error per file; untrusted names as text; counts refresh; filter, sort, search; every action', async () => {
    await createKb(svc, 'docs-kb')
    const w = await open()
    const { page } = w
    await page.goto(`${svc.url}/console#/kb/docs-kb/docs`)
    await page.getByRole('heading', { name: 'docs-kb', level: 1 }).waitFor()
    await page.evaluate(() => ((window as Json).__noReload = true))
    await dropFiles(page, '.dropzone', [
      { name: 'alpha.txt', content: `Alpha handbook. ${prose('alpha', 6)}` },
      { name: 'beta.md', content: `# Beta\n\n${prose('beta', 6)}` },
      { name: EVIL_FILE, content: `Evil name. ${prose('evil', 6)}` },
      { name: 'virus.exe', content: 'MZ not a document' },
      { name: 'gamma.txt', content: `Gamma notes. ${prose('gamma', 6)}` },
    ])
    const uploads = page.getByRole('list', { name: 'Uploads' }).locator('li')
    await waitFor(async () => (await uploads.locator('.state').allTextContents()).every((s) => s !== 'queued' && s !== 'uploading'), 'every upload to finish')
    const states = Object.fromEntries(await uploads.evaluateAll((lis) => lis.map((li) => [li.querySelector('.name')!.textContent, li.querySelector('.state')!.textContent])))
    assert.equal(states['virus.exe'], 'error: Unsupported file format: .exe')
    for (const n of ['alpha.txt', 'beta.md', EVIL_FILE, 'gamma.txt']) assert.equal(states[n], 'stored, queued for indexing', n)
    // Each stored file's progress ran to the end; the refused one is marked as failed (its bytes went up, the answer was 422).
    assert.deepEqual(await uploads.evaluateAll((lis) => lis.map((li) => [li.className, li.querySelector('progress').value])),
      [['ok', 1], ['ok', 1], ['ok', 1], ['failed', 1], ['ok', 1]])

    // The worker indexes them; the counts (and the table) follow without a reload.
    await textUntil(page, '.counts [data-status="indexed"] .n', /^4$/, 'four indexed documents in the counts')
    await rowOf(page, 'gamma').waitFor()
    // The file named like markup is shown as its characters and runs nothing.
    await rowOf(page, '<img src=x onerror=alert(1)>').waitFor()
    assert.equal(await page.locator('table.docs td.source', { hasText: EVIL_FILE }).count(), 1)
    assert.equal(await page.locator('img').count(), 0, 'no element was made from the name')
    await assertAccessible(page, 'documents view')
    await screenshot(page, 'base-documents')

    // search, status filter, sort
    await page.getByLabel('Search', { exact: true }).fill('gamma')
    await waitFor(async () => (await page.locator('table.docs tbody tr').count()) === 1 && (await rowOf(page, 'gamma').count()) === 1, 'the search to keep gamma only')
    await page.getByLabel('Search', { exact: true }).fill('')
    await waitFor(async () => (await page.locator('table.docs tbody tr[data-doc]').count()) === 4, 'the four documents back')
    await page.getByLabel('Status', { exact: true }).selectOption('failed')
    await textUntil(page, 'table.docs tbody', /No documents\./, 'no failed document')
    await page.getByLabel('Status', { exact: true }).selectOption('')
    await page.getByRole('button', { name: 'Title', exact: true }).click()
    await waitFor(async () => (await page.locator('table.docs th[aria-sort="descending"]').count()) === 1, 'title sorted descending')
    await page.getByRole('button', { name: 'Title', exact: true }).click()
    // the view re-renders after the click: read the fields once it shows the new order (a loaded machine is slow to)
    await waitFor(async () => (await page.locator('table.docs th[aria-sort="ascending"]').count()) === 1, 'title sorted ascending')
    assert.equal(await page.getByLabel('Sort by').inputValue(), 'title', 'the header sort shows in the sort field')
    assert.equal(await page.getByLabel('Order').inputValue(), 'asc')
    const byTitle = ((await (await svc.request('/api/kb/docs-kb/docs?sort_by=title&sort_order=asc')).json()) as Json).items.map((d: Json) => d.title)
    assert.equal(byTitle.length, 4)
    await waitFor(async () => JSON.stringify(await page.locator('table.docs tbody th').allTextContents()) === JSON.stringify(byTitle), 'titles in the service\'s ascending order')

    // download of the original
    const [download] = await Promise.all([page.waitForEvent('download'), rowOf(page, 'alpha').getByRole('button', { name: /^Download/ }).click()])
    assert.equal(download.suggestedFilename(), 'alpha.txt')
    const bytes = await (await download.createReadStream()).toArray()
    assert.match(Buffer.concat(bytes).toString(), /^Alpha handbook\./)

    // reindex
    const alphaId = (await rowOf(page, 'alpha').getAttribute('data-doc'))!
    const before = (await docStatus(svc, 'docs-kb', alphaId)).process_started_at
    await rowOf(page, 'alpha').getByRole('button', { name: /^Reindex/ }).click()
    await textUntil(page, '.notice', /alpha: queued for reindexing/, 'the reindex notice')
    await waitFor(async () => {
      const s = await docStatus(svc, 'docs-kb', alphaId)
      return s.status === 'indexed' && s.process_started_at !== before
    }, 'alpha indexed again')

    // recover a document stuck in running (its worker died), and fail another one with a reason
    const betaId = (await rowOf(page, 'Beta').getAttribute('data-doc'))!
    const gammaId = (await rowOf(page, 'gamma').getAttribute('data-doc'))!
    await svc.app.adapters.sql.query(`UPDATE documents SET status = 'running', updated_at = now() WHERE doc_id = ANY($1::text[])`, [[betaId, gammaId]])
    await rowOf(page, 'Beta').getByRole('button', { name: /^Recover/ }).waitFor()
    await rowOf(page, 'Beta').getByRole('button', { name: /^Recover/ }).click()
    await textUntil(page, '.notice', /Beta: recovered/, 'the recover notice')
    assert.equal((await settled(svc, 'docs-kb', betaId)).status, 'indexed')
    await rowOf(page, 'gamma').getByRole('button', { name: /^Fail/ }).click()
    const failDlg = page.getByRole('dialog', { name: /Mark gamma failed/ })
    await failDlg.getByLabel('Reason (optional)').fill('Stuck after a node restart')
    await failDlg.getByRole('button', { name: 'Mark failed' }).click()
    await textUntil(page, `table.docs tr[data-doc="${gammaId}"]`, /failed.*Stuck after a node restart/s, 'gamma failed with its reason')

    // delete: the failed one goes entirely; an indexed one is soft-deleted, then deleted for good
    await rowOf(page, 'gamma').getByRole('button', { name: /^Delete/ }).click()
    const delGamma = page.getByRole('dialog', { name: 'Delete gamma?' })
    assert.match((await delGamma.textContent()) ?? '', /removed for good/)
    await delGamma.getByRole('button', { name: 'Delete', exact: true }).click()
    await rowOf(page, 'gamma').waitFor({ state: 'detached' })
    await waitFor(async () => (await svc.request(`/api/kb/docs-kb/docs/${gammaId}/status`)).status === 404, 'gamma removed')
    await rowOf(page, 'alpha').getByRole('button', { name: /^Delete/ }).click()
    const delAlpha = page.getByRole('dialog', { name: 'Delete alpha?' })
    assert.match((await delAlpha.textContent()) ?? '', /kept as deleted/)
    await delAlpha.getByRole('button', { name: 'Delete', exact: true }).click()
    await textUntil(page, '.counts [data-status="deleted"] .n', /^1$/, 'one deleted document')
    await page.locator('.counts [data-status="deleted"]').click()
    await rowOf(page, 'alpha').getByRole('button', { name: /^Delete permanently/ }).click()
    await page.getByRole('dialog', { name: 'Delete alpha?' }).getByRole('button', { name: 'Delete permanently' }).click()
    await textUntil(page, '.counts [data-status="deleted"] .n', /^0$/, 'no deleted document left')
    await waitFor(async () => (await svc.request(`/api/kb/docs-kb/docs/${alphaId}/status`)).status === 404, 'alpha removed for good')
    await page.locator('.counts [data-status="total"]').click()

    // an outdated copy: its dedup verdict and reason, then restore
    const text = `# Travel policy\n\n${prose('travel', 12)}\n`
    const orig = await upload(svc, 'docs-kb', 'travel.md', text)
    await settled(svc, 'docs-kb', orig)
    const copy = await upload(svc, 'docs-kb', 'travel-copy.md', text)
    assert.equal((await settled(svc, 'docs-kb', copy)).status, 'outdated')
    await textUntil(page, '.counts [data-status="outdated"] .n', /^1$/, 'one outdated document')
    await page.locator('.counts [data-status="outdated"]').click()
    const outdated = page.locator(`table.docs tr[data-doc="${copy}"]`)
    await outdated.waitFor()
    const line = (await outdated.locator('.dedup').textContent()) ?? ''
    assert.match(line, /^identical \(stage \d, score \d\.\d\d\) of /)
    assert.ok(line.includes(orig), `the verdict names the original: ${line}`)
    assert.match(line, /not indexed/)
    await assertAccessible(page, 'outdated documents')
    await screenshot(page, 'base-outdated')
    await outdated.getByRole('button', { name: /^Restore/ }).click()
    await textUntil(page, '.notice', /Travel policy: restored/, 'the restore notice')
    assert.equal((await settled(svc, 'docs-kb', copy, ['indexed'])).status, 'indexed')
    await textUntil(page, '.counts [data-status="outdated"] .n', /^0$/, 'no outdated document left')
    assert.equal(await page.evaluate(() => (window as Json).__noReload), true, 'the page was never reloaded')
    assertClean(w, 'documents flow')
  })

  it('documents: a KB of 10,000 documents is read page by page, never whole', async () => {
    await createKb(svc, 'big-kb')
    const seed = await upload(svc, 'big-kb', 'seed.txt', prose('seed', 5))
    await settled(svc, 'big-kb', seed)
    await svc.app.adapters.sql.query(
      `INSERT INTO documents SELECT (jsonb_populate_record(t, jsonb_build_object(
         'doc_id', lpad(to_hex(g), 16, '0'), 'source', 'bulk-' || lpad(g::text, 5, '0') || '.txt', 'title', 'Bulk ' || lpad(g::text, 5, '0'),
         'status', CASE WHEN g % 10 = 0 THEN 'failed' ELSE 'indexed' END, 'storage_key', null))).*
       FROM documents t, generate_series(1, 9999) g WHERE t.doc_id = $1`, [seed])
    const w = await open()
    const { page } = w
    await page.goto(`${svc.url}/console#/kb/big-kb/docs`)
    await textUntil(page, '.pager-row p', /^10000 documents, page 1 of 200$/, 'the first page of 10,000')
    assert.equal(await page.locator('table.docs tbody tr').count(), 50)
    assert.equal(await page.locator('.counts [data-status="failed"] .n').textContent(), '999')
    await page.getByRole('button', { name: 'Last', exact: true }).click()
    await textUntil(page, '.pager-row p', /page 200 of 200$/, 'the last page')
    await page.getByLabel('Per page').selectOption('100')
    await textUntil(page, '.pager-row p', /page 1 of 100$/, 'pages of 100')
    assert.equal(await page.locator('table.docs tbody tr').count(), 100)
    await page.getByLabel('Search', { exact: true }).fill('Bulk 0999')
    await textUntil(page, '.pager-row p', /^10 documents, page 1 of 1$/, 'Bulk 0999x matches')
    assert.deepEqual((await page.locator('table.docs tbody th').allTextContents()).sort(), Array.from({ length: 10 }, (_, i) => `Bulk 0999${i}`))
    const lists = w.responses.filter((r) => /\/api\/kb\/big-kb\/docs\?/.test(r.path))
    assert.ok(lists.length >= 4)
    for (const r of lists) assert.ok(Number(new URL(r.path, svc.url).searchParams.get('page_size')) <= 100, `a page, never the whole list: ${r.path}`)
    assertClean(w, '10,000 documents')
  })

  it('settings: the overrides form from the schema endpoint; a 422 shows at its field; save and clear', async () => {
    await createKb(svc, 'settings-kb')
    const w = await open()
    const { page } = w
    await page.goto(`${svc.url}/console#/kb/settings-kb/settings`)
    const form = page.getByRole('form', { name: 'Overrides' })
    await form.waitFor()
    const schema = ((await (await svc.request('/api/kb/settings-kb/settings/schema')).json()) as Json).schema
    const overridable = Object.entries(schema).filter(([, e]: [string, Json]) => e.overridable).map(([k]) => k)
    assert.deepEqual(await form.locator('[data-key]').evaluateAll((els) => els.map((e) => (e as any).dataset.key)), overridable, 'one field per overridable key')
    const size = form.getByLabel('Chunk Size', { exact: true })
    await size.fill('5')
    await form.getByRole('button', { name: 'Save overrides' }).click()
    await waitFor(async () => (await size.getAttribute('aria-invalid')) === 'true', 'the chunk size field marked invalid')
    const err = page.locator(`#${await size.getAttribute('id')}-err`)
    assert.match((await err.textContent()) ?? '', /\S/, 'the message is at the field')
    assert.equal(await page.locator('[aria-invalid="true"]').count(), 1, 'only that field')
    await assertAccessible(page, 'settings with a field error')
    await screenshot(page, 'base-settings-error')
    await size.fill('2048')
    await form.getByLabel('Strategy', { exact: true }).selectOption({ label: 'semantic' })
    await form.getByRole('button', { name: 'Save overrides' }).click()
    await textUntil(page, '.notice', /Saved 2 overrides/, 'the save notice')
    assert.deepEqual(((await (await svc.request('/api/kb/settings-kb/settings/overrides')).json()) as Json).overrides, { 'chunking.chunk_size': 2048, 'chunking.strategy': 'semantic' })
    await page.getByRole('button', { name: 'Clear all overrides' }).click()
    await page.getByRole('dialog', { name: 'Clear all overrides?' }).getByRole('button', { name: 'Clear overrides' }).click()
    await textUntil(page, '.notice', /Overrides cleared/, 'the clear notice')
    assert.deepEqual(((await (await svc.request('/api/kb/settings-kb/settings/overrides')).json()) as Json).overrides, {})
    assert.equal(await size.inputValue(), '')
    assertClean(w, 'settings flow')
  })

  it('search playground: options, results with scores, pages, highlights and merged, the latency split and cache status, copy as curl', async () => {
    await createKb(svc, 'merge-kb', {
      'chunking.strategy': 'hierarchical', 'chunking.chunk_size': [2048, 512, 128], 'chunking.chunk_overlap': 0, 'chunking.min_chunk_chars': 10,
      'retrieval.auto_merge.enabled': true, 'retrieval.auto_merge.merge_threshold': 0.3,
    })
    await createKb(svc, 'plain-kb')
    await settled(svc, 'merge-kb', await upload(svc, 'merge-kb', 'deep.md', `# Deep\n\n${'Lantern harbor compass glacier. '.repeat(12)}\n\n${prose('filler', 30)}`))
    await settled(svc, 'plain-kb', await upload(svc, 'plain-kb', 'harbor.md', `# Harbor\n\nThe lantern at the harbor. ${prose('harbor', 6)}`))
    const w = await open()
    const { page, context } = w
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: svc.url })
    await page.goto(`${svc.url}/console#/search`)
    const form = page.getByRole('form', { name: 'Search' })
    await form.waitFor()
    await form.getByLabel('Query').fill('lantern harbor compass glacier')
    await form.getByLabel('merge-kb').check()
    await form.getByLabel('plain-kb').check()
    await form.getByLabel('Top k').fill('500')
    await form.getByRole('button', { name: 'Search', exact: true }).click()
    await waitFor(async () => (await form.getByLabel('Top k').getAttribute('aria-invalid')) === 'true', 'top_k refused at its field')
    assert.match((await page.locator(`#${await form.getByLabel('Top k').getAttribute('id')}-err`).textContent()) ?? '', /top_k must be an integer between 1 and 100/)
    await form.getByLabel('Top k').fill('10')
    await form.getByLabel('Mode').selectOption('similarity')
    await form.getByRole('button', { name: 'Search', exact: true }).click()
    const results = page.locator('ol.results > li')
    await results.first().waitFor()
    assert.ok((await page.locator('ol.results .badge.s-merged').count()) >= 1, 'a merged result is flagged')
    const first = (await results.first().textContent()) ?? ''
    assert.match(first, /page 1/)
    assert.match(first, /score \d\.\d{4}/)
    assert.match(first, /rerank \d\.\d{4}/)
    assert.ok((await page.locator('ol.results mark', { hasText: /^lantern$/i }).count()) >= 1, 'query words are highlighted')
    const timing = async () => Object.fromEntries(await page.locator('table.timing tr').evaluateAll((rows) => rows.map((r) => [r.querySelector('th')!.textContent, r.querySelector('td')!.textContent])))
    const split = await timing()
    assert.equal(split.Cache, 'miss')
    for (const k of ['Embed', 'Search merge-kb', 'Search plain-kb', 'Fusion', 'Rerank']) assert.match(split[k] ?? '', /^\d+\.\d ms$/, `${k}: ${split[k]}`)
    await assertAccessible(page, 'search results')
    await screenshot(page, 'base-search')
    await form.getByRole('button', { name: 'Search', exact: true }).click()
    await waitFor(async () => (await timing()).Cache === 'hit', 'the second search served from the cache')

    await form.getByRole('button', { name: 'Copy as curl' }).click()
    await textUntil(page, 'form[aria-label="Search"] [role="status"]', /Copied/, 'the copy notice')
    const curl = await page.evaluate(() => navigator.clipboard.readText())
    assert.match(curl, /^curl -sS -X POST 'http:\/\/127\.0\.0\.1:\d+\/api\/search'/)
    // The copied command is the request: run it.
    const { stdout } = await promisify(execFile)('sh', ['-c', curl])
    const answer = JSON.parse(stdout)
    assert.equal(answer.query, 'lantern harbor compass glacier')
    assert.equal(answer.meta.search_mode, 'similarity')
    assert.equal(answer.results.length, await results.count())
    assertClean(w, 'search flow')
  })

  it('connectors: web, confluence and github forms from their schemas, 422 at the field; sync now, status, documents, abort; a crawled title with a script is text', async () => {
    await createKb(svc, 'conn-kb')
    let gate: Promise<void> | null = null
    const site = await listenLoopback(createServer((req, res) => {
      const send = (html: string) => res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html)
      const article = (title: string, body: string) => `<!doctype html><html><head><title>${title}</title></head><body><article><h1>${title}</h1><p>${body}</p></article></body></html>`
      void (async () => {
        if (req.url === '/site/') return send('<html><head><title>Index</title></head><body><a href="/site/evil">evil</a> <a href="/site/plain">plain</a></body></html>')
        if (gate) await gate
        if (req.url === '/site/evil') {
          return send(article('&lt;script&gt;alert(1)&lt;/script&gt; Evil &lt;img src=x onerror=alert(2)&gt;',
            `Crawled &lt;b onmouseover=alert(3)&gt;markup&lt;/b&gt; text. <script>alert(4)</script>${prose('evil', 6)}`))
        }
        if (req.url === '/site/plain') return send(article('Plain page', prose('plain', 6)))
        res.writeHead(404).end()
      })()
    }))
    cleanups.push(() => site.close())
    const w = await open()
    const { page } = w
    await page.goto(`${svc.url}/console#/connectors`)
    await page.getByRole('button', { name: 'New connector' }).click()
    const dlg = page.getByRole('dialog', { name: 'New connector' })
    await dlg.getByLabel('Knowledge base').selectOption('conn-kb')
    // github: its own fields; a bad owner is refused at its field
    await dlg.getByLabel('Source type').selectOption('github')
    await dlg.getByLabel('Name', { exact: true }).fill('Repo')
    await dlg.getByLabel('Owner (required)').fill('bad owner!')
    await dlg.getByLabel('Repo (required)').fill('quarry')
    assert.equal(await dlg.getByLabel('Api url').inputValue(), 'https://api.github.com', 'defaults from the schema')
    await dlg.getByRole('button', { name: 'Create' }).click()
    await waitFor(async () => (await dlg.getByLabel('Owner (required)').getAttribute('aria-invalid')) === 'true', 'owner refused at its field')
    await assertAccessible(page, 'connector form (github) with an error')
    // confluence: created, then edited below
    await dlg.getByLabel('Source type').selectOption('confluence')
    assert.equal(await dlg.getByLabel('Owner (required)').count(), 0, 'the form follows the source type')
    await dlg.getByLabel('Name', { exact: true }).fill('Wiki')
    await dlg.getByLabel('Base url (required)').fill('http://127.0.0.1:9/wiki')
    await dlg.getByLabel('Space key (required)').fill('ENG')
    await dlg.getByLabel('Exclude labels').fill('draft\nobsolete')
    await dlg.getByRole('button', { name: 'Create' }).click()
    await page.locator('tr[data-connector]', { hasText: 'Wiki' }).waitFor()
    const wiki = ((await (await svc.request('/api/connectors?kb_id=conn-kb')).json()) as Json).items.find((c: Json) => c.name === 'Wiki')
    assert.deepEqual([wiki.source_type, wiki.config.space_key, wiki.config.exclude_labels], ['confluence', 'ENG', ['draft', 'obsolete']])
    await page.getByRole('link', { name: 'Wiki', exact: true }).click()
    await page.getByRole('button', { name: 'Edit', exact: true }).click()
    const edit = page.getByRole('dialog', { name: 'Edit Wiki' })
    assert.equal(await edit.getByLabel('Space key (required)').inputValue(), 'ENG')
    await edit.getByLabel('Space key (required)').fill('OPS')
    await edit.getByRole('button', { name: 'Save' }).click()
    await textUntil(page, '.notice', /Saved Wiki/, 'the edit notice')
    assert.equal(((await (await svc.request(`/api/connectors/${wiki.connector_id}`)).json()) as Json).config.space_key, 'OPS')

    // web: seed required (422 at the field), then a crawl of the loopback site
    await page.goto(`${svc.url}/console#/kb/conn-kb/connectors`)
    await page.getByRole('button', { name: 'New connector' }).click()
    const web = page.getByRole('dialog', { name: 'New connector' })
    assert.equal(await web.getByLabel('Knowledge base').isDisabled(), true, 'the KB of the tab')
    await web.getByLabel('Name', { exact: true }).fill('Site')
    await web.getByRole('button', { name: 'Create' }).click()
    await waitFor(async () => (await web.getByLabel('Seed urls (required)').getAttribute('aria-invalid')) === 'true', 'seed_urls refused at its field')
    await web.getByLabel('Seed urls (required)').fill(`${site.url}/site/`)
    await web.getByLabel('Depth').fill('1')
    await web.getByLabel('Respect robots txt').uncheck()
    await web.getByRole('button', { name: 'Create' }).click()
    await page.getByRole('link', { name: 'Site', exact: true }).click()
    await page.getByRole('heading', { name: 'Site', level: 1 }).waitFor()
    await page.getByRole('button', { name: 'Sync now' }).click()
    await rowOf(page, EVIL_TITLE).waitFor({ timeout: 60_000 })
    await rowOf(page, 'Plain page').waitFor()
    await textUntil(page, '[aria-label="Sync status"]', /Last run.*completed.*stored 2/s, 'the finished run in the status')
    assert.match((await page.locator('[aria-label="Sync status"] [data-count="total"]').textContent()) ?? '', /total 2/)
    assert.equal(await page.locator('img').count(), 0)
    await page.getByRole('button', { name: EVIL_TITLE, exact: true }).click()
    const details = page.getByRole('dialog', { name: EVIL_TITLE })
    await details.waitFor()
    assert.ok(((await details.textContent()) ?? '').includes(`${site.url}/site/evil`))
    await assertAccessible(page, 'document details')
    await details.getByRole('button', { name: 'Close' }).click()
    await assertAccessible(page, 'connector detail')
    await screenshot(page, 'base-connector')

    // abort: the site holds its pages until the abort is in
    let release!: () => void
    gate = new Promise<void>((r) => (release = r))
    const connectorId = (await page.evaluate(() => location.hash)).split('/').pop()!
    await page.getByRole('button', { name: 'Sync now' }).click()
    await page.getByRole('button', { name: 'Abort sync' }).click()
    await textUntil(page, '.notice', /Abort requested/, 'the abort notice')
    release()
    gate = null
    await textUntil(page, '[aria-label="Sync status"]', /Last run.*aborted/s, 'the aborted run')
    await page.getByRole('button', { name: 'Sync now' }).waitFor()

    // the crawled text is text in the search playground too
    await page.goto(`${svc.url}/console#/search`)
    await page.getByLabel('Query').fill('crawled markup text')
    await page.getByLabel('conn-kb').check()
    await page.getByRole('button', { name: 'Search', exact: true }).click()
    await page.locator('ol.results h3', { hasText: EVIL_TITLE }).first().waitFor()
    assert.ok((await page.locator('ol.results').textContent())!.includes('<b onmouseover=alert(3)>markup</b>'), 'the crawled markup is shown as characters')
    assert.equal(await page.locator('ol.results b, ol.results img, ol.results script').count(), 0)

    // delete names the documents it takes
    await page.goto(`${svc.url}/console#/connectors/${connectorId}`)
    await page.getByRole('button', { name: 'Delete', exact: true }).click()
    const del = page.getByRole('dialog', { name: 'Delete Site?' })
    assert.match((await del.textContent()) ?? '', /the 2 documents it collected into conn-kb/)
    await del.getByRole('button', { name: 'Delete connector' }).click()
    await page.getByRole('heading', { name: 'conn-kb', level: 1 }).waitFor()
    assertClean(w, 'connectors flow')
  })

  it('keyboard and dark theme: the views are reached and used by keyboard; axe passes in the dark theme', async () => {
    await createKb(svc, 'dark-kb')
    await settled(svc, 'dark-kb', await upload(svc, 'dark-kb', 'night.txt', prose('night', 6)))
    const w = await open('dark')
    const { page } = w
    await page.goto(`${svc.url}/console`)
    await page.getByRole('heading', { name: 'Knowledge bases', level: 1 }).waitFor()
    assert.equal(await page.evaluate(() => getComputedStyle(document.body).backgroundColor), 'rgb(13, 17, 23)', 'the dark palette applies')
    // Tab from the top: the skip link first, then the main navigation.
    await page.keyboard.press('Tab')
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Skip to content')
    await page.keyboard.press('Enter')
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'main')
    await assertAccessible(page, 'KB list (dark)')
    // open the KB by keyboard
    await page.getByRole('link', { name: 'dark-kb' }).focus()
    await page.keyboard.press('Enter')
    await page.getByRole('heading', { name: 'dark-kb', level: 1 }).waitFor()
    await rowOf(page, 'night').waitFor()
    await assertAccessible(page, 'documents (dark)')
    // a dialog by keyboard: focus goes in, Escape closes it and gives focus back
    await rowOf(page, 'night').getByRole('button', { name: /^Delete/ }).focus()
    await page.keyboard.press('Enter')
    const dlg = page.getByRole('dialog', { name: 'Delete night?' })
    await dlg.waitFor()
    assert.equal(await page.evaluate(() => document.activeElement?.closest('dialog') !== null), true, 'focus is in the dialog')
    await assertAccessible(page, 'confirmation (dark)')
    await page.keyboard.press('Escape')
    await dlg.waitFor({ state: 'detached' })
    assert.equal((await docStatus(svc, 'dark-kb', (await rowOf(page, 'night').getAttribute('data-doc'))!)).status, 'indexed', 'nothing was deleted')
    await page.goto(`${svc.url}/console#/search`)
    await page.getByRole('form', { name: 'Search' }).waitFor()
    await assertAccessible(page, 'search (dark)')
    await screenshot(page, 'base-search-dark')
    assertClean(w, 'dark theme')
  })

  it('no page made a request outside the origin or logged a script error', () => {
    assert.ok(pages.length >= 7)
    for (const w of pages) assertClean(w, w.page.url())
  })
})

describe('operator console, base edition (services: PostgreSQL, Redis, S3)', { skip: skipWithoutChromium || skipUnless('postgres') || skipUnless('redis') }, () => {
  it('smoke: create a KB, upload by drop, see it indexed, search it', async (t) => {
    const svc = await startApp(t, { services: true, settings: FAST })
    const browser = await launchChromium()
    t.after(() => browser.close())
    const w = await openPage(browser, svc.url)
    const { page } = w
    await page.goto(`${svc.url}/console`)
    await page.getByRole('button', { name: 'New knowledge base' }).click()
    const dlg = page.getByRole('dialog', { name: 'New knowledge base' })
    await dlg.getByLabel('ID', { exact: true }).fill('smoke-kb')
    await dlg.getByRole('button', { name: 'Create' }).click()
    await page.getByRole('link', { name: 'smoke-kb' }).click()
    await dropFiles(page, '.dropzone', [{ name: 'smoke.txt', content: `Smoke test. ${prose('smoke', 6)}` }, { name: EVIL_FILE, content: prose('evil', 6) }])
    await textUntil(page, '.counts [data-status="indexed"] .n', /^2$/, 'two documents indexed')
    await rowOf(page, '<img src=x onerror=alert(1)>').waitFor()
    await page.getByRole('link', { name: 'Search' }).click()
    await page.getByLabel('Query').fill('smoke test')
    await page.getByLabel('smoke-kb').check()
    await page.getByRole('button', { name: 'Search', exact: true }).click()
    await page.locator('ol.results > li').first().waitFor()
    await screenshot(page, 'services-search')
    assertClean(w, 'services smoke')
  })
})
