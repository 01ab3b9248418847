// The MCP endpoint (spec 4.11, notes.md "MCP tools"): the official SDK client against the running service over
// Streamable HTTP, and against `kernel/main.ts mcp` over stdio.
import { after, before, describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { Readable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js'
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { stringify } from 'yaml'
import { Reply } from '../../kernel/plugin.ts'
import { toReply } from '../../plugins/mcp/http.ts'
import { seedPglite, startApp, uniqueId, type StartedApp } from '../helpers/app.ts'
import { waitFor } from '../helpers/wait.ts'
import { md, newKb, prose, settle, upload } from './docs.suite.ts'

type Json = any
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const ACCEPT = 'application/json, text/event-stream'

async function connect(svc: StartedApp): Promise<Client> {
  const client = new Client({ name: 'quarry-test', version: '0.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(`${svc.url}/mcp`)))
  return client
}

const call = (client: Client, name: string, args: Record<string, unknown> = {}) =>
  client.callTool({ name, arguments: args }) as Promise<{ isError?: boolean; structuredContent?: Json; content: { type: string; text: string }[] }>

/** The structured result, after checking the text block carries the same JSON for clients without structured results. */
function structured(res: Awaited<ReturnType<typeof call>>): Json {
  assert.ok(!res.isError, `tool error: ${res.content[0]?.text}`)
  assert.equal(res.content[0].type, 'text')
  assert.deepEqual(JSON.parse(res.content[0].text), res.structuredContent)
  return res.structuredContent
}

/** What the REST search answered, in the shape of the MCP tool's results. */
const asToolResults = (rest: Json) => rest.results.map((r: Json) => ({
  text: r.text, score: r.score, rerank_score: r.rerank_score ?? null, kb_id: r.kb_id, doc_id: r.doc_id, title: r.title,
  source: r.source, page_num: r.page_num, page_label: r.page_label, chunk_idx: r.chunk_index,
}))

describe('mcp over Streamable HTTP', () => {
  const cleanups: (() => unknown)[] = []
  let svc: StartedApp
  let client: Client
  let kbA: string
  let kbB: string
  let docA: Json

  before(async () => {
    svc = await startApp({ after: (fn: () => unknown) => void cleanups.push(fn) }, { settings: { queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 } } })
    kbA = await newKb(svc)
    kbB = await newKb(svc)
    const upA = await (await upload(svc, kbA, 'leave-policy.md', md('Leave policy', prose('mcp-leave', 30)))).json() as Json
    const upB = await (await upload(svc, kbB, 'harbor-notes.md', md('Harbor notes', prose('mcp-harbor', 30)))).json() as Json
    docA = await settle(svc, kbA, upA.doc_id)
    assert.equal(docA.status, 'indexed', docA.last_error)
    assert.equal((await settle(svc, kbB, upB.doc_id)).status, 'indexed')
    client = await connect(svc)
    cleanups.unshift(() => client.close())
  })
  after(async () => {
    for (const c of cleanups) await c()
  })

  it('lists the four tools with their input and output schemas', async () => {
    const { tools } = await client.listTools()
    const byName = new Map(tools.map((t) => [t.name, t]))
    assert.deepEqual([...byName.keys()].sort(), ['get_document', 'get_document_status', 'list_knowledge_bases', 'search'])
    const search = byName.get('search')!.inputSchema as Json
    assert.deepEqual(search.required, ['query'])
    assert.deepEqual(Object.keys(search.properties).sort(), ['filter', 'kb_ids', 'min_score', 'mode', 'query', 'top_k'])
    assert.deepEqual(Object.keys(search.properties.filter.properties).sort(), ['doc_ids', 'doc_type', 'source_prefix', 'source_type', 'tags', 'updated_after', 'updated_before'])
    assert.equal(search.properties.filter.additionalProperties, false)
    for (const p of Object.values(search.properties.filter.properties) as Json[]) assert.ok(p.description, 'every filter field is described')
    assert.equal(search.properties.top_k.type, 'integer')
    assert.deepEqual([search.properties.top_k.minimum, search.properties.top_k.maximum], [1, 100])
    assert.deepEqual([search.properties.min_score.minimum, search.properties.min_score.maximum], [0, 1])
    assert.deepEqual(search.properties.mode.enum, ['hybrid', 'similarity'])
    assert.equal(search.properties.kb_ids.type, 'array')
    for (const p of Object.values(search.properties) as Json[]) assert.ok(p.description, 'every search parameter is described')
    for (const name of ['get_document', 'get_document_status']) {
      const input = byName.get(name)!.inputSchema as Json
      assert.deepEqual(input.required.sort(), ['doc_id', 'kb_id'])
    }
    assert.deepEqual(Object.keys((byName.get('list_knowledge_bases')!.inputSchema as Json).properties ?? {}), [])
    for (const t of tools) {
      assert.equal(t.outputSchema?.type, 'object', `${t.name} declares an output schema`)
      assert.equal(t.annotations?.readOnlyHint, true)
    }
  })

  it('search answers what POST /api/search answers for the same query and options', async () => {
    const cases: { args: Json; options: Json }[] = [
      { args: { query: 'leave policy manager approval', kb_ids: [kbA, kbB], top_k: 5 }, options: { top_k: 5 } },
      { args: { query: 'harbor glacier lantern', kb_ids: [kbB], mode: 'similarity' }, options: { mode: 'similarity' } },
      { args: { query: 'employee annual holiday', kb_ids: [kbA, kbB], mode: 'similarity', min_score: 0.2, top_k: 20 }, options: { mode: 'similarity', 'similarity.min_score': 0.2, top_k: 20 } },
    ]
    for (const { args, options } of cases) {
      const tool = structured(await call(client, 'search', args))
      const rest = await (await svc.request('/api/search', { method: 'POST', json: { query: args.query, kb_ids: args.kb_ids, options } })).json() as Json
      assert.ok(rest.results.length > 0, `the REST search finds something for ${args.query}`)
      assert.deepEqual(tool.results, asToolResults(rest), JSON.stringify(args))
      assert.equal(typeof tool.latency_ms, 'number')
    }
    const hybrid = structured(await call(client, 'search', cases[0].args))
    assert.deepEqual(new Set(hybrid.results.map((r: Json) => r.kb_id)), new Set([kbA, kbB]), 'both knowledge bases contribute')
  })

  it('search takes a filter, applied as POST /api/search applies options.filter', async () => {
    const query = 'leave policy harbor notes'
    const cases: Json[] = [
      { doc_ids: [docA.doc_id] },
      { source_prefix: 'harbor-' },
      { doc_type: ['md'], updated_after: '2000-01-01' },
      { tags: 'no-such-tag' },
    ]
    for (const filter of cases) {
      const tool = structured(await call(client, 'search', { query, kb_ids: [kbA, kbB], top_k: 10, filter }))
      const rest = await (await svc.request('/api/search', { method: 'POST', json: { query, kb_ids: [kbA, kbB], options: { top_k: 10, filter } } })).json() as Json
      assert.deepEqual(tool.results, asToolResults(rest), JSON.stringify(filter))
    }
    const onlyA = structured(await call(client, 'search', { query, kb_ids: [kbA, kbB], top_k: 10, filter: { doc_ids: [docA.doc_id] } }))
    assert.ok(onlyA.results.length > 0 && onlyA.results.every((r: Json) => r.doc_id === docA.doc_id))
    const onlyB = structured(await call(client, 'search', { query, top_k: 10, filter: { source_prefix: 'harbor-' } }))
    assert.ok(onlyB.results.length > 0 && onlyB.results.every((r: Json) => r.kb_id === kbB), 'without kb_ids too')
    assert.deepEqual(structured(await call(client, 'search', { query, kb_ids: [kbA, kbB], filter: { tags: 'no-such-tag' } })).results, [])

    const bad: [Json, RegExp][] = [
      [{ doc_typ: 'md' }, /doc_typ/],
      [{ doc_ids: [] }, /doc_ids/],
      [{ updated_after: 'yesterday' }, /updated_after/],
      [{ updated_after: '2024-02-30' }, /updated_after is not a valid date/],
      [{ updated_after: '2024-05-02', updated_before: '2024-05-01' }, /updated_after must be earlier than updated_before/],
    ]
    for (const [filter, message] of bad) {
      const res = await call(client, 'search', { query, kb_ids: [kbA], filter })
      assert.equal(res.isError, true, JSON.stringify(filter))
      assert.match(res.content[0].text, message)
    }
  })

  it('search without kb_ids searches every knowledge base', async () => {
    const query = 'harbor notes glacier'
    const tool = structured(await call(client, 'search', { query, top_k: 50 }))
    const all = (await (await svc.request('/api/kb')).json() as Json).knowledge_bases.map((k: Json) => k.kb_id)
    assert.ok(all.includes(kbA) && all.includes(kbB))
    const rest = await (await svc.request('/api/search', { method: 'POST', json: { query, kb_ids: all, options: { top_k: 50 } } })).json() as Json
    assert.deepEqual(tool.results, asToolResults(rest))
    assert.deepEqual(new Set(tool.results.map((r: Json) => r.kb_id)), new Set([kbA, kbB]))
  })

  it('list_knowledge_bases lists the knowledge bases with id, name, description and tags', async () => {
    const id = uniqueId()
    assert.equal((await svc.request('/api/kb', { method: 'POST', json: { kb_id: id, kb_name: 'Travel', description: 'Travel rules', tags: ['hr', 'travel'] } })).status, 201)
    const { knowledge_bases: kbs } = structured(await call(client, 'list_knowledge_bases'))
    const rest = (await (await svc.request('/api/kb')).json() as Json).knowledge_bases
    assert.deepEqual(kbs.map((k: Json) => k.id).sort(), rest.map((k: Json) => k.kb_id).sort())
    assert.deepEqual(kbs.find((k: Json) => k.id === id), { id, name: 'Travel', description: 'Travel rules', tags: ['hr', 'travel'] })
    assert.ok(kbs.some((k: Json) => k.id === kbA) && kbs.some((k: Json) => k.id === kbB))
  })

  it('get_document returns the record, or {status: "not_found"}; get_document_status the same record, or the older service\'s not_found shape', async () => {
    const rest = await (await svc.request(`/api/kb/${kbA}/docs/${docA.doc_id}/status`)).json() as Json
    for (const name of ['get_document', 'get_document_status']) {
      const notFound = name === 'get_document' ? { status: 'not_found' } : { status: 'not_found', updated_at: null, file_size: null, content_version: null }
      const doc = structured(await call(client, name, { kb_id: kbA, doc_id: docA.doc_id }))
      assert.deepEqual(doc, rest)
      assert.equal(doc.status, 'indexed')
      assert.equal(doc.source, 'leave-policy.md')
      assert.ok(!('content_type' in doc), 'internal fields stay internal')
      assert.deepEqual(structured(await call(client, name, { kb_id: kbA, doc_id: '0000000000000000' })), notFound)
      assert.deepEqual(structured(await call(client, name, { kb_id: 'no-such-kb', doc_id: docA.doc_id })), notFound)
      assert.deepEqual(structured(await call(client, name, { kb_id: kbB, doc_id: docA.doc_id })), notFound, 'a document is found only in its own knowledge base')
      // Ids no document can have never reach the database (which refuses a NUL in text): not found, not an error.
      for (const args of [{ kb_id: kbA, doc_id: `${docA.doc_id.slice(0, 15)}\u0000` }, { kb_id: `${kbA}\u0000`, doc_id: docA.doc_id }, { kb_id: kbA, doc_id: 'x'.repeat(10_000) }]) {
        assert.deepEqual(structured(await call(client, name, args)), notFound, JSON.stringify(args).slice(0, 60))
      }
    }
  })

  it('bad input is a tool error, and the session goes on', async () => {
    const bad: [Json, RegExp][] = [
      [{ query: 'leave', top_k: 0 }, /top_k/],
      [{ query: 'leave', top_k: 101 }, /top_k/],
      [{ query: '' }, /query/],
      [{ query: '   ', kb_ids: [kbA] }, /query must not be blank/],
      [{ query: 'leave', kb_ids: [] }, /kb_ids must contain at least one entry/],
      [{ query: 'leave', mode: 'fuzzy' }, /mode/],
      [{ query: 'leave', min_score: 1.5 }, /min_score/],
      [{ top_k: 3 }, /query/],
    ]
    for (const [args, message] of bad) {
      const res = await call(client, 'search', args)
      assert.equal(res.isError, true, JSON.stringify(args))
      assert.match(res.content[0].text, message)
    }
    const res = await call(client, 'get_document', { kb_id: kbA })
    assert.equal(res.isError, true)
    assert.match(res.content[0].text, /doc_id/)
    assert.ok(structured(await call(client, 'search', { query: 'leave policy', kb_ids: [kbA] })).results.length > 0, 'still answering')
  })

  it('speaks the transport rules: 405 for GET and DELETE, JSON-RPC errors for bad messages, 406, 413', async () => {
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(`${svc.url}/mcp`, { method, headers: { accept: ACCEPT } })
      assert.equal(res.status, 405)
      assert.equal(res.headers.get('allow'), 'POST')
      assert.equal((await res.json() as Json).jsonrpc, '2.0')
    }
    const post = (body: string, headers: Record<string, string> = {}) =>
      fetch(`${svc.url}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json', accept: ACCEPT, ...headers }, body })
    let res = await post('{"jsonrpc":')
    assert.equal(res.status, 400)
    assert.equal((await res.json() as Json).error.code, -32700)
    res = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), { accept: 'text/html' })
    assert.equal(res.status, 406)
    await res.arrayBuffer()
    res = await post(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }))
    assert.equal(res.status, 202)
    res = await post(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'list_knowledge_bases', arguments: {} } }), { accept: 'application/json' })
    assert.equal(res.status, 200)
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/)
    const answer = await res.json() as Json
    assert.equal(answer.id, 7)
    assert.ok(Array.isArray(answer.result.structuredContent.knowledge_bases), 'JSON only: a call needs no initialize first')
    // SSE and sessions: test/plugins/mcp-session.test.ts.
    const limit = svc.app.settings.server.json_body_limit_kb * 1024
    res = await post(JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'search', arguments: { query: 'x'.repeat(limit) } } }))
    assert.equal(res.status, 413)
    await res.arrayBuffer().catch(() => null)
  })
})

describe('mcp endpoint switched off', () => {
  it('mcp.enabled false: /mcp is 404; transport stdio: /mcp is not served either', async (t) => {
    for (const mcp of [{ enabled: false }, { enabled: true, transport: 'stdio' }]) {
      const svc = await startApp(t, { settings: { mcp }, listen: false })
      const res = await svc.app.inject({ method: 'POST', url: '/mcp', headers: { accept: ACCEPT }, body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } })
      assert.equal(res.status, 404, JSON.stringify(mcp))
      assert.ok(!svc.app.routes.some((r) => r.path === '/mcp'))
    }
  })
})

describe('mcp with transport sse', () => {
  it('serves the deprecated HTTP+SSE transport at /mcp/sse beside Streamable HTTP at /mcp', async (t) => {
    const svc = await startApp(t, { settings: { mcp: { transport: 'sse' } } })
    const kb = await newKb(svc)
    const legacy = new Client({ name: 'quarry-test-sse', version: '0.0.0' })
    await legacy.connect(new SSEClientTransport(new URL(`${svc.url}/mcp/sse`)))
    t.after(() => legacy.close())
    const { tools } = await legacy.listTools()
    assert.equal(tools.length, 4)
    const listed = structured(await call(legacy, 'list_knowledge_bases'))
    assert.ok(listed.knowledge_bases.some((k: Json) => k.id === kb))
    const bad = await call(legacy, 'search', { query: 'x', top_k: 0 })
    assert.equal(bad.isError, true)
    assert.deepEqual(structured(await call(legacy, 'get_document', { kb_id: kb, doc_id: 'nope' })), { status: 'not_found' })

    const current = await connect(svc)
    t.after(() => current.close())
    assert.deepEqual(structured(await call(current, 'list_knowledge_bases')), listed)

    const post = (session: string, body: unknown) => svc.request(`/mcp/messages?session_id=${session}`, { method: 'POST', json: body })
    let res = await post('no-such-session', { jsonrpc: '2.0', id: 1, method: 'tools/list' })
    assert.equal(res.status, 404)
    assert.match((await res.json() as Json).detail, /^MCP session 'no-such-session' not found/)
    res = await post('s'.repeat(5000), { jsonrpc: '2.0', id: 1, method: 'tools/list' })
    assert.equal(res.status, 404)
    const { detail } = await res.json() as Json
    assert.ok(detail.startsWith(`MCP session '${'s'.repeat(200)}…[5000 chars]' not found`), 'the echoed id is clipped')
    // a session of our own, read by hand: the endpoint event, then the answer to a POSTed request
    const ac = new AbortController()
    const stream = await fetch(`${svc.url}/mcp/sse`, { headers: { accept: 'text/event-stream' }, signal: ac.signal })
    assert.equal(stream.status, 200)
    assert.match(stream.headers.get('content-type') ?? '', /^text\/event-stream/)
    const reader = stream.body!.getReader()
    let buffered = ''
    const nextEvent = async () => {
      for (;;) {
        const end = buffered.indexOf('\n\n')
        if (end >= 0) {
          const frame = buffered.slice(0, end)
          buffered = buffered.slice(end + 2)
          if (!frame.startsWith(':')) return frame
          continue
        }
        const { value, done } = await reader.read()
        if (done) throw new Error('stream ended')
        buffered += Buffer.from(value).toString()
      }
    }
    const endpoint = /^event: endpoint\ndata: (.+)$/.exec(await nextEvent())
    assert.ok(endpoint, 'the first event names the messages URL')
    const session = new URL(endpoint[1], svc.url).searchParams.get('session_id')!
    res = await post(session, { jsonrpc: '2.0', id: 42, method: 'tools/call', params: { name: 'get_document', arguments: { kb_id: kb, doc_id: 'nope' } } })
    assert.equal(res.status, 202)
    await res.arrayBuffer()
    const answer = /^event: message\ndata: (.+)$/.exec(await nextEvent())
    assert.ok(answer)
    const msg = JSON.parse(answer[1])
    assert.equal(msg.id, 42)
    assert.deepEqual(msg.result.structuredContent, { status: 'not_found' })
    res = await post(session, { not: 'json-rpc' })
    assert.equal(res.status, 400)
    await res.arrayBuffer()
    ac.abort()
    await reader.cancel().catch(() => {})
    await waitFor(async () => {
      const gone = await post(session, { jsonrpc: '2.0', method: 'notifications/initialized' })
      await gone.arrayBuffer()
      return gone.status === 404
    }, 'the session to end when its stream is closed by the client')
  })
})

describe('mcp bridge: Fetch Response to kernel reply', () => {
  it('streams an SSE body and sends other bodies as bytes, calling done once the body is consumed', async () => {
    let done = 0
    const events = 'event: message\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n'
    const sse = await toReply(new Response(events, { headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' } }), () => done++)
    assert.ok(sse instanceof Reply)
    assert.equal(sse.kind, 'stream')
    assert.equal(sse.headers['content-type'], 'text/event-stream')
    assert.ok(!('connection' in sse.headers), 'hop-by-hop headers are left to uWS')
    assert.equal(done, 0, 'not done before the stream is read')
    const parts: Buffer[] = []
    for await (const p of sse.body as Readable) parts.push(Buffer.from(p as Buffer))
    assert.equal(Buffer.concat(parts).toString(), events)
    await new Promise((r) => setImmediate(r))
    assert.equal(done, 1)

    const json = await toReply(new Response('{"a":1}', { status: 200, headers: { 'content-type': 'application/json' } }), () => done++)
    assert.equal(json.kind, 'raw')
    assert.equal(Buffer.from(json.body as Uint8Array).toString(), '{"a":1}')
    assert.equal(done, 2)
    const accepted = await toReply(new Response(null, { status: 202 }), () => done++)
    assert.deepEqual([accepted.status, (accepted.body as Uint8Array).length, done], [202, 0, 3])
  })
})

describe('mcp over stdio', () => {
  it('`kernel/main.ts mcp` speaks MCP on stdin/stdout, logs on stderr, and exits when the client closes', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'quarry-mcp-stdio-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    await seedPglite(join(dir, 'data'))
    const kbId = uniqueId('stdio')
    const config = join(dir, 'settings.yaml')
    writeFileSync(config, stringify({
      data_dir: join(dir, 'data'),
      embedding: { vector_size: 64 },
      logging: { level: 'INFO' },
      knowledge_bases: [{ id: kbId, name: 'Stdio KB', description: 'made at start', tags: ['stdio'] }],
    }))
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: ['--import', 'tsx', 'kernel/main.ts', 'mcp', '--config', config],
      cwd: ROOT,
      env: getDefaultEnvironment(),
      stderr: 'pipe',
    })
    let stderr = ''
    transport.stderr?.on('data', (d: Buffer) => (stderr += d.toString()))
    const errors: Error[] = []
    const client = new Client({ name: 'quarry-test', version: '0.0.0' })
    client.onerror = (err) => errors.push(err)
    await client.connect(transport)
    const pid = transport.pid!
    try {
      const res = await call(client, 'list_knowledge_bases')
      const { knowledge_bases: kbs } = structured(res)
      assert.deepEqual(kbs, [{ id: kbId, name: 'Stdio KB', description: 'made at start', tags: ['stdio'] }])
      const { tools } = await client.listTools()
      assert.equal(tools.length, 4)
      const search = structured(await call(client, 'search', { query: 'anything' }))
      assert.deepEqual(search.results, [], 'an empty knowledge base answers no passage')
    } finally {
      await client.close()
    }
    assert.deepEqual(errors, [], 'nothing but protocol messages on stdout')
    assert.match(stderr, /"msg":"MCP server on stdio"/, 'logs go to stderr')
    assert.match(stderr, /"msg":"closed"/, 'the service shut down cleanly when stdin closed')
    assert.throws(() => process.kill(pid, 0), 'the process has exited')
  })
})
