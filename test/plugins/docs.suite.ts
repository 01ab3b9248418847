// The document endpoints (spec 4.7) and the lifecycle (spec 3.1) through HTTP, on either driver set.
import { it } from 'node:test'
import assert from 'node:assert/strict'
import type { DocRepo, DocumentRecord } from '../../plugins/docs/repo.ts'
import type { Processor } from '../../plugins/docs/worker.ts'
import { startApp, uniqueId, type StartOptions, type StartedApp } from '../helpers/app.ts'
import { waitFor } from '../helpers/wait.ts'

type Json = any

export const md = (title: string, body: string) => `# ${title}\n\n${body}\n`

/** A worker's processor that marks each document it is given indexed (no pipeline), after `first` when given; no delete is expected. */
export function indexingProcessor(repo: DocRepo, first?: (doc: DocumentRecord) => void | Promise<void>): Processor {
  return {
    async ingest(doc) {
      await first?.(doc)
      await repo.transition(doc.doc_id, ['running'], 'indexed')
    },
    async remove() {
      throw new Error('no delete was queued')
    },
  }
}
const WORDS = ('policy leave employee manager request approval days annual sick parental holiday calendar payroll benefit contract ' +
  'notice period overtime schedule team office remote travel expense receipt budget training review goal project deadline client ' +
  'meeting report quality safety incident laptop access badge security password network support ticket escalation vacation ' +
  'insurance pension bonus salary promotion feedback mentor onboarding handbook river mountain engine protein galaxy orchard ' +
  'harbor violin glacier lantern meadow compass theorem crystal').split(' ')

/** Deterministic prose: sentences of words drawn from WORDS by a seeded generator (different seeds, unrelated texts). */
export function prose(seed: string, sentences = 12): string {
  let x = [...seed].reduce((h, c) => (h * 31 + c.charCodeAt(0)) | 0, 7) & 0x7fffffff
  const next = () => (x = (x * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff
  return Array.from({ length: sentences }, () => {
    const w = Array.from({ length: 8 + Math.floor(next() * 10) }, () => WORDS[Math.floor(next() * WORDS.length)])
    return `${w[0][0].toUpperCase()}${w[0].slice(1)} ${w.slice(1).join(' ')}.`
  }).join(' ')
}

export async function upload(svc: StartedApp, kbId: string, name: string, content: string | Uint8Array, type = 'application/octet-stream'): Promise<Response> {
  const form = new FormData()
  form.append('file', new Blob([content], { type }), name)
  return svc.request(`/api/kb/${kbId}/docs/upload`, { method: 'POST', body: form })
}

export async function status(svc: StartedApp, kbId: string, docId: string): Promise<Json> {
  const res = await svc.request(`/api/kb/${kbId}/docs/${docId}/status`)
  return res.status === 200 ? res.json() : { status: `http-${res.status}` }
}

export const settle = (svc: StartedApp, kbId: string, docId: string, want: string[] = ['indexed', 'failed', 'outdated', 'deleted']) =>
  waitFor(async () => {
    const s = await status(svc, kbId, docId)
    return want.includes(s.status) ? s : null
  }, `document ${docId} to reach ${want.join('|')}`)

export async function newKb(svc: StartedApp, overrides?: Record<string, unknown>): Promise<string> {
  const id = uniqueId()
  const res = await svc.request('/api/kb', { method: 'POST', json: { kb_id: id } })
  assert.equal(res.status, 201)
  if (overrides) assert.equal((await svc.request(`/api/kb/${id}/settings/overrides`, { method: 'PUT', json: { overrides } })).status, 200)
  return id
}

export function docsSuite(label: string, opts: StartOptions): void {
  const fast = { ...opts, settings: { queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 }, ...opts.settings } }

  it(`${label}: upload, status, list, counts, download and the record's fields`, async (t) => {
    const svc = await startApp(t, fast)
    const kb = await newKb(svc)
    const text = md('Handbook', prose('alpha'))
    const res = await upload(svc, kb, 'handbook.md', text)
    assert.equal(res.status, 202)
    const up = await res.json() as Json
    assert.match(up.doc_id, /^[0-9a-f]{16}$/)
    assert.equal(up.source, 'handbook.md')
    assert.equal(up.status_url, `/api/kb/${kb}/docs/${up.doc_id}/status`)
    assert.match(up.etag, /^[0-9a-f]{32}$/)
    const doc = await settle(svc, kb, up.doc_id)
    assert.equal(doc.status, 'indexed', doc.last_error)
    for (const k of ['doc_id', 'kb_id', 'title', 'source_type', 'source', 'storage_key', 'connector_id', 'status', 'doc_type', 'chunk_count', 'file_size', 'embedding_model', 'last_error', 'etag', 'source_uri', 'content_version', 'created_at', 'updated_at']) {
      assert.ok(k in doc, `record has ${k}`)
    }
    assert.equal(doc.title, 'Handbook')
    assert.equal(doc.source_type, 's3')
    assert.equal(doc.doc_type, 'md')
    assert.equal(doc.file_size, Buffer.byteLength(text))
    assert.ok(doc.chunk_count >= 1)
    assert.equal(doc.embedding_model, svc.app.adapters.embedder.model)
    assert.equal(doc.connector_id, null)
    assert.equal(doc.storage_key, `${kb}/${up.doc_id}-handbook.md`, 'stored beside the KB\'s other files, in no folder of its own')
    assert.equal(await svc.app.adapters.vectors.count(kb), doc.chunk_count)

    const dl = await svc.request(`/api/kb/${kb}/docs/${up.doc_id}/download`)
    assert.equal(dl.status, 200)
    assert.match(dl.headers.get('content-disposition') ?? '', /filename="handbook.md"/)
    assert.equal(await dl.text(), text)

    const counts = await (await svc.request(`/api/kb/${kb}/docs/status`)).json() as Json
    assert.equal(counts.kb_id, kb)
    assert.equal(counts.doc_counts.indexed, 1)
    assert.equal(counts.doc_counts.total, 1)
    for (const k of ['indexed', 'pending', 'running', 'failed', 'deleted', 'total']) assert.equal(typeof counts.doc_counts[k], 'number')
    const all = await (await svc.request('/api/docs/status')).json() as Json
    assert.equal(all.knowledge_bases[kb].doc_counts.indexed, 1)
    assert.equal((await svc.request('/api/kb/ghost/docs/status')).status, 404)
    assert.equal((await svc.request(`/api/kb/${kb}/docs/0000000000000000/status`)).status, 404)
    assert.equal((await svc.request(`/api/kb/${kb}/docs/0000000000000000/download`)).status, 404)
  })

  it(`${label}: a file under the per-document folder of earlier keys, or under a name too long to share a segment with the doc_id, is read, replaced and deleted`, async (t) => {
    const svc = await startApp(t, fast)
    const objects = svc.app.adapters.objects
    const kb = await newKb(svc)
    const uploaded = async (name: string, body: string) => {
      const id = ((await (await upload(svc, kb, name, body)).json()) as Json).doc_id
      const doc = await settle(svc, kb, id)
      assert.equal(doc.status, 'indexed', doc.last_error)
      return doc
    }
    /** Moves a document's file where an earlier version stored it, in a folder named after the doc_id, and its row along. */
    const toOldKey = async (doc: Json, body: string) => {
      const oldKey = `${kb}/${doc.doc_id}/${doc.source}`
      await objects.put(oldKey, Buffer.from(body))
      await objects.delete([doc.storage_key])
      await svc.app.adapters.sql.query('UPDATE documents SET storage_key = $2 WHERE doc_id = $1', [doc.doc_id, oldKey])
      return oldKey
    }
    const download = async (id: string) => (await svc.request(`/api/kb/${kb}/docs/${id}/download`)).text()
    const remove = async (id: string) => {
      assert.equal((await svc.request(`/api/kb/${kb}/docs/${id}?force=true`, { method: 'DELETE' })).status, 202)
      await waitFor(async () => (await svc.request(`/api/kb/${kb}/docs/${id}/status`)).status === 404, 'the document to be removed')
    }

    const text = md('Legacy', prose('legacy'))
    const kept = await uploaded('kept.md', text)
    const keptKey = await toOldKey(kept, text)
    assert.equal(await download(kept.doc_id), text)

    // A new version of a document stored under an old key takes a key of the new form; the old file goes.
    const text1 = md('Replaced', prose('replaced'))
    const replaced = await uploaded('replaced.md', text1)
    const replacedKey = await toOldKey(replaced, text1)
    const text2 = md('Legacy v2', prose('legacy-2'))
    // (A stored file's key names the id drawn for its upload: the row keeps its doc_id.)
    assert.match((await uploaded('replaced.md', text2)).storage_key, new RegExp(`^${kb}/[0-9a-f]{16}-replaced\\.md$`))
    assert.equal(await objects.head(replacedKey), null)
    assert.equal(await download(replaced.doc_id), text2)

    const done = [kept, replaced]
    // s3rver (the tests' S3) keeps an object in a file named after the key's last segment and 35 more bytes: it
    // cannot store a name longer than 220 bytes.
    if (objects.name === 'local') {
      const longName = `${'n'.repeat(230)}.md`
      const text3 = md('Long', prose('long'))
      const long = await uploaded(longName, text3)
      assert.equal(long.storage_key, `${kb}/${long.doc_id}/${longName}`)
      assert.equal(await download(long.doc_id), text3)
      done.push(long)
    }
    for (const doc of done) await remove(doc.doc_id)
    assert.equal(await objects.head(keptKey), null)
    const left: string[] = []
    for await (const key of objects.list(`${kb}/`)) left.push(key)
    assert.deepEqual(left, [])
  })

  it(`${label}: list filters, sorting with nulls last, paging and bad values`, async (t) => {
    const svc = await startApp(t, fast)
    const kb = await newKb(svc)
    const ids: string[] = []
    for (const [name, body] of [['b-report.md', prose('bravo', 20)], ['a-notes.txt', prose('alpha', 5)], ['c-guide.md', prose('charlie', 40)]]) {
      ids.push(((await (await upload(svc, kb, name, body)).json()) as Json).doc_id)
    }
    for (const id of ids) assert.equal((await settle(svc, kb, id)).status, 'indexed')
    const failForm = await svc.request(`/api/kb/${kb}/docs/${ids[0]}/fail`, { method: 'POST' }) // indexed: not failable
    assert.equal(failForm.status, 409)

    const list = async (q: string) => (await (await svc.request(`/api/kb/${kb}/docs?${q}`)).json()) as Json
    assert.deepEqual((await list('sort_by=source&sort_order=asc')).items.map((d: Json) => d.source), ['a-notes.txt', 'b-report.md', 'c-guide.md'])
    assert.deepEqual((await list('sort_by=file_size&sort_order=desc')).items.map((d: Json) => d.source), ['c-guide.md', 'b-report.md', 'a-notes.txt'])
    assert.deepEqual((await list('search=REPORT')).items.map((d: Json) => d.source), ['b-report.md'])
    assert.equal((await list('search=%25')).total, 0, 'LIKE wildcards are matched literally')
    const paged = await list('page=2&page_size=2&sort_by=source&sort_order=asc')
    assert.deepEqual([paged.total, paged.page, paged.page_size, paged.items.length, paged.items[0].source], [3, 2, 2, 1, 'c-guide.md'])
    assert.deepEqual((await list('page=9')).items, [])
    assert.equal((await list('page_size=500')).page_size, 100)
    assert.equal((await list('status=indexed')).total, 3)
    assert.equal((await list('source_type=web')).total, 0)

    // a document with chunk_count null (deleted ones keep it; a pending upload has none) sorts last both ways
    await svc.app.adapters.sql.query('UPDATE documents SET chunk_count = NULL WHERE doc_id = $1', [ids[2]])
    assert.equal((await list('sort_by=chunk_count&sort_order=asc')).items.at(-1).doc_id, ids[2])
    assert.equal((await list('sort_by=chunk_count&sort_order=desc')).items.at(-1).doc_id, ids[2])

    for (const bad of ['sort_by=name', 'sort_order=up', 'status=done', 'page=0', 'page_size=0', 'page=x']) {
      const res = await svc.request(`/api/kb/${kb}/docs?${bad}`)
      assert.equal(res.status, 422, bad)
      assert.ok(Array.isArray(((await res.json()) as Json).detail))
    }
    assert.equal((await svc.request('/api/kb/ghost/docs')).status, 404)
    const global = await (await svc.request('/api/docs?sort_by=source&sort_order=asc&search=-')).json() as Json
    assert.ok(global.items.some((d: Json) => d.kb_id === kb))
  })

  it(`${label}: soft delete keeps the file and hides the document; force and non-indexed deletes remove it`, async (t) => {
    const svc = await startApp(t, fast)
    const kb = await newKb(svc)
    const a = ((await (await upload(svc, kb, 'a.md', md('A', prose('delta')))).json()) as Json).doc_id
    const b = ((await (await upload(svc, kb, 'b.md', md('B', prose('echo')))).json()) as Json).doc_id
    await settle(svc, kb, a)
    await settle(svc, kb, b)

    let res = await svc.request(`/api/kb/${kb}/docs/${a}`, { method: 'DELETE' })
    assert.equal(res.status, 202)
    assert.deepEqual(await res.json(), { kb_id: kb, doc_id: a, status: 'pending' })
    const deleted = await settle(svc, kb, a, ['deleted'])
    assert.equal(deleted.status, 'deleted')
    assert.equal((await svc.request(`/api/kb/${kb}/docs/${a}/download`)).status, 200, 'soft delete keeps the file')
    const listed = await (await svc.request(`/api/kb/${kb}/docs`)).json() as Json
    assert.ok(!listed.items.some((d: Json) => d.doc_id === a), 'deleted documents are hidden by default')
    assert.equal((await (await svc.request(`/api/kb/${kb}/docs?status=deleted`)).json() as Json).items[0].doc_id, a)
    assert.equal((await svc.app.adapters.vectors.docVectors(kb, a)).length, 0, 'vectors removed')
    res = await svc.request(`/api/kb/${kb}/docs/${a}`, { method: 'DELETE' })
    assert.equal(res.status, 202, 'deleting a deleted document answers 202 and changes nothing')
    assert.equal((await status(svc, kb, a)).status, 'deleted')

    res = await svc.request(`/api/kb/${kb}/docs/${b}?force=true`, { method: 'DELETE' })
    assert.equal(res.status, 202)
    await waitFor(async () => (await svc.request(`/api/kb/${kb}/docs/${b}/status`)).status === 404, 'hard delete')
    assert.equal(await svc.app.adapters.objects.head(`${kb}/${b}/b.md`), null, 'file removed')

    const f = ((await (await upload(svc, kb, 'broken.pdf', 'not a pdf at all')).json()) as Json).doc_id
    assert.equal((await settle(svc, kb, f)).status, 'failed')
    await svc.request(`/api/kb/${kb}/docs/${f}`, { method: 'DELETE' })
    await waitFor(async () => (await svc.request(`/api/kb/${kb}/docs/${f}/status`)).status === 404, 'a failed document is removed entirely')
    assert.equal((await svc.request(`/api/kb/${kb}/docs/ffffffffffffffff`, { method: 'DELETE' })).status, 404)
  })

  it(`${label}: same file name reuses the doc_id and re-indexes the new content; reindex etag rule`, async (t) => {
    const svc = await startApp(t, fast)
    const kb = await newKb(svc)
    const first = await (await upload(svc, kb, 'policy.md', md('Policy', prose('foxtrot')))).json() as Json
    await settle(svc, kb, first.doc_id)
    const second = await (await upload(svc, kb, 'policy.md', md('Policy v2', prose('golf', 30)))).json() as Json
    assert.equal(second.doc_id, first.doc_id)
    assert.notEqual(second.etag, first.etag)
    const doc = await settle(svc, kb, first.doc_id)
    assert.equal(doc.status, 'indexed')
    assert.equal(doc.title, 'Policy v2')
    assert.equal(doc.etag, second.etag)

    let res = await svc.request(`/api/kb/${kb}/docs/${first.doc_id}/reindex`, { method: 'POST' })
    assert.equal(res.status, 202)
    assert.deepEqual(await res.json(), { kb_id: kb, doc_id: first.doc_id, queued: 0, skipped: 1 })
    res = await svc.request(`/api/kb/${kb}/docs/${first.doc_id}/reindex?force=true`, { method: 'POST' })
    assert.deepEqual(await res.json(), { kb_id: kb, doc_id: first.doc_id, queued: 1, skipped: 0 })
    await settle(svc, kb, first.doc_id)
    res = await svc.request(`/api/kb/${kb}/reindex`, { method: 'POST' })
    assert.deepEqual(await res.json(), { kb_id: kb, queued: 0, skipped: 1 })
    // The stored file changes behind the record (as a connector's source would): the etag differs, so it is queued.
    await svc.app.adapters.objects.put(doc.storage_key, Buffer.from(md('Policy v3', prose('hotel'))))
    res = await svc.request(`/api/kb/${kb}/reindex`, { method: 'POST' })
    assert.deepEqual(await res.json(), { kb_id: kb, queued: 1, skipped: 0 })
    assert.equal((await settle(svc, kb, first.doc_id)).title, 'Policy v3')
    res = await svc.request(`/api/kb/${kb}/reindex?force=true`, { method: 'POST' })
    assert.equal((await res.json() as Json).queued, 1)
    assert.equal((await svc.request('/api/kb/ghost/reindex', { method: 'POST' })).status, 404)
  })

  it(`${label}: fail and recover follow the state table, and a late pipeline never overwrites a fail`, async (t) => {
    // One worker slot, long polling: documents stay where we put them while the test moves them.
    const svc = await startApp(t, { ...opts, settings: { queue_worker: { enabled: false }, ...opts.settings } })
    const kb = await newKb(svc)
    const a = ((await (await upload(svc, kb, 'a.md', md('A', prose('india')))).json()) as Json).doc_id
    assert.equal((await status(svc, kb, a)).status, 'pending', 'no worker: stays pending')

    let res = await svc.request(`/api/kb/${kb}/docs/${a}/recover`, { method: 'POST' })
    assert.equal(res.status, 409, 'recover needs running')
    res = await svc.request(`/api/kb/${kb}/docs/${a}/fail?reason=${encodeURIComponent('stuck in the queue')}`, { method: 'POST' })
    assert.equal(res.status, 200)
    assert.deepEqual(await res.json(), { kb_id: kb, doc_id: a, status: 'failed' })
    const failed = await status(svc, kb, a)
    assert.equal(failed.status, 'failed')
    assert.equal(failed.last_error, 'stuck in the queue')
    assert.equal((await svc.app.adapters.queue.depth('ingest')).ready, 0, 'its queued event was removed')
    res = await svc.request(`/api/kb/${kb}/docs/${a}/fail`, { method: 'POST' })
    assert.equal(res.status, 409, 'fail of a failed document')

    // running: fail wins; recover re-queues
    await svc.app.adapters.sql.query(`UPDATE documents SET status = 'running' WHERE doc_id = $1`, [a])
    res = await svc.request(`/api/kb/${kb}/docs/${a}/fail`, { method: 'POST' })
    assert.equal((await status(svc, kb, a)).last_error, 'Manually failed via API')
    await svc.app.adapters.sql.query(`UPDATE documents SET status = 'running' WHERE doc_id = $1`, [a])
    res = await svc.request(`/api/kb/${kb}/docs/${a}/recover`, { method: 'POST' })
    assert.equal(res.status, 202)
    assert.deepEqual(await res.json(), { kb_id: kb, doc_id: a, queued: true })
    assert.equal((await status(svc, kb, a)).status, 'pending')
    assert.equal((await svc.app.adapters.queue.depth('ingest')).ready, 1)

    const long = 'x'.repeat(800)
    res = await svc.request(`/api/kb/${kb}/docs/${a}/fail?reason=${long}`, { method: 'POST' })
    assert.equal((await status(svc, kb, a)).last_error.length, 500, 'reason cut to 500 characters')

    // running/deleting documents refuse delete, upload and reindex
    for (const s of ['running', 'deleting']) {
      await svc.app.adapters.sql.query(`UPDATE documents SET status = $2 WHERE doc_id = $1`, [a, s])
      res = await svc.request(`/api/kb/${kb}/docs/${a}`, { method: 'DELETE' })
      assert.equal(res.status, 409)
      assert.equal((await res.json() as Json).detail, `Document is active, try again later: doc_id=${a} status=${s}`)
      assert.equal((await upload(svc, kb, 'a.md', 'new')).status, 409)
      assert.equal((await svc.request(`/api/kb/${kb}/docs/${a}/reindex?force=true`, { method: 'POST' })).status, 409)
    }
    await svc.app.adapters.sql.query(`UPDATE documents SET status = 'running' WHERE doc_id = $1`, [a])
    res = await svc.request(`/api/kb/${kb}/docs/${a}/fail`, { method: 'POST' })
    assert.ok(!('warning' in (await res.json() as Json)), 'no built-in worker here: no warning')

    // built-in worker mode: failing a running document carries a warning
    const withWorker = await startApp(t, fast)
    const kb2 = await newKb(withWorker)
    const b = ((await (await upload(withWorker, kb2, 'b.md', md('B', prose('juliett')))).json()) as Json).doc_id
    await settle(withWorker, kb2, b)
    await withWorker.app.adapters.sql.query(`UPDATE documents SET status = 'running' WHERE doc_id = $1`, [b])
    res = await withWorker.request(`/api/kb/${kb2}/docs/${b}/fail`, { method: 'POST' })
    const body = await res.json() as Json
    assert.equal(body.status, 'failed')
    assert.match(body.warning, /^The built-in worker stops the running task at its next check point/)
    assert.equal((await withWorker.app.adapters.vectors.docVectors(kb2, b)).length, 0, 'fail purges the vectors')
  })

  it(`${label}: bad uploads get clear errors and leave nothing behind`, async (t) => {
    const svc = await startApp(t, { ...fast, settings: { ...fast.settings, ingestion: { max_file_size_mb: 1 } } })
    const kb = await newKb(svc)
    let res = await upload(svc, kb, 'virus.exe', 'MZ...')
    assert.equal(res.status, 422)
    assert.deepEqual(await res.json(), { detail: 'Unsupported file format: .exe' })
    res = await upload(svc, kb, 'empty.txt', '')
    assert.equal(res.status, 422)
    assert.match((await res.json() as Json).detail, /empty/)
    res = await upload(svc, kb, 'big.txt', Buffer.alloc(1024 * 1024 + 10, 'a'))
    assert.equal(res.status, 422)
    assert.match((await res.json() as Json).detail, /larger than the 1 MB limit/)
    const counts = await (await svc.request(`/api/kb/${kb}/docs/status`)).json() as Json
    assert.equal(counts.doc_counts.total, 0, 'no row left')
    const keys: string[] = []
    for await (const k of svc.app.adapters.objects.list(`${kb}/`)) keys.push(k)
    assert.deepEqual(keys, [], 'nothing stored')
    res = await svc.request(`/api/kb/${kb}/docs/upload`, { method: 'POST', body: new FormData() })
    assert.equal(res.status, 422)
    assert.equal((await upload(svc, 'ghost', 'a.md', 'x')).status, 404)

    // a binary file named .txt and a corrupt PDF end failed with the parser's message
    const bin = ((await (await upload(svc, kb, 'data.txt', new Uint8Array([0, 1, 2, 0, 255, 0, 3, 0, 0, 9]))).json()) as Json).doc_id
    const pdf = ((await (await upload(svc, kb, 'scan.pdf', '%PDF-1.7 truncated garbage')).json()) as Json).doc_id
    const binDoc = await settle(svc, kb, bin)
    assert.equal(binDoc.status, 'failed')
    assert.match(binDoc.last_error, /^parse failed: .*text/i)
    const pdfDoc = await settle(svc, kb, pdf)
    assert.equal(pdfDoc.status, 'failed')
    assert.match(pdfDoc.last_error, /^parse failed: .*PDF/i)
  })

  it(`${label}: concurrent uploads of one file name: exactly one wins, the other gets 409`, async (t) => {
    const svc = await startApp(t, fast)
    const kb = await newKb(svc)
    const results = await Promise.all([0, 1, 2, 3].map(() => upload(svc, kb, 'race.md', md('Race', prose('juliet')))))
    const codes = results.map((r) => r.status).sort()
    assert.equal(codes.filter((c) => c === 202).length, 1, `one winner, got ${codes}`)
    assert.ok(codes.filter((c) => c === 409).length >= 1)
    assert.equal((await (await svc.request(`/api/kb/${kb}/docs/status`)).json() as Json).doc_counts.total, 1)
  })

  it(`${label}: batch upload: submission order, failures with {results, detail}, files before a failure stay`, async (t) => {
    const svc = await startApp(t, fast)
    const kb = await newKb(svc)
    const form = new FormData()
    form.append('files', new Blob([md('One', prose('kilo'))]), 'one.md')
    form.append('files', new Blob(['<html><body><article><h1>Two</h1><p>' + prose('lima') + '</p></article></body></html>']), 'two.html')
    let res = await svc.request(`/api/kb/${kb}/docs/upload/batch`, { method: 'POST', body: form })
    assert.equal(res.status, 202)
    const ok = await res.json() as Json
    assert.deepEqual(ok.results.map((r: Json) => r.source), ['one.md', 'two.html'])
    assert.ok(!('detail' in ok))

    const mixed = new FormData()
    mixed.append('files', new Blob([md('Three', prose('mike'))]), 'three.md')
    mixed.append('files', new Blob(['x']), 'bad.zip')
    mixed.append('files', new Blob([md('Four', prose('november'))]), 'four.md')
    res = await svc.request(`/api/kb/${kb}/docs/upload/batch`, { method: 'POST', body: mixed })
    assert.equal(res.status, 422)
    const body = await res.json() as Json
    assert.equal(body.results.length, 3)
    assert.equal(body.results[0].source, 'three.md')
    assert.deepEqual({ title: body.results[1].title, status: body.results[1].status }, { title: 'bad.zip', status: 'error' })
    assert.match(body.results[1].error, /Unsupported file format/)
    assert.equal(body.results[2].source, 'four.md', 'every file is processed')
    assert.equal(body.detail, body.results[1].error)
    for (const r of [...ok.results, body.results[0], body.results[2]]) assert.equal((await settle(svc, kb, r.doc_id)).status, 'indexed')
  })

  it(`${label}: an ingest hook that blocks answers 403 and skips the rest of a batch`, async (t) => {
    const svc = await startApp(t, fast)
    const kb = await newKb(svc)
    const docs = svc.app.use<{ addIngestHook(h: (i: { kbId: string }) => Promise<void>): void; service: { repo: { countLive(k: string): Promise<number> } } }>('docs')
    const { AppError } = await import('../../kernel/errors.ts')
    docs.addIngestHook(async ({ kbId }) => {
      if ((await docs.service.repo.countLive(kbId)) >= 1) throw new AppError('DOC_LIMIT', 403, `Document limit reached for knowledge base '${kbId}' (1)`)
    })
    const form = new FormData()
    for (const n of ['p.md', 'q.md', 'r.md']) form.append('files', new Blob([md(n, prose(n))]), n)
    const res = await svc.request(`/api/kb/${kb}/docs/upload/batch`, { method: 'POST', body: form })
    assert.equal(res.status, 403)
    const body = await res.json() as Json
    assert.equal(body.results[0].source, 'p.md')
    assert.match(body.results[1].error, /Document limit reached/)
    assert.match(body.results[2].error, /^Skipped: batch stopped at q\.md/)
    assert.equal(body.detail, body.results[1].error)
    const single = await upload(svc, kb, 's.md', 'x')
    assert.equal(single.status, 403)
  })

  it(`${label}: dedup: identical content is not indexed twice, similar content supersedes the older document`, async (t) => {
    const svc = await startApp(t, fast)
    const kb = await newKb(svc)
    const base = md('Leave policy', prose('oscar', 30))
    const a = ((await (await upload(svc, kb, 'leave.md', base)).json()) as Json).doc_id
    assert.equal((await settle(svc, kb, a)).status, 'indexed')
    const b = ((await (await upload(svc, kb, 'leave-copy.md', base)).json()) as Json).doc_id
    const bDoc = await settle(svc, kb, b)
    assert.equal(bDoc.status, 'outdated')
    assert.equal(bDoc.duplicate_of, a)
    assert.equal((await svc.app.adapters.vectors.docVectors(kb, b)).length, 0)

    // a revised version: 3 of 30 sentences rewritten (one in ten: most passages unchanged)
    const sentences = base.split('. ')
    const replacement = prose('revision', 3).split('. ')
    for (let i = 0; i < 3; i++) sentences[i * 10 + 1] = replacement[i]
    const revised = sentences.join('. ')
    const c = ((await (await upload(svc, kb, 'leave-v2.md', revised)).json()) as Json).doc_id
    const cDoc = await settle(svc, kb, c)
    assert.equal(cDoc.status, 'indexed')
    // outdated just after the newer document is indexed (a statement of its own)
    const aDoc = await settle(svc, kb, a, ['outdated'])
    assert.equal(aDoc.duplicate_of, c, 'the older document is superseded')

    // an unrelated document is unique
    const d = ((await (await upload(svc, kb, 'other.md', md('Travel', prose('papa', 30)))).json()) as Json).doc_id
    assert.equal((await settle(svc, kb, d)).status, 'indexed')

    // dedup off for a KB: identical content is indexed again
    const kb2 = await newKb(svc, { 'dedup.enabled': false })
    const e = ((await (await upload(svc, kb2, 'x.md', base)).json()) as Json).doc_id
    const f = ((await (await upload(svc, kb2, 'y.md', base)).json()) as Json).doc_id
    assert.equal((await settle(svc, kb2, e)).status, 'indexed')
    assert.equal((await settle(svc, kb2, f)).status, 'indexed')

    // deleting the document that superseded an identical one brings the duplicate back into the index
    await svc.request(`/api/kb/${kb}/docs/${c}?force=true`, { method: 'DELETE' })
    const back = await settle(svc, kb, a, ['indexed'])
    assert.equal(back.duplicate_of, null)
  })

  it(`${label}: wire texts of the older service for KB, document, format, fail and recover errors`, async (t) => {
    const svc = await startApp(t, { ...opts, settings: { queue_worker: { enabled: false }, ...opts.settings } })
    const kb = await newKb(svc)
    const a = ((await (await upload(svc, kb, 'a.md', md('A', prose('wire-a')))).json()) as Json).doc_id
    const detail = async (res: Response, status: number) => {
      assert.equal(res.status, status)
      return ((await res.json()) as Json).detail
    }
    const ghost = '0123456789abcdef'
    for (const [method, path] of [['GET', 'status'], ['GET', 'download'], ['DELETE', ''], ['POST', 'reindex'], ['POST', 'recover'], ['POST', 'fail']]) {
      const res = await svc.request(`/api/kb/${kb}/docs/${ghost}${path ? `/${path}` : ''}`, { method })
      assert.equal(await detail(res, 404), `Document not found: kb=${kb} doc_id=${ghost}`, `${method} ${path}`)
    }
    assert.equal(await detail(await svc.request('/api/kb/ghost/docs'), 404), 'KB not found: ghost')
    assert.equal(await detail(await svc.request(`/api/kb/ghost/docs/${a}/status`), 404), 'KB not found: ghost')
    assert.equal(await detail(await upload(svc, 'ghost', 'a.md', 'x'), 404), 'KB not found: ghost')
    assert.equal(await detail(await upload(svc, kb, 'photo.PNG', 'x'), 422), 'Unsupported file format: .png')
    assert.match(await detail(await upload(svc, kb, 'Makefile', 'x'), 422), /^Unsupported file format: /)

    // pending: recover refuses; indexed-like stable states: fail refuses
    assert.equal(await detail(await svc.request(`/api/kb/${kb}/docs/${a}/recover`, { method: 'POST' }), 409), 'Document is not in a recoverable state: status=pending')
    assert.equal((await svc.request(`/api/kb/${kb}/docs/${a}/fail`, { method: 'POST' })).status, 200)
    assert.equal(await detail(await svc.request(`/api/kb/${kb}/docs/${a}/fail`, { method: 'POST' }), 409), 'Cannot force-fail document in current state: status=failed')
    assert.equal(await detail(await svc.request(`/api/kb/${kb}/docs/${a}/recover`, { method: 'POST' }), 409), 'Document is not in a recoverable state: status=failed')
  })

  it(`${label}: wire record fields, title sort, search over title, source and doc_id, and force delete of a deleted document`, async (t) => {
    const svc = await startApp(t, fast)
    const kb = await newKb(svc)
    const before = new Date(Date.now() - 60_000).toISOString()
    const ups: Json[] = []
    // Titles (from the headings) sort the other way round from the file names.
    for (const [name, title] of [['a-one.md', 'Zulu guide'], ['b-two.md', 'Yankee notes'], ['c-three.md', 'Xray report']]) {
      ups.push(await (await upload(svc, kb, name, md(title, prose(`wire-${name}`, 20)))).json())
    }
    // The worker records the end of a run once the pipeline has returned: wait for it, not just the status.
    const finished = (k: string, id: string) => waitFor(async () => {
      const d = await status(svc, k, id)
      return ['indexed', 'failed'].includes(d.status) && d.process_finished_at ? d : null
    }, `document ${id} to finish its run`)
    const docs = await Promise.all(ups.map((u) => finished(kb, u.doc_id)))
    for (const [i, d] of docs.entries()) {
      assert.equal(d.status, 'indexed', d.last_error)
      assert.equal(d.content_version, ups[i].etag, 'content_version is the etag for uploads')
      assert.equal(d.chunk_strategy, 'recursive')
      assert.equal(d.deleted_at, null)
      for (const k of ['doc_created_at', 'process_started_at', 'process_finished_at']) assert.ok(d[k] > before, `${k} is set: ${d[k]}`)
      assert.ok(d.process_started_at <= d.process_finished_at)
      assert.ok(d.doc_created_at <= d.process_started_at)
    }

    const list = async (q: string) => ((await (await svc.request(`/api/kb/${kb}/docs?${q}`)).json()) as Json).items.map((d: Json) => d.source)
    assert.deepEqual(await list('sort_by=title&sort_order=asc'), ['c-three.md', 'b-two.md', 'a-one.md'])
    assert.deepEqual(await list('sort_by=title&sort_order=desc'), ['a-one.md', 'b-two.md', 'c-three.md'])
    assert.deepEqual(await list('sort_by=source&sort_order=asc'), ['a-one.md', 'b-two.md', 'c-three.md'], 'source sorting stays')
    assert.deepEqual(await list('search=yankee'), ['b-two.md'], 'title')
    assert.deepEqual(await list('search=THREE'), ['c-three.md'], 'source')
    assert.deepEqual(await list(`search=${ups[0].doc_id.slice(3, 12)}`), ['a-one.md'], 'doc_id')
    const page = await (await svc.request(`/api/kb/${kb}/docs?search=ray`)).json() as Json
    assert.equal(page.total, 1)
    for (const k of ['chunk_strategy', 'doc_created_at', 'process_started_at', 'process_finished_at', 'deleted_at', 'content_version']) assert.ok(k in page.items[0], `listed record has ${k}`)

    // a KB with another strategy records it
    const kb2 = await newKb(svc, { 'chunking.strategy': 'hierarchical', 'chunking.chunk_size': [1024, 256], 'chunking.chunk_overlap': 32 })
    const h = ((await (await upload(svc, kb2, 'h.md', md('H', prose('wire-h', 30)))).json()) as Json).doc_id
    assert.equal((await settle(svc, kb2, h)).chunk_strategy, 'hierarchical')
    // a failed run ends too
    const f = ((await (await upload(svc, kb, 'broken.pdf', 'not a pdf')).json()) as Json).doc_id
    const failed = await finished(kb, f)
    assert.equal(failed.status, 'failed')
    assert.ok(failed.process_finished_at >= failed.process_started_at)

    // soft delete stamps deleted_at; force=true of the deleted document removes it for good
    const [one] = ups
    await svc.request(`/api/kb/${kb}/docs/${one.doc_id}`, { method: 'DELETE' })
    const deleted = await settle(svc, kb, one.doc_id, ['deleted'])
    assert.ok(deleted.deleted_at >= deleted.process_finished_at, `deleted_at ${deleted.deleted_at}`)
    assert.equal(deleted.doc_created_at, docs[0].doc_created_at, 'deleting is not new content')
    let res = await svc.request(`/api/kb/${kb}/docs/${one.doc_id}`, { method: 'DELETE' })
    assert.equal(res.status, 202)
    assert.equal((await status(svc, kb, one.doc_id)).status, 'deleted', 'without force a deleted document stays')
    res = await svc.request(`/api/kb/${kb}/docs/${one.doc_id}?force=true`, { method: 'DELETE' })
    assert.equal(res.status, 202)
    assert.deepEqual(await res.json(), { kb_id: kb, doc_id: one.doc_id, status: 'pending' })
    await waitFor(async () => (await svc.request(`/api/kb/${kb}/docs/${one.doc_id}/status`)).status === 404, 'the deleted document to be removed')
    assert.equal(await svc.app.adapters.objects.head(deleted.storage_key), null, 'its file is gone')
    assert.equal((await list('status=deleted')).length, 0)

    // a re-upload under a soft-deleted name is new content: doc_created_at moves, deleted_at clears
    const [, two] = ups
    await svc.request(`/api/kb/${kb}/docs/${two.doc_id}`, { method: 'DELETE' })
    const gone = await settle(svc, kb, two.doc_id, ['deleted'])
    const again = await (await upload(svc, kb, 'b-two.md', md('Yankee notes v2', prose('wire-again', 20)))).json() as Json
    assert.equal(again.doc_id, two.doc_id)
    const back = await settle(svc, kb, two.doc_id, ['indexed'])
    assert.equal(back.deleted_at, null)
    assert.equal(back.content_version, again.etag)
    assert.ok(back.doc_created_at > gone.doc_created_at)
  })

  it(`${label}: hierarchical chunking stores parent chunks and links leaves to them`, async (t) => {
    const svc = await startApp(t, fast)
    const kb = await newKb(svc, { 'chunking.strategy': 'hierarchical', 'chunking.chunk_size': [1024, 256], 'chunking.chunk_overlap': 32 })
    const a = ((await (await upload(svc, kb, 'long.md', md('Long', prose('quebec', 60)))).json()) as Json).doc_id
    const doc = await settle(svc, kb, a)
    assert.equal(doc.status, 'indexed', doc.last_error)
    const parents = await svc.app.adapters.sql.query<Json>('SELECT chunk_id, level, child_count, text FROM parent_chunks WHERE doc_id = $1', [a])
    assert.ok(parents.length >= 2)
    const { sparse, dense } = await svc.app.adapters.vectors.search(kb, { dense: (await svc.app.adapters.embedder.embed(['quebec sentence 5']))[0], limit: 50 })
    void sparse
    const ids = new Set(parents.map((p: Json) => p.chunk_id))
    assert.ok(dense.length > 0)
    for (const hit of dense) assert.ok(ids.has(hit.payload.parent_chunk_id), `leaf ${hit.payload.chunk_id} points at a stored parent`)
    assert.equal(parents.reduce((n: number, p: Json) => n + p.child_count, 0), doc.chunk_count)
  })
}
