// The ingest benchmark's upload client (bench/lib/upload-client.ts): its request body is the one FormData sends, and
// the client, started as the benchmark starts it, uploads every file of a folder into a real service, names and bytes
// intact, and fails loudly on a refused upload or a concurrency that would upload nothing.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { multipartUpload, startUploadClient } from '../../bench/lib/upload-client.ts'
import { startApp, uniqueId } from '../helpers/app.ts'

/** FormData's own encoding of one part `file` (undici, as fetch sends it), with its boundary. */
async function formDataBody(name: string, bytes: Uint8Array): Promise<{ body: Buffer; boundary: string }> {
  const form = new FormData()
  form.append('file', new Blob([bytes]), name)
  const res = new Response(form)
  const boundary = /boundary=(.+)$/.exec(res.headers.get('content-type') ?? '')?.[1]
  assert.ok(boundary, 'FormData names its boundary')
  return { body: Buffer.from(await res.arrayBuffer()), boundary }
}

describe('ingest bench upload client', () => {
  it('encodes a file as FormData does, byte for byte (quotes and line breaks in the name, CRLF and -- in the bytes)', async () => {
    const cases: [string, Uint8Array][] = [
      ['handbook.md', Buffer.from('# Handbook\n\nalpha beta\n')],
      ['say "hi".txt', Buffer.from('line\r\n--not-a-boundary\r\n\r\nend')],
      ['two\r\nlines.html', new Uint8Array([0, 1, 2, 255, 13, 10, 45, 45])],
      ['empty.txt', new Uint8Array(0)],
    ]
    for (const [name, bytes] of cases) {
      const expected = await formDataBody(name, bytes)
      const ours = multipartUpload(name, bytes, expected.boundary)
      assert.equal(ours.contentType, `multipart/form-data; boundary=${expected.boundary}`)
      assert.equal(ours.body.toString('latin1'), expected.body.toString('latin1'), name)
    }
  })

  it('uploads every file of a folder into a running service, once each, names and bytes intact', async (t) => {
    const svc = await startApp(t, { settings: { queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 } } })
    const kb = uniqueId()
    assert.equal((await svc.request('/api/kb', { method: 'POST', json: { kb_id: kb } })).status, 201)
    const dir = mkdtempSync(join(tmpdir(), 'quarry-upload-client-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const files: Record<string, string> = {}
    for (let i = 0; i < 7; i++) files[`note-${i}.md`] = `# Note ${i}\n\n${'word '.repeat(50 + i * 13)}${i}\n`
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text)

    // As the benchmark runs it (startUploadClient), with fewer workers than files.
    const client = await startUploadClient(svc.url, kb, dir, 3, 'pipe')
    assert.equal(client.code, null, 'ready and waiting for go()')
    client.go()
    const report = await client.result()
    assert.equal(report.uploaded, 7, 'every upload answered 202')
    assert.ok(report.cpu_ms > 0, 'the client reports the CPU it spent')
    assert.equal(client.code, 0)

    const list = await (await svc.request(`/api/kb/${kb}/docs?page_size=100`)).json() as { items: { doc_id: string; source: string }[]; total: number }
    assert.equal(list.total, 7, 'one document per file')
    assert.deepEqual(list.items.map((d) => d.source).sort(), Object.keys(files).sort())
    for (const doc of list.items) {
      const dl = await svc.request(`/api/kb/${kb}/docs/${doc.doc_id}/download`)
      assert.equal(dl.status, 200)
      assert.equal(await dl.text(), files[doc.source], doc.source)
    }
  })

  it('stops with the service\'s answer when an upload is refused', async (t) => {
    const svc = await startApp(t)
    const dir = mkdtempSync(join(tmpdir(), 'quarry-upload-client-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    writeFileSync(join(dir, 'a.md'), '# A\n\ntext\n')
    // No such KB: the first upload answers 404 and the client exits 1 naming it.
    const client = await startUploadClient(svc.url, uniqueId('ghost'), dir, 1, 'pipe')
    client.go()
    await assert.rejects(client.result(), /failed \(exit 1\): upload of a\.md answered 404/)
    assert.equal(client.code, 1)
  })

  it('refuses a concurrency that would upload nothing, before it is ready', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'quarry-upload-client-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    writeFileSync(join(dir, 'a.md'), '# A\n\ntext\n')
    for (const bad of [0, 1.5, Number.NaN]) {
      const started = startUploadClient('http://127.0.0.1:1', 'kb', dir, bad, 'pipe')
      // a client that did get ready would wait for go() for ever
      t.after(() => started.then((c) => c.kill(), () => {}))
      await assert.rejects(started, /exited \(code 2\) before it was ready: concurrency must be an integer >= 1/)
    }
  })
})
