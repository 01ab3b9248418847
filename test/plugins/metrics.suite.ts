// GET /metrics after real traffic through the HTTP stack: the scrape parses as Prometheus text, states
// (documents, queue, pipeline totals) match what the API reports, labels carry route templates only.
// Run on both driver sets. The instruments fed from other modules (kernel dispatch, search, pipeline, compute
// pool, connectors) are asserted in tests of their own, which skip saying so while that code does not feed them.
import { after, before, it, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, type StartedApp, type StartOptions } from '../helpers/app.ts'
import { md, newKb, prose, settle, upload } from './docs.suite.ts'
import { CONNECTOR_TEST_SETTINGS, createConnector, syncAndWait } from './connectors/connectors.suite.ts'
import { startWebSite } from '../helpers/web-site.ts'
import { parsePrometheus, type Scrape } from '../telemetry/prom-text.ts'
import { withMetricsPlugin } from '../telemetry/with-metrics.ts'

type Json = any

const withMetrics = (opts: StartOptions): StartOptions =>
  ({ ...opts, settings: { ...CONNECTOR_TEST_SETTINGS, ...opts.settings }, plugins: withMetricsPlugin() })

export async function scrape(svc: StartedApp): Promise<Scrape> {
  const res = await svc.request('/metrics')
  assert.equal(res.status, 200)
  assert.equal(res.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8')
  return parsePrometheus(await res.text())
}

/** One indexed document and one search, through the API. */
async function traffic(svc: StartedApp): Promise<{ kb: string; docId: string }> {
  const kb = await newKb(svc)
  const res = await upload(svc, kb, 'harbour.md', md('Harbour rules', prose('harbour', 8)))
  assert.equal(res.status, 202)
  const docId = ((await res.json()) as Json).doc_id
  assert.equal((await settle(svc, kb, docId)).status, 'indexed')
  const found = await svc.request('/api/search', { method: 'POST', json: { query: 'harbour rules', kb_ids: [kb] } })
  assert.equal(found.status, 200)
  return { kb, docId }
}

/** An instrument fed from code outside this plugin has samples: its call into kernel/telemetry.ts is there. */
function needsFeed(_t: TestContext, s: Scrape, name: string, where: string): boolean {
  assert.ok(s.find(name).length > 0, `${name} has no samples: ${where} does not feed it`)
  return true
}

export function metricsSuite(label: string, opts: StartOptions): void {
  // One service and one round of traffic for the whole suite: every test reads its own part of the scrapes.
  let svc: StartedApp
  let kb: string
  let docId: string
  let first: Scrape
  let s: Scrape
  let syncOutcome: string
  const cleanups: (() => unknown)[] = []
  before(async () => {
    svc = await startApp({ after: (fn: () => unknown) => void cleanups.push(fn) }, withMetrics(opts))
    first = await scrape(svc)
    ;({ kb, docId } = await traffic(svc))
    assert.equal((await svc.request(`/api/kb/${kb}-missing`)).status, 404)
    assert.equal((await svc.request(`/no/such/${kb}`)).status, 404)
    // Three identical searches: the search cache answers at least the last one.
    for (let i = 0; i < 2; i++) assert.equal((await svc.request('/api/search', { method: 'POST', json: { query: 'harbour rules', kb_ids: [kb] } })).status, 200)
    const body = { query: 'harbour rules', kb_ids: [kb, await newKb(svc)], options: { mode: 'similarity' } }
    assert.equal((await svc.request('/api/search', { method: 'POST', json: body })).status, 200)
    const site = await startWebSite({ articles: 2 })
    cleanups.push(() => site.close())
    const connector = await createConnector(svc, { kb_id: await newKb(svc), name: 'Site', source_type: 'web', config: { seed_urls: [`${site.url}/docs`] } })
    syncOutcome = (await syncAndWait(svc, connector.connector_id)).last_sync?.outcome
    s = await scrape(svc)
  })
  after(async () => {
    for (const c of cleanups) await c()
  })

  it(`${label}: documents by status, queue depth and pipeline totals follow real traffic`, () => {
    for (const status of ['uploading', 'fetching', 'pending', 'running', 'failed', 'deleting', 'deleted', 'outdated']) {
      assert.equal(s.find('quarry_documents', { status }).length, 1, status)
    }
    assert.equal(s.find('quarry_documents', { status: 'total' }).length, 0)
    for (const state of ['ready', 'delayed', 'inflight']) {
      assert.equal(s.value('quarry_queue_messages', { topic: 'ingest', state }), 0, state)
    }
    assert.equal(s.value('quarry_metrics_source_up', { source: 'documents' }), 1)
    assert.equal(s.value('quarry_metrics_source_up', { source: 'queue' }), 1)
    assert.equal(s.value('quarry_worker_active_documents'), 0)

    // This app's pipeline indexed exactly the documents its fresh database holds as indexed (the upload and the
    // connector's pages).
    const indexed = (x: Scrape) => x.value('quarry_ingest_documents_total', { outcome: 'indexed' })
    assert.ok(indexed(s) - indexed(first) >= 2)
    assert.equal(indexed(s) - indexed(first), s.value('quarry_documents', { status: 'indexed' }))
    assert.ok(s.value('quarry_ingest_stage_seconds_total', { stage: 'parse' }) > 0)
    assert.ok(s.value('quarry_ingest_chunks_total') > 0)
    assert.ok(s.value('quarry_ingest_bytes_total') > 0)
    assert.equal(s.types.get('quarry_ingest_documents_total'), 'counter')
  })

  it(`${label}: process metrics, and the instruments other modules record into are declared`, () => {
    assert.ok(s.value('process_cpu_user_seconds_total') > 0)
    assert.ok(s.value('nodejs_heap_size_used_bytes') > 0)
    assert.equal(s.find('nodejs_eventloop_lag_seconds').length, 1)
    for (const [name, type] of [
      ['quarry_http_requests_total', 'counter'],
      ['quarry_http_request_duration_seconds', 'histogram'],
      ['quarry_search_duration_seconds', 'histogram'],
      ['quarry_ingest_stage_duration_seconds', 'histogram'],
      ['quarry_connector_syncs_total', 'counter'],
      ['quarry_rate_limit_rejections_total', 'counter'],
    ]) assert.equal(s.types.get(name), type, name)
  })

  it(`${label}: HTTP requests by route template and status, never by raw path`, (t) => {
    if (!needsFeed(t, s, 'quarry_http_requests_total', 'the kernel dispatcher (kernel/app.ts)')) return
    assert.ok(s.value('quarry_http_requests_total', { method: 'POST', route: '/api/kb/{kb_id}/docs/upload', status: '202' }) >= 1)
    assert.ok(s.value('quarry_http_requests_total', { method: 'POST', route: '/api/search', status: '200' }) >= 3)
    assert.ok(s.value('quarry_http_requests_total', { method: 'GET', route: '/api/kb/{kb_id}', status: '404' }) >= 1)
    assert.ok(s.value('quarry_http_requests_total', { method: 'GET', route: 'unmatched', status: '404' }) >= 1)
    const searches = { method: 'POST', route: '/api/search', status: '200' }
    assert.equal(s.value('quarry_http_request_duration_seconds_count', searches), s.value('quarry_http_requests_total', searches))
    assert.equal(s.find('quarry_http_request_duration_seconds_bucket', { ...searches, le: '+Inf' }).length, 1)
    // Bounded label sets: no id and no raw path of the traffic appears in any label.
    for (const sample of s.samples) {
      for (const v of Object.values(sample.labels)) {
        assert.ok(!v.includes(kb) && !v.includes(docId) && !v.includes('/no/such'), `${sample.name} ${v}`)
      }
    }
  })

  it(`${label}: search latency by mode, KB count and cache outcome`, (t) => {
    if (!needsFeed(t, s, 'quarry_search_duration_seconds_count', 'plugins/search')) return
    // The registry is the process's: count what this suite's searches added.
    const added = (labels: Record<string, string>) => {
      const was = first.find('quarry_search_duration_seconds_count', labels)
      return s.value('quarry_search_duration_seconds_count', labels) - (was[0]?.value ?? 0)
    }
    const hybrid = { mode: 'hybrid', kbs: '1' }
    assert.ok(added({ ...hybrid, cache: 'miss' }) >= 1)
    assert.ok(added({ ...hybrid, cache: 'hit' }) >= 1)
    assert.equal(added({ ...hybrid, cache: 'miss' }) + added({ ...hybrid, cache: 'hit' }), 3)
    assert.equal(added({ mode: 'similarity', kbs: '2-5', cache: 'miss' }), 1)
  })

  it(`${label}: ingest stage durations per stage`, (t) => {
    if (!needsFeed(t, s, 'quarry_ingest_stage_duration_seconds_count', 'plugins/docs/pipeline.ts')) return
    for (const stage of ['validate', 'parse', 'chunk', 'embed', 'upsert', 'meta']) {
      assert.ok(s.value('quarry_ingest_stage_duration_seconds_count', { stage }) >= 1, stage)
    }
  })

  it(`${label}: connector syncs by source type and outcome`, (t) => {
    if (!needsFeed(t, s, 'quarry_connector_syncs_total', 'plugins/connectors/engine.ts')) return
    assert.equal(syncOutcome, 'completed')
    const was = first.find('quarry_connector_syncs_total', { source_type: 'web', outcome: 'completed' })[0]?.value ?? 0
    assert.equal(s.value('quarry_connector_syncs_total', { source_type: 'web', outcome: 'completed' }) - was, 1)
  })

  it(`${label}: compute pool utilisation, tasks and queue wait`, (t) => {
    if (!needsFeed(t, s, 'quarry_compute_pool_threads', 'the docs plugin (its compute pool)')) return
    assert.ok(s.value('quarry_compute_pool_threads') >= 1)
    const utilisation = s.value('quarry_compute_pool_utilization')
    assert.ok(utilisation >= 0 && utilisation <= 1)
    assert.ok(s.value('quarry_compute_tasks_total', { outcome: 'completed' }) >= 1)
    assert.equal(s.value('quarry_compute_tasks_total', { outcome: 'crashed' }), 0)
    assert.equal(s.value('quarry_compute_pool_queued_tasks'), 0)
    if (!needsFeed(t, s, 'quarry_compute_queue_wait_seconds', 'compute/pool.ts (stats().waitMs)')) return
    assert.ok(s.value('quarry_compute_queue_wait_seconds', { quantile: '0.99' }) >= 0)
  })
}
