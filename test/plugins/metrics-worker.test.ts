// A worker process (`npm run worker`) serves no API: the metrics plugin answers GET /metrics alone on
// server.host:server.port, with the worker's own states, and frees the port on close. A failing source (the
// queue closed under it) costs its own series only.
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { createApp } from '../../kernel/app.ts'
import { createLogger } from '../../kernel/log.ts'
import type { MetricsService } from '../../plugins/metrics/index.ts'
import { startApp } from '../helpers/app.ts'
import { parsePrometheus } from '../telemetry/prom-text.ts'
import { tempSettings, withMetricsPlugin } from '../telemetry/with-metrics.ts'

it('worker mode: GET /metrics on server.port, nothing else there, closed with the app', async (t) => {
  const settings = tempSettings(t, { server: { host: '127.0.0.1', port: 0, shutdown_grace_sec: 2 } })
  const app = await createApp({ settings, plugins: withMetricsPlugin(), log: createLogger('SILENT'), mode: 'worker' })
  let closed = false
  t.after(() => (closed ? undefined : app.close()))
  const { port } = app.use<MetricsService>('metrics')
  assert.ok(typeof port === 'number' && port > 0)
  const base = `http://127.0.0.1:${port}`

  let res = await fetch(`${base}/metrics`)
  assert.equal(res.status, 200)
  assert.equal(res.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8')
  const s = parsePrometheus(await res.text())
  assert.equal(s.value('quarry_queue_messages', { topic: 'ingest', state: 'ready' }), 0)
  assert.equal(s.value('quarry_worker_active_documents'), 0)
  assert.ok(s.value('process_resident_memory_bytes') > 0)

  res = await fetch(`${base}/metrics?x=1`, { method: 'HEAD' })
  assert.equal(res.status, 200)
  assert.equal(await res.text(), '')
  res = await fetch(`${base}/metrics`, { method: 'POST' })
  assert.equal(res.status, 405)
  assert.equal(res.headers.get('allow'), 'GET')
  assert.deepEqual(await res.json(), { detail: 'Method Not Allowed' })
  res = await fetch(`${base}/api/kb`)
  assert.equal(res.status, 404)
  assert.deepEqual(await res.json(), { detail: 'Not Found' })

  await app.close()
  closed = true
  await assert.rejects(fetch(`${base}/metrics`))
})

it('API mode: /metrics is a route of the API server and no second listener is opened', async (t) => {
  const svc = await startApp(t, { plugins: withMetricsPlugin() })
  assert.equal(svc.app.use<MetricsService>('metrics').port, null)
  const res = await svc.request('/metrics')
  assert.equal(res.status, 200)
  assert.ok(parsePrometheus(await res.text()).types.has('quarry_http_requests_total'))
  const spec = (await (await svc.request('/openapi.json')).json()) as { paths: Record<string, unknown> }
  assert.ok(spec.paths['/metrics'])
})

it('a source that cannot answer drops its own series and reports source_up 0; the scrape still succeeds', async (t) => {
  const svc = await startApp(t, { plugins: withMetricsPlugin() })
  await svc.app.adapters.queue.close()
  const res = await svc.request('/metrics')
  assert.equal(res.status, 200)
  const s = parsePrometheus(await res.text())
  assert.equal(s.value('quarry_metrics_source_up', { source: 'queue' }), 0)
  assert.equal(s.find('quarry_queue_messages').length, 0)
  assert.equal(s.value('quarry_metrics_source_up', { source: 'documents' }), 1)
  assert.deepEqual(s.find('quarry_documents').map((x) => x.labels.status).sort(),
    ['deleted', 'deleting', 'failed', 'fetching', 'indexed', 'outdated', 'pending', 'running', 'uploading'])
})
