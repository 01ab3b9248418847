// The in-process search cache (adapters/cache/memory.ts): a lookup reuses the entry key it made for a key while the
// KBs' versions hold, so every write to any of the KBs must still miss at once.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { createMemorySearchCache } from '../../adapters/cache/memory.ts'

const cache = () => createMemorySearchCache({ ttlMs: 60_000, maxEntries: 4, maxBytes: 1 << 20 })

describe('memory search cache', () => {
  it('hits while the versions hold and misses at once after a write to any KB of the key', async () => {
    const c = cache()
    await c.init(['a', 'b'])
    const first = await c.lookup('q1', ['a', 'b'])
    assert.deepEqual(first, { versions: ['1', '1'], value: null })
    await c.store('q1', ['a', 'b'], first.versions!, 'answer-1')
    // Twice: the second lookup takes the remembered entry key.
    assert.equal((await c.lookup('q1', ['a', 'b'])).value, 'answer-1')
    assert.equal((await c.lookup('q1', ['a', 'b'])).value, 'answer-1')
    await c.bump('b')
    const after = await c.lookup('q1', ['a', 'b'])
    assert.deepEqual(after, { versions: ['1', '2'], value: null })
    await c.store('q1', ['a', 'b'], after.versions!, 'answer-2')
    assert.equal((await c.lookup('q1', ['a', 'b'])).value, 'answer-2')
    // A write elsewhere changes nothing for this key.
    await c.bump('z')
    assert.equal((await c.lookup('q1', ['a', 'b'])).value, 'answer-2')
    await c.bump('a')
    assert.deepEqual(await c.lookup('q1', ['a', 'b']), { versions: ['2', '2'], value: null })
  })

  it('hands each caller its own versions array, and a KB with no version is a miss without versions', async () => {
    const c = cache()
    await c.init(['a'])
    const one = await c.lookup('q', ['a'])
    one.versions!.push('changed')
    assert.deepEqual((await c.lookup('q', ['a'])).versions, ['1'])
    assert.deepEqual(await c.lookup('q', ['a', 'unknown']), { versions: null, value: null })
  })

  it('keeps answering right after many keys empty the remembered keys', async () => {
    const c = cache()
    await c.init(['a'])
    for (let i = 0; i < 20; i++) {
      const r = await c.lookup(`q${i}`, ['a'])
      await c.store(`q${i}`, ['a'], r.versions!, `v${i}`)
    }
    assert.equal((await c.lookup('q19', ['a'])).value, 'v19')
    await c.bump('a')
    assert.equal((await c.lookup('q19', ['a'])).value, null)
  })
})
