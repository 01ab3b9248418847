import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { checkKey } from '../../adapters/objects/keys.ts'
import { documentKey, documentKeyName } from '../../plugins/docs/storage-key.ts'

const DOC = '0123456789abcdef'

describe('stored originals: object keys', () => {
  it('puts a document beside the others of its KB, without a folder of its own', () => {
    assert.equal(documentKey('kb1', DOC, 'handbook.md'), `kb1/${DOC}-handbook.md`)
  })

  it('keeps the folder form for a name too long to share a path segment with the doc_id', () => {
    // 240 bytes is the longest segment a key may have: 16 + 1 + 223 fits, 16 + 1 + 224 (with two-byte
    // characters) does not.
    const fits = `${'a'.repeat(220)}.md`
    assert.equal(documentKey('kb1', DOC, fits), `kb1/${DOC}-${fits}`)
    const long = `${'é'.repeat(110)}a.md`
    assert.equal(Buffer.byteLength(`${DOC}-${long}`), 241)
    assert.equal(documentKey('kb1', DOC, long), `kb1/${DOC}/${long}`)
    for (const name of [fits, long, `${'가'.repeat(78)}.md`]) checkKey(documentKey('kb1', DOC, name))
  })

  it('reads the name back from either form, and from a key of another shape its last segment', () => {
    assert.equal(documentKeyName(`kb1/${DOC}-handbook.md`, 'kb1', DOC), 'handbook.md')
    assert.equal(documentKeyName(`kb1/${DOC}/handbook.md`, 'kb1', DOC), 'handbook.md')
    assert.equal(documentKeyName(`kb1/${DOC}-a-b.md`, 'kb1', DOC), 'a-b.md')
    assert.equal(documentKeyName('elsewhere/x/report.pdf', 'kb1', DOC), 'report.pdf')
    assert.equal(documentKeyName(`kb1/${DOC}/`, 'kb1', DOC), '')
  })
})
