// Issue 15, security suite: hostile files through the real upload routes, one by one and in a batch, on both
// driver sets. Each is refused with a 4xx or its document ends `failed` with the parser's reason; nothing
// is written outside the KB's own keys; the process's memory stays bounded (the workers run under a heap cap
// of 256 MB here, and a task that passes it costs its worker, not the process); and the service still
// answers /health and indexes a normal file afterwards. The parsers' own cases are in test/compute/parse.test.ts:
// this suite checks the same files end to end, where the upload, the queue and the worker pool meet them.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { ComputePool } from '../../compute/pool.ts'
import { makeDocx, makeEncryptedDocxLike } from '../fixtures/make-docx.ts'
import { makePdf, proseLines } from '../fixtures/make-pdf.ts'
import { markupDepth, MAX_HTML_DEPTH } from '../../compute/parse/html-depth.ts'
import { makeOverlappingZipBomb } from '../fixtures/hostile/zip-bomb.ts'
import { documentKey } from '../../plugins/docs/storage-key.ts'
import { startApp, type StartedApp, type StartOptions } from '../helpers/app.ts'
import { skipUnless } from '../helpers/services.ts'
import { md, newKb, prose, settle, upload } from '../plugins/docs.suite.ts'

type Json = any

const HWP_DIR = '/work/shared/fixtures/hwp'
const hwp = (name: string) => new Uint8Array(readFileSync(`${HWP_DIR}/${name}`))
const MB = 1024 * 1024
/** Worker heap cap of this suite: low, so that a parser that ran away would hit it within the test. */
const WORKER_MB = 256
/** What the whole process (API, two capped workers, the embedded engines) may reach while it reads them all. */
const RSS_BOUND_MB = 1536

/** Every byte of `b` from `at` on replaced by a repeating pattern that is no valid structure of any format. */
const garble = (b: Uint8Array, at: number) => {
  const out = new Uint8Array(b)
  for (let i = at; i < out.length; i++) out[i] = (i * 131 + 7) & 0xff
  return out
}

/** Bytes that no text decoder takes for text: NULs and every byte value. */
const binary = () => Uint8Array.from({ length: 64 * 1024 }, (_, i) => (i % 3 === 0 ? 0 : (i * 97) & 0xff))

/** A file the service must take in and fail with a reason (its last_error must match). */
interface Hostile {
  name: string
  bytes: Uint8Array
  reason: RegExp
}

async function hostileFiles(): Promise<Hostile[]> {
  const pdf = await makePdf({ title: 'Handbook', pages: [proseLines(0, 30), proseLines(1, 30), proseLines(2, 30)] })
  const docx = await makeDocx({ heading: 'Handbook', paragraphs: [prose('docx', 40)] })
  const example = hwp('example.hwp')
  return [
    // Garbled from its header on, so its end-of-file marker is gone too: read as cut short.
    { name: 'corrupt.pdf', bytes: garble(pdf, 9), reason: /^parse failed: (corrupt|truncated) PDF/ },
    { name: 'truncated.pdf', bytes: pdf.slice(0, Math.floor(pdf.length * 0.6)), reason: /^parse failed: truncated PDF/ },
    { name: 'encrypted.pdf', bytes: await makePdf({ pages: [['secret']], encrypted: true }), reason: /^parse failed: encrypted PDF is not supported/ },
    { name: 'corrupt.docx', bytes: garble(docx, 40), reason: /^parse failed: corrupt docx/ },
    { name: 'truncated.docx', bytes: docx.slice(0, docx.length - 100), reason: /^parse failed: corrupt docx/ },
    { name: 'encrypted.docx', bytes: makeEncryptedDocxLike(), reason: /^parse failed: encrypted docx is not supported/ },
    { name: 'corrupt.hwp', bytes: garble(example, 600), reason: /^parse failed: corrupt HWP/ },
    { name: 'truncated.hwp', bytes: example.slice(0, 5000), reason: /^parse failed: corrupt HWP/ },
    { name: 'encrypted.hwp', bytes: hwp('password-12345.hwp'), reason: /^parse failed: encrypted HWP document is not supported/ },
    { name: 'encrypted.hwpx', bytes: hwp('password-12345.hwpx'), reason: /^parse failed: encrypted HWPX document is not supported/ },
    // 64 central-directory entries over one 64 MB stream of zeros: about 70 KB declaring 4 GB.
    { name: 'bomb.docx', bytes: makeOverlappingZipBomb({ entryMb: 64, entries: 64 }), reason: /^parse failed: docx rejected as a zip bomb: it expands to more than 4096 MB/ },
    // The same, its headers claiming 1,000 bytes an entry: stopped by counting what is really inflated.
    { name: 'lying-bomb.docx', bytes: makeOverlappingZipBomb({ entryMb: 64, entries: 64, declaredSize: 1000 }), reason: /^parse failed: docx rejected as a zip bomb/ },
    { name: 'nested.html', bytes: new TextEncoder().encode(`<html><body>${'<div>'.repeat(100_000)}deep${'</div>'.repeat(100_000)}</body></html>`), reason: /^parse failed: HTML is nested too deeply: more than 512 levels/ },
    { name: 'binary.txt', bytes: binary(), reason: /^parse failed: .*text/i },
  ]
}

/** A multipart body written by hand, so a file name can carry bytes FormData would escape. */
function rawUpload(svc: StartedApp, kb: string, path: 'upload' | 'upload/batch', parts: { field: string; filename: string; data: Uint8Array | string; encoded?: boolean }[]) {
  const chunks: Buffer[] = []
  for (const p of parts) {
    const filename = p.encoded ? `filename*=UTF-8''${encodeURIComponent(p.filename)}` : `filename="${p.filename}"`
    chunks.push(Buffer.from(`--hostile\r\nContent-Disposition: form-data; name="${p.field}"; ${filename}\r\nContent-Type: application/octet-stream\r\n\r\n`))
    chunks.push(Buffer.from(p.data), Buffer.from('\r\n'))
  }
  chunks.push(Buffer.from('--hostile--\r\n'))
  return svc.request(`/api/kb/${kb}/docs/${path}`, { method: 'POST', body: Buffer.concat(chunks), headers: { 'content-type': 'multipart/form-data; boundary=hostile' } })
}

/** Peak resident set size of this process (API and worker threads alike) while `run` runs. */
async function peakRss<T>(run: () => Promise<T>): Promise<{ value: T; peakMb: number }> {
  let peak = process.memoryUsage.rss()
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 25)
  try {
    const value = await run()
    return { value, peakMb: Math.round(Math.max(peak, process.memoryUsage.rss()) / MB) }
  } finally {
    clearInterval(timer)
  }
}

async function keysOf(svc: StartedApp, prefix = ''): Promise<string[]> {
  const keys: string[] = []
  for await (const k of svc.app.adapters.objects.list(prefix)) keys.push(k)
  return keys
}

/** The service still works: /health, and a normal document indexed and found. */
async function stillServing(svc: StartedApp, kb: string) {
  const health = await svc.request('/health')
  assert.equal(health.status, 200)
  assert.deepEqual(await health.json(), { status: 'ok' })
  const res = await upload(svc, kb, 'still-serving.md', md('Parental leave', 'Parental leave lasts sixteen weeks and is requested through the manager.'))
  assert.equal(res.status, 202, await res.clone().text())
  const doc = await settle(svc, kb, ((await res.json()) as Json).doc_id)
  assert.equal(doc.status, 'indexed', doc.last_error)
  const search = await svc.request('/api/search', { method: 'POST', json: { query: 'how long is parental leave', kb_ids: [kb] } })
  assert.equal(search.status, 200)
  assert.ok(((await search.json()) as Json).results.some((r: Json) => r.doc_id === doc.doc_id), 'the normal document is found')
}

function hostileSuite(label: string, opts: StartOptions): void {
  const start = (t: Parameters<typeof startApp>[0]) =>
    startApp(t, {
      ...opts,
      settings: {
        queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 },
        ingestion: { max_file_size_mb: 2 },
        compute: { worker_memory_mb: WORKER_MB, max_threads: 2 },
      },
    })

  it(`${label}: each hostile file uploaded alone ends failed with its reason; memory stays bounded; the service stays up`, async (t) => {
    const svc = await start(t)
    const kb = await newKb(svc)
    const files = await hostileFiles()
    const { value: docs, peakMb } = await peakRss(async () => {
      const ids = new Map<string, string>()
      for (const f of files) {
        const res = await upload(svc, kb, f.name, f.bytes)
        assert.equal(res.status, 202, `${f.name}: ${await res.clone().text()}`)
        ids.set(f.name, ((await res.json()) as Json).doc_id)
      }
      return Promise.all(files.map(async (f) => [f, await settle(svc, kb, ids.get(f.name)!)] as const))
    })
    t.diagnostic(`peak RSS ${peakMb} MB while ${files.length} hostile files were read (worker heap cap ${WORKER_MB} MB)`)
    for (const [f, doc] of docs) {
      assert.equal(doc.status, 'failed', `${f.name} ends failed, not ${doc.status}`)
      assert.match(doc.last_error, f.reason, f.name)
      assert.equal(doc.chunk_count ?? 0, 0, `${f.name}: no chunks`)
    }
    assert.ok(peakMb < RSS_BOUND_MB, `peak RSS ${peakMb} MB stays under ${RSS_BOUND_MB} MB`)
    await stillServing(svc, kb)
  })

  it(`${label}: the same files in one batch: every entry stored, every one failed with its reason`, async (t) => {
    const svc = await start(t)
    const kb = await newKb(svc)
    const files = await hostileFiles()
    const form = new FormData()
    for (const f of files) form.append('files', new Blob([f.bytes]), f.name)
    const res = await svc.request(`/api/kb/${kb}/docs/upload/batch`, { method: 'POST', body: form })
    assert.equal(res.status, 202, await res.clone().text())
    const { results } = (await res.json()) as Json
    assert.deepEqual(results.map((r: Json) => r.source), files.map((f) => f.name), 'in submission order')
    for (const [i, f] of files.entries()) {
      const doc = await settle(svc, kb, results[i].doc_id)
      assert.equal(doc.status, 'failed', f.name)
      assert.match(doc.last_error, f.reason, f.name)
    }
    await stillServing(svc, kb)
  })

  it(`${label}: an oversized part is refused with 422 alone and as a batch entry; nothing of it is stored`, async (t) => {
    const svc = await start(t)
    const kb = await newKb(svc)
    const big = new Uint8Array(3 * MB).fill(0x61)
    const tooLarge = /^File 'big\.txt' is larger than the 2 MB limit/
    let res = await upload(svc, kb, 'big.txt', big)
    assert.equal(res.status, 422)
    assert.match(((await res.json()) as Json).detail, tooLarge)

    const form = new FormData()
    form.append('files', new Blob([md('Before', prose('before'))]), 'before.md')
    form.append('files', new Blob([big]), 'big.txt')
    form.append('files', new Blob([md('After', prose('after'))]), 'after.md')
    res = await svc.request(`/api/kb/${kb}/docs/upload/batch`, { method: 'POST', body: form })
    assert.equal(res.status, 422)
    const body = (await res.json()) as Json
    assert.deepEqual(body.results.map((r: Json) => r.source ?? r.title), ['before.md', 'big.txt', 'after.md'])
    assert.equal(body.results[1].status, 'error')
    assert.match(body.results[1].error, tooLarge)
    assert.equal(body.detail, body.results[1].error)
    const listed = (await (await svc.request(`/api/kb/${kb}/docs`)).json()) as Json
    assert.deepEqual(listed.items.map((d: Json) => d.source).sort(), ['after.md', 'before.md'])
    const keys = await keysOf(svc, `${kb}/`)
    assert.deepEqual(keys.sort(), listed.items.map((d: Json) => documentKey(kb, d.doc_id, d.source)).sort(), 'the oversized file left no object')
    await stillServing(svc, kb)
  })

  it(`${label}: file names with ../ stay inside the KB's keys; control characters are refused with 422`, async (t) => {
    const svc = await start(t)
    const kb = await newKb(svc)
    const names = ['../../../escape.md', '..\\..\\windows.md', '/etc/absolute.md', `..%2F..%2Fencoded.md`]
    const sources: string[] = []
    for (const name of names) {
      // Texts of their own: identical ones would be kept out of the index as duplicates.
      const res = await rawUpload(svc, kb, 'upload', [{ field: 'file', filename: name, data: md('Traversal', prose(name)) }])
      assert.equal(res.status, 202, `${name}: ${await res.clone().text()}`)
      const { source, doc_id } = (await res.json()) as Json
      assert.doesNotMatch(source, /[\\/]/, `${name} is stored under its base name`)
      sources.push(source)
      assert.equal((await settle(svc, kb, doc_id)).status, 'indexed')
    }
    assert.deepEqual(sources, ['escape.md', 'windows.md', 'absolute.md', '..%2F..%2Fencoded.md'])
    for (const key of await keysOf(svc)) {
      assert.ok(key.startsWith(`${kb}/`), `key ${key} is under its KB`)
      assert.equal(key.split('/').length, 2, `key ${key} is kb/<doc>-<name>`)
      assert.ok(sources.some((source) => key.endsWith(`-${source}`)), `key ${key} ends with a stored base name`)
      assert.ok(!key.split('/').includes('..'), `key ${key} has no .. segment`)
    }
    // On the embedded store the keys are files under the data folder: nothing was written beside it.
    const parent = dirname(svc.dataDir)
    for (const n of ['escape.md', 'windows.md', 'absolute.md']) assert.ok(!existsSync(join(parent, n)) && !existsSync(join('/etc', n)), n)
    assert.ok(!readdirSync(svc.dataDir).some((n) => n.endsWith('.md')), 'no document file at the top of the data folder')

    // Written raw into the part header, busboy refuses the header itself; percent-encoded (RFC 5987), the
    // name arrives whole and the kernel refuses it. Either way: 422, and no row.
    const controls = ['evil\u0001.md', 'new\r\nline.md', '../\u001b[31mred.md', 'tab\t.md', 'del\u007f.md']
    const fileNameRefusal = [{ loc: ['body', 'file', 'filename'], msg: 'File name should not contain control characters', type: 'value_error' }]
    for (const name of controls) {
      for (const [path, field] of [['upload', 'file'], ['upload/batch', 'files']] as const) {
        let res = await rawUpload(svc, kb, path, [{ field, filename: name, data: 'Leave policy.' }])
        assert.equal(res.status, 422, `${JSON.stringify(name)} raw on ${path}`)
        const { detail } = (await res.json()) as Json
        assert.ok(detail === 'Malformed multipart body: Malformed part header' || (path === 'upload' ? detail[0]?.msg : detail) === fileNameRefusal[0].msg, JSON.stringify(detail))
        res = await rawUpload(svc, kb, path, [{ field, filename: name, data: 'Leave policy.', encoded: true }])
        assert.equal(res.status, 422, `${JSON.stringify(name)} encoded on ${path}`)
        const body = (await res.json()) as Json
        if (path === 'upload') assert.deepEqual(body.detail, [{ ...fileNameRefusal[0], loc: ['body', field, 'filename'] }])
        else {
          // A batch reports the refused name as its own failed entry (spec 4.7 rule 3), without the control characters.
          assert.equal(body.detail, fileNameRefusal[0].msg)
          assert.equal(body.results.length, 1)
          assert.deepEqual({ ...body.results[0], title: undefined }, { title: undefined, error: fileNameRefusal[0].msg, status: 'error' })
          assert.doesNotMatch(body.results[0].title, /[\u0000-\u001f\u007f]/)
        }
      }
    }
    // Between good files, a refused name fails alone: the files before and after it are stored.
    const mixed = await rawUpload(svc, kb, 'upload/batch', [
      { field: 'files', filename: 'before-refused.md', data: 'Travel policy before.' },
      { field: 'files', filename: 'bad\u0001name.md', data: 'Refused.', encoded: true },
      { field: 'files', filename: 'after-refused.md', data: 'Travel policy after.' },
    ])
    assert.equal(mixed.status, 422)
    const mixedBody = (await mixed.json()) as Json
    assert.equal(mixedBody.results.length, 3)
    assert.equal(mixedBody.results[1].status, 'error')
    assert.equal(mixedBody.results[1].error, fileNameRefusal[0].msg)
    assert.ok(mixedBody.results[0].doc_id && mixedBody.results[2].doc_id, JSON.stringify(mixedBody.results))
    const listed = (await (await svc.request(`/api/kb/${kb}/docs`)).json()) as Json
    assert.equal(listed.total, names.length + 2, 'no row for a refused name; the good files around it are stored')
    await stillServing(svc, kb)
  })

  it(`${label}: the worker heap cap holds: a task past it fails alone, and the pool serves the next one`, async (t) => {
    const svc = await start(t)
    const kb = await newKb(svc)
    const pool = svc.app.use<{ pool: ComputePool }>('docs').pool
    await assert.rejects(pool.run('selftest', { mode: 'oom' } as never), (err: Error) => {
      assert.match(err.message, new RegExp(`ran out of memory \\(worker heap cap ${WORKER_MB} MB\\)`))
      return true
    })
    assert.equal(((await pool.run('selftest', { mode: 'echo', value: 'alive' } as never)) as Json).echo, 'alive')
    await stillServing(svc, kb)
  })
}

describe('HTML nesting pre-scan (compute/parse/html-depth.ts)', () => {
  it('counts what needs an end tag; omitted end tags, void elements, raw text and comments add nothing', () => {
    assert.equal(markupDepth('<html><body><div><section><span>x</span></section></div></body></html>'), 3)
    assert.equal(markupDepth(`<ul>${'<li>item <br><img src=x>'.repeat(5_000)}</ul><p>a<p>b<p>c`), 1)
    assert.equal(markupDepth(`<script>const t = '${'<div>'.repeat(2_000)}'</script><style>a<b{}</style><title>${'<b>'.repeat(900)}</title><div></div>`), 1)
    assert.equal(markupDepth(`<!-- ${'<div>'.repeat(2_000)} --><svg>${'<path d="M0"/>'.repeat(900)}</svg>`), 1)
    assert.equal(markupDepth(`${'<DIV>'.repeat(600)}x`), MAX_HTML_DEPTH + 1, 'counting stops past the limit, case-insensitively')
  })

  it('reads hostile markup in linear time: a 10 MB unclosed tag, a run of bare <', () => {
    assert.equal(markupDepth(`<a${'a'.repeat(10 * MB)}`), 0)
    assert.equal(markupDepth('<a '.repeat(3 * MB)), 0)
  })
})

describe('hostile files on the embedded default', () => hostileSuite('embedded', {}))

describe('hostile files on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  hostileSuite('services', { services: true }))
