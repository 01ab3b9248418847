// Rate limiting over HTTP in the access-controlled edition (spec 8, notes.md): per user after authentication, the
// first matching rule, weights, the default rule, exempt paths, super-admins not counted, 429 with the older
// service's body and Retry-After, on REST and /mcp. One service per driver set; each case uses its own users, so
// their counters start at zero.
import assert from 'node:assert/strict'
import { after, before, it } from 'node:test'
import { telemetry } from '../../../kernel/telemetry.ts'
import { startAuthzFixture, type AuthzFixture } from '../../helpers/authz-fixture.ts'
import type { StartOptions } from '../../helpers/app.ts'

export const RATE_LIMIT_SETTINGS = {
  enabled: true,
  rules: [
    { name: 'search', paths: ['/api/search'], limit: '3/minute' },
    { name: 'upload', paths: ['/api/kb/*/docs/upload', '/api/kb/*/docs/upload/batch'], limit: '20/minute', weights: { '/api/kb/*/docs/upload/batch': 10 } },
    { name: 'mcp', paths: ['/mcp'], limit: '2/minute' },
  ],
  default: '4/minute',
  exempt_paths: ['/health', '/ready', '/api/kb/*/docs/status'],
}

const search = { method: 'POST', json: { query: 'leave policy', kb_ids: ['no-such-kb'] } }

export async function expect429(res: Response, rule: string, windowSec: number): Promise<void> {
  assert.equal(res.status, 429, await res.clone().text())
  assert.deepEqual(await res.json(), { detail: `Rate limit exceeded for '${rule}' requests` })
  const retryAfter = res.headers.get('retry-after')
  assert.match(retryAfter ?? '', /^\d+$/, 'whole seconds')
  assert.ok(Number(retryAfter) >= 1 && Number(retryAfter) <= windowSec, `Retry-After ${retryAfter}`)
}

export function rateLimitSuite(label: string, opts: StartOptions): void {
  let f: AuthzFixture
  const cleanups: (() => unknown)[] = []
  before(async () => {
    f = await startAuthzFixture({ after: (fn) => void cleanups.push(fn) }, { ...opts, authzEnabled: false, settings: { rate_limit: RATE_LIMIT_SETTINGS } })
  })
  after(async () => {
    for (const c of cleanups.reverse()) await c()
  })

  it(`${label}: a rule's limit per user: 429 with the rule's name and Retry-After, other users unaffected`, async () => {
    const refusedBefore = (await telemetry.metrics.rateLimited.get()).values.find((v) => v.labels.rule === 'search')?.value ?? 0
    for (let i = 0; i < 3; i++) assert.equal((await f.asUser('rl-search-1', '/api/search', search)).status, 200)
    await expect429(await f.asUser('rl-search-1', '/api/search', search), 'search', 60)
    await expect429(await f.asUser('rl-search-1', '/api/search', search), 'search', 60)
    assert.equal((await f.asUser('rl-search-2', '/api/search', search)).status, 200, 'counted per user')
    const refused = (await telemetry.metrics.rateLimited.get()).values.find((v) => v.labels.rule === 'search')?.value ?? 0
    assert.equal(refused - refusedBefore, 2, 'refusals are counted in quarry_rate_limit_rejections_total')
  })

  it(`${label}: super-admins are not limited`, async () => {
    for (let i = 0; i < 8; i++) assert.equal((await f.asUser('rl-boss', '/api/search', search, { superAdmin: true })).status, 200)
  })

  it(`${label}: paths no rule matches share the default limit; exempt paths are never counted`, async () => {
    for (let i = 0; i < 4; i++) assert.notEqual((await f.asUser('rl-default', i % 2 ? '/api/kb' : '/api/kb/no-such-kb')).status, 429)
    await expect429(await f.asUser('rl-default', '/api/kb'), 'default', 60)
    await expect429(await f.asUser('rl-default', '/api/connectors'), 'default', 60)
    for (let i = 0; i < 6; i++) assert.equal((await f.asUser('rl-default', '/api/kb/no-such-kb/docs/status')).status, 404, 'exempt: not limited')
    assert.equal((await f.asUser('rl-default', '/api/search', search)).status, 200, 'a rule of its own: not the default counter')
    assert.equal((await f.svc.request('/health')).status, 200)
  })

  it(`${label}: weights: a batch upload counts as 10 against the upload rule it shares with single uploads`, async () => {
    const empty = () => ({ method: 'POST', body: new FormData() })
    for (let i = 0; i < 2; i++) assert.notEqual((await f.asUser('rl-upload', '/api/kb/no-such-kb/docs/upload/batch', empty())).status, 429)
    await expect429(await f.asUser('rl-upload', '/api/kb/no-such-kb/docs/upload', empty()), 'upload', 60)
    await expect429(await f.asUser('rl-upload', '/api/kb/other-kb/docs/upload/batch', empty()), 'upload', 60)
    assert.notEqual((await f.asUser('rl-upload-2', '/api/kb/no-such-kb/docs/upload/batch', empty())).status, 429)
  })

  it(`${label}: /mcp is limited like any route`, async () => {
    const init = {
      method: 'POST', headers: { accept: 'application/json, text/event-stream' },
      json: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 't', version: '1' } } },
    }
    for (let i = 0; i < 2; i++) {
      const res = await f.asUser('rl-mcp', '/mcp', init)
      assert.notEqual(res.status, 429)
      await res.body?.cancel()
    }
    await expect429(await f.asUser('rl-mcp', '/mcp', init), 'mcp', 60)
  })

  it(`${label}: requests without a valid token are refused by authentication (401), never counted`, async () => {
    for (let i = 0; i < 6; i++) assert.equal((await f.svc.request('/api/kb')).status, 401)
  })
}
