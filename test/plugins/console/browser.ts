// Chromium (Debian's, driven by playwright-core) for the console's tests: every page is watched for requests
// outside the origins it may reach (they are aborted and recorded), script errors, alert dialogs, CSP
// violations and 403 answers; axe-core (a dev dependency, injected by the test, never shipped) checks
// accessibility; screenshots go to test-artifacts/console/ (git-ignored).
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import type { Browser, BrowserContext, Page } from 'playwright-core'

// Browser globals of the functions run in the page (page.evaluate): the project compiles without DOM typings.
declare const window: any, document: any, DataTransfer: any

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
/** describe(..., { skip }): Chromium is required in CI (QUARRY_REQUIRE_SERVICES=1), optional elsewhere. */
export const skipWithoutChromium: string | false = existsSync(CHROMIUM) || process.env.QUARRY_REQUIRE_SERVICES === '1' ? false : `no Chromium at ${CHROMIUM}`
export const ARTIFACTS = join('test-artifacts', 'console')

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')

export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core')
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage',
      // A second fence behind the request routing below: no name resolves, nothing but loopback is reached.
      '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
    ],
  })
}

export interface Watched {
  context: BrowserContext
  page: Page
  /** Requests that the console's own pages made outside the allowed origins (aborted). */
  external: string[]
  /** Uncaught exceptions and console errors other than HTTP error statuses of fetches. */
  errors: string[]
  /** alert/confirm/prompt dialogs that opened (dismissed). */
  dialogs: string[]
  cspViolations: string[]
  /** API answers seen: method, path, status. */
  responses: { method: string; path: string; status: number }[]
}

/**
 * A new context and page. `origin` is the service; `allow` other origins the console may reach (the issuer's token
 * endpoint). Requests from other sites' pages (the issuer's login page loads a web font) are aborted too but not
 * held against the console.
 */
export async function openPage(browser: Browser, origin: string, opts: { allow?: string[]; colorScheme?: 'light' | 'dark' } = {}): Promise<Watched> {
  const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 }, colorScheme: opts.colorScheme ?? 'light' })
  const allowed = new Set([origin, ...(opts.allow ?? [])])
  const w: Watched = { context, page: null as never, external: [], errors: [], dialogs: [], cspViolations: [], responses: [] }
  await context.route('**/*', async (route) => {
    const req = route.request()
    const url = req.url()
    const target = new URL(url).origin
    if (allowed.has(target)) return route.continue()
    let from = ''
    try {
      from = new URL(req.frame().url()).origin
    } catch {
      // a request without a frame (service worker, …) counts as the console's
    }
    if (from === '' || from === origin || from === 'null') w.external.push(url)
    return route.abort()
  })
  const page = await context.newPage()
  w.page = page
  page.on('pageerror', (e) => w.errors.push(`pageerror: ${e.message}`))
  page.on('console', (m) => {
    // Only the console's own pages (the issuer's login page logs its blocked web font).
    if (new URL(page.url()).origin !== origin) return
    if (m.type() === 'error' && !/^Failed to load resource: the server responded with a status of/.test(m.text())) w.errors.push(`console: ${m.text()}`)
  })
  page.on('dialog', (d) => {
    w.dialogs.push(`${d.type()}: ${d.message()}`)
    void d.dismiss()
  })
  page.on('response', (r) => {
    const u = new URL(r.url())
    if (u.origin === origin) w.responses.push({ method: r.request().method(), path: u.pathname + u.search, status: r.status() })
  })
  await page.exposeFunction('__cspViolation', (text: string) => void w.cspViolations.push(text))
  await page.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e: any) => {
      void (window as unknown as { __cspViolation(t: string): void }).__cspViolation(`${e.violatedDirective} ${e.blockedURI}`)
    })
  })
  return w
}

/** Nothing left the allowed origins, no script error, no dialog, no CSP violation. */
export function assertClean(w: Watched, label: string): void {
  assert.deepEqual(w.external, [], `${label}: requests outside the allowed origins`)
  assert.deepEqual(w.errors, [], `${label}: script errors`)
  assert.deepEqual(w.dialogs, [], `${label}: dialogs opened (a script ran)`)
  assert.deepEqual(w.cspViolations, [], `${label}: CSP violations`)
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true })
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true })
}

/** axe-core on the page as it is: no serious or critical violation (WCAG 2.1 A/AA and best practices). */
export async function assertAccessible(page: Page, label: string): Promise<void> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE_SOURCE)
  const result = await page.evaluate(() => (window as unknown as { axe: { run(ctx: unknown, opts: unknown): Promise<any> } }).axe.run(document, {
    runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] },
    resultTypes: ['violations'],
  }))
  const bad = (result.violations as { id: string; impact: string; help: string; nodes: { target: string[] }[] }[])
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id}: ${v.help} at ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | ')}`)
  assert.deepEqual(bad, [], `axe on ${label}`)
}

/** Drops files on an element as a user's drag and drop would (a DataTransfer holding File objects). */
export async function dropFiles(page: Page, selector: string, files: { name: string; content: string; type?: string }[]): Promise<void> {
  const transfer = await page.evaluateHandle((list) => {
    const dt = new DataTransfer()
    for (const f of list) dt.items.add(new File([f.content], f.name, { type: f.type ?? 'text/plain' }))
    return dt
  }, files)
  await page.dispatchEvent(selector, 'dragover', { dataTransfer: transfer })
  await page.dispatchEvent(selector, 'drop', { dataTransfer: transfer })
}
