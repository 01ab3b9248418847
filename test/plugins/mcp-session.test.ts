// MCP sessions over Streamable HTTP (notes.md, wire details): SSE-framed answers and a signed mcp-session-id for
// clients that accept text/event-stream, valid on every instance; plain JSON without a session for JSON-only clients.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { createFileSecrets } from '../../adapters/cache/secrets.ts'
import { createSessionIds, SECRET_NAME, SESSION_MAX_AGE_SEC } from '../../plugins/mcp/session.ts'
import { startApp, type StartedApp } from '../helpers/app.ts'
import { skipUnless } from '../helpers/services.ts'
import { newKb } from './docs.suite.ts'

type Json = any
const BOTH = 'application/json, text/event-stream'
const SESSION_ID = /^[A-Za-z0-9_-]{22}\.[0-9a-z]+\.[A-Za-z0-9_-]{43}$/
const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'curl', version: '0' } } }
const LIST_KBS = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'list_knowledge_bases', arguments: {} } }

const post = (svc: StartedApp, body: unknown, headers: Record<string, string>) =>
  fetch(`${svc.url}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })

/** What the older docs' curl walkthroughs do: `| sed 's/^data: //'` and read the JSON line. */
function sedData(text: string): Json {
  const lines = text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.replace(/^data: /, ''))
  assert.equal(lines.length, 1, text)
  return JSON.parse(lines[0])
}

async function openSession(svc: StartedApp): Promise<string> {
  const res = await post(svc, INIT, { accept: BOTH })
  assert.equal(res.status, 200)
  assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/)
  const sid = res.headers.get('mcp-session-id')
  assert.match(sid ?? '', SESSION_ID)
  assert.equal(sedData(await res.text()).result.serverInfo.name, 'quarry')
  return sid!
}

async function listKbs(svc: StartedApp, sid: string): Promise<Response> {
  return post(svc, LIST_KBS, { accept: BOTH, 'mcp-session-id': sid, 'mcp-protocol-version': '2025-03-26' })
}

describe('mcp sessions on the embedded default', () => {
  it('the SDK client gets a session id at initialize, sends it, and is answered as SSE', async (t) => {
    const svc = await startApp(t)
    const kb = await newKb(svc)
    const seen: { method: string; status: number; type: string | null; session: string | null; sent: string | null }[] = []
    const recording = async (url: string | URL, init?: RequestInit) => {
      const res = await fetch(url, init)
      seen.push({ method: init?.method ?? 'GET', status: res.status, type: res.headers.get('content-type'), session: res.headers.get('mcp-session-id'), sent: new Headers(init?.headers).get('mcp-session-id') })
      return res
    }
    const transport = new StreamableHTTPClientTransport(new URL(`${svc.url}/mcp`), { fetch: recording })
    const client = new Client({ name: 'quarry-test', version: '0.0.0' })
    await client.connect(transport)
    t.after(() => client.close())
    assert.match(transport.sessionId ?? '', SESSION_ID)
    const res = await client.callTool({ name: 'list_knowledge_bases', arguments: {} }) as Json
    assert.ok(res.structuredContent.knowledge_bases.some((k: Json) => k.id === kb))

    const posts = seen.filter((s) => s.method === 'POST')
    assert.equal(posts[0].sent, null, 'initialize carries no session')
    for (const p of posts.slice(1)) assert.equal(p.sent, transport.sessionId, 'every later request names the session')
    for (const p of posts.filter((x) => x.status === 200)) {
      assert.match(p.type ?? '', /^text\/event-stream/)
      assert.equal(p.session, transport.sessionId)
    }
    assert.ok(posts.filter((x) => x.status === 200).length >= 2, JSON.stringify(seen))
  })

  it('raw HTTP: initialize, the header, tools/call as SSE; forged, damaged and expired ids are 404; JSON-only clients get JSON and no session', async (t) => {
    const svc = await startApp(t)
    const kb = await newKb(svc)
    const sid = await openSession(svc)

    let res = await listKbs(svc, sid)
    assert.equal(res.status, 200)
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/)
    assert.equal(res.headers.get('mcp-session-id'), sid)
    const answer = sedData(await res.text())
    assert.equal(answer.id, 2)
    assert.ok(answer.result.structuredContent.knowledge_bases.some((k: Json) => k.id === kb))

    // The MCP spec: a session id the server does not know is answered 404, and the client initializes again.
    const [id, issued, mac] = sid.split('.')
    const secret = Buffer.from(readFileSync(join(svc.dataDir, 'secrets', SECRET_NAME), 'utf8'), 'hex')
    const sign = (i: string, at: string, key = secret) => createHmac('sha256', key).update(`${i}.${at}`).digest('base64url')
    const old = Math.floor(Date.now() / 1000 - SESSION_MAX_AGE_SEC - 60).toString(36)
    const unknown = [
      `${id}.${issued}.${mac.slice(0, -2)}${mac.endsWith('AA') ? 'BB' : 'AA'}`, // damaged signature
      `${'A'.repeat(22)}.${issued}.${mac}`, // another id under this signature
      `${id}.${old}.${sign(id, old)}`, // well signed, expired
      `${id}.${issued}.${sign(id, issued, Buffer.alloc(32, 7))}`, // signed with another key
      'not-a-session',
      'x'.repeat(5000),
    ]
    for (const bad of unknown) {
      res = await listKbs(svc, bad)
      assert.equal(res.status, 404, bad.slice(0, 60))
      assert.deepEqual(await res.json(), { jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null })
    }
    // Still signed by us: the id checks out whatever instance or process reads it.
    assert.equal((await listKbs(svc, `${id}.${issued}.${sign(id, issued)}`)).status, 200)

    // JSON-only: JSON answers, no session, and a call needs no initialize first.
    res = await post(svc, INIT, { accept: 'application/json' })
    assert.equal(res.status, 200)
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/)
    assert.equal(res.headers.get('mcp-session-id'), null)
    assert.equal(((await res.json()) as Json).result.serverInfo.name, 'quarry')
    res = await post(svc, LIST_KBS, { accept: 'application/json' })
    assert.equal(res.status, 200)
    assert.ok(((await res.json()) as Json).result.structuredContent.knowledge_bases.some((k: Json) => k.id === kb))
    // A client that accepts SSE but never initialized: answered, without a session.
    res = await post(svc, LIST_KBS, { accept: BOTH })
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('mcp-session-id'), null)
    assert.equal(sedData(await res.text()).id, 2)
  })

  it('ids signed with the secret in data_dir stay valid for every reader of that secret (a restarted process)', async (t) => {
    const dir = join(process.env.TMPDIR ?? '/tmp', `quarry-secrets-${process.pid}-${Date.now()}`)
    t.after(() => {
      for (const d of [dir, `${dir}-other`]) rmSync(d, { recursive: true, force: true })
    })
    const first = createSessionIds(createFileSecrets(dir))
    const second = createSessionIds(createFileSecrets(dir))
    const other = createSessionIds(createFileSecrets(`${dir}-other`))
    const sid = await first.issue()
    assert.equal(await second.verify(sid), true)
    assert.equal(await other.verify(sid), false)
    assert.equal(await first.verify(`${sid}x`), false)
  })
})

describe('mcp sessions on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () => {
  it('a second instance sharing the Redis accepts the first one\'s session; one with another Redis prefix does not', async (t) => {
    const a = await startApp(t, { services: true })
    const b = await startApp(t, { services: true, settings: { redis: a.app.settings.redis, queue_worker: { enabled: false } } })
    const elsewhere = await startApp(t, { services: true, settings: { queue_worker: { enabled: false } } })
    const sid = await openSession(a)
    const res = await listKbs(b, sid)
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('mcp-session-id'), sid)
    assert.ok(Array.isArray(sedData(await res.text()).result.structuredContent.knowledge_bases))
    assert.equal((await listKbs(elsewhere, sid)).status, 404)
    // And the other way round: b issues, a accepts.
    assert.equal((await listKbs(a, await openSession(b))).status, 200)
  })
})
