// Issue 15, security suite: every forged or broken bearer token (test/helpers/jwt-attacks.ts) against every
// operation the API description marks as protected, /mcp included, on a real service with a real OpenID
// provider and a second one whose tokens must not pass, on both driver sets. Each answer is 401 with the
// token's reason and a Bearer challenge naming invalid_token; nothing is created; open operations ignore the
// token. (test/plugins/authz/authn.test.ts checks the same tokens on one route, with the claim mapping.)
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { startAuthzFixture } from '../helpers/authz-fixture.ts'
import { jwtAttacks } from '../helpers/jwt-attacks.ts'
import { startOidc } from '../helpers/oidc.ts'
import { skipUnless } from '../helpers/services.ts'
import type { StartOptions } from '../helpers/app.ts'
import { operationsFrom, type FuzzOperation } from './fuzz-engine.ts'

type Json = any

/**
 * Well-formed made-up path values: an id that cannot exist (`x1` as a doc_id) is answered 404 by the router
 * before any hook runs, which says nothing about any object, but is not the 401 checked here.
 */
const PATH_VALUES: Record<string, string> = { doc_id: '0123456789abcdef', connector_id: '00000000-0000-4000-8000-000000000000', invite_id: '00000000-0000-4000-8000-000000000001' }

/** A request for an operation on the KB `kb` (the token is refused before anything is read) with a JSON body. */
function requestOf(op: FuzzOperation, kb: string, authorization: string | null): [string, RequestInit] {
  const path = op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => (name === 'kb_id' ? kb : PATH_VALUES[name] ?? 'u-x1'))
  const headers: Record<string, string> = { accept: 'application/json, text/event-stream' }
  if (authorization !== null) headers.authorization = authorization
  const init: RequestInit = { method: op.method, headers }
  if (op.method !== 'GET' && op.method !== 'DELETE') {
    headers['content-type'] = 'application/json'
    init.body = JSON.stringify(op.path === '/mcp' ? { jsonrpc: '2.0', id: 1, method: 'tools/list' } : {})
  }
  return [path, init]
}

function jwtSuite(label: string, opts: StartOptions): void {
  it(`${label}: every bad token on every protected operation answers 401 invalid_token with its reason; open operations ignore it`, async (t) => {
    const fx = await startAuthzFixture(t, opts)
    const other = await startOidc({ clients: [{ client_id: 'elsewhere', client_secret: 'elsewhere-secret' }] })
    t.after(() => other.close())
    const kb = await fx.createKb()
    await fx.uploadDoc(kb)
    const attacks = await jwtAttacks(fx.oidc, await fx.token('u-owner'), await other.clientToken('elsewhere'))

    const doc = (await (await fx.svc.request('/openapi.json')).json()) as Json
    const operations = operationsFrom(doc)
    const secured = (op: FuzzOperation) => (doc.paths[op.path][op.method.toLowerCase()].security ?? []).length > 0
    const protectedOps = operations.filter(secured)
    const openOps = operations.filter((op) => !secured(op))
    assert.ok(protectedOps.length >= 30, `${protectedOps.length} protected operations`)
    assert.ok(protectedOps.some((op) => op.path === '/mcp'), '/mcp is among them')
    const counts = async () => {
      const kbs = (await (await fx.as('super_admin', '/api/kb')).json()) as Json
      const docs = (await (await fx.as('super_admin', '/api/docs/status')).json()) as Json
      assert.ok(Array.isArray(kbs.knowledge_bases), JSON.stringify(kbs).slice(0, 200))
      return { kbs: kbs.knowledge_bases.map((k: Json) => k.kb_id).sort(), docs }
    }
    const before = await counts()

    const findings: string[] = []
    for (const op of protectedOps) {
      await Promise.all(attacks.map(async (a) => {
        const [path, init] = requestOf(op, kb, `Bearer ${a.token}`)
        const res = await fx.svc.request(path, init)
        const body = await res.text()
        const challenge = res.headers.get('www-authenticate') ?? ''
        const expected = `Bearer realm="quarry", error="invalid_token", error_description="${a.detail}"`
        if (res.status !== 401 || body !== JSON.stringify({ detail: a.detail }) || challenge !== expected) {
          findings.push(`${a.name} on ${op.id}: ${res.status} ${body.slice(0, 200)} [${challenge}]`)
        }
      }))
      // No credentials at all: the plain challenge of RFC 6750 3.1, no error code.
      const [path, init] = requestOf(op, kb, null)
      const res = await fx.svc.request(path, init)
      const body = await res.text()
      if (res.status !== 401 || body !== '{"detail":"Not authenticated"}' || res.headers.get('www-authenticate') !== 'Bearer realm="quarry"') {
        findings.push(`no token on ${op.id}: ${res.status} ${body.slice(0, 200)}`)
      }
    }
    assert.deepEqual(findings.slice(0, 30), [], `${findings.length} of ${protectedOps.length * (attacks.length + 1)} requests were not refused as they should be`)
    t.diagnostic(`${protectedOps.length} protected operations x ${attacks.length + 1} bad credentials refused`)

    for (const op of openOps) {
      const [path, init] = requestOf(op, kb, `Bearer ${attacks[0].token}`)
      const res = await fx.svc.request(path, init)
      await res.arrayBuffer()
      assert.ok(res.status !== 401 && res.status < 500, `${op.id} with a forged token: ${res.status}`)
    }
    assert.deepEqual(await counts(), before, 'nothing was created or removed')
    // The real token still works: the attacks did not poison the key cache.
    assert.equal((await fx.as('owner', `/api/kb/${kb}`)).status, 200)
  })
}

describe('JWT attacks on the embedded default', () => jwtSuite('embedded', {}))

describe('JWT attacks on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  jwtSuite('services', { services: true }))
