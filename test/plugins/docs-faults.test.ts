// Faults around ingestion: object storage, queue and embedder failures, and a crash mid-ingest.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer as createHttpServer, request as httpRequest } from 'node:http'
import { createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { createLogger } from '../../kernel/log.ts'
import type { DocsPlugin } from '../../plugins/docs/index.ts'
import { INGEST_TOPIC } from '../../plugins/docs/service.ts'
import { createWorker } from '../../plugins/docs/worker.ts'
import { seedPglite, startApp, type StartedApp } from '../helpers/app.ts'
import { startFakeEmbeddingServer } from '../helpers/fake-embedding-server.ts'
import { startS3rver } from '../helpers/s3rver.ts'
import { skipUnless } from '../helpers/services.ts'
import { waitFor } from '../helpers/wait.ts'
import { indexingProcessor, md, newKb, prose, settle, status, upload } from './docs.suite.ts'

type Json = any

async function deadPort(): Promise<number> {
  const srv = createServer()
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r))
  const port = (srv.address() as { port: number }).port
  await new Promise<void>((r) => srv.close(() => r()))
  return port
}

const fastPoll = { queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 } }

describe('ingestion faults', () => {
  it('queue down: upload answers 503, the file is kept and the document is failed with the reason', async (t) => {
    const svc = await startApp(t, { settings: { redis: { host: '127.0.0.1', port: await deadPort() }, queue_worker: { enabled: false } } })
    const kb = await newKb(svc)
    const res = await upload(svc, kb, 'a.md', md('A', prose('queue')))
    assert.equal(res.status, 503)
    assert.match((await res.json() as Json).detail, /127\.0\.0\.1/)
    const list = await (await svc.request(`/api/kb/${kb}/docs`)).json() as Json
    assert.equal(list.items.length, 1)
    assert.equal(list.items[0].status, 'failed')
    assert.match(list.items[0].last_error, /^Could not queue the document/)
    assert.equal((await svc.request(`/api/kb/${kb}/docs/${list.items[0].doc_id}/download`)).status, 200, 'nothing is lost')
    const ready = await svc.request('/ready')
    assert.equal(ready.status, 503)
    assert.equal((await ready.json() as Json).checks.redis, false)
  })

  it('embedder down: the document fails with a clear reason after the retries', async (t) => {
    const svc = await startApp(t, {
      settings: { ...fastPoll, provider: { name: 'local', url: `http://127.0.0.1:${await deadPort()}` }, embedding: { model: 'nomic-embed-text', vector_size: 768, max_retries: 1 } },
    })
    const kb = await newKb(svc)
    const id = ((await (await upload(svc, kb, 'a.md', md('A', prose('embedder')))).json()) as Json).doc_id
    const doc = await settle(svc, kb, id)
    assert.equal(doc.status, 'failed')
    assert.match(doc.last_error, /^embed failed: .*(unreachable|unavailable).*127\.0\.0\.1/i)
  })

  it('embedder slow: the document fails on the timeout while the service keeps answering', async (t) => {
    const fake = await startFakeEmbeddingServer({ dimensions: 768 })
    t.after(() => fake.close())
    fake.setDefault({ delayMs: 3000 })
    const svc = await startApp(t, {
      settings: { ...fastPoll, provider: { name: 'local', url: fake.url }, embedding: { model: 'nomic-embed-text', vector_size: 768, timeout_sec: 1, max_retries: 1 } },
    })
    const kb = await newKb(svc)
    const id = ((await (await upload(svc, kb, 'slow.md', md('Slow', prose('slow')))).json()) as Json).doc_id
    await waitFor(async () => (await status(svc, kb, id)).status === 'running', 'the document to be running')
    const started = Date.now()
    assert.equal((await svc.request('/health')).status, 200)
    assert.equal((await svc.request(`/api/kb/${kb}/docs`)).status, 200)
    assert.ok(Date.now() - started < 1000, 'API requests are not held by the slow embedder')
    const doc = await settle(svc, kb, id)
    assert.equal(doc.status, 'failed')
    assert.match(doc.last_error, /^embed failed: .*(timed out|timeout)/i)
    assert.ok(fake.embedRequests().length >= 2, 'it was retried')
  })
})

describe('object storage down', { skip: skipUnless('postgres') || skipUnless('redis') }, () => {
  it('upload answers 502 and leaves no row in uploading', async (t) => {
    const svc = await startApp(t, { services: true })
    const kb = await newKb(svc)
    await svc.stopS3!()
    const res = await upload(svc, kb, 'a.md', md('A', prose('storage')))
    assert.equal(res.status, 502)
    assert.match((await res.json() as Json).detail, /storage/i)
    const counts = await (await svc.request(`/api/kb/${kb}/docs/status`)).json() as Json
    assert.equal(counts.doc_counts.total, 0)
    const ready = await (await svc.request('/ready')).json() as Json
    assert.equal(ready.checks.s3, false)
    assert.equal(ready.status, 'ready', 'object storage is not critical for readiness')
  })
})

describe('object storage down while documents are processed', { skip: skipUnless('postgres') || skipUnless('redis') }, () => {
  it('the document waits for its retry with the reason in its status, then is indexed once storage is back', { timeout: 120_000 }, async (t) => {
    // S3 behind a loopback proxy that cuts every read of an object off while `reads` is false: uploads (PUT) pass.
    const s3 = await startS3rver()
    t.after(() => s3.close())
    let reads = false
    let cut = 0
    const target = new URL(s3.endpoint)
    const proxy = createHttpServer((req, res) => {
      if (req.method === 'GET' && !reads && (req.url ?? '').split('?')[0].split('/').filter(Boolean).length >= 2) {
        cut++
        req.socket.destroy()
        return
      }
      const up = httpRequest({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (ur) => {
        res.writeHead(ur.statusCode ?? 502, ur.headers)
        ur.pipe(res)
      })
      up.on('error', () => res.socket?.destroy())
      req.pipe(up)
    })
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r))
    t.after(() => new Promise<void>((r) => {
      proxy.closeAllConnections()
      proxy.close(() => r())
    }))
    const endpoint = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`
    const svc = await startApp(t, {
      services: true,
      settings: { ...fastPoll, s3: { endpoint, access_key: s3.accessKey, secret_key: s3.secretKey, rag_bucket: s3.bucket, insecure: true } },
    })
    const kb = await newKb(svc)
    const res = await upload(svc, kb, 'waits.md', md('Waits', `${prose('storage-retry')} Reference qzwaitsxk.`))
    assert.equal(res.status, 202)
    const id = ((await res.json()) as Json).doc_id
    // Read, cut off, queued again: pending, with the retry and the store's failure in last_error.
    const waiting = await waitFor(async () => {
      const s = await status(svc, kb, id)
      return s.status === 'pending' && /^Retry 2 of \d+ in 2 s: validate failed: Object storage/.test(s.last_error ?? '') ? s : null
    }, 'the document to wait for its second retry', 60_000)
    assert.ok(cut >= 2, `reads were cut off (${cut})`)
    assert.equal(waiting.chunk_count ?? 0, 0)
    reads = true
    const done = await settle(svc, kb, id, ['indexed', 'failed'])
    assert.equal(done.status, 'indexed', JSON.stringify(done))
    assert.equal(done.last_error, null)
    const found = (await (await svc.request('/api/search', { method: 'POST', json: { query: 'qzwaitsxk', kb_ids: [kb] } })).json()) as Json
    assert.deepEqual(found.results.map((r: Json) => r.doc_id).filter((d: string) => d === id).length > 0, true)
  })
})

describe('crash recovery', () => {
  it('a process killed mid-ingest leaves nothing stuck: after a restart every document is indexed', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'quarry-crash-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const fake = await startFakeEmbeddingServer({ dimensions: 768 })
    t.after(() => fake.close())
    fake.setDefault({ delayMs: 1500 })
    await seedPglite(join(dir, 'data'))
    const port = await deadPort()
    const config = join(dir, 'settings.yaml')
    writeFileSync(config, stringify({
      data_dir: join(dir, 'data'), server: { port, host: '127.0.0.1' }, logging: { level: 'WARNING' }, ...fastPoll,
      queue_worker: { max_workers: 2 }, provider: { name: 'local', url: fake.url }, embedding: { model: 'nomic-embed-text', vector_size: 768 },
    }))
    const start = async (): Promise<ChildProcess> => {
      // Compiled, as npm start runs it (kernel/run.mjs).
      const child = spawn(process.execPath, ['kernel/run.mjs', 'kernel/main.ts', '--config', config], { stdio: ['ignore', 'ignore', 'inherit'] })
      t.after(() => child.kill('SIGKILL'))
      await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/health`)).ok, 'the service to start', 60_000, 200)
      return child
    }
    const svc = { request: (p: string, init: RequestInit & { json?: unknown } = {}) => fetch(`http://127.0.0.1:${port}${p}`, { ...init, headers: init.json ? { 'content-type': 'application/json' } : init.headers, body: init.json ? JSON.stringify(init.json) : init.body }) } as unknown as StartedApp

    const first = await start()
    const kb = await newKb(svc)
    const ids: string[] = []
    for (let i = 0; i < 5; i++) ids.push(((await (await upload(svc, kb, `doc-${i}.md`, md(`Doc ${i}`, prose(`crash${i}`)))).json()) as Json).doc_id)
    await waitFor(async () => (await status(svc, kb, ids[0])).status === 'running' || (await status(svc, kb, ids[1])).status === 'running', 'a document to be running')
    first.kill('SIGKILL')
    await new Promise((r) => first.once('exit', r))

    fake.setDefault({})
    await start()
    for (const id of ids) assert.equal((await settle(svc, kb, id)).status, 'indexed', `document ${id}`)
    const counts = await (await svc.request(`/api/kb/${kb}/docs/status`)).json() as Json
    assert.equal(counts.doc_counts.indexed, 5)
  })
})

describe('a pending document whose event never reached the queue (the process died between the two)', () => {
  const dropEvent = (svc: StartedApp, docId: string) => svc.app.adapters.queue.removeByKey(INGEST_TOPIC, docId)

  it('embedded: queued again when the service restarts on its data folder, then indexed', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'quarry-orphan-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const first = await startApp(t, { settings: { data_dir: dir, queue_worker: { enabled: false } } })
    const kb = await newKb(first)
    const lost = ((await (await upload(first, kb, 'lost.md', md('Lost', prose('lost')))).json()) as Json).doc_id
    const kept = ((await (await upload(first, kb, 'kept.md', md('Kept', prose('kept')))).json()) as Json).doc_id
    assert.equal(await dropEvent(first, lost), 1)
    assert.deepEqual(await first.app.adapters.queue.present(INGEST_TOPIC, [lost, kept]), new Set([kept]))
    await first.app.close()

    const svc = await startApp(t, { settings: { data_dir: dir, ...fastPoll } })
    for (const id of [lost, kept]) assert.equal((await settle(svc, kb, id)).status, 'indexed', id)
    assert.deepEqual(await svc.app.adapters.queue.depth(INGEST_TOPIC), { ready: 0, delayed: 0, inflight: 0 })
  })

  it('calls afterBurst once the worker goes idle after a burst of documents, and not after fewer', async (t) => {
    const svc = await startApp(t, { settings: { queue_worker: { enabled: false } } })
    const kb = await newKb(svc)
    const repo = svc.app.use<DocsPlugin>('docs').service.repo
    const processor = indexingProcessor(repo)
    let bursts = 0
    const w = createWorker({ queue: svc.app.adapters.queue, repo, processor, log: createLogger('SILENT'), afterBurst: () => bursts++ }, {
      maxWorkers: 2, maxPerPoll: 2, pollIntervalMs: 50, retryIntervalMs: 50, leaseMs: 60_000, heartbeatMs: 10_000, staleMs: 60_000,
      burstDocuments: 3, burstIdleMs: 20,
    })
    t.after(() => w.stop(1000))
    const ingest = async (names: string[]) => {
      const ids = []
      for (const name of names) ids.push(((await (await upload(svc, kb, name, md(name, prose(name)))).json()) as Json).doc_id)
      for (const id of ids) assert.equal((await settle(svc, kb, id)).status, 'indexed')
      await w.idle()
    }
    await w.start()
    await ingest(['b1.md', 'b2.md', 'b3.md'])
    await waitFor(async () => bursts === 1 || null, 'the end of the first burst')
    // Two more documents are below the burst size: nothing is called however long the worker stays idle...
    await ingest(['b4.md', 'b5.md'])
    await new Promise((resolve) => setTimeout(resolve, 200))
    assert.equal(bursts, 1)
    // ...and a third makes a burst again.
    await ingest(['b6.md'])
    await waitFor(async () => bursts === 2 || null, 'the end of the second burst')
    await new Promise((resolve) => setTimeout(resolve, 100))
    assert.equal(bursts, 2)
  })

  it('PostgreSQL + Redis: a running worker re-queues it once it is older than the stale window; a queued one is left alone', { skip: skipUnless('postgres') || skipUnless('redis') }, async (t) => {
    const svc = await startApp(t, { services: true, settings: { queue_worker: { enabled: false } } })
    const kb = await newKb(svc)
    const lost = ((await (await upload(svc, kb, 'lost.md', md('Lost', prose('lost')))).json()) as Json).doc_id
    const kept = ((await (await upload(svc, kb, 'kept.md', md('Kept', prose('kept')))).json()) as Json).doc_id
    assert.equal(await dropEvent(svc, lost), 1)
    const repo = svc.app.use<DocsPlugin>('docs').service.repo
    // The worker of another process, with a processor that records what it is given and indexes it.
    const seen: string[] = []
    const processor = indexingProcessor(repo, (doc) => void seen.push(doc.doc_id))
    const workerWith = (staleMs: number) => {
      const w = createWorker({ queue: svc.app.adapters.queue, repo, processor, log: createLogger('SILENT') }, {
        maxWorkers: 2, maxPerPoll: 2, pollIntervalMs: 50, retryIntervalMs: 50, leaseMs: 60_000, heartbeatMs: 10_000, staleMs,
      })
      t.after(() => w.stop(1000))
      return w
    }
    const worker = workerWith(60_000)
    // Inside the stale window nothing is re-queued: the row may be one whose enqueue is still on its way.
    await worker.start()
    await waitFor(async () => seen.includes(kept) && seen, 'the queued document')
    await worker.idle()
    assert.deepEqual(seen, [kept])
    assert.equal((await status(svc, kb, lost)).status, 'pending')
    await worker.stop(1000)

    const later = workerWith(1)
    await later.start()
    assert.equal((await settle(svc, kb, lost)).status, 'indexed')
    await later.idle()
    assert.deepEqual(seen, [kept, lost], 'each document was processed once')
    assert.deepEqual(await svc.app.adapters.queue.depth(INGEST_TOPIC), { ready: 0, delayed: 0, inflight: 0 })
  })
})

describe('separate worker processes on Redis', { skip: skipUnless('postgres') || skipUnless('redis') }, () => {
  it('an API process that does not consume, and `worker` processes that do', async (t) => {
    const svc = await startApp(t, { services: true, settings: { queue_worker: { enabled: false } } })
    const kb = await newKb(svc)
    const ids: string[] = []
    for (let i = 0; i < 3; i++) ids.push(((await (await upload(svc, kb, `w-${i}.md`, md(`W ${i}`, prose(`worker${i}`)))).json()) as Json).doc_id)
    assert.equal((await status(svc, kb, ids[0])).status, 'pending')
    // The same settings the API process uses, in a file for the worker process.
    const dir = mkdtempSync(join(tmpdir(), 'quarry-worker-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const s = svc.app.settings
    writeFileSync(join(dir, 'settings.yaml'), stringify({
      data_dir: join(dir, 'data'), logging: { level: 'WARNING' }, ...fastPoll, embedding: { vector_size: s.embedding.vector_size },
      postgres: s.postgres, redis: s.redis, s3: s.s3, qdrant: s.qdrant,
    }))
    // The worker has its own data_dir: its embedded vector index is not the API process's, so the API process
    // reads what the worker wrote only through PostgreSQL; vectors are checked through the worker's metadata.
    // As npm run worker starts them: compiled (kernel/run.mjs).
    const workers = [0, 1].map(() => spawn(process.execPath, ['kernel/run.mjs', 'kernel/main.ts', 'worker', '--config', join(dir, 'settings.yaml')], { stdio: ['ignore', 'ignore', 'inherit'] }))
    t.after(() => workers.forEach((w) => w.kill('SIGTERM')))
    for (const id of ids) assert.equal((await settle(svc, kb, id)).status, 'indexed', `document ${id}`)
  })
})
