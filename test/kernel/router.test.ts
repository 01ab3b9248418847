import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { Router } from '../../kernel/router.ts'

describe('router', () => {
  const r = new Router<string>()
  r.add('GET', '/api/kb', 'list')
  r.add('POST', '/api/kb', 'create')
  r.add('GET', '/api/kb/:kb_id', 'get')
  r.add('GET', '/api/kb/:kb_id/docs/status', 'kb-status')
  r.add('GET', '/api/kb/:kb_id/docs/:doc_id/status', 'doc-status')
  r.add('GET', '/api/kb/:kb_id/settings/schema', 'schema')
  r.add('GET', '/static/*', 'static')
  r.add('GET', '/', 'root')

  it('matches static paths and methods', () => {
    assert.deepEqual(r.find('GET', '/api/kb'), { kind: 'found', value: 'list', params: {} })
    assert.deepEqual(r.find('POST', '/api/kb'), { kind: 'found', value: 'create', params: {} })
    assert.deepEqual(r.find('GET', '/'), { kind: 'found', value: 'root', params: {} })
  })

  it('extracts and decodes parameters', () => {
    assert.deepEqual(r.find('GET', '/api/kb/my-kb'), { kind: 'found', value: 'get', params: { kb_id: 'my-kb' } })
    assert.deepEqual(r.find('GET', '/api/kb/a%20b/docs/d1/status'), { kind: 'found', value: 'doc-status', params: { kb_id: 'a b', doc_id: 'd1' } })
  })

  it('prefers static segments and backtracks to parameters', () => {
    assert.equal((r.find('GET', '/api/kb/k/docs/status') as { value: string }).value, 'kb-status')
    // 'status' as a doc_id under a static 'docs' branch that dead-ends
    assert.deepEqual(r.find('GET', '/api/kb/k/docs/status/status'), { kind: 'found', value: 'doc-status', params: { kb_id: 'k', doc_id: 'status' } })
  })

  it('answers method_not_allowed with the allowed methods', () => {
    const found = r.find('DELETE', '/api/kb')
    assert.equal(found.kind, 'method_not_allowed')
    assert.deepEqual((found as { allowed: string[] }).allowed.sort(), ['GET', 'POST'])
  })

  it('answers not_found for unknown paths, empty segments and trailing slashes', () => {
    assert.equal(r.find('GET', '/nope').kind, 'not_found')
    assert.equal(r.find('GET', '/api/kb//docs/status').kind, 'not_found')
    assert.equal(r.find('GET', '/api/kb/x/').kind, 'not_found')
  })

  it('matches wildcards last', () => {
    assert.deepEqual(r.find('GET', '/static/a/b.css'), { kind: 'found', value: 'static', params: { '*': 'a/b.css' } })
  })

  it('serves HEAD from GET routes', () => {
    assert.equal(r.find('HEAD', '/api/kb').kind, 'found')
  })

  it('flags malformed percent-encoding', () => {
    assert.equal(r.find('GET', '/api/kb/%E0%A4%A').kind, 'bad_path')
  })

  it('refuses duplicate routes and conflicting parameter names', () => {
    assert.throws(() => r.add('GET', '/api/kb', 'again'), /duplicate route/)
    assert.throws(() => r.add('GET', '/api/kb/:other/x', 'x'), /conflicting parameter names/)
  })
})
