// MCP tools under the access-controlled edition (spec 4.11: the same access and bypass rules as the REST API),
// through the official SDK client with a bearer token, and the legacy HTTP+SSE sessions bound to their user.
// Run on both driver sets by mcp.test.ts.
import assert from 'node:assert/strict'
import { it } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { startAuthzFixture, type AuthzFixture } from '../../helpers/authz-fixture.ts'
import type { StartOptions } from '../../helpers/app.ts'
import { waitFor } from '../../helpers/wait.ts'

type Json = any
type Result = { isError?: boolean; structuredContent?: Json; content: { type: string; text: string }[] }

async function mcpAs(f: AuthzFixture, t: { after(fn: () => unknown): void }, userId: string, superAdmin = false): Promise<(name: string, args?: Json) => Promise<Result>> {
  const client = new Client({ name: 'quarry-authz-test', version: '0.0.0' })
  const headers = { authorization: `Bearer ${await f.token(userId, { superAdmin })}` }
  await client.connect(new StreamableHTTPClientTransport(new URL(`${f.svc.url}/mcp`), { requestInit: { headers } }))
  t.after(() => client.close())
  return (name, args = {}) => client.callTool({ name, arguments: args }) as Promise<Result>
}

const ok = (r: Result): Json => {
  assert.ok(!r.isError, `tool error: ${r.content[0]?.text}`)
  return r.structuredContent
}

export function mcpAuthzSuite(label: string, base: StartOptions): void {
  it(`${label}: search, list_knowledge_bases and get_document apply the caller's roles; sessions belong to their user`, async (t) => {
    const f = await startAuthzFixture(t, { ...base, settings: { queue_worker: { enabled: true }, mcp: { transport: 'sse' } } })
    const mine = await f.createKb()
    const theirs = await f.createKb({ members: false })
    const pub = await f.createKb({ visibility: 'public', members: false })
    const text = 'Quarry travel policy: economy class for flights under six hours, reimbursed within thirty days.'
    const docs: Record<string, string> = {}
    for (const kb of [mine, theirs, pub]) docs[kb] = await f.uploadDoc(kb, 'travel.txt', text)
    for (const kb of [mine, theirs, pub]) {
      await waitFor(async () => (await (await f.as('owner', `/api/kb/${kb}/docs/${docs[kb]}/status`)).json() as Json).status === 'indexed', `${kb} indexed`)
    }
    const kbsOf = (out: Json) => [...new Set(out.results.map((r: Json) => r.kb_id))].sort()

    const viewer = await mcpAs(f, t, 'u-viewer')
    assert.deepEqual(ok(await viewer('list_knowledge_bases')).knowledge_bases.map((k: Json) => k.id).sort(), [mine, pub].sort())
    assert.deepEqual(kbsOf(ok(await viewer('search', { query: 'flight reimbursement policy' }))), [mine, pub].sort(), 'no kb_ids: the readable KBs')
    assert.deepEqual(kbsOf(ok(await viewer('search', { query: 'flight reimbursement policy', kb_ids: [mine, theirs] }))), [mine])
    assert.deepEqual(ok(await viewer('search', { query: 'flight reimbursement policy', kb_ids: [theirs] })), { results: [], latency_ms: 0 })
    assert.equal(ok(await viewer('get_document', { kb_id: mine, doc_id: docs[mine] })).doc_id, docs[mine])
    assert.equal(ok(await viewer('get_document', { kb_id: pub, doc_id: docs[pub] })).doc_id, docs[pub])
    const refused = await viewer('get_document', { kb_id: theirs, doc_id: docs[theirs] })
    assert.equal(refused.isError, true)
    assert.equal(refused.content[0].text, `403 Forbidden: No access to KB: ${theirs}`)
    assert.deepEqual(ok(await viewer('get_document', { kb_id: 'no-such-kb', doc_id: docs[mine] })), { status: 'not_found' })
    assert.deepEqual(ok(await viewer('get_document', { kb_id: mine, doc_id: '0123456789abcdef' })), { status: 'not_found' })

    const su = await mcpAs(f, t, 'u-super', true)
    assert.deepEqual(kbsOf(ok(await su('search', { query: 'flight reimbursement policy', kb_ids: [theirs] }))), [theirs])
    assert.equal(ok(await su('get_document', { kb_id: theirs, doc_id: docs[theirs] })).doc_id, docs[theirs])

    // A role granted now is effective in the next tool call.
    await f.addMember(theirs, 'u-viewer', 'viewer')
    assert.equal(ok(await viewer('get_document', { kb_id: theirs, doc_id: docs[theirs] })).doc_id, docs[theirs])
    // Off: every KB for every valid token.
    await f.setAuthzEnabled(false)
    const outsider = await mcpAs(f, t, 'u-outsider')
    assert.deepEqual(ok(await outsider('list_knowledge_bases')).knowledge_bases.map((k: Json) => k.id).sort(), [mine, theirs, pub].sort())
    await f.setAuthzEnabled(true)

    // Legacy HTTP+SSE: the session belongs to who opened it.
    const stream = await f.asUser('u-viewer', '/mcp/sse')
    assert.equal(stream.status, 200)
    const reader = stream.body!.getReader()
    let buffered = ''
    while (!buffered.includes('\n\n')) buffered += new TextDecoder().decode((await reader.read()).value)
    const endpoint = /data: (\S+)/.exec(buffered)![1]
    const ping = { jsonrpc: '2.0', id: 1, method: 'ping' }
    assert.equal((await f.asUser('u-outsider', endpoint, { method: 'POST', json: ping })).status, 404, 'another user')
    assert.equal((await f.as('super_admin', endpoint, { method: 'POST', json: ping })).status, 404, 'a super-admin is another user too')
    assert.equal((await f.svc.request(endpoint, { method: 'POST', json: ping })).status, 401, 'no token')
    assert.equal((await f.asUser('u-viewer', endpoint, { method: 'POST', json: ping })).status, 202, 'its user')
    // The same user whose new token makes them a super-admin: the session's tools would still run as the
    // opener, so the message is refused (and the other way round a demoted user keeps no super-admin session).
    const promoted = await f.asUser('u-viewer', endpoint, { method: 'POST', json: ping }, { superAdmin: true })
    assert.equal(promoted.status, 403)
    assert.match(((await promoted.json()) as Json).detail, /^MCP session '[0-9a-f-]+' was opened with other groups or super-admin status than this token's: open a new one with GET \/mcp\/sse$/)
    const suStream = await f.as('super_admin', '/mcp/sse')
    const suReader = suStream.body!.getReader()
    let suBuffered = ''
    while (!suBuffered.includes('\n\n')) suBuffered += new TextDecoder().decode((await suReader.read()).value)
    const suEndpoint = /data: (\S+)/.exec(suBuffered)![1]
    assert.equal((await f.asUser('u-super', suEndpoint, { method: 'POST', json: ping }, { superAdmin: false })).status, 403, 'demoted')
    assert.equal((await f.as('super_admin', suEndpoint, { method: 'POST', json: ping })).status, 202)
    await suReader.cancel()
    await reader.cancel()
  })
}
