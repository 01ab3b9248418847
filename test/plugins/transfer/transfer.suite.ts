// KB export and import (issue 39) through HTTP and the CLI (a child process), on one driver set: a KB with
// hierarchical chunks, auto-merge, a copy kept out as a duplicate, a restored pair (dedup_distinct), a failed and a
// deleted document and a connector holding a literal and an env secret goes out as an archive and comes back under
// another id with the same documents, files, search answers and relations; interrupted exports and imports resume;
// another embedding model re-embeds; bad archives are refused and lose nothing.
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { after, before, it } from 'node:test'
import { countedSignatureWrites } from '../../../plugins/docs/dedup.ts'
import { readTar, scanTarFile, tarStream } from '../../../plugins/transfer/tar.ts'
import { startApp, uniqueId, type StartedApp, type StartOptions } from '../../helpers/app.ts'
import { waitFor } from '../../helpers/wait.ts'
import { runCli, startCli, tempDir } from '../../cli/helpers.ts'

type Json = any
const TIMEOUT = { timeout: 240_000 }

// Read by the connectors plugin when it starts: literal connector secrets are stored sealed under it.
process.env.CONNECTOR_SECRET_KEY ??= 'transfer-suite-key'
const LITERAL_SECRET = `literal-${randomBytes(6).toString('hex')}`

const OVERRIDES = {
  'chunking.strategy': 'hierarchical', 'chunking.chunk_size': [1024, 128], 'chunking.chunk_overlap': 0, 'chunking.min_chunk_chars': 10,
  'retrieval.auto_merge.enabled': true, 'retrieval.auto_merge.merge_threshold': 0.3,
}

const TOPICS = ['glacier', 'orchard', 'violin', 'harbour', 'lantern', 'quarry', 'meadow', 'compass']

/**
 * A note of a few paragraphs about its topic, in words of its own: chunks cut from one template would tie in every
 * ranking.
 */
function note(i: number, words: string[]): string {
  const t = TOPICS[i]
  const para = (p: number) => {
    const n = 18 + ((i * 7 + p * 5) % 23)
    const w = Array.from({ length: n }, (_, k) => (k % 9 === 4 ? t : randomBytes(3).toString('hex')))
    words.push(w[1], w[2])
    return `${w.join(' ')}.`
  }
  return `# The ${t} notes\n\n${[0, 1, 2, 3].map(para).join('\n\n')}\n`
}

export interface SourceKb {
  svc: StartedApp
  kb: string
  /** source -> text of each note. */
  files: Record<string, Buffer>
  queries: string[]
}

const json = async (res: Response) => ({ status: res.status, body: (await res.json().catch(() => null)) as Json })

async function upload(svc: StartedApp, kb: string, name: string, body: Buffer | string): Promise<string> {
  const form = new FormData()
  form.append('file', new Blob([body]), name)
  const r = await json(await svc.request(`/api/kb/${kb}/docs/upload`, { method: 'POST', body: form }))
  assert.equal(r.status, 202, JSON.stringify(r.body))
  return r.body.doc_id
}

const settled = (svc: StartedApp, kb: string) => waitFor(async () => {
  const c = (await json(await svc.request(`/api/kb/${kb}/docs/status`))).body.doc_counts
  return c.pending + c.running + c.uploading === 0 ? c : null
}, `KB ${kb} to settle`, 120_000, 100)

export async function buildSourceKb(svc: StartedApp): Promise<SourceKb> {
  const kb = uniqueId('src')
  assert.equal((await svc.request('/api/kb', { method: 'POST', json: { kb_id: kb, kb_name: 'Field notes', description: 'notes', tags: ['notes'] } })).status, 201)
  assert.equal((await svc.request(`/api/kb/${kb}/settings/overrides`, { method: 'PUT', json: { overrides: OVERRIDES } })).status, 200)
  const files: Record<string, Buffer> = {}
  const queries: string[] = []
  for (let i = 0; i < TOPICS.length; i++) {
    const words: string[] = []
    files[`${TOPICS[i]}.md`] = Buffer.from(note(i, words))
    queries.push(`${TOPICS[i]} ${words[2]} ${words[5]}`, `${words[0]} ${words[7]}`)
  }
  for (const [name, body] of Object.entries(files)) await upload(svc, kb, name, body)
  await settled(svc, kb)
  // Copies of two notes. The orchard copy is outdated, duplicate_of the original. The glacier copy carries a title of
  // its own (the same text under another title supersedes the original), and the original is restored: a pair
  // declared distinct. Its title keeps the two apart in every ranking (chunks are encoded with the document's
  // title): two chunks that tie are listed in whatever order a store holds them, which differs between stores.
  files['glacier-copy.md'] = Buffer.from(files['glacier.md'].toString().replace('# The glacier notes', '# The glacier notes (copy)'))
  files['orchard-copy.md'] = files['orchard.md']
  await upload(svc, kb, 'glacier-copy.md', files['glacier-copy.md'])
  await upload(svc, kb, 'orchard-copy.md', files['orchard.md'])
  files['broken.pdf'] = Buffer.from('this is not a PDF at all')
  await upload(svc, kb, 'broken.pdf', files['broken.pdf'])
  await settled(svc, kb)
  const glacier = (await listAll(svc, kb)).find((d) => d.source === 'glacier.md')!
  assert.equal(glacier.status, 'outdated', 'the same text under another title superseded it')
  assert.equal((await svc.request(`/api/kb/${kb}/docs/${glacier.doc_id}/restore`, { method: 'POST' })).status, 202)
  await settled(svc, kb)
  // A soft-deleted document keeps its file.
  const docs = await listAll(svc, kb)
  const compass = docs.find((d) => d.source === 'compass.md')!
  assert.equal((await svc.request(`/api/kb/${kb}/docs/${compass.doc_id}`, { method: 'DELETE' })).status, 202)
  await waitFor(async () => (await listAll(svc, kb)).find((d) => d.source === 'compass.md')?.status === 'deleted', 'compass.md soft-deleted', 60_000)
  const conn = await json(await svc.request('/api/connectors', {
    method: 'POST',
    json: {
      kb_id: kb, name: 'wiki', source_type: 'web', sync_schedule: '0 3 * * *',
      config: { seed_urls: ['http://127.0.0.1:9/wiki'], auth_headers: { Authorization: `Bearer ${LITERAL_SECRET}`, 'X-Api-Key': 'env:CONNECTOR_TEST_KEY' } },
    },
  }))
  assert.equal(conn.status, 201, JSON.stringify(conn.body))
  const by = (await listAll(svc, kb)).map((d) => [d.source, d.status])
  assert.deepEqual(Object.fromEntries(by), {
    'glacier.md': 'indexed', 'orchard.md': 'indexed', 'violin.md': 'indexed', 'harbour.md': 'indexed', 'lantern.md': 'indexed', 'quarry.md': 'indexed',
    'meadow.md': 'indexed', 'compass.md': 'deleted', 'glacier-copy.md': 'indexed', 'orchard-copy.md': 'outdated', 'broken.pdf': 'failed',
  }, 'the source KB holds every kind of document')
  const sql = svc.app.adapters.sql
  assert.ok((await sql.query<Json>('SELECT count(*)::int AS n FROM parent_chunks WHERE kb_id = $1', [kb]))[0].n > 0, 'hierarchical chunks have parents')
  assert.equal((await sql.query<Json>('SELECT count(*)::int AS n FROM dedup_distinct WHERE kb_id = $1', [kb]))[0].n, 1, 'the restored pair is distinct')
  return { svc, kb, files, queries }
}

export async function listAll(svc: StartedApp, kb: string): Promise<Json[]> {
  const live = (await json(await svc.request(`/api/kb/${kb}/docs?page_size=100`))).body.items
  const deleted = (await json(await svc.request(`/api/kb/${kb}/docs?page_size=100&status=deleted`))).body.items
  return [...live, ...deleted]
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')

/**
 * Everything about a KB that must survive the trip, with ids replaced by the sources they name. `acrossStores`: the two
 * answers to compare come from different vector stores, whose indexes give hybrid fusion its dense ranks each its own
 * way, so hybrid answers are compared as the same results, not their order.
 */
export async function snapshot(svc: StartedApp, kb: string, queries: string[], opts: { acrossStores?: boolean } = {}): Promise<Json> {
  const docs = await listAll(svc, kb)
  const sourceOf = new Map(docs.map((d) => [d.doc_id, d.source]))
  const byId = (id: string | null) => (id === null ? null : sourceOf.get(id) ?? `?${id}`)
  const out: Json = { docs: {}, searches: {} }
  for (const d of docs) {
    const file = await svc.request(`/api/kb/${kb}/docs/${d.doc_id}/download`)
    out.docs[d.source] = {
      status: d.status, title: d.title, doc_type: d.doc_type, chunk_count: d.chunk_count, file_size: d.file_size, content_version: d.content_version,
      source_uri: d.source_uri, embedding_model: d.embedding_model, last_error: d.last_error, duplicate_of: byId(d.duplicate_of),
      dedup: d.dedup && { ...d.dedup, matched_doc_id: byId(d.dedup.matched_doc_id) }, created_at: d.created_at, doc_created_at: d.doc_created_at,
      file_sha256: file.status === 200 ? sha(Buffer.from(await file.arrayBuffer())) : `status ${file.status}`,
    }
  }
  for (const q of queries) {
    for (const mode of ['hybrid', 'similarity']) {
      const r = await json(await svc.request('/api/search', { method: 'POST', json: { query: q, kb_ids: [kb], options: { mode, top_k: 10 } } }))
      assert.equal(r.status, 200)
      // By what a result says: a copy's chunk scores as its original's, and which of the two a store ranks first is its own.
      const results = r.body.results.map((x: Json) => ({ key: `${x.merged ? 'merged' : 'chunk'} ${sha(Buffer.from(x.text)).slice(0, 12)} ${x.text.slice(0, 30)}`, score: x.score }))
      // In order, hybrid too: chunks that the dense or the sparse list scores alike (the tests' 64-dimension embedder and
      // the query's rare terms make such ties) are ranked there by what they say, not by their rows, which an import
      // holds in another order (a fresh-clone CI run once swapped two such chunks at ranks 7 and 8), and fused ties go
      // by rank, not by the chunk ids an import renames (adapters/vectors/payloads.ts tieOrder, plugins/search/fusion.ts).
      out.searches[`${mode}: ${q}`] = mode === 'hybrid' && opts.acrossStores ? results.map((x: Json) => x.key).sort() : answer(results, 10)
    }
  }
  out.counts = (await json(await svc.request(`/api/kb/${kb}/docs/status`))).body.doc_counts
  out.overrides = (await json(await svc.request(`/api/kb/${kb}/settings/overrides`))).body.overrides
  const sql = svc.app.adapters.sql
  out.parents = (await sql.query<Json>(
    'SELECT doc_id, level, child_count, text, page_num, start_offset, end_offset FROM parent_chunks WHERE kb_id = $1', [kb]))
    .map((p: Json) => [byId(p.doc_id), p.level, p.child_count, p.page_num, p.start_offset, p.end_offset, p.text]).sort()
  out.signatures = (await sql.query<Json>('SELECT count(*)::int AS n FROM dedup_signatures WHERE kb_id = $1', [kb]))[0].n
  out.distinct = (await sql.query<Json>('SELECT doc_a, doc_b FROM dedup_distinct WHERE kb_id = $1', [kb])).map((r: Json) => [byId(r.doc_a), byId(r.doc_b)].sort())
  out.points = await svc.app.adapters.vectors.count(kb)
  return out
}

/**
 * How far apart two vector stores' rounded similarity scores may be: pgvector sums a cosine in f32, the embedded store
 * in f64, and a difference of 1e-7 moves a score that lies on a rounding boundary to the next 1e-4 (a fresh-clone CI
 * run, 2026-12-03: 0.1647 against 0.1646). One step of the rounding, with room for its float error.
 */
const ACROSS_STORES_SCORE = 1.5e-4

/**
 * Two snapshots (`snapshot`, acrossStores) taken from different vector stores: equal, but for the scores of the
 * similarity answers, each within ACROSS_STORES_SCORE of the other's.
 */
export function assertSameAcrossStores(actual: Json, expected: Json): void {
  const split = (s: Json) => {
    const scores: number[] = []
    const searches: Json = {}
    for (const [key, value] of Object.entries(s.searches as Json)) {
      searches[key] = key.startsWith('similarity') ? (value as [number, Json][]).map(([score, keys]) => (scores.push(score), keys)) : value
    }
    return { rest: { ...s, searches }, scores }
  }
  const a = split(actual)
  const e = split(expected)
  assert.deepEqual(a.rest, e.rest)
  assert.equal(a.scores.length, e.scores.length)
  a.scores.forEach((score, i) => assert.ok(Math.abs(score - e.scores[i]) <= ACROSS_STORES_SCORE, `similarity score ${i}: ${score} against ${e.scores[i]}`))
}

/**
 * An answer as groups of equal scores (the order inside a tie is the store's choice): each group's results, sorted;
 * the last group of a full list only by its score and size, since the cut may fall inside the tie.
 */
export function answer(results: { key: string; score: number }[], topK: number): Json[] {
  const groups: { score: number; keys: string[] }[] = []
  for (const r of results) {
    const last = groups[groups.length - 1]
    if (last && Math.abs(last.score - r.score) <= 1e-5 * Math.max(1, Math.abs(r.score))) last.keys.push(r.key)
    else groups.push({ score: r.score, keys: [r.key] })
  }
  return groups.map((g, i) => [Math.round(g.score * 1e4) / 1e4, i === groups.length - 1 && results.length === topK ? g.keys.length : g.keys.sort()])
}


/**
 * A loopback proxy in front of the service that can cut a response after some bytes (the connection drops), stop
 * forwarding one (the client waits), or cut or hold a request body after some bytes; it records every request.
 */
export async function startCutProxy(t: { after(fn: () => unknown): void }, upstream: string) {
  const target = new URL(upstream)
  const seen: { method: string; url: string; requestBytes: number }[] = []
  const plan = { cutResponseAt: Infinity, holdResponseAt: Infinity, cutRequestAt: Infinity, holdRequestAt: Infinity }
  const stalled: (() => void)[] = []
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const record = { method: req.method ?? '', url: req.url ?? '', requestBytes: 0 }
    seen.push(record)
    // Each fault applies once: a request body cut to the next POST, a response cut or hold to the next export.
    const posting = req.method === 'POST'
    const exporting = req.method === 'GET' && /\/export(\?|$)/.test(req.url ?? '')
    const cutReq = posting ? plan.cutRequestAt : Infinity
    const holdReq = posting ? plan.holdRequestAt : Infinity
    const cutRes = exporting ? plan.cutResponseAt : Infinity
    const holdRes = exporting ? plan.holdResponseAt : Infinity
    if (posting) Object.assign(plan, { cutRequestAt: Infinity, holdRequestAt: Infinity })
    if (exporting) Object.assign(plan, { cutResponseAt: Infinity, holdResponseAt: Infinity })
    const up = httpRequest({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.headers)
      let sent = 0
      ur.on('data', (c: Buffer) => {
        if (sent + c.length > cutRes) {
          res.write(c.subarray(0, cutRes - sent))
          res.socket?.destroy()
          ur.destroy()
          return
        }
        if (sent + c.length > holdRes) {
          res.write(c.subarray(0, holdRes - sent))
          sent = holdRes
          ur.pause()
          stalled.push(() => {
            ur.destroy()
            res.socket?.destroy()
          })
          return
        }
        sent += c.length
        res.write(c)
      })
      ur.on('end', () => res.end())
      ur.on('error', () => res.socket?.destroy())
    })
    up.on('error', () => res.socket?.destroy())
    let holding = false
    req.on('data', (c: Buffer) => {
      if (holding) return
      if (record.requestBytes + c.length > holdReq) {
        // The service gets the first bytes and then nothing more, until release() drops both connections.
        up.write(c.subarray(0, holdReq - record.requestBytes))
        record.requestBytes = holdReq
        holding = true
        req.pause()
        stalled.push(() => {
          req.socket.destroy()
          up.destroy()
        })
        return
      }
      if (record.requestBytes + c.length > cutReq) {
        up.write(c.subarray(0, cutReq - record.requestBytes))
        record.requestBytes = cutReq
        req.socket.destroy()
        // Let the service take what arrived, then drop its connection as a dead client's would.
        setTimeout(() => up.destroy(), 200)
        return
      }
      record.requestBytes += c.length
      up.write(c)
    })
    req.on('end', () => up.end())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise<void>((resolve) => {
    for (const s of stalled) s()
    server.closeAllConnections()
    server.close(() => resolve())
  }))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    plan,
    release: () => stalled.splice(0).forEach((s) => s()),
    stalled: () => stalled.length,
  }
}

const cliJson = (stdout: string) => JSON.parse(stdout) as Json

export function transferSuite(label: string, opts: StartOptions): void {
  const startOpts = { ...opts, settings: { connectors: { egress: { allow: ['127.0.0.1/32'] } }, ...opts.settings } }
  let src: SourceKb

  // The source service lives for the whole suite (its tests read, never write, the source KB).
  const cleanups: (() => unknown)[] = []
  before(async () => {
    const svc = await startApp({ after: (fn: () => unknown) => cleanups.push(fn) }, startOpts)
    src = await buildSourceKb(svc)
  }, { timeout: 240_000 })
  after(async () => {
    for (const fn of cleanups) await fn()
  })

  it(`${label}: quarry export then quarry import under another id: same documents, files, answers, relations; secrets left out but named`, TIMEOUT, async (t) => {
    const { svc, kb } = src
    const dir = tempDir(t)
    const file = join(dir, 'notes.tar')
    const exp = await runCli(['export', '--kb', kb, '--out', file, '--url', svc.url], { cwd: dir })
    assert.equal(exp.code, 0, exp.stderr + exp.stdout)
    assert.match(exp.stdout, /Exported '.+': 11 document\(s\)/)
    assert.match(exp.stderr, /^exporting: 100% 11\/11 documents/m)
    assert.ok(existsSync(file) && !existsSync(`${file}.partial`))
    const bytes = readFileSync(file)
    assert.ok(!bytes.includes(LITERAL_SECRET) && !bytes.includes('enc:v1:'), 'no secret value, sealed or not, in the archive')
    const scan = scanTarFile(file)
    assert.equal(scan.entries[0].name, 'quarry-kb.json')
    assert.equal(scan.entries[scan.entries.length - 1].name, 'end.json')
    const manifest = JSON.parse(scan.read(scan.entries[0]).toString()) as Json
    assert.deepEqual(manifest.connectors[0].secrets, [{ field: 'auth_headers.Authorization', kind: 'literal' }, { field: 'auth_headers.X-Api-Key', kind: 'env', env: 'CONNECTOR_TEST_KEY' }])
    assert.equal(manifest.embedding.dimensions, 64)
    assert.equal(manifest.samples.length, 5, 'a sample query from each of five indexed documents')
    // The compass note was soft-deleted: no points. The failed PDF: no points, its file kept.
    assert.equal(scan.entries.filter((e) => e.name.endsWith('/file')).length, 11)
    assert.equal(scan.entries.filter((e) => e.name.endsWith('/points.bin')).length, 8)

    const copy = uniqueId('copy')
    const imp = await runCli(['import', file, '--kb', copy, '--url', svc.url, '--json'], { cwd: dir })
    assert.equal(imp.code, 0, imp.stderr + imp.stdout)
    const report = cliJson(imp.stdout)
    assert.equal(report.status, 'imported')
    assert.equal(report.vectors, 'reused')
    assert.deepEqual(report.documents, { total: 11, written: 11, skipped: 0 })
    assert.equal(report.verification.ok, true, JSON.stringify(report.verification))
    assert.deepEqual(report.verification.counts.documents, { expected: 11, actual: 11 })
    assert.ok(report.verification.searches.checked >= 2 && report.verification.searches.matched === report.verification.searches.checked)
    assert.deepEqual(report.verification.checksums, { ok: true, documents: 11, files: 11, points: manifest.counts.points })
    assert.deepEqual(report.connectors.map((c: Json) => [c.name, c.paused, c.secrets_to_enter]), [['wiki', true, ['auth_headers.Authorization']]])
    assert.match(imp.stderr, /^importing: 100% 11\/11 documents/m)

    const [a, b] = [await snapshot(svc, kb, src.queries), await snapshot(svc, copy, src.queries)]
    assert.deepEqual(b, a)
    // Every signature row the import wrote was counted as a write (plugins/docs/dedup.ts noteSignatureWrite): a document
    // the pipeline commits meanwhile reads the rows it does not hold only then (on the embedded default).
    const signed = (await svc.app.adapters.sql.query<Json>('SELECT count(*)::int AS n FROM dedup_signatures WHERE kb_id = $1', [copy]))[0].n
    assert.ok(signed > 0 && countedSignatureWrites(svc.app.adapters.sql, copy) >= signed, `${countedSignatureWrites(svc.app.adapters.sql, copy)} writes counted for ${signed} rows`)
    for (const [name, body] of Object.entries(src.files)) assert.equal(b.docs[name].file_sha256, sha(body), `${name}: the original file`)

    // Every point of the copy names a parent the copy holds (auto-merge reads them by these ids).
    const parentIds = new Set((await svc.app.adapters.sql.query<Json>('SELECT chunk_id FROM parent_chunks WHERE kb_id = $1', [copy])).map((r: Json) => r.chunk_id))
    let named = 0
    for (const d of (await listAll(svc, copy)).filter((x) => x.status === 'indexed')) {
      for (const p of await svc.app.adapters.vectors.docPoints(copy, d.doc_id)) {
        assert.equal(p.payload.kb_id, copy)
        assert.equal(p.payload.doc_id, d.doc_id)
        assert.ok(p.payload.chunk_id.startsWith(`${d.doc_id}-`))
        if (p.payload.parent_chunk_id !== null) assert.ok(parentIds.has(p.payload.parent_chunk_id), p.payload.parent_chunk_id)
        named += p.payload.parent_chunk_id === null ? 0 : 1
      }
    }
    assert.ok(named > 0)

    // New ids under the new KB, derived from the old ones; the connector is paused, its env secret kept, the literal gone.
    const ids = (k: string) => listAll(svc, k).then((d) => d.map((x: Json) => x.doc_id))
    const [oldIds, newIds] = [await ids(kb), await ids(copy)]
    assert.equal(newIds.filter((id: string) => oldIds.includes(id)).length, 0)
    const [conn] = await svc.app.adapters.sql.query<Json>('SELECT config, status, last_error, sync_schedule FROM connectors WHERE kb_id = $1', [copy])
    assert.deepEqual(conn.config.auth_headers, { 'X-Api-Key': 'env:CONNECTOR_TEST_KEY' })
    assert.equal(conn.status, 'paused')
    assert.equal(conn.sync_schedule, '0 3 * * *')
    assert.match(conn.last_error, /auth_headers\.Authorization/)
    const kbRow = (await json(await svc.request(`/api/kb/${copy}`))).body
    assert.deepEqual([kbRow.kb_name, kbRow.description, kbRow.tags], ['Field notes', 'notes', ['notes']])

    // Again: nothing is written twice.
    const again = await runCli(['import', file, '--kb', copy, '--url', svc.url, '--json'], { cwd: dir })
    assert.equal(again.code, 0, again.stderr)
    assert.equal(cliJson(again.stdout).status, 'already_imported')
    assert.equal((await svc.app.adapters.sql.query<Json>('SELECT count(*)::int AS n FROM documents WHERE kb_id = $1', [copy]))[0].n, 11)
    const state = (await json(await svc.request(`/api/kb/${copy}/import`))).body
    assert.deepEqual([state.state, state.documents, state.archive_id], ['done', 11, manifest.archive_id])

    // Another export of the same KB is another archive: it does not go into this KB.
    const file2 = join(dir, 'notes2.tar')
    assert.equal((await runCli(['export', '--kb', kb, '--out', file2, '--url', svc.url], { cwd: dir })).code, 0)
    const other = await runCli(['import', file2, '--kb', copy, '--url', svc.url], { cwd: dir })
    assert.equal(other.code, 1)
    assert.match(other.stderr, /409: KB '.+' holds an import of another archive/)
    const exists = await runCli(['export', '--kb', kb, '--out', file, '--url', svc.url], { cwd: dir })
    assert.equal(exists.code, 1)
    assert.match(exists.stderr, /exists: remove it or choose another --out/)
  })

  it(`${label}: an export cut off mid-way is resumed after the last whole document, at once and after kill -9`, TIMEOUT, async (t) => {
    const { svc, kb } = src
    const dir = tempDir(t)
    const proxy = await startCutProxy(t, svc.url)
    const whole = Buffer.from(await (await svc.request(`/api/kb/${kb}/export`)).arrayBuffer())

    // The connection drops at 45 %: the CLI resumes by itself.
    proxy.plan.cutResponseAt = Math.floor(whole.length * 0.45)
    const file = join(dir, 'a.tar')
    const run = await runCli(['export', '--kb', kb, '--out', file, '--url', proxy.url], { cwd: dir })
    assert.equal(run.code, 0, run.stderr)
    assert.match(run.stderr, /the download stopped .*; resuming/)
    const exports = proxy.seen.filter((s) => s.url.includes('/export'))
    assert.equal(exports.length, 2)
    assert.match(exports[1].url, /\?manifest=false&after=[0-9a-f]{16}$/)
    const resumed = readFileSync(file)
    assert.ok(resumed.length < whole.length + 2048, 'nothing was saved twice')
    assert.deepEqual(scanTarFile(file).entries.map((e) => e.name), scanTarFile(writeTemp(dir, whole)).entries.map((e) => e.name))

    // Held at 60 % and killed: the next run starts from what the partial file holds.
    proxy.plan.holdResponseAt = Math.floor(whole.length * 0.6)
    const file2 = join(dir, 'b.tar')
    const cli = startCli(['export', '--kb', kb, '--out', file2, '--url', proxy.url], { cwd: dir })
    // Stalled, and what arrived before the stall written down: the CLI writes what it receives through a stream, so the
    // partial file can trail the proxy's 60 % for a moment (a CI run killed it with no whole document written yet).
    const wholeInPartial = () => {
      try {
        return scanTarFile(`${file2}.partial`).entries.filter((e) => e.name.endsWith('sums.json')).length
      } catch {
        return 0
      }
    }
    await waitFor(async () => proxy.stalled() > 0 && existsSync(`${file2}.partial`) && wholeInPartial() >= 1, 'the download to stall with a whole document saved', 60_000)
    cli.child.kill('SIGKILL')
    await cli.exited
    proxy.release()
    const kept = scanTarFile(`${file2}.partial`).entries.filter((e) => e.name.endsWith('sums.json')).length
    assert.ok(kept >= 1 && kept < 11, `${kept} whole documents in the partial file`)
    const rerun = await runCli(['export', '--kb', kb, '--out', file2, '--url', svc.url], { cwd: dir })
    assert.equal(rerun.code, 0, rerun.stderr)
    assert.match(rerun.stderr, new RegExp(`resuming .*: ${kept} document\\(s\\) saved, going on after [0-9a-f]{16}`))
    // Both resumed archives import whole and verified.
    for (const f of [file, file2]) {
      const r = await runCli(['import', f, '--kb', uniqueId('res'), '--url', svc.url, '--json'], { cwd: dir })
      assert.equal(r.code, 0, r.stderr)
      const rep = cliJson(r.stdout)
      assert.deepEqual([rep.documents.total, rep.verification.ok], [11, true], JSON.stringify(rep.verification))
    }
  })

  it(`${label}: an import cut off mid-way resumes with only what the service lacks, each document written once`, TIMEOUT, async (t) => {
    const { svc, kb } = src
    const dir = tempDir(t)
    const file = join(dir, 'notes.tar')
    assert.equal((await runCli(['export', '--kb', kb, '--out', file, '--url', svc.url], { cwd: dir })).code, 0)
    const sums = scanTarFile(file).entries.filter((e) => e.name.endsWith('sums.json'))
    const proxy = await startCutProxy(t, svc.url)
    // The service receives four whole documents and part of the fifth, then the connection dies.
    proxy.plan.holdRequestAt = sums[3].end + 100
    const target = uniqueId('cut')
    const first = startCli(['import', file, '--kb', target, '--url', proxy.url, '--retries', '0'], { cwd: dir })
    const state = await waitFor(async () => {
      const s = (await json(await svc.request(`/api/kb/${target}/import`))).body
      return s.state === 'running' && s.documents >= 4 ? s : null
    }, 'the service to import the documents it received whole', 60_000)
    assert.equal(state.documents, 4)
    proxy.release()
    const firstRun = await first.exited
    assert.equal(firstRun.code, 1, firstRun.stdout)
    assert.match(firstRun.stderr, /run the same command again to resume/)
    await waitFor(async () => (await json(await svc.request(`/api/kb/${target}/import`))).body.documents === 4, 'the cut import to stop', 10_000)
    const second = await runCli(['import', file, '--kb', target, '--url', proxy.url, '--json'], { cwd: dir })
    assert.equal(second.code, 0, second.stderr)
    assert.match(second.stderr, /resuming the import into '.+': 4 document\(s\) there already/)
    const report = cliJson(second.stdout)
    assert.equal(report.status, 'resumed')
    assert.deepEqual(report.documents, { total: 11, written: 7, skipped: 0 })
    assert.equal(report.verification.ok, true, JSON.stringify(report.verification))
    // The manifest and the documents after the fourth: nothing the service held was sent again.
    const posts = proxy.seen.filter((s) => s.method === 'POST')
    assert.equal(posts[1].requestBytes, scanTarFile(file).entries[0].end + readFileSync(file).length - sums[3].end)
    assert.deepEqual(await snapshot(svc, target, src.queries), await snapshot(svc, kb, src.queries))
    const written = await svc.app.adapters.sql.query<Json>('SELECT count(*)::int AS n FROM kb_transfer_docs WHERE kb_id = $1', [target])
    assert.equal(written[0].n, 11)
  })

  it(`${label}: into a service embedding with another model, the documents are embedded again (--wait)`, TIMEOUT, async (t) => {
    const { svc, kb } = src
    const dir = tempDir(t)
    const file = join(dir, 'notes.tar')
    assert.equal((await runCli(['export', '--kb', kb, '--out', file, '--url', svc.url], { cwd: dir })).code, 0)
    const other = await startApp(t, { ...startOpts, settings: { ...startOpts.settings, embedding: { vector_size: 32 } } })
    const run = await runCli(['import', file, '--url', other.url, '--wait', '--poll-ms', '100', '--json'], { cwd: dir })
    assert.equal(run.code, 0, run.stderr + run.stdout)
    const report = cliJson(run.stdout)
    assert.equal(report.kb_id, kb, 'the archive\'s own id by default')
    assert.deepEqual([report.vectors, report.queued], ['reembed', 8])
    assert.equal(report.embedding.archive, `${report.embedding.here.replace('(32)', '(64)')}`)
    assert.equal(report.verification.searches.skipped !== undefined, true)
    assert.match(run.stderr, /^indexing: 100% 8\/8 documents/m)
    const counts = (await json(await other.request(`/api/kb/${kb}/docs/status`))).body.doc_counts
    assert.deepEqual([counts.indexed, counts.outdated, counts.failed, counts.deleted, counts.pending], [8, 1, 1, 1, 0])
    const glacier = (await listAll(other, kb)).find((d) => d.source === 'glacier.md')
    const vectors = await other.app.adapters.vectors.docVectors(kb, glacier.doc_id)
    assert.ok(vectors.length > 0 && vectors.every((v) => v.length === 32), 'embedded again at 32 dimensions')
    const hit = (await json(await other.request('/api/search', { method: 'POST', json: { query: 'violin paragraph things', kb_ids: [kb] } }))).body
    assert.equal(hit.results[0].source, 'violin.md')
  })

  it(`${label}: a damaged or wrong archive is refused with a clear error and loses nothing`, TIMEOUT, async () => {
    const { svc, kb } = src
    const whole = Buffer.from(await (await svc.request(`/api/kb/${kb}/export`)).arrayBuffer())
    const post = (body: Buffer | string, q = '', type = 'application/x-tar') =>
      svc.request(`/api/kb/import${q}`, { method: 'POST', body, headers: { 'content-type': type } }).then(json)

    let r = await post('not a tar at all, just some text that is long enough to fill a block'.repeat(10), `?kb_id=${uniqueId('x')}`)
    assert.equal(r.status, 422)
    assert.match(r.body.detail, /archive/)
    r = await post(whole, '', 'multipart/form-data; boundary=x')
    assert.deepEqual([r.status, r.body.detail], [422, 'Send the archive itself as the request body (Content-Type: application/x-tar), not multipart/form-data; boundary=x'])
    r = await post(whole)
    assert.deepEqual([r.status, r.body.detail], [409, `KB already exists: ${kb}; import into another KB id (?kb_id=)`])
    r = await post(whole, '?kb_id=Not_Valid')
    assert.equal(r.status, 422)
    assert.deepEqual(r.body.detail[0].loc, ['query', 'kb_id'])
    assert.equal((await svc.request('/api/kb/no-such-kb/export')).status, 404)

    // One byte of a file changed: that document is refused by its checksum, those before it stay.
    const file = scanTarFile(writeTemp(tempDirOnce(), whole)).entries.filter((e) => e.name.endsWith('/file'))[2]
    const bad = Buffer.from(whole)
    bad[file.dataOffset + 5] ^= 0x20
    const damagedKb = uniqueId('dmg')
    r = await post(bad, `?kb_id=${damagedKb}`)
    assert.equal(r.status, 422)
    assert.match(r.body.detail, /^The archive is damaged: docs\/[0-9a-f]{16}\/file: sha256 [0-9a-f]{64} \(\d+ bytes\), the archive's sums say/)
    const state = (await json(await svc.request(`/api/kb/${damagedKb}/import`))).body
    assert.deepEqual([state.state, state.documents], ['running', 2])
    const sql = svc.app.adapters.sql
    assert.equal((await sql.query<Json>('SELECT count(*)::int AS n FROM documents WHERE kb_id = $1', [damagedKb]))[0].n, 2)
    // The refused document's file was not left behind.
    const keys: string[] = []
    for await (const k of svc.app.adapters.objects.list(`${damagedKb}/`)) keys.push(k)
    assert.equal(keys.length, 2)
    // The intact archive finishes the import, sent twice at once: one import waits for the other's hold on the KB and
    // finds the import done; the 9 documents missing are written once.
    const [r1, r2] = await Promise.all([post(whole, `?kb_id=${damagedKb}`), post(whole, `?kb_id=${damagedKb}`)])
    for (const x of [r1, r2]) assert.deepEqual([x.status, x.body.documents?.total, x.body.verification?.ok], [200, 11, true], JSON.stringify(x.body))
    assert.equal(r1.body.documents.written + r2.body.documents.written, 9)
    assert.equal((await sql.query<Json>('SELECT count(*)::int AS n FROM kb_transfer_docs WHERE kb_id = $1', [damagedKb]))[0].n, 11)

    // A manifest made by hand: a plain secret in a connector's config is dropped, a variable the service keeps for
    // itself is named as a secret to enter, and the connector waits paused.
    const entries: { name: string; size: number; body: Buffer }[] = []
    for await (const e of readTar([whole])) entries.push({ name: e.name, size: e.size, body: await e.buffer(1 << 24) })
    const forged = JSON.parse(entries[0].body.toString()) as Json
    forged.connectors[0].config.auth_headers = { 'X-Plain': 'plain-secret-value', 'X-Db': 'env:PGPASSWORD' }
    forged.connectors[0].secrets = []
    entries[0].body = Buffer.from(JSON.stringify(forged))
    entries[0].size = entries[0].body.length
    const forgedKb = uniqueId('forged')
    const forgedParts: Buffer[] = []
    for await (const c of tarStream((async function* () { yield* entries })())) forgedParts.push(c as Buffer)
    const forgedTar = Buffer.concat(forgedParts)
    r = await post(forgedTar, `?kb_id=${forgedKb}`)
    assert.equal(r.status, 201, JSON.stringify(r.body))
    assert.deepEqual(r.body.connectors.map((c: Json) => [c.paused, c.secrets_to_enter]), [[true, ['auth_headers.X-Plain', 'auth_headers.X-Db (PGPASSWORD is not allowed here)']]])
    const [forgedConn] = await sql.query<Json>('SELECT config, status FROM connectors WHERE kb_id = $1', [forgedKb])
    assert.deepEqual([forgedConn.config.auth_headers, forgedConn.status], [{ 'X-Db': 'env:PGPASSWORD' }, 'paused'])

    // Cut short: what arrived whole is kept, and the import says it is unfinished.
    const cutKb = uniqueId('short')
    r = await post(whole.subarray(0, Math.floor(whole.length / 2)), `?kb_id=${cutKb}`)
    assert.equal(r.status, 422)
    assert.match(r.body.detail, /^The archive is damaged: tar archive cut short/)
    assert.equal((await json(await svc.request(`/api/kb/${cutKb}/import`))).body.state, 'running')

    // Cut inside a document's original file: the object store is reading that entry when the archive ends.
    const inFile = fileEntryMiddle(whole)
    assert.ok(inFile !== null, 'the archive holds a file entry')
    const cutFileKb = uniqueId('shortfile')
    r = await post(whole.subarray(0, inFile), `?kb_id=${cutFileKb}`)
    assert.equal(r.status, 422, JSON.stringify(r.body))
    assert.match(r.body.detail, /^The archive is damaged: /)
  })

  it(`${label}: the same archive sent four times at once into a new KB: one import creates it, the others wait for it and find it done`, TIMEOUT, async () => {
    const { svc, kb } = src
    const whole = Buffer.from(await (await svc.request(`/api/kb/${kb}/export`)).arrayBuffer())
    const post = (target: string) =>
      svc.request(`/api/kb/import?kb_id=${target}`, { method: 'POST', body: whole, headers: { 'content-type': 'application/x-tar' } }).then(json)
    let target = ''
    for (let round = 0; round < 3; round++) {
      target = uniqueId('race')
      const answers = await Promise.all([0, 1, 2, 3].map(() => post(target)))
      const shown = JSON.stringify(answers)
      assert.deepEqual(answers.map((a) => a.status).sort(), [200, 200, 200, 201], shown)
      assert.deepEqual(answers.map((a) => a.body.status).sort(), ['already_imported', 'already_imported', 'already_imported', 'imported'], shown)
      for (const a of answers) assert.deepEqual([a.body.documents?.total, a.body.verification?.ok], [11, true], shown)
      assert.equal(answers.reduce((n, a) => n + a.body.documents.written, 0), 11, shown)
      const sql = svc.app.adapters.sql
      assert.equal((await sql.query<Json>('SELECT count(*)::int AS n FROM kb_transfer_docs WHERE kb_id = $1', [target]))[0].n, 11)
      assert.equal((await sql.query<Json>('SELECT count(*)::int AS n FROM documents WHERE kb_id = $1', [target]))[0].n, 11)
    }
    // Every file and point is there: nothing one import wrote was removed by another.
    assert.deepEqual(await snapshot(svc, target, src.queries), await snapshot(svc, kb, src.queries))
  })
}

/** An offset in the middle of the first docs/<id>/file entry's data (ustar headers walked; pax headers are entries too). */
function fileEntryMiddle(tar: Buffer): number | null {
  for (let at = 0; at + 512 <= tar.length; ) {
    const header = tar.subarray(at, at + 512)
    if (header.every((b) => b === 0)) return null
    const name = header.subarray(0, 100).toString('latin1').replace(/\0.*$/s, '')
    const size = parseInt(header.subarray(124, 136).toString('latin1').replace(/\0.*$/s, '').trim() || '0', 8)
    if (/^docs\/[^/]+\/file$/.test(name) && size > 1) return at + 512 + Math.floor(size / 2)
    at += 512 + Math.ceil(size / 512) * 512
  }
  return null
}

let onceDir: string | undefined
function tempDirOnce(): string {
  onceDir ??= tempDir({ after: (fn) => process.once('exit', fn as () => void) })
  return onceDir
}

function writeTemp(dir: string, bytes: Buffer): string {
  const p = join(dir, `t-${randomBytes(4).toString('hex')}.tar`)
  writeFileSync(p, bytes)
  return p
}
