import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { startApp } from '../helpers/app.ts'

type Json = any
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'

describe('API description', () => {
  it('/openapi.json is OpenAPI 3.1 with every route, its schemas and error responses', async (t) => {
    const svc = await startApp(t)
    const res = await svc.request('/openapi.json')
    assert.equal(res.status, 200)
    assert.match(res.headers.get('content-type') ?? '', /application\/json/)
    const doc = await res.json() as Json
    assert.equal(doc.openapi, '3.1.0')
    for (const route of svc.app.routes.filter((r) => !r.hidden)) {
      const op = doc.paths[route.path]?.[route.method.toLowerCase()]
      assert.ok(op, `${route.method} ${route.path} is described`)
      assert.ok(op.responses['500'], `${route.method} ${route.path} documents 500`)
    }
    const create = doc.paths['/api/kb'].post
    assert.equal(create.requestBody.content['application/json'].schema.properties.kb_id.pattern, '^[a-z0-9][a-z0-9_-]{0,62}$')
    assert.ok(create.responses['201'] && create.responses['409'] && create.responses['422'])
    const get = doc.paths['/api/kb/{kb_id}'].get
    assert.deepEqual(get.parameters.map((p: Json) => [p.name, p.in, p.required]), [['kb_id', 'path', true]])
    assert.ok(get.responses['404'].content['application/json'].schema.properties.detail)
    assert.ok(doc.components.schemas.ValidationError)
  })

  it('/docs and /redoc are served from local packages (no CDN)', async (t) => {
    const svc = await startApp(t)
    for (const path of ['/docs', '/redoc']) {
      const html = await (await svc.request(path)).text()
      assert.doesNotMatch(html, /https?:\/\//, `${path} references no remote URL`)
      for (const src of html.matchAll(/(?:src|href)="([^"]+)"/g)) {
        const res = await svc.request(src[1])
        assert.equal(res.status, 200, `${path} asset ${src[1]}`)
        assert.ok((await res.arrayBuffer()).byteLength > 100)
      }
    }
    assert.equal((await svc.request('/docs/static/../../package.json')).status, 404)
  })

  it('Swagger UI renders the operations in headless Chromium', { skip: existsSync(CHROMIUM) || process.env.QUARRY_REQUIRE_SERVICES === '1' ? false : `no Chromium at ${CHROMIUM}` }, async (t) => {
    const svc = await startApp(t)
    const { chromium } = await import('playwright-core')
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    })
    t.after(() => browser.close())
    const page = await browser.newPage()
    const external: string[] = []
    page.on('request', (r) => { if (!r.url().startsWith(svc.url)) external.push(r.url()) })
    await page.goto(`${svc.url}/docs`)
    await page.waitForSelector('.opblock-summary-path', { timeout: 30_000 })
    const paths = await page.$$eval('.opblock-summary-path', (els) => els.map((e) => e.getAttribute('data-path') ?? e.textContent ?? ''))
    for (const expected of ['/api/kb', '/api/kb/{kb_id}', '/api/kb/{kb_id}/settings/overrides', '/health', '/ready']) {
      assert.ok(paths.some((p) => p.replace(/\u200b/g, '') === expected), `Swagger UI lists ${expected}; saw ${paths.join(', ')}`)
    }
    assert.deepEqual(external.filter((u) => !u.startsWith('data:')), [], 'the page loads nothing from outside')
  })
})
