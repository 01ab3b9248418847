// The kernel's boundary (issue 12, part 4): what no handler may ever be handed, and how much of a user's value an
// error may echo. Kernel-only routes here; the same rules through the real plugins and storage, on both driver
// sets, are in boundary.suite.ts.
import { request as httpRequest } from 'node:http'
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { Type } from '@sinclair/typebox'
import { AppError, clip } from '../../kernel/errors.ts'
import { readMultipart } from '../../kernel/http/multipart.ts'
import { buildOpenApi } from '../../kernel/openapi.ts'
import { definePlugin, type Plugin } from '../../kernel/plugin.ts'
import { couldExist } from '../../kernel/schemas.ts'
import { unstorable } from '../../kernel/validate.ts'
import { startKernel } from '../helpers/app.ts'

type Json = any

/** What the handlers were handed, so a test can tell that a refused request never reached one. */
const seen: unknown[] = []

const probePlugin = definePlugin({
  name: 'probe',
  register(ctx) {
    const record = (req: { params: unknown; query: unknown; body: unknown }) => {
      seen.push(req)
      return { params: req.params, query: req.query, body: req.body }
    }
    ctx.route({ method: 'GET', path: '/kbs/{kb_id}', summary: 'kb', handler: record })
    ctx.route({ method: 'GET', path: '/kbs/{kb_id}/docs/{doc_id}', summary: 'doc', handler: record })
    ctx.route({ method: 'GET', path: '/things/{connector_id}', summary: 'connector', handler: record })
    ctx.route({ method: 'GET', path: '/names/{name}', summary: 'free', handler: record })
    ctx.route({
      method: 'GET', path: '/list', summary: 'list', handler: record,
      query: Type.Object({ page: Type.Integer({ minimum: 1, default: 1 }), size: Type.Integer({ minimum: 1, maximum: 100, default: 20 }), q: Type.Optional(Type.String()) }),
    })
    ctx.route({ method: 'POST', path: '/items', summary: 'items', body: Type.Object({ name: Type.String() }, { additionalProperties: true }), handler: record })
    ctx.route({
      method: 'POST', path: '/files', summary: 'files', bodyKind: 'multipart',
      handler: async (req) => {
        const names: string[] = []
        const fields = await readMultipart(req, { maxFileBytes: 1000, onFile: async (f) => void names.push(`${f.field}:${f.filename}`) })
        return { names, fields }
      },
    })
    ctx.route({ method: 'GET', path: '/long-error', summary: 'long', handler: () => { throw new AppError('X', 409, `busy: ${'y'.repeat(50_000)}`) } })
    ctx.hooks.onRequest((req) => void seen.push({ hook: req.params }))
  },
})

const multipart = (disposition: string, data = 'hello') => ({
  body: `--b\r\nContent-Disposition: ${disposition}\r\nContent-Type: text/plain\r\n\r\n${data}\r\n--b--\r\n`,
  headers: { 'content-type': 'multipart/form-data; boundary=b' },
})

describe('clip', () => {
  it('keeps a short value, cuts a long one to max characters and says how long it was', () => {
    assert.equal(clip('handbook'), 'handbook')
    assert.equal(clip('x'.repeat(200)), 'x'.repeat(200))
    assert.equal(clip('x'.repeat(10_000)), `${'x'.repeat(200)}…[10000 chars]`)
    assert.equal(clip('abcdef', 3), 'abc…[6 chars]')
  })

  it('never splits a surrogate pair (half of one is a string no store accepts)', () => {
    const cut = clip(`${'x'.repeat(199)}😀😀`, 200)
    assert.equal(cut, `${'x'.repeat(199)}…[203 chars]`)
    assert.equal(unstorable(cut), null)
  })
})

describe('unstorable', () => {
  it('finds NUL and unpaired surrogates, and nothing else', () => {
    for (const ok of ['', 'plain', '한국어 😀', '\t\r\n\u0001\u007f', '\uffff']) assert.equal(unstorable(ok), null, JSON.stringify(ok))
    for (const bad of ['\u0000', 'a\u0000b', '\ud800', 'x\udc00', '😀\ud83d', '\ude00😀']) assert.ok(unstorable(bad), JSON.stringify(bad))
  })
})

describe('couldExist', () => {
  it('tells the ids that could name something from those that cannot, by name', () => {
    assert.equal(couldExist('kb_id', 'hand_book-1'), true)
    assert.equal(couldExist('kb_id', 'Hand'), false)
    assert.equal(couldExist('doc_id', '0123456789abcdef'), true)
    assert.equal(couldExist('doc_id', 'x\u0000'), false)
    assert.equal(couldExist('connector_id', '0F8FAD5B-D9CB-469F-A165-70867728950E'), true)
    assert.equal(couldExist('connector_id', '42'), false)
    assert.equal(couldExist('name', 'anything'), true, 'no fixed format: any value')
  })
})

describe('the kernel boundary', () => {
  it('answers 404 with the resource text for a path id that cannot exist, before any hook or handler', async (t) => {
    const { url } = await startKernel(t, [probePlugin])
    seen.length = 0
    const cases: [string, string][] = [
      ['/kbs/UPPER', 'KB not found: UPPER'],
      ['/kbs/a%00b', 'KB not found: a\u0000b'],
      [`/kbs/${'k'.repeat(10_000)}`, `KB not found: ${'k'.repeat(200)}…[10000 chars]`],
      ['/kbs/handbook/docs/XYZ', 'Document not found: kb=handbook doc_id=XYZ'],
      [`/kbs/handbook/docs/${'0'.repeat(17)}`, `Document not found: kb=handbook doc_id=${'0'.repeat(17)}`],
      ['/kbs/Bad/docs/XYZ', 'KB not found: Bad'],
      ['/things/not-a-uuid', 'Connector not found: not-a-uuid'],
    ]
    for (const [path, detail] of cases) {
      const res = await fetch(url + path)
      assert.equal(res.status, 404, path.slice(0, 80))
      assert.deepEqual(await res.json(), { detail }, path.slice(0, 80))
    }
    assert.deepEqual(seen, [], 'neither the hook nor the handler saw any of them')

    const ok = await fetch(`${url}/kbs/hand_book-1/docs/0123456789abcdef`)
    assert.equal(ok.status, 200)
    assert.deepEqual(((await ok.json()) as Json).params, { kb_id: 'hand_book-1', doc_id: '0123456789abcdef' })
    assert.equal((await fetch(`${url}/things/0f8fad5b-d9cb-469f-a165-70867728950e`)).status, 200)
  })

  it('answers 422 for NUL in any other path value or in a query, key or value', async (t) => {
    const { url } = await startKernel(t, [probePlugin])
    seen.length = 0
    let res = await fetch(`${url}/names/a%00b`)
    assert.equal(res.status, 422)
    assert.deepEqual(await res.json(), { detail: [{ loc: ['path', 'name'], msg: 'Input should not contain the NUL character (\\u0000)', type: 'string_unicode' }] })

    res = await fetch(`${url}/list?q=a%00b`)
    assert.equal(res.status, 422)
    assert.deepEqual(((await res.json()) as Json).detail[0].loc, ['query', 'q'])
    res = await fetch(`${url}/list?${'k'.repeat(5000)}%00=1`)
    assert.equal(res.status, 422, 'unknown keys too: a handler may read them')
    assert.deepEqual(((await res.json()) as Json).detail[0].loc, ['query', `${'k'.repeat(200)}…[5001 chars]`])
    assert.deepEqual(seen.filter((s) => !(s as Json).hook), [], 'no handler ran')
  })

  it('answers 422 for NUL or an unpaired surrogate anywhere in a JSON body, keys included', async (t) => {
    const { url } = await startKernel(t, [probePlugin])
    const post = (body: string) => fetch(`${url}/items`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
    const cases: [string, (string | number)[], string][] = [
      ['{"name":"a\\u0000b"}', ['body', 'name'], 'Input should not contain the NUL character (\\u0000)'],
      ['{"name":"x","tags":["ok","\\ud800"]}', ['body', 'tags', 1], 'Input should not contain an unpaired UTF-16 surrogate'],
      ['{"name":"x","deep":{"a":{"b":"\\udfff"}}}', ['body', 'deep', 'a', 'b'], 'Input should not contain an unpaired UTF-16 surrogate'],
      ['{"name":"x","meta":{"k\\u0000":1}}', ['body', 'meta', 'k\u0000'], 'Input should not contain the NUL character (\\u0000)'],
    ]
    for (const [body, loc, msg] of cases) {
      const res = await post(body)
      assert.equal(res.status, 422, body)
      assert.deepEqual(await res.json(), { detail: [{ loc, msg, type: 'string_unicode' }] }, body)
    }
    const ok = await post('{"name":"한국어 😀 \\t"}')
    assert.equal(ok.status, 200)
    assert.equal(((await ok.json()) as Json).body.name, '한국어 😀 \t')
  })

  it('answers 422 for JSON nested past 64 levels, however deep, and keeps serving', async (t) => {
    const { url } = await startKernel(t, [probePlugin])
    for (const depth of [65, 100_000]) {
      const res = await fetch(`${url}/items`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: `{"name":"x","n":${'['.repeat(depth)}${']'.repeat(depth)}}` })
      assert.equal(res.status, 422, String(depth))
      const detail = ((await res.json()) as Json).detail
      assert.equal(detail[0].msg, 'JSON nested deeper than 64 levels')
      assert.equal(detail[0].loc.length, 65)
    }
    const ok = await fetch(`${url}/items`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: `{"name":"x","n":${'['.repeat(60)}${']'.repeat(60)}}` })
    assert.equal(ok.status, 200)
  })

  it('holds an integer without its own bound to PostgreSQL integer range, and says so in the API description', async (t) => {
    const { app, url } = await startKernel(t, [probePlugin])
    const res = await fetch(`${url}/list?page=99999999999999999999`)
    assert.equal(res.status, 422)
    assert.deepEqual(await res.json(), { detail: [{ loc: ['query', 'page'], msg: 'Input should be less than or equal to 2147483647', type: 'less_than_equal' }] })
    assert.equal((await fetch(`${url}/list?page=2147483647&size=100`)).status, 200)
    const spec = buildOpenApi(app.routes, { title: 't', version: '1', description: 'd' }) as Json
    const params = spec.paths['/list'].get.parameters as Json[]
    assert.deepEqual(params.find((p) => p.name === 'page').schema, { minimum: 1, default: 1, type: 'integer', maximum: 2147483647 })
    assert.equal(params.find((p) => p.name === 'size').schema.maximum, 100, 'a declared bound stays')
    assert.equal(spec.paths['/kbs/{kb_id}/docs/{doc_id}'].get.parameters[1].schema.pattern, '^[0-9a-f]{16}$')
  })

  it('refuses multipart file names and fields that cannot be stored, and a name past 240 bytes', async (t) => {
    const { url } = await startKernel(t, [probePlugin])
    const send = (disposition: string, data?: string) => fetch(`${url}/files`, { method: 'POST', ...multipart(disposition, data) })
    const cases: [string, Json][] = [
      [`form-data; name="file"; filename*=UTF-8''a%00.txt`, { loc: ['body', 'file', 'filename'], msg: 'Input should not contain the NUL character (\\u0000)', type: 'string_unicode' }],
      [`form-data; name="file"; filename*=UTF-8''a%0D%0Ab.txt`, { loc: ['body', 'file', 'filename'], msg: 'File name should not contain control characters', type: 'value_error' }],
      [`form-data; name="file"; filename="${'é'.repeat(119)}.txt"`, { loc: ['body', 'file', 'filename'], msg: 'File name should have at most 240 bytes in UTF-8, not 242', type: 'string_too_long' }],
      ['form-data; name="note"', { loc: ['body', 'note'], msg: 'Input should not contain the NUL character (\\u0000)', type: 'string_unicode' }],
    ]
    for (const [disposition, issue] of cases) {
      const res = await send(disposition, disposition.includes('note') ? 'a\u0000b' : 'hello')
      assert.equal(res.status, 422, disposition.slice(0, 80))
      assert.deepEqual(await res.json(), { detail: [issue] }, disposition.slice(0, 80))
    }
    // A part named "" reaches the handler as field '' (busboy reports no name at all).
    const unnamed = await send('form-data; name=""; filename="a.txt"')
    assert.equal(unnamed.status, 200)
    assert.deepEqual(((await unnamed.json()) as Json).names, [':a.txt'])
    const ok = await send(`form-data; name="file"; filename="${'é'.repeat(118)}.txt"`)
    assert.equal(ok.status, 200)
  })

  it('a streamed body refused before it has all arrived leaves the server whole', async (t) => {
    const { url } = await startKernel(t, [probePlugin])
    // Before: once the reader fell behind, uWS's response was paused and later resumed after the 422 had been
    // sent, which throws from a stream callback: an uncaught exception, fatal outside tests.
    const uncaught: unknown[] = []
    const onUncaught = (err: unknown) => void uncaught.push(err)
    process.prependListener('uncaughtException', onUncaught)
    t.after(() => void process.off('uncaughtException', onUncaught))
    const big = 'x'.repeat(4 * 1024 * 1024)
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(`${url}/files`, { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=b' } }, (res) => {
        let body = ''
        res.on('data', (c: Buffer) => (body += c.toString()))
        // The whole body has gone out by the time the answer is read: the server saw every chunk.
        res.on('end', () => req.writableFinished ? resolve({ status: res.statusCode!, body }) : req.once('finish', () => resolve({ status: res.statusCode!, body })))
      })
      req.on('error', reject)
      req.end(`--b\r\nContent-Disposition: form-data; name="file"; filename*=UTF-8''a%00.txt\r\n\r\n${big}\r\n--b--\r\n`)
    })
    assert.equal(answer.status, 422)
    assert.equal((await fetch(`${url}/list`)).status, 200, 'still serving')
    assert.deepEqual(uncaught, [])
  })

  it('cuts every detail to a sane size, whatever a handler put in it', async (t) => {
    const { url } = await startKernel(t, [probePlugin])
    const res = await fetch(`${url}/long-error`)
    assert.equal(res.status, 409)
    const { detail } = (await res.json()) as Json
    assert.equal(detail, `busy: ${'y'.repeat(1994)}…[50006 chars]`)
  })
})
