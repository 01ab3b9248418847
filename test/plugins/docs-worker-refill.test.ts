// The worker refills its slots in batches (plugins/docs/worker.ts refillBelow): documents finishing one at a time
// are claimed a batch per statement, concurrency stays within max_workers, and a lone document is taken at once.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import type { Sql } from '../../adapters/ports.ts'
import { createLogger } from '../../kernel/log.ts'
import type { DocsPlugin } from '../../plugins/docs/index.ts'
import { createDocRepo } from '../../plugins/docs/repo.ts'
import { INGEST_TOPIC } from '../../plugins/docs/service.ts'
import { createWorker, refillBelow } from '../../plugins/docs/worker.ts'
import { startApp } from '../helpers/app.ts'
import { indexingProcessor, md, newKb, prose, upload } from './docs.suite.ts'

type Json = any

describe('worker refill', () => {
  it('refills about half of max_workers at a time, and never more than max_workers', () => {
    assert.deepEqual([1, 2, 3, 4, 5, 8].map(refillBelow), [0, 1, 1, 2, 2, 4])
  })

  it('claims documents finishing one at a time in batches, within max_workers', async (t) => {
    const svc = await startApp(t, { settings: { queue_worker: { enabled: false } } })
    const kb = await newKb(svc)
    const sql = svc.app.adapters.sql
    let claims = 0
    const counting: Sql = { ...sql, query: (text, params) => {
      if (/^\s*UPDATE documents SET status = 'running'/.test(text)) claims++
      return sql.query(text, params)
    } }
    const repo = createDocRepo(counting, { chunkStrategy: 'recursive' })
    const ids: string[] = []
    for (let i = 0; i < 12; i++) ids.push(((await (await upload(svc, kb, `d${i}.md`, md(`D${i}`, prose(`d${i}`)))).json()) as Json).doc_id)
    // The documents finish strictly one after another, 20 ms apart, as behind one compute thread.
    let active = 0
    let most = 0
    let turn = Promise.resolve()
    const done: string[] = []
    const processor = indexingProcessor(svc.app.use<DocsPlugin>('docs').service.repo, async (doc) => {
      active++
      most = Math.max(most, active)
      const mine = turn.then(() => new Promise<void>((resolve) => setTimeout(resolve, 20)))
      turn = mine
      await mine
      active--
      done.push(doc.doc_id)
    })
    const w = createWorker({ queue: svc.app.adapters.queue, repo, processor, log: createLogger('SILENT') }, {
      maxWorkers: 5, maxPerPoll: 5, pollIntervalMs: 50, retryIntervalMs: 50, leaseMs: 60_000, heartbeatMs: 10_000, staleMs: 60_000,
    })
    t.after(() => w.stop(1000))
    await w.start()
    await w.idle()
    assert.deepEqual([...done].sort(), [...ids].sort(), 'every document processed once')
    assert.ok(most <= 5, `at most max_workers at once (saw ${most})`)
    // 5 at first, then batches of 3 as the active count falls to 2: 5 + 3 + 3 + 1 = four statements for 12 documents;
    // refilled one slot at a time it takes one statement per document after the first five (eight).
    assert.ok(claims <= 5, `claims in batches (${claims} statements for ${ids.length} documents)`)
    assert.deepEqual(await svc.app.adapters.queue.depth(INGEST_TOPIC), { ready: 0, delayed: 0, inflight: 0 })
  })

  it('takes a lone document at once', async (t) => {
    const svc = await startApp(t, { settings: { queue_worker: { enabled: false } } })
    const kb = await newKb(svc)
    const repo = svc.app.use<DocsPlugin>('docs').service.repo
    const seen: string[] = []
    const processor = indexingProcessor(repo, (doc) => void seen.push(doc.doc_id))
    const w = createWorker({ queue: svc.app.adapters.queue, repo, processor, log: createLogger('SILENT') }, {
      maxWorkers: 5, maxPerPoll: 5, pollIntervalMs: 60_000, retryIntervalMs: 50, leaseMs: 60_000, heartbeatMs: 10_000, staleMs: 60_000,
    })
    t.after(() => w.stop(1000))
    await w.start()
    // The poll interval is a minute: only the queue's nudge on enqueue can bring the document in.
    const id = ((await (await upload(svc, kb, 'one.md', md('One', prose('one')))).json()) as Json).doc_id
    await w.idle()
    assert.deepEqual(seen, [id])
  })
})
