import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { startApp } from '../helpers/app.ts'
import { skipUnless } from '../helpers/services.ts'

type Json = any

describe('health', () => {
  it('/health is alive and needs nothing', async (t) => {
    const svc = await startApp(t)
    const res = await svc.request('/health')
    assert.equal(res.status, 200)
    assert.deepEqual(await res.json(), { status: 'ok' })
  })

  it('/ready reports the embedded engines and the built-in provider by name', async (t) => {
    const svc = await startApp(t)
    const res = await svc.request('/ready')
    assert.equal(res.status, 200)
    assert.deepEqual(await res.json(), {
      status: 'ready', provider: 'builtin',
      checks: { pglite: true, embedded_queue: true, embedded_vectors: true, local_files: true, builtin: true },
    })
  })

  it('/ready is 503 not_ready when the embedding provider cannot be reached, and names it', async (t) => {
    // A port that was open a moment ago and is closed now: nothing listens there.
    const probe = createServer()
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r))
    const port = (probe.address() as AddressInfo).port
    await new Promise<void>((r) => probe.close(() => r()))
    const svc = await startApp(t, { settings: { provider: { name: 'local', url: `http://127.0.0.1:${port}` }, embedding: { model: 'nomic-embed-text', vector_size: 768 } } })
    const res = await svc.request('/ready')
    assert.equal(res.status, 503)
    const body = await res.json() as Json
    assert.equal(body.status, 'not_ready')
    assert.equal(body.provider, 'local')
    assert.equal(body.checks.local, false)
    assert.equal(body.checks.pglite, true)
  })

  it('/ready probes {provider.url}/v1/models of an OpenAI-compatible provider', async (t) => {
    const seen: string[] = []
    const server = createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`)
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'm', object: 'model' }] }))
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    t.after(() => new Promise<void>((r) => server.close(() => r())))
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    const svc = await startApp(t, { settings: { provider: { name: 'hosted', url: base }, embedding: { model: 'text-embedding-3-small', vector_size: 1536 } } })
    const body = await (await svc.request('/ready')).json() as Json
    assert.equal(body.status, 'ready')
    assert.equal(body.checks.hosted, true)
    assert.ok(seen.includes('GET /v1/models'), seen.join(', '))
  })
})

describe('health on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () => {
  it('/ready names postgres, redis and s3', async (t) => {
    const svc = await startApp(t, { services: true })
    const res = await svc.request('/ready')
    const body = await res.json() as Json
    assert.equal(res.status, 200, JSON.stringify(body))
    assert.deepEqual(body.checks, { postgres: true, redis: true, embedded_vectors: true, s3: true, builtin: true })
  })
})
