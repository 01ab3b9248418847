import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { connect } from 'node:net'
import { Readable } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import { Type } from '@sinclair/typebox'
import { createApp, type App } from '../../kernel/app.ts'
import { resolveSettings } from '../../kernel/config/load.ts'
import { AppError } from '../../kernel/errors.ts'
import { readMultipart } from '../../kernel/http/multipart.ts'
import { createLogger } from '../../kernel/log.ts'
import { definePlugin, Reply, reply, streamReply, type Plugin } from '../../kernel/plugin.ts'
import type { Adapters } from '../../adapters/ports.ts'

// Kernel tests exercise routing, validation and the plugin loader; no plugin here touches a port.
const noAdapters = {} as Adapters

async function boot(plugins: Plugin<any>[], settings: Record<string, unknown> = {}): Promise<{ app: App; url: string }> {
  const { settings: s } = resolveSettings({ server: { json_body_limit_kb: 1, shutdown_grace_sec: 5 }, ...settings })
  const app = await createApp({ settings: s, plugins, adapters: noAdapters, log: createLogger('SILENT') })
  const port = await app.listen(0, '127.0.0.1')
  return { app, url: `http://127.0.0.1:${port}` }
}

/** Writes `request` (pipelined requests) on a raw socket and reads the bytes back until `body` appears `count` times. */
function rawExchange(url: string, request: string, body: RegExp, count: number): Promise<string> {
  const { port } = new URL(url)
  return new Promise<string>((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1')
    let text = ''
    socket.setEncoding('latin1')
    socket.on('data', (d: string) => {
      text += d
      if ((text.match(body) ?? []).length === count) {
        socket.end()
        resolve(text)
      }
    })
    socket.on('error', reject)
    socket.write(request)
  })
}

const Echo = Type.Object({
  name: Type.String({ minLength: 1 }),
  count: Type.Optional(Type.Integer({ minimum: 0, maximum: 10 })),
  tags: Type.Optional(Type.Array(Type.String())),
})

/** Resolved when /slow is being handled: a test can close the app knowing the request is in flight. */
const signal = () => {
  let resolve!: () => void
  const promise = new Promise<void>((r) => (resolve = r))
  return { promise, resolve }
}
let slowStarted = signal()

const echoPlugin = definePlugin({
  name: 'echo',
  register(ctx) {
    ctx.route({
      method: 'POST', path: '/echo/{id}', summary: 'echo', body: Echo, params: Type.Object({ id: Type.String() }),
      query: Type.Object({ n: Type.Optional(Type.Integer()), flag: Type.Optional(Type.Boolean()) }),
      handler: (req) => ({ id: req.params.id, body: req.body, query: req.query }),
    })
    ctx.route({ method: 'GET', path: '/fail', summary: 'fail', handler: () => { throw new Error('secret stack detail') } })
    ctx.route({ method: 'GET', path: '/conflict', summary: 'c', handler: () => { throw new AppError('X', 409, 'busy: doc_id=1', { extra: { results: [1] } }) } })
    ctx.route({ method: 'GET', path: '/created', summary: 'c', status: 201, handler: () => ({ ok: true }) })
    ctx.route({ method: 'GET', path: '/accepted', summary: 'a', handler: () => reply(202, { queued: 1 }, { 'x-extra': 'yes' }) })
    ctx.route({
      method: 'GET', path: '/stream', summary: 's',
      handler: () => streamReply(Readable.from((function* () { for (let i = 0; i < 2000; i++) yield Buffer.from(`line ${i}\n`) })()), 'text/plain'),
    })
    ctx.route({
      method: 'GET', path: '/slow', summary: 's',
      handler: async () => {
        slowStarted.resolve()
        await sleep(400)
        return { slow: true }
      },
    })
    ctx.route({
      method: 'POST', path: '/upload', summary: 'u', bodyKind: 'multipart',
      handler: async (req) => {
        const files: { field: string; filename: string; size: number }[] = []
        const fields = await readMultipart(req, {
          maxFileBytes: 1000,
          onFile: async (f) => {
            let size = 0
            for await (const chunk of f.stream) size += (chunk as Buffer).length
            files.push({ field: f.field, filename: f.filename, size })
          },
        })
        return { files, fields }
      },
    })
  },
})

describe('kernel over HTTP (uWebSockets.js)', () => {
  it('validates path, query and body and answers 422 in the FastAPI shape', async (t) => {
    const { app, url } = await boot([echoPlugin])
    t.after(() => app.close())
    let res = await fetch(`${url}/echo/a%20b?n=3&flag=true`, { method: 'POST', body: JSON.stringify({ name: 'x', tags: ['t'] }) })
    assert.equal(res.status, 200)
    assert.deepEqual(await res.json(), { id: 'a b', body: { name: 'x', tags: ['t'] }, query: { n: 3, flag: true } })

    res = await fetch(`${url}/echo/1`, { method: 'POST', body: JSON.stringify({ count: 11, tags: 'notalist' }) })
    assert.equal(res.status, 422)
    const body = await res.json() as { detail: { loc: unknown[]; msg: string; type: string }[] }
    const byLoc = Object.fromEntries(body.detail.map((d) => [d.loc.join('.'), d]))
    assert.equal(byLoc['body.name'].type, 'missing')
    assert.equal(byLoc['body.name'].msg, 'Field required')
    assert.equal(byLoc['body.count'].type, 'less_than_equal')
    assert.equal(byLoc['body.tags'].type, 'list_type')

    res = await fetch(`${url}/echo/1?n=abc`, { method: 'POST', body: JSON.stringify({ name: 'x' }) })
    assert.equal(res.status, 422)
    assert.deepEqual((await res.json() as { detail: { loc: unknown[] }[] }).detail[0].loc, ['query', 'n'])
  })

  it('answers malformed JSON and a missing body with 422 json_invalid / missing', async (t) => {
    const { app, url } = await boot([echoPlugin])
    t.after(() => app.close())
    let res = await fetch(`${url}/echo/1`, { method: 'POST', body: '{"name": ' })
    assert.equal(res.status, 422)
    const d = (await res.json() as { detail: { type: string; loc: unknown[] }[] }).detail[0]
    assert.equal(d.type, 'json_invalid')
    assert.equal(d.loc[0], 'body')
    res = await fetch(`${url}/echo/1`, { method: 'POST' })
    assert.equal(res.status, 422)
    assert.equal((await res.json() as { detail: { type: string }[] }).detail[0].type, 'missing')
  })

  it('refuses a JSON body over the cap with 413, declared or streamed', async (t) => {
    const { app, url } = await boot([echoPlugin])
    t.after(() => app.close())
    const big = JSON.stringify({ name: 'x'.repeat(5000) })
    let res = await fetch(`${url}/echo/1`, { method: 'POST', body: big })
    assert.equal(res.status, 413)
    assert.match((await res.json() as { detail: string }).detail, /too large: at most 1024 bytes/)
    // chunked: no content-length, the cap is enforced while reading
    res = await fetch(`${url}/echo/1`, { method: 'POST', body: Readable.toWeb(Readable.from([Buffer.from(big)])) as never, duplex: 'half' } as RequestInit)
    assert.equal(res.status, 413)
    // the server keeps serving
    res = await fetch(`${url}/echo/1`, { method: 'POST', body: JSON.stringify({ name: 'ok' }) })
    assert.equal(res.status, 200)
  })

  it('answers unknown routes 404 and wrong methods 405, both with {detail}', async (t) => {
    const { app, url } = await boot([echoPlugin])
    t.after(() => app.close())
    let res = await fetch(`${url}/nowhere`)
    assert.equal(res.status, 404)
    assert.deepEqual(await res.json(), { detail: 'Not Found' })
    res = await fetch(`${url}/echo/1`)
    assert.equal(res.status, 405)
    assert.equal(res.headers.get('allow'), 'POST')
    assert.deepEqual(await res.json(), { detail: 'Method Not Allowed' })
  })

  it('maps errors: AppError keeps status, message and extra fields; unknown errors leak nothing', async (t) => {
    const { app, url } = await boot([echoPlugin])
    t.after(() => app.close())
    let res = await fetch(`${url}/conflict`)
    assert.equal(res.status, 409)
    assert.deepEqual(await res.json(), { results: [1], detail: 'busy: doc_id=1' })
    res = await fetch(`${url}/fail`)
    assert.equal(res.status, 500)
    const text = await res.text()
    assert.equal(text, '{"detail":"Internal Server Error"}')
    assert.doesNotMatch(text, /secret|stack/)
  })

  it('uses the route status, reply() statuses and headers, and echoes a request id', async (t) => {
    const { app, url } = await boot([echoPlugin])
    t.after(() => app.close())
    let res = await fetch(`${url}/created`)
    assert.equal(res.status, 201)
    assert.ok(res.headers.get('x-request-id'))
    res = await fetch(`${url}/accepted`, { headers: { 'x-request-id': 'abc-123' } })
    assert.equal(res.status, 202)
    assert.equal(res.headers.get('x-extra'), 'yes')
    assert.equal(res.headers.get('x-request-id'), 'abc-123')
    res = await fetch(`${url}/accepted`, { headers: { 'x-request-id': 'bad id with spaces' } })
    assert.notEqual(res.headers.get('x-request-id'), 'bad id with spaces')
  })

  it('answers HEAD over a socket without a body and goes on serving (this uWS build ended the process on HEAD once)', async (t) => {
    const { app, url } = await boot([echoPlugin])
    t.after(() => app.close())
    for (const path of ['/created', '/accepted', '/stream', '/nowhere']) {
      const head = await fetch(`${url}${path}`, { method: 'HEAD' })
      const get = await fetch(`${url}${path}`)
      assert.equal(head.status, get.status, path)
      assert.equal(await head.text(), '', path)
      assert.ok((await get.text()).length > 0, path)
    }
    assert.equal((await fetch(`${url}/created`)).status, 201, 'still serving')
  })

  it('writes one content-type and one x-request-id per JSON answer, each request its own id, on the wire', async (t) => {
    const { app, url } = await boot([echoPlugin])
    t.after(() => app.close())
    const raw = await rawExchange(url, 'GET /created HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(3), /\{"ok":true\}/g, 3)
    const answers = raw.split('HTTP/1.1 ').slice(1)
    assert.equal(answers.length, 3, raw)
    const ids = answers.map((a) => {
      const headers = a.slice(0, a.indexOf('\r\n\r\n')).split('\r\n').slice(1)
      assert.deepEqual(headers.filter((h) => /^content-type:/i.test(h)), ['content-type: application/json'], a)
      const id = headers.filter((h) => /^x-request-id:/i.test(h))
      assert.equal(id.length, 1, a)
      assert.match(id[0], /^x-request-id: [0-9a-z]+-[0-9a-z]+$/)
      return id[0]
    })
    assert.equal(new Set(ids).size, 3, ids.join(', '))
  })

  it('writes the headers of a frozen headers object once each, for every answer that uses it, on the wire', async (t) => {
    const CONSTANT = Object.freeze({ 'content-type': 'application/json', 'server-timing': 'cache;desc="hit"', 'x-extra': 'one' })
    const NOT_PLAIN = Object.freeze({ 'content-type': 'application/json', 'x-name': 'caf\u00e9' })
    const frozen = definePlugin({
      name: 'frozen',
      register(ctx) {
        ctx.route({ method: 'GET', path: '/constant', summary: 'c', handler: () => new Reply(200, '{"ok":1}', CONSTANT, 'raw') })
        ctx.route({ method: 'GET', path: '/accented', summary: 'a', handler: () => new Reply(200, '{"ok":1}', NOT_PLAIN, 'raw') })
        ctx.route({ method: 'GET', path: '/closing', summary: 'x', handler: () => new Reply(200, '{"ok":1}', Object.freeze({ 'content-type': 'text/plain', connection: 'close' }), 'raw') })
      },
    })
    const { app, url } = await boot([frozen])
    t.after(() => app.close())
    const raw = await rawExchange(url, 'GET /constant HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(2) + 'GET /accented HTTP/1.1\r\nHost: x\r\n\r\n', /\{"ok":1\}/g, 3)
    const answers = raw.split('HTTP/1.1 ').slice(1).map((a) => a.slice(0, a.indexOf('\r\n\r\n')).split('\r\n').slice(1))
    assert.equal(answers.length, 3, raw)
    const ids = new Set<string>()
    for (const headers of answers.slice(0, 2)) {
      for (const [name, value] of Object.entries(CONSTANT)) assert.deepEqual(headers.filter((h) => h.toLowerCase().startsWith(`${name}:`)), [`${name}: ${value}`], raw)
      const id = headers.filter((h) => /^x-request-id:/i.test(h))
      assert.equal(id.length, 1, raw)
      ids.add(id[0])
    }
    assert.equal(ids.size, 2, 'each answer its own request id')
    // a value uWS must convert (not plain ASCII) goes the usual way, as UTF-8
    assert.ok(Buffer.from(raw, 'latin1').includes(Buffer.from('x-name: caf\u00e9', 'utf8')), raw)
    const closing = await fetch(`${url}/closing`)
    assert.equal(closing.headers.get('content-type'), 'text/plain')
    assert.equal(closing.headers.get('connection'), 'close')
    assert.equal((await app.inject({ method: 'GET', url: '/constant' })).headers['server-timing'], 'cache;desc="hit"')
  })

  it('parses and validates a JSON body seen before to the same value, each request its own copy (repeatBodies)', async (t) => {
    const seen: unknown[] = []
    const mutating = definePlugin({
      name: 'mutating',
      register(ctx) {
        ctx.route({
          method: 'POST', path: '/mutate', summary: 'm', body: Echo, repeatBodies: true,
          handler: (req) => {
            seen.push(structuredClone(req.body))
            // what a hook or handler may do to its own body (the access hook narrows kb_ids)
            const body = req.body as { name: string; tags?: string[]; count?: number }
            body.tags?.push('added')
            body.name = 'changed'
            delete body.count
            return { ok: true }
          },
        })
      },
    })
    const { app, url } = await boot([mutating])
    t.after(() => app.close())
    const text = JSON.stringify({ name: 'a', count: 3, tags: ['x', 'y'] })
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${url}/mutate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text })
      assert.equal(res.status, 200)
    }
    assert.equal((await app.inject({ method: 'POST', url: '/mutate', body: text })).status, 200)
    assert.deepEqual(seen, Array(4).fill({ name: 'a', count: 3, tags: ['x', 'y'] }))
    // a refused body is refused every time, with the same issues
    for (let i = 0; i < 2; i++) {
      const bad = await fetch(`${url}/mutate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"a","count":11}' })
      assert.equal(bad.status, 422)
      assert.deepEqual(((await bad.json()) as { detail: { loc: unknown[] }[] }).detail.map((d) => d.loc), [['body', 'count']])
    }
    const nul = await fetch(`${url}/mutate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"a\\u0000"}' })
    assert.equal(nul.status, 422)
    assert.equal(seen.length, 4)
  })

  it('keeps bodies only on a route that asks for it (repeatBodies): another route parses every body', async (t) => {
    const route = (name: string, path: string, repeatBodies: boolean) => definePlugin({
      name,
      register(ctx) {
        ctx.route({ method: 'POST', path, summary: name, body: Echo, repeatBodies, handler: (req) => ({ name: (req.body as { name: string }).name }) })
      },
    })
    const { app } = await boot([route('kept', '/kept', true), route('plain', '/plain', false)])
    t.after(() => app.close())
    const text = JSON.stringify({ name: 'counted', count: 4 })
    const parse = JSON.parse
    let parsed = 0
    JSON.parse = ((s: string, r?: never) => {
      if (s === text) parsed++
      return parse(s, r)
    }) as typeof JSON.parse
    try {
      for (let i = 0; i < 3; i++) assert.equal((await app.inject({ method: 'POST', url: '/kept', body: text })).status, 200)
      assert.equal(parsed, 1)
      for (let i = 0; i < 3; i++) assert.equal((await app.inject({ method: 'POST', url: '/plain', body: text })).status, 200)
      assert.equal(parsed, 4)
    } finally {
      JSON.parse = parse
    }
  })

  it('streams responses', async (t) => {
    const { app, url } = await boot([echoPlugin])
    t.after(() => app.close())
    const res = await fetch(`${url}/stream`)
    assert.equal(res.headers.get('content-type'), 'text/plain')
    const lines = (await res.text()).trim().split('\n')
    assert.equal(lines.length, 2000)
    assert.equal(lines[1999], 'line 1999')
  })

  it('streams multipart uploads and refuses a file over the cap with 422', async (t) => {
    const { app, url } = await boot([echoPlugin])
    t.after(() => app.close())
    const form = new FormData()
    form.append('note', 'hello')
    form.append('files', new Blob([Buffer.alloc(300, 1)]), 'a.txt')
    form.append('files', new Blob([Buffer.alloc(700, 2)]), '한글 이름.md')
    let res = await fetch(`${url}/upload`, { method: 'POST', body: form })
    assert.equal(res.status, 200)
    assert.deepEqual(await res.json(), {
      files: [{ field: 'files', filename: 'a.txt', size: 300 }, { field: 'files', filename: '한글 이름.md', size: 700 }],
      fields: { note: 'hello' },
    })
    const big = new FormData()
    big.append('file', new Blob([Buffer.alloc(5000)]), 'big.pdf')
    res = await fetch(`${url}/upload`, { method: 'POST', body: big })
    assert.equal(res.status, 422)
    assert.match((await res.json() as { detail: string }).detail, /big\.pdf.*larger than the 1000 bytes limit/)
    res = await fetch(`${url}/upload`, { method: 'POST', body: 'plain', headers: { 'content-type': 'text/plain' } })
    assert.equal(res.status, 422)
  })

  it('finishes in-flight requests on close and then stops accepting', async (t) => {
    const { app, url } = await boot([echoPlugin])
    slowStarted = signal()
    const inflight = fetch(`${url}/slow`)
    await slowStarted.promise
    const closing = app.close()
    const res = await inflight
    assert.equal(res.status, 200)
    assert.deepEqual(await res.json(), { slow: true })
    await closing
    await assert.rejects(fetch(`${url}/created`))
    t.after(() => {})
  })
})

describe('kernel plugins', () => {
  it('boots in dependency order, shares services and closes in reverse order', async () => {
    const events: string[] = []
    const a = definePlugin({ name: 'a', register: () => { events.push('register a'); return { hello: 'from a' } }, close: () => void events.push('close a') })
    const b = definePlugin({
      name: 'b', dependsOn: ['a'],
      register: (ctx) => { events.push(`register b: ${ctx.use<{ hello: string }>('a').hello}`) },
      close: () => void events.push('close b'),
    })
    const { settings } = resolveSettings({})
    const app = await createApp({ settings, plugins: [b, a], adapters: noAdapters, log: createLogger('SILENT') })
    await app.close()
    assert.deepEqual(events, ['register a', 'register b: from a', 'close b', 'close a'])
  })

  it('fails at boot with a coded error on a missing dependency, a cycle, or an undeclared use', async () => {
    const { settings } = resolveSettings({})
    const mk = (plugins: Plugin<any>[]) => createApp({ settings, plugins, adapters: noAdapters, log: createLogger('SILENT') })
    await assert.rejects(mk([definePlugin({ name: 'x', dependsOn: ['ghost'], register: () => {} })]), (e: AppError) => e.code === 'KERNEL_PLUGIN_MISSING_DEPENDENCY' && /'x' depends on 'ghost'/.test(e.message))
    await assert.rejects(mk([
      definePlugin({ name: 'p', dependsOn: ['q'], register: () => {} }),
      definePlugin({ name: 'q', dependsOn: ['p'], register: () => {} }),
    ]), (e: AppError) => e.code === 'KERNEL_PLUGIN_CYCLE')
    await assert.rejects(mk([
      definePlugin({ name: 'p', register: () => 1 }),
      definePlugin({ name: 'q', register: (ctx) => ctx.use('p') }),
    ]), (e: AppError) => e.code === 'KERNEL_PLUGIN_UNDECLARED_DEPENDENCY')
  })

  it('runs request hooks before validation with the route access metadata', async (t) => {
    const seen: string[] = []
    const auth = definePlugin({
      name: 'auth',
      register(ctx) {
        ctx.hooks.onRequest((req, route) => {
          seen.push(`${route.access.level}:${route.access.kb?.name ?? '-'}`)
          if (route.access.level !== 'public' && req.headers.authorization !== 'Bearer good') {
            throw new AppError('AUTH', 401, 'Not authenticated', { headers: { 'www-authenticate': 'Bearer' } })
          }
        })
        ctx.route({ method: 'GET', path: '/open', summary: 'o', access: { level: 'public' }, handler: () => ({ ok: 1 }) })
        ctx.route({
          method: 'POST', path: '/kb/{kb_id}', summary: 'k', access: { level: 'editor', kb: { from: 'params', name: 'kb_id' } },
          body: Type.Object({ n: Type.Integer() }), handler: () => ({ ok: 2 }),
        })
      },
    })
    const { app } = await boot([auth])
    t.after(() => app.close())
    assert.equal((await app.inject({ method: 'GET', url: '/open' })).status, 200)
    const denied = await app.inject({ method: 'POST', url: '/kb/k1', body: { n: 'not a number' } })
    assert.equal(denied.status, 401, 'authentication runs before body validation')
    assert.equal(denied.headers['www-authenticate'], 'Bearer')
    const ok = await app.inject({ method: 'POST', url: '/kb/k1', headers: { authorization: 'Bearer good' }, body: { n: 1 } })
    assert.equal(ok.status, 200)
    assert.deepEqual(seen, ['public:-', 'editor:kb_id', 'editor:kb_id'])
  })
})
