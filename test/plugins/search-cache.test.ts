import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { createServer, type AddressInfo } from 'node:net'
import { createMemorySearchCache } from '../../adapters/cache/memory.ts'
import type { SearchCache } from '../../adapters/ports.ts'
import { createLogger } from '../../kernel/log.ts'
import { cacheKey, createCachedSearch, createHitBytes, finish } from '../../plugins/search/cache.ts'
import type { SearchPlan, SearchService } from '../../plugins/search/service.ts'
import { startApp } from '../helpers/app.ts'
import { serviceUrl, skipUnless } from '../helpers/services.ts'
import { md, newKb, prose, settle, upload } from './docs.suite.ts'
import { comparable, searchCacheSuite, searchRaw } from './search-cache.suite.ts'

type Json = any

/** The port's contract, for both drivers. */
function cacheContract(make: () => Promise<SearchCache & { raw?: { del(key: string): Promise<unknown> } }>): void {
  it('no version, no caching; store and lookup at versions; a bump misses; clear counts', async (t) => {
    const c = await make()
    t.after(() => c.close())
    assert.deepEqual(await c.lookup('k', ['a']), { versions: null, value: null }, 'a KB never written: not cacheable')
    await c.init(['a', 'b'])
    const { versions } = await c.lookup('k', ['a', 'b'])
    assert.equal(versions!.length, 2)
    await c.store('k', ['a', 'b'], versions!, 'answer-ab')
    assert.deepEqual(await c.lookup('k', ['a', 'b']), { versions, value: 'answer-ab' })
    await c.store('k', ['b'], [versions![1]], 'answer-b')
    await c.bump('a')
    const after = await c.lookup('k', ['a', 'b'])
    assert.equal(after.value, null)
    assert.notEqual(after.versions![0], versions![0])
    assert.equal(after.versions![1], versions![1])
    await c.init(['a'])
    assert.deepEqual((await c.lookup('k', ['a', 'b'])).versions, after.versions, 'init never moves an existing version')
    assert.equal((await c.lookup('k', ['b'])).value, 'answer-b')
    assert.equal(await c.clear('b'), 2)
    assert.equal((await c.lookup('k', ['b'])).value, null)
    await c.store('k', ['b'], [versions![1]], 'again')
    assert.equal(await c.clear(), 1)
    assert.equal(await c.clear(), 0)
  })

  it('lookupNow, where a driver has it, answers what lookup answers', async (t) => {
    const c = await make()
    t.after(() => c.close())
    if (c.lookupNow === undefined) {
      assert.equal(c.name, 'redis', 'only a cache behind a network answers later')
      return
    }
    assert.deepEqual(c.lookupNow('k', ['a']), { versions: null, value: null })
    await c.init(['a', 'b'])
    const { versions } = c.lookupNow('k', ['a', 'b'])
    assert.deepEqual(versions, (await c.lookup('k', ['a', 'b'])).versions)
    await c.store('k', ['a', 'b'], versions!, 'answer')
    assert.deepEqual(c.lookupNow('k', ['a', 'b']), { versions, value: 'answer' })
    await c.bump('b')
    const after = c.lookupNow('k', ['a', 'b'])
    assert.equal(after.value, null)
    assert.deepEqual(after, await c.lookup('k', ['a', 'b']))
  })

  it('a bump of a KB without a version gives it one, never an earlier one', async (t) => {
    const c = await make()
    t.after(() => c.close())
    await c.bump('z')
    const v1 = (await c.lookup('k', ['z'])).versions!
    await c.store('k', ['z'], v1, 'x')
    await c.bump('z')
    assert.equal((await c.lookup('k', ['z'])).value, null)
  })
}

describe('search cache keys and kept hit bytes', () => {
  const plan = (over: Partial<SearchPlan> = {}, opts: Partial<SearchPlan['opts']> = {}): SearchPlan => ({
    query: 'alpha beta', kbIds: ['a', 'b'],
    opts: { mode: 'hybrid', top_k: 10, alpha: 0.02, min_score: 0, rerank: false, rerank_top_n: 20, ...opts },
    merges: new Map([['a', { enabled: true, threshold: 0.3 }], ['b', { enabled: false, threshold: 0.3 }]]),
    filter: undefined, ...over,
  })

  it('two plans share a key only when every field is the same, texts that would join alike included', () => {
    const variants: [string, SearchPlan, string?][] = [
      ['base', plan()],
      ['query', plan({ query: 'alpha beta ' })],
      ['query joined into the next field', plan({ query: 'alpha beta|6:hybrid' })],
      ['kb order', plan({ kbIds: ['b', 'a'] })],
      ['one kb', plan({ kbIds: ['a'] })],
      ['mode', plan({}, { mode: 'similarity' })],
      ['top_k', plan({}, { top_k: 11 })],
      ['alpha', plan({}, { alpha: 0.2 })],
      ['min_score', plan({}, { min_score: 0.1 })],
      ['rerank', plan({}, { rerank: true })],
      ['rerank_top_n', plan({}, { rerank_top_n: 21 })],
      ['merge enabled', plan({ merges: new Map([['a', { enabled: false, threshold: 0.3 }], ['b', { enabled: false, threshold: 0.3 }]]) })],
      ['merge threshold', plan({ merges: new Map([['a', { enabled: true, threshold: 0.31 }], ['b', { enabled: false, threshold: 0.3 }]]) })],
      ['filter', plan({ filter: { doc_type: ['md'] } as never })],
      ['another filter', plan({ filter: { doc_type: ['pdf'] } as never })],
    ]
    const keys = variants.map(([, p, fp]) => cacheKey(fp ?? 'fp', p))
    assert.equal(new Set(keys).size, variants.length, JSON.stringify(variants.map(([name], i) => [name, keys[i]])))
    assert.equal(cacheKey('fp', plan()), keys[0], 'the same plan, built again, has the same key')
    assert.notEqual(cacheKey('fp2', plan()), keys[0], 'another settings fingerprint, another key')
    assert.match(keys[0], /^[A-Za-z0-9_-]{43}$/, 'a SHA-256, base64url')
  })

  it('kept hit bytes are the hit answer encoded, the same object while the cached text is the same, and bounded', () => {
    const kept = createHitBytes(16 * 1024)
    const head = '{"results":[{"text":"caf\u00e9 ☕"}],"meta":{'
    const first = kept.get('k1', head)
    assert.equal(new TextDecoder().decode(first), finish(head, 'hit', 0))
    assert.equal(kept.get('k1', head), first, 'the same bytes while the cache hands out the same text')
    const changed = '{"results":[],"meta":{'
    const second = kept.get('k1', changed)
    assert.notEqual(second, first)
    assert.equal(new TextDecoder().decode(second), finish(changed, 'hit', 0), 'new text (the KB was written): new bytes')
    // 16 KB in all, one answer at most a sixteenth of it: the oldest go first, an answer too large is not kept.
    const big = `{"results":[${'"x",'.repeat(100)}"x"],"meta":{`
    for (let i = 0; i < 64; i++) kept.get(`n${i}`, big)
    assert.ok(kept.size < 64 && kept.size > 0, `bounded: ${kept.size}`)
    const huge = `{"results":["${'y'.repeat(2000)}"],"meta":{`
    const before = kept.size
    assert.equal(new TextDecoder().decode(kept.get('huge', huge)), finish(huge, 'hit', 0))
    assert.equal(kept.get('huge', huge) === kept.get('huge', huge), false, 'an answer over a sixteenth of the bound is not kept')
    assert.ok(kept.size <= before)
  })

  it("a stored miss's hit bytes are made in the next turn of the event loop, and kept from then on", async () => {
    const kept = createHitBytes(16 * 1024)
    const head = '{"results":[{"text":"caf\u00e9 ☕ 한국어"}],"meta":{'
    kept.stored('k1', head)
    kept.stored('k2', head)
    assert.equal(kept.size, 0, 'nothing made while the miss is being answered')
    await new Promise((r) => setImmediate(r))
    assert.equal(kept.size, 2, 'made after it, before any hit')
    const hit = kept.get('k1', head)
    assert.equal(new TextDecoder().decode(hit), finish(head, 'hit', 0))
    assert.equal(kept.get('k1', head), hit)
    // stored again with the same text: the bytes made are kept as they are
    kept.stored('k1', head)
    await new Promise((r) => setImmediate(r))
    assert.equal(kept.get('k1', head), hit)
    const changed = '{"results":[],"meta":{'
    kept.stored('k1', changed)
    await new Promise((r) => setImmediate(r))
    assert.equal(new TextDecoder().decode(kept.get('k1', changed)), finish(changed, 'hit', 0), 'another text for the key: its own bytes')
    const huge = `{"results":["${'y'.repeat(2000)}"],"meta":{`
    kept.stored('huge', huge)
    await new Promise((r) => setImmediate(r))
    assert.equal(kept.size, 2, 'too large to keep')
  })
})

describe('search cache store: in process', () => {
  cacheContract(async () => createMemorySearchCache({ ttlMs: 60_000, maxEntries: 100, maxBytes: 1 << 20 }))

  it('bounded: least recently used answers go first, by count and by bytes; expired answers are not served', async () => {
    let now = 0
    const c = createMemorySearchCache({ ttlMs: 1000, maxEntries: 3, maxBytes: 1000, now: () => now })
    await c.init(['a'])
    const v = (await c.lookup('x', ['a'])).versions!
    for (const k of ['k1', 'k2', 'k3']) await c.store(k, ['a'], v, k)
    assert.equal((await c.lookup('k1', ['a'])).value, 'k1') // k1 is now the most recent
    await c.store('k4', ['a'], v, 'k4')
    assert.equal((await c.lookup('k2', ['a'])).value, null, 'the least recently used went')
    for (const k of ['k1', 'k3', 'k4']) assert.equal((await c.lookup(k, ['a'])).value, k)
    await c.store('big', ['a'], v, 'x'.repeat(400)) // 800 bytes: only room for it and one more small one
    assert.equal((await c.lookup('big', ['a'])).value?.length, 400)
    assert.equal((await c.lookup('k1', ['a'])).value, null)
    await c.store('huge', ['a'], v, 'x'.repeat(600)) // larger than the whole bound: not kept
    assert.equal((await c.lookup('huge', ['a'])).value, null)
    now = 1001
    assert.equal((await c.lookup('big', ['a'])).value, null, 'expired')
  })
})

describe('search cache store: Redis', { skip: skipUnless('redis') }, () => {
  const make = async () => {
    const url = new URL(serviceUrl('redis')!)
    const { createRedisSearchCache } = await import('../../adapters/cache/redis.ts')
    return createRedisSearchCache({ host: url.hostname, port: Number(url.port || 6379), prefix: `qt-${randomBytes(4).toString('hex')}`, ttlMs: 60_000, maxEntries: 3 })
  }
  cacheContract(make)

  it('bounded: the oldest answers go first; a lost version key comes back larger, so old answers stay unreachable', async (t) => {
    const url = new URL(serviceUrl('redis')!)
    const prefix = `qt-${randomBytes(4).toString('hex')}`
    const { createRedisSearchCache } = await import('../../adapters/cache/redis.ts')
    const c = await createRedisSearchCache({ host: url.hostname, port: Number(url.port || 6379), prefix, ttlMs: 60_000, maxEntries: 3 })
    t.after(() => c.close())
    await c.init(['a'])
    const v = (await c.lookup('x', ['a'])).versions!
    for (const k of ['k1', 'k2', 'k3', 'k4']) await c.store(k, ['a'], v, k)
    assert.equal((await c.lookup('k1', ['a'])).value, null)
    for (const k of ['k2', 'k3', 'k4']) assert.equal((await c.lookup(k, ['a'])).value, k)
    assert.equal(await c.clear('a'), 3)

    await c.store('k1', ['a'], v, 'k1')
    const { Redis } = await import('ioredis')
    const raw = new Redis({ host: url.hostname, port: Number(url.port || 6379), lazyConnect: true })
    t.after(() => raw.disconnect())
    assert.equal(await raw.del(`${prefix}:sc:v:a`), 1)
    assert.equal((await c.lookup('k1', ['a'])).versions, null)
    await c.init(['a'])
    const back = (await c.lookup('k1', ['a']))
    assert.equal(back.value, null)
    assert.ok(BigInt(back.versions![0]) > BigInt(v[0]))
  })
})

describe('search cache on the embedded default', () => {
  searchCacheSuite('embedded', {})

  it('embedded: a hit is answered at once (no promise), a miss later; both the same text as over HTTP', async (t) => {
    const svc = await startApp(t, { settings: { queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 } } })
    const kb = await newKb(svc)
    const doc = ((await (await upload(svc, kb, 'delta.md', md('Deltas', `A river delta fans out at the sea. ${prose('delta', 6)}`))).json()) as Json).doc_id
    assert.equal((await settle(svc, kb, doc)).status, 'indexed')
    const cached = createCachedSearch(svc.app.use<SearchService>('search'), svc.app.adapters.searchCache, 'fingerprint', createLogger('SILENT'))
    const q = { query: 'river delta', kb_ids: [kb] }
    const text = (b: string | Uint8Array) => (typeof b === 'string' ? b : new TextDecoder().decode(b))
    // the first search gives the KB its version (or it has one from the write); then one stores, the next hits
    let first = cached.searchBody(q)
    assert.ok(first instanceof Promise, 'nothing cached yet: searched')
    let body = text(await first)
    if (JSON.parse(body).meta.cache_status === 'miss') {
      first = cached.searchBody(q)
      body = text(await first)
    }
    const again = cached.searchBody(q)
    assert.ok(!(again instanceof Promise), 'a hit from the cache in this process: no promise')
    assert.equal(JSON.parse(text(again)).meta.cache_status, 'hit')
    assert.equal(comparable(text(again)), comparable(body))
    assert.equal(comparable(text(again)), comparable((await searchRaw(svc, q)).text))
    assert.throws(() => cached.searchBody({ query: '   ', kb_ids: [kb] }), (err: Error & { status?: number }) => err.status === 422, 'refused at once')
    await assert.rejects(cached.searchJson({ query: '   ', kb_ids: [kb] }), (err: Error & { status?: number }) => err.status === 422)
  })

  it('embedded: a cache store that cannot be reached costs a miss, never a failed search', async (t) => {
    const svc = await startApp(t, { settings: { queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 } } })
    const kb = await newKb(svc)
    const doc = ((await (await upload(svc, kb, 'delta.md', md('Deltas', `A river delta fans out at the sea. ${prose('delta', 6)}`))).json()) as Json).doc_id
    assert.equal((await settle(svc, kb, doc)).status, 'indexed')
    // A port nothing listens on: every command of this Redis cache fails.
    const probe = createServer()
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r))
    const port = (probe.address() as AddressInfo).port
    await new Promise((r) => probe.close(r))
    const { createRedisSearchCache } = await import('../../adapters/cache/redis.ts')
    const down = await createRedisSearchCache({ host: '127.0.0.1', port, ttlMs: 60_000, maxEntries: 10, connectTimeoutMs: 500 })
    t.after(() => down.close())
    const cached = createCachedSearch(svc.app.use<SearchService>('search'), down, 'fingerprint', createLogger('SILENT'))
    const q = { query: 'river delta', kb_ids: [kb] }
    const viaHttp = await searchRaw(svc, q)
    for (let i = 0; i < 2; i++) {
      const text = await cached.searchJson(q)
      assert.equal(JSON.parse(text).meta.cache_status, 'miss')
      assert.equal(comparable(text), comparable(viaHttp.text))
    }
    await assert.rejects(cached.clear(), (err: Error & { status?: number }) => err.status === 503)
  })
})

describe('search cache on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () => {
  searchCacheSuite('services', { services: true })

  it('services: two instances share answers and invalidation through Redis', async (t) => {
    const fast = { queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 } }
    const a = await startApp(t, { services: true, settings: fast })
    const s = a.app.settings
    // b shares a's metadata, objects and Redis, and runs no worker: every write below is a's.
    const b = await startApp(t, { services: true, settings: { ...fast, postgres: s.postgres, redis: s.redis, s3: s.s3, queue_worker: { enabled: false } } })
    const kb = await newKb(a)
    const doc = ((await (await upload(a, kb, 'fjord.md', md('Fjords', `A fjord is a drowned glacier valley. ${prose('fjord', 6)}`))).json()) as Json).doc_id
    assert.equal((await settle(a, kb, doc)).status, 'indexed')
    const q = { query: 'fjord glacier valley', kb_ids: [kb] }

    const miss = await searchRaw(a, q)
    assert.equal(miss.body.meta.cache_status, 'miss')
    assert.ok(miss.body.results.length > 0)
    const shared = await searchRaw(b, q)
    assert.equal(shared.body.meta.cache_status, 'hit', 'b reads what a kept')
    assert.equal(comparable(shared.text), comparable(miss.text))

    const more = ((await (await upload(a, kb, 'glacier.md', md('Glaciers', `A glacier valley before the fjord. ${prose('ice', 6)}`))).json()) as Json).doc_id
    assert.equal((await settle(a, kb, more)).status, 'indexed')
    assert.equal((await searchRaw(b, q)).body.meta.cache_status, 'miss', 'a write on a misses on b at once')

    assert.equal((await searchRaw(a, q)).body.meta.cache_status, 'hit')
    const cleared = await b.request('/api/search/cache', { method: 'DELETE' })
    assert.ok(((await cleared.json()) as Json).cleared_count >= 1)
    assert.equal((await searchRaw(a, q)).body.meta.cache_status, 'miss', 'cleared on b, gone for a')
  })
})
