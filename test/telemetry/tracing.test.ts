// Tracing against a local OTLP receiver in Langfuse's place: the endpoint path, basic auth from the keys, the
// resource's service.name, parent/child links across awaits, failed spans; and, with tracing off, that no
// OpenTelemetry SDK or exporter is loaded at all (a child process, so that this file's imports do not count).
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { createOtlpTracer } from '../../adapters/telemetry/otlp.ts'
import { ConfigError, resolveSettings } from '../../kernel/config/load.ts'
import { createLogger } from '../../kernel/log.ts'
import { telemetry } from '../../kernel/telemetry.ts'
import { tempSettings, withMetricsPlugin } from './with-metrics.ts'
import { startApp, type StartedApp } from '../helpers/app.ts'
import { md, newKb, prose, settle, upload } from '../plugins/docs.suite.ts'
import { startOtlpReceiver, type ReceivedSpan } from './otlp-receiver.ts'

const KEYS = { langfuse_public_key: 'pk-lf-test', langfuse_secret_key: 'sk-lf-test' }

async function tracedApp(t: { after(fn: () => unknown): void }, baseUrl: string): Promise<StartedApp> {
  return startApp(t, {
    plugins: withMetricsPlugin(),
    settings: { tracing: { enabled: true, langfuse_baseurl: `${baseUrl}/`, service_name: 'quarry-test', ...KEYS } },
  })
}

const byName = (spans: ReceivedSpan[], name: string) => {
  const hit = spans.filter((s) => s.name === name)
  assert.equal(hit.length, 1, `one span named ${name}, got ${hit.length}: ${spans.map((s) => s.name).join(', ')}`)
  return hit[0]
}

it('exports spans to {langfuse_baseurl}/api/public/otel/v1/traces with basic auth and the service name', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const svc = await tracedApp(t, receiver.url)
  assert.equal(telemetry.tracing, true)

  await telemetry.span('ingest.document', async () => {
    await telemetry.span('ingest.parse', async () => new Promise((r) => setImmediate(r)), { 'quarry.kb_id': 'handbook' })
    await assert.rejects(telemetry.span('ingest.embed', async () => {
      throw new Error('embedder down')
    }), /embedder down/)
  })
  assert.equal(telemetry.span('plain', () => 42), 42)

  await svc.app.close()
  assert.equal(telemetry.tracing, false)
  assert.ok(receiver.exports.length >= 1)
  for (const e of receiver.exports) {
    assert.equal(e.method, 'POST')
    assert.equal(e.path, '/api/public/otel/v1/traces')
    assert.equal(e.headers.authorization, `Basic ${Buffer.from('pk-lf-test:sk-lf-test').toString('base64')}`)
    assert.match(String(e.headers['content-type']), /^application\/json/)
    assert.equal(e.headers['x-langfuse-ingestion-version'], '4')
  }

  const spans = receiver.spans()
  const doc = byName(spans, 'ingest.document')
  const parse = byName(spans, 'ingest.parse')
  const embed = byName(spans, 'ingest.embed')
  byName(spans, 'plain')
  assert.equal(doc.resource['service.name'], 'quarry-test')
  assert.equal(doc.parentSpanId, undefined)
  for (const child of [parse, embed]) {
    assert.equal(child.traceId, doc.traceId)
    assert.equal(child.parentSpanId, doc.spanId)
  }
  assert.equal(parse.attributes['quarry.kb_id'], 'handbook')
  assert.equal(embed.status.code, 2)
  assert.equal(embed.status.message, 'embedder down')
  assert.notEqual(doc.status.code, 2)
})

it('a request is a root span with the search stages under it; a document, with its ingest stages', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const svc = await tracedApp(t, receiver.url)
  const kb = await newKb(svc)
  const res = await upload(svc, kb, 'harbour.md', md('Harbour rules', prose('harbour', 6)))
  assert.equal(res.status, 202)
  const docId = ((await res.json()) as { doc_id: string }).doc_id
  assert.equal((await settle(svc, kb, docId)).status, 'indexed')
  assert.equal((await svc.request('/api/search', { method: 'POST', json: { query: 'harbour', kb_ids: [kb] } })).status, 200)
  assert.equal((await svc.request(`/api/kb/${kb}-missing`)).status, 404)
  await svc.app.close()

  const spans = receiver.spans()
  assert.ok(spans.some((s) => s.name === 'POST /api/search'), 'request spans from the kernel dispatcher')
  const request = byName(spans, 'POST /api/search')
  assert.equal(request.parentSpanId, undefined)
  assert.equal(request.attributes['http.route'], '/api/search')
  assert.equal(request.attributes['http.response.status_code'], 200)
  assert.equal(request.resource['service.name'], 'quarry-test')
  const missing = byName(spans, 'GET /api/kb/{kb_id}')
  assert.equal(missing.attributes['http.response.status_code'], 404)
  assert.notEqual(missing.status.code, 2, 'a 4xx is not a failed span')

  assert.ok(spans.some((s) => s.name.startsWith('search.')), 'search stage spans')
  for (const name of ['search.embed', 'search.kb', 'search.fusion']) {
    const stage = byName(spans, name)
    assert.equal(stage.traceId, request.traceId, name)
    assert.equal(stage.parentSpanId, request.spanId, name)
  }
  assert.equal(byName(spans, 'search.kb').attributes['quarry.kb_id'], kb)

  assert.ok(spans.some((s) => s.name === 'ingest.document'), 'ingest spans from the worker')
  const doc = byName(spans, 'ingest.document')
  assert.equal(doc.parentSpanId, undefined, 'the worker runs a document outside any request')
  assert.equal(doc.attributes['quarry.doc_id'], docId)
  for (const stage of ['validate', 'parse', 'chunk', 'embed', 'upsert', 'meta']) {
    const span = byName(spans, `ingest.${stage}`)
    assert.equal(span.parentSpanId, doc.spanId, stage)
    assert.equal(span.traceId, doc.traceId, stage)
  }
})

it('with tracing off no OpenTelemetry SDK or exporter is loaded; on, they are', async () => {
  const child = fileURLToPath(new URL('./tracing-off.child.ts', import.meta.url))
  const run = promisify(execFile)
  const { stdout } = await run(process.execPath, ['--openssl-legacy-provider', '--import', 'tsx', child], { timeout: 120_000 })
  assert.deepEqual(JSON.parse(stdout.trim().split('\n').at(-1)!), { off: 0, on: true })
})

it('tracing on without a usable endpoint or keys is refused with the settings, before any store opens', async (t) => {
  const refused = (tracing: Record<string, unknown>): string[] => {
    try {
      tempSettings(t, { tracing: { enabled: true, ...tracing } })
    } catch (err) {
      assert.ok(err instanceof ConfigError, String(err))
      return err.problems
    }
    assert.fail('the settings were accepted')
  }
  const noUrl = "tracing.enabled is true but tracing.langfuse_baseurl is not an http(s) URL: ''"
  const noKeys = 'tracing.enabled is true but tracing.langfuse_public_key or the secret key (env TRACING_SECRET_KEY) is empty'
  assert.deepEqual(refused({ ...KEYS }), [noUrl])
  assert.deepEqual(refused({ ...KEYS, langfuse_baseurl: 'ftp://langfuse.internal' }), ["tracing.enabled is true but tracing.langfuse_baseurl is not an http(s) URL: 'ftp://langfuse.internal'"])
  assert.deepEqual(refused({ langfuse_baseurl: 'http://127.0.0.1:9', langfuse_public_key: 'pk' }), [noKeys])
  assert.deepEqual(refused({}), [noUrl, noKeys])
  // the secret key from the environment counts
  assert.equal(resolveSettings({ tracing: { enabled: true, langfuse_baseurl: 'http://127.0.0.1:9', langfuse_public_key: 'pk' } }, { TRACING_SECRET_KEY: 'sk' }).settings.tracing.langfuse_secret_key, 'sk')
  // Settings made without resolveSettings are still checked when tracing starts (no exporter is made).
  const unchecked = { ...resolveSettings({}).settings.tracing, enabled: true, ...KEYS }
  assert.throws(() => createOtlpTracer(unchecked, createLogger('SILENT')), { code: 'TELEMETRY_CONFIG', message: noUrl })
  assert.equal(telemetry.tracing, false)
})
