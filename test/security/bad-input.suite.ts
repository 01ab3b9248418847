// Issue 12, part 4, through the real plugins and storage: input PostgreSQL refuses (NUL, unpaired surrogates),
// ids that cannot exist and values too large for a column answer 422 or 404, never 5xx; echoed values are
// clipped. Each request here answered 500 (or 502) before the kernel's boundary. Run on both driver sets.
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, uniqueId, type StartedApp, type StartOptions } from '../helpers/app.ts'

type Json = any

const NUL_MSG = 'Input should not contain the NUL character (\\u0000)'
const SURROGATE_MSG = 'Input should not contain an unpaired UTF-16 surrogate'

async function withKb(t: Parameters<typeof startApp>[0], opts: StartOptions): Promise<{ svc: StartedApp; kb: string }> {
  const svc = await startApp(t, opts)
  const kb = uniqueId()
  const res = await svc.request('/api/kb', { method: 'POST', json: { kb_id: kb, kb_name: 'Handbook', tags: ['hr'] } })
  assert.equal(res.status, 201)
  return { svc, kb }
}

const jsonOf = async (res: Response) => ({ status: res.status, body: (await res.json()) as Json })

function uploadRaw(svc: StartedApp, kb: string, disposition: string, path = 'upload'): Promise<Response> {
  const body = `--b\r\nContent-Disposition: ${disposition}\r\nContent-Type: text/plain\r\n\r\nLeave policy text.\r\n--b--\r\n`
  return svc.request(`/api/kb/${kb}/docs/${path}`, { method: 'POST', body, headers: { 'content-type': 'multipart/form-data; boundary=b' } })
}

export function badInputSuite(label: string, opts: StartOptions): void {
  it(`${label}: a path id that cannot exist is the resource's 404 with the value clipped`, async (t) => {
    const { svc, kb } = await withKb(t, opts)
    assert.deepEqual(await jsonOf(await svc.request('/api/kb/a%00b')), { status: 404, body: { detail: 'KB not found: a\u0000b' } })
    assert.deepEqual(await jsonOf(await svc.request(`/api/kb/${'k'.repeat(10_000)}`, { method: 'DELETE' })),
      { status: 404, body: { detail: `KB not found: ${'k'.repeat(200)}…[10000 chars]` } })
    assert.deepEqual(await jsonOf(await svc.request(`/api/kb/${kb}/docs/zz%00/status`)),
      { status: 404, body: { detail: `Document not found: kb=${kb} doc_id=zz\u0000` } })
    assert.deepEqual(await jsonOf(await svc.request(`/api/kb/${kb}/docs/${'f'.repeat(5000)}`, { method: 'DELETE' })),
      { status: 404, body: { detail: `Document not found: kb=${kb} doc_id=${'f'.repeat(200)}…[5000 chars]` } })
    // connector_id is a uuid column: PostgreSQL refuses anything else outright.
    assert.deepEqual(await jsonOf(await svc.request('/api/connectors/not-a-uuid')), { status: 404, body: { detail: 'Connector not found: not-a-uuid' } })
  })

  it(`${label}: NUL and unpaired surrogates in JSON bodies and queries answer 422, and nothing is stored`, async (t) => {
    const { svc, kb } = await withKb(t, opts)
    const cases: [string, RequestInit & { json?: unknown }, (string | number)[], string][] = [
      ['/api/kb', { method: 'POST', json: { kb_id: uniqueId(), kb_name: 'a\u0000b' } }, ['body', 'kb_name'], NUL_MSG],
      [`/api/kb/${kb}`, { method: 'PATCH', json: { tags: ['ok', '\ud800'] } }, ['body', 'tags', 1], SURROGATE_MSG],
      [`/api/kb/${kb}/settings/overrides`, { method: 'PUT', json: { overrides: { 'chunking.chunk_size\u0000': 512 } } }, ['body', 'overrides', 'chunking.chunk_size\u0000'], NUL_MSG],
      ['/api/search', { method: 'POST', json: { query: 'leave\u0000policy', kb_ids: [kb] } }, ['body', 'query'], NUL_MSG],
      ['/api/search', { method: 'POST', json: { query: 'leave', kb_ids: ['\udfff'] } }, ['body', 'kb_ids', 0], SURROGATE_MSG],
      [`/api/kb/${kb}/docs?search=a%00b`, {}, ['query', 'search'], NUL_MSG],
      [`/api/kb/${kb}/docs/0123456789abcdef/fail?reason=%00`, { method: 'POST' }, ['query', 'reason'], NUL_MSG],
    ]
    for (const [path, init, loc, msg] of cases) {
      assert.deepEqual(await jsonOf(await svc.request(path, init)), { status: 422, body: { detail: [{ loc, msg, type: 'string_unicode' }] } }, `${init.method ?? 'GET'} ${path}`)
    }
    const stored = (await (await svc.request(`/api/kb/${kb}`)).json()) as Json
    assert.deepEqual(stored.tags, ['hr'])
    assert.deepEqual(((await (await svc.request(`/api/kb/${kb}/settings/overrides`)).json()) as Json).overrides, {})
  })

  it(`${label}: an integer past PostgreSQL's range answers 422 instead of overflowing an OFFSET`, async (t) => {
    const { svc, kb } = await withKb(t, opts)
    for (const path of [`/api/kb/${kb}/docs?page=99999999999999999999`, '/api/docs?page=2147483648']) {
      const { status, body } = await jsonOf(await svc.request(path))
      assert.equal(status, 422, path)
      assert.deepEqual(body.detail[0].loc, ['query', 'page'])
    }
    assert.equal((await svc.request(`/api/kb/${kb}/docs?page=2147483647`)).status, 200)
  })

  it(`${label}: an upload whose file name cannot be stored or is too long for a file system answers 422`, async (t) => {
    const { svc, kb } = await withKb(t, opts)
    const cases: [string, string, string][] = [
      ['upload', `form-data; name="file"; filename*=UTF-8''leave%00.txt`, NUL_MSG],
      ['upload', `form-data; name="file"; filename="${'x'.repeat(300)}.txt"`, 'File name should have at most 240 bytes in UTF-8, not 304'],
      ['upload/batch', `form-data; name="files"; filename*=UTF-8''a%01b.txt`, 'File name should not contain control characters'],
    ]
    for (const [path, disposition, msg] of cases) {
      const { status, body } = await jsonOf(await uploadRaw(svc, kb, disposition, path))
      assert.equal(status, 422, disposition.slice(0, 60))
      if (path === 'upload') {
        assert.equal(body.detail[0].msg, msg)
        assert.deepEqual(body.detail[0].loc.slice(-1), ['filename'])
      } else {
        // A batch fails that entry alone (spec 4.7 rule 3: `{results, detail}`).
        assert.equal(body.detail, msg)
        assert.deepEqual(body.results.map((r: Json) => [r.status, r.error]), [['error', msg]])
      }
    }
    const listed = (await (await svc.request(`/api/kb/${kb}/docs`)).json()) as Json
    assert.equal(listed.total, 0, 'no document row was created')
    // 200 bytes, not the limit of 240: s3rver (the S3 of the test set) keeps objects in files whose names add a
    // suffix to the key's last segment, so it cannot store much more (real S3 takes 1,024 bytes a key).
    const ok = await uploadRaw(svc, kb, `form-data; name="file"; filename="${'é'.repeat(98)}.txt"`)
    assert.equal(ok.status, 202, 'a long name within the limit is stored')
  })
}
