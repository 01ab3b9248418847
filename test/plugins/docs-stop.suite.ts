// A fail through the API stops the document's run (issue 38, item 4): with one worker slot, a multi-MB text
// failed while running frees the slot for the next document long before its own run would have ended, and
// leaves nothing behind. The time a run takes un-failed is measured in the same test; no fixed timing.
import { it } from 'node:test'
import assert from 'node:assert/strict'
import type { DocsPlugin } from '../../plugins/docs/index.ts'
import { startApp, type StartOptions, type StartedApp } from '../helpers/app.ts'
import { waitFor } from '../helpers/wait.ts'
import { md, newKb, prose, settle, status, upload } from './docs.suite.ts'

type Json = any

/** About `mb` MB of plain text in sections. */
function bigText(seed: string, mb = 8): string {
  const parts: string[] = []
  let size = 0
  for (let i = 0; size < mb * 1024 * 1024; i++) {
    const part = md(`${seed} section ${i}`, prose(`${seed}-${i}`, 20))
    parts.push(part)
    size += part.length
  }
  return parts.join('\n')
}

/** Uploads and waits until the worker has claimed it: the moment it was first seen running. */
async function uploadAndWaitRunning(svc: StartedApp, kb: string, name: string, text: string): Promise<{ id: string; runningAt: number }> {
  const res = await upload(svc, kb, name, text)
  assert.equal(res.status, 202)
  const id = ((await res.json()) as Json).doc_id
  await waitFor(async () => (await status(svc, kb, id)).status === 'running', `${name} to be running`, 60_000, 20)
  return { id, runningAt: Date.now() }
}

const parentRows = async (svc: StartedApp, docId: string) =>
  (await svc.app.adapters.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM parent_chunks WHERE doc_id = $1', [docId]))[0].n

export function docsStopSuite(label: string, opts: StartOptions): void {
  // One worker slot. Small chunks: 8 MB make some 46,000 of them, about 3 s of work on an idle 2-core machine. Stopping
  // a run and indexing the next document takes a time that does not grow with the document: up to a watch tick
  // (0.5 s) before the worker sees a row changed elsewhere, then the small document's own run, about 0.35 s on
  // PostgreSQL + Redis + S3 (1.0 s from the big run's start in all, measured). With 4 MB (1.5 s un-stopped) that went
  // past the half below on a loaded CI machine (1,349 ms against half of 2,582), so the document is twice that.
  const settings = {
    queue_worker: { max_workers: 1 }, queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 }, chunking: { chunk_size: 256, chunk_overlap: 32 },
    ...opts.settings,
  }

  it(`${label}: a running document failed through the API (this process, a row changed by another) frees the only worker slot`, async (t) => {
    const svc = await startApp(t, { ...opts, settings })
    const worker = svc.app.use<DocsPlugin>('docs').worker!
    assert.ok(worker, 'the built-in worker runs')

    // The reference: how long the big text takes un-failed, from running to indexed, once the worker is warm (the
    // first document also starts the compute pool's thread).
    const refKb = await newKb(svc)
    assert.equal((await settle(svc, refKb, ((await (await upload(svc, refKb, 'warm.md', md('Warm', prose('warm')))).json()) as Json).doc_id)).status, 'indexed')
    const ref = await uploadAndWaitRunning(svc, refKb, 'reference.txt', bigText('reference'))
    const refDoc = await settle(svc, refKb, ref.id)
    const fullMs = Date.now() - ref.runningAt
    assert.equal(refDoc.status, 'indexed', refDoc.last_error)
    assert.ok(refDoc.chunk_count > 1000, `a big document (${refDoc.chunk_count} chunks)`)

    const stopped: { kb: string; id: string }[] = []
    const failWhileRunning = async (seed: string, fail: (kb: string, id: string) => Promise<void>) => {
      const kb = await newKb(svc)
      const big = await uploadAndWaitRunning(svc, kb, 'big.txt', bigText(seed))
      await fail(kb, big.id)
      // The next document, behind the big one in the queue of a one-slot worker.
      const small = ((await (await upload(svc, kb, 'small.md', md('Small', prose(`${seed}-small`)))).json()) as Json).doc_id
      const smallDoc = await settle(svc, kb, small)
      const elapsed = Date.now() - big.runningAt
      assert.equal(smallDoc.status, 'indexed', smallDoc.last_error)
      // Un-stopped, the big run holds the slot for about fullMs; the small one could only follow it.
      assert.ok(elapsed < fullMs / 2, `${seed}: the next document was indexed ${elapsed} ms after the big one started running; the big one takes ${fullMs} ms`)
      const bigDoc = await status(svc, kb, big.id)
      assert.equal(bigDoc.status, 'failed')
      assert.equal((await svc.app.adapters.vectors.docVectors(kb, big.id)).length, 0, 'no vectors of the stopped run')
      assert.equal(await parentRows(svc, big.id), 0)
      stopped.push({ kb, id: big.id })
      return bigDoc
    }

    // Failed through this process's API: the answer says the task stops.
    const here = await failWhileRunning('here', async (kb, id) => {
      const res = await svc.request(`/api/kb/${kb}/docs/${id}/fail?reason=${encodeURIComponent('taking too long')}`, { method: 'POST' })
      assert.equal(res.status, 200)
      const body = await res.json() as Json
      assert.equal(body.status, 'failed')
      assert.match(body.warning, /^The built-in worker stops the running task at its next check point/)
    })
    assert.equal(here.last_error, 'taking too long')

    // Failed by another process: only the row changes; no call reaches this worker, which notices on its own.
    const other = await failWhileRunning('other', async (_kb, id) => {
      const rows = await svc.app.adapters.sql.query(`UPDATE documents SET status = 'failed', last_error = 'failed elsewhere' WHERE doc_id = $1 AND status = 'running' RETURNING doc_id`, [id])
      assert.equal(rows.length, 1)
    })
    assert.equal(other.last_error, 'failed elsewhere')

    // Once the time a full run takes has passed, nothing of a stopped run has come back.
    await new Promise((r) => setTimeout(r, fullMs))
    for (const { kb, id } of stopped) {
      const doc = await status(svc, kb, id)
      assert.equal(doc.status, 'failed')
      assert.equal(doc.chunk_count, null)
      assert.equal((await svc.app.adapters.vectors.docVectors(kb, id)).length, 0)
      assert.equal(await parentRows(svc, id), 0)
    }
    assert.equal(worker.active, 0)

    // A stopped document is indexed again on request, whole.
    const again = stopped[0]
    assert.equal((await svc.request(`/api/kb/${again.kb}/docs/${again.id}/reindex?force=true`, { method: 'POST' })).status, 202)
    const reindexed = await settle(svc, again.kb, again.id)
    assert.equal(reindexed.status, 'indexed', reindexed.last_error)
    assert.equal((await svc.app.adapters.vectors.docVectors(again.kb, again.id)).length, reindexed.chunk_count)
  })

  if (opts.services) {
    it(`${label}: failed through an API process that does not consume, the worker process stops the run`, async (t) => {
      const worker = await startApp(t, { ...opts, settings })
      const s = worker.app.settings
      const api = await startApp(t, { ...opts, settings: { ...settings, postgres: s.postgres, redis: s.redis, s3: s.s3, queue_worker: { enabled: false } } })

      const refKb = await newKb(api)
      assert.equal((await settle(api, refKb, ((await (await upload(api, refKb, 'warm.md', md('Warm', prose('warm')))).json()) as Json).doc_id)).status, 'indexed')
      const ref = await uploadAndWaitRunning(api, refKb, 'reference.txt', bigText('reference'))
      assert.equal((await settle(api, refKb, ref.id)).status, 'indexed')
      const fullMs = Date.now() - ref.runningAt

      const kb = await newKb(api)
      const big = await uploadAndWaitRunning(api, kb, 'big.txt', bigText('remote'))
      const res = await api.request(`/api/kb/${kb}/docs/${big.id}/fail`, { method: 'POST' })
      assert.equal(res.status, 200)
      assert.deepEqual(await res.json(), { kb_id: kb, doc_id: big.id, status: 'failed' }, 'no built-in worker in the API process: no warning')
      const small = ((await (await upload(api, kb, 'small.md', md('Small', prose('remote-small')))).json()) as Json).doc_id
      assert.equal((await settle(api, kb, small)).status, 'indexed')
      const elapsed = Date.now() - big.runningAt
      assert.ok(elapsed < fullMs / 2, `the next document was indexed ${elapsed} ms after the big one started running; the big one takes ${fullMs} ms`)

      await new Promise((r) => setTimeout(r, fullMs))
      const doc = await status(api, kb, big.id)
      assert.equal(doc.status, 'failed')
      assert.equal(doc.last_error, 'Manually failed via API')
      // The vectors live in the worker process's store.
      assert.equal((await worker.app.adapters.vectors.docVectors(kb, big.id)).length, 0)
      assert.equal(await parentRows(api, big.id), 0)
    })
  }
}
