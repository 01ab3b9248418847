// The ObjectStore contract: every driver runs these cases (test/adapters/objects.test.ts).
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import { after, before, describe, it } from 'node:test'
import type { ObjectStore } from '../../adapters/ports.ts'

export type ObjectStoreFactory = () => Promise<ObjectStore>

const md5 = (data: Uint8Array) => createHash('md5').update(data).digest('hex')

export async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Uint8Array))
  return Buffer.concat(chunks)
}

/** A stream of data in small pieces, so the driver sees many chunks. */
export function chunked(data: Buffer, size = 64 * 1024): Readable {
  const pieces: Buffer[] = []
  for (let i = 0; i < data.length; i += size) pieces.push(data.subarray(i, i + size))
  return Readable.from(pieces)
}

export async function collect(iter: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = []
  for await (const k of iter) out.push(k)
  return out
}

const rejectsWith = (promise: Promise<unknown>, code: string, status: number) =>
  assert.rejects(promise, (err: unknown) => {
    const e = err as { code?: string; status?: number }
    assert.equal(e.code, code)
    assert.equal(e.status, status)
    return true
  })

export function objectStoreContract(name: string, factory: ObjectStoreFactory): void {
  describe(`ObjectStore contract: ${name}`, () => {
    let store: ObjectStore
    // Each case works under its own prefix, so cases never see each other's objects.
    let n = 0
    const space = () => `c${++n}-${randomBytes(3).toString('hex')}/`

    before(async () => {
      store = await factory()
    })
    after(async () => {
      await store?.close()
    })

    it('answers ping', async () => {
      assert.equal(await store.ping(), true)
    })

    it('round-trips bytes, with the MD5 as etag', async () => {
      const key = `${space()}doc/file.bin`
      const data = randomBytes(100_000)
      const info = await store.put(key, data, { contentType: 'application/octet-stream' })
      assert.equal(info.size, data.length)
      assert.equal(info.etag, md5(data))
      assert.deepEqual(await readAll(await store.get(key)), data)
    })

    it('round-trips a stream of a few MB with and without an announced size', async () => {
      const p = space()
      const data = randomBytes(3 * 1024 * 1024 + 123)
      const sized = await store.put(`${p}sized.bin`, chunked(data), { size: data.length })
      const unsized = await store.put(`${p}unsized.bin`, chunked(data))
      for (const info of [sized, unsized]) {
        assert.equal(info.size, data.length)
        assert.equal(info.etag, md5(data))
      }
      for (const key of ['sized.bin', 'unsized.bin']) {
        const back = await readAll(await store.get(p + key))
        assert.equal(back.length, data.length)
        assert.equal(md5(back), md5(data))
      }
    })

    it('heads an object: size, etag and content type; null when absent', async () => {
      const p = space()
      const data = Buffer.from('hello, head')
      await store.put(`${p}a.txt`, data, { contentType: 'text/plain' })
      const info = await store.head(`${p}a.txt`)
      assert.ok(info)
      assert.equal(info.size, data.length)
      assert.equal(info.etag, md5(data))
      assert.match(info.contentType ?? '', /^text\/plain/)
      assert.equal(await store.head(`${p}missing.txt`), null)
    })

    it('overwrites an object', async () => {
      const key = `${space()}same.txt`
      await store.put(key, Buffer.from('first version, longer than the second'))
      const second = Buffer.from('second')
      const info = await store.put(key, second)
      assert.equal(info.etag, md5(second))
      assert.deepEqual(await readAll(await store.get(key)), second)
      const head = await store.head(key)
      assert.equal(head?.size, second.length)
      assert.equal(head?.etag, md5(second))
    })

    it('get of a missing key throws OBJECT_NOT_FOUND 404', async () => {
      await rejectsWith(store.get(`${space()}nothing-here`), 'OBJECT_NOT_FOUND', 404)
    })

    it('delete counts only keys that existed', async () => {
      const p = space()
      await store.put(`${p}1`, Buffer.from('1'))
      await store.put(`${p}2`, Buffer.from('2'))
      await store.put(`${p}keep`, Buffer.from('k'))
      assert.equal(await store.delete([`${p}1`, `${p}2`, `${p}never-existed`]), 2)
      assert.equal(await store.head(`${p}1`), null)
      assert.equal(await store.head(`${p}2`), null)
      assert.ok(await store.head(`${p}keep`))
      assert.equal(await store.delete([`${p}1`, `${p}2`]), 0)
      assert.equal(await store.delete([]), 0)
    })

    it('deletePrefix removes only that prefix and counts', async () => {
      const p = space()
      const doomed = [`${p}kb1/a.txt`, `${p}kb1/d1/b.txt`, `${p}kb1/d1/d2/c.txt`]
      const kept = [`${p}kb10/x.txt`, `${p}kb1.txt`, `${p}kb2/y.txt`]
      for (const key of [...doomed, ...kept]) await store.put(key, Buffer.from(key))
      assert.equal(await store.deletePrefix(`${p}kb1/`), doomed.length)
      for (const key of doomed) assert.equal(await store.head(key), null, key)
      for (const key of kept) assert.ok(await store.head(key), key)
      assert.equal(await store.deletePrefix(`${p}kb1/`), 0)
      assert.deepEqual((await collect(store.list(p))).sort(), [...kept].sort())
    })

    it('refuses deletePrefix with an empty prefix', async () => {
      await rejectsWith(store.deletePrefix(''), 'OBJECT_KEY_INVALID', 422)
    })

    it('lists keys under a prefix, whole segments or part of one', async () => {
      const p = space()
      const keys = [`${p}doc1/a.pdf`, `${p}doc1/sub/b.pdf`, `${p}dog.txt`, `${p}cat/c.txt`, `${p}do`]
      for (const key of keys) await store.put(key, Buffer.from('x'))
      assert.deepEqual((await collect(store.list(p))).sort(), [...keys].sort())
      assert.deepEqual((await collect(store.list(`${p}do`))).sort(), [`${p}do`, `${p}doc1/a.pdf`, `${p}doc1/sub/b.pdf`, `${p}dog.txt`].sort())
      assert.deepEqual(await collect(store.list(`${p}doc1/`)), [`${p}doc1/a.pdf`, `${p}doc1/sub/b.pdf`])
      assert.deepEqual(await collect(store.list(`${p}none/`)), [])
    })

    it('keeps keys with Korean names and spaces', async () => {
      const p = space()
      const key = `${p}한국어 문서/보고서 2024 (최종) v1.2.pdf`
      const other = `${p}한국어 문서/회의록 초안.txt`
      const data = Buffer.from('내용: 안녕하세요', 'utf8')
      const info = await store.put(key, data)
      await store.put(other, Buffer.from('b'))
      assert.equal(info.etag, md5(data))
      assert.deepEqual(await readAll(await store.get(key)), data)
      assert.equal((await store.head(key))?.size, data.length)
      assert.deepEqual((await collect(store.list(`${p}한국어 문서/`))).sort(), [key, other].sort())
      assert.equal(await store.delete([key]), 1)
      assert.equal(await store.deletePrefix(`${p}한국어 문서/`), 1)
      assert.deepEqual(await collect(store.list(p)), [])
    })

    it('refuses keys with "..", a leading "/", empty segments or nothing at all', async () => {
      for (const key of ['../escape.txt', 'a/../../b', '/abs/path', 'a//b', 'a/./b', '', 'trailing/']) {
        await rejectsWith(store.put(key, Buffer.from('x')), 'OBJECT_KEY_INVALID', 422)
        await rejectsWith(store.get(key), 'OBJECT_KEY_INVALID', 422)
      }
      await rejectsWith(store.delete(['ok/key', '../x']), 'OBJECT_KEY_INVALID', 422)
      await rejectsWith(collect(store.list('../')), 'OBJECT_KEY_INVALID', 422)
    })

    it('refuses a body whose length differs from the announced size, and stores nothing', async () => {
      const p = space()
      await rejectsWith(store.put(`${p}short`, chunked(Buffer.alloc(1000, 1), 100), { size: 2000 }), 'OBJECT_SIZE_MISMATCH', 422)
      await rejectsWith(store.put(`${p}long`, chunked(Buffer.alloc(3000, 1), 100), { size: 2000 }), 'OBJECT_SIZE_MISMATCH', 422)
      await rejectsWith(store.put(`${p}bytes`, Buffer.alloc(10), { size: 11 }), 'OBJECT_SIZE_MISMATCH', 422)
      assert.deepEqual(await collect(store.list(p)), [])
    })

    it('refuses a longer body whose extra bytes come late, and keeps what the key held', async () => {
      const p = space()
      const before = Buffer.from('the object as it was')
      await store.put(`${p}late`, before)
      // The announced size arrives whole, then a pause long enough for a store to finish the request.
      async function* late() {
        yield Buffer.alloc(2000, 2)
        await new Promise((resolve) => setTimeout(resolve, 300))
        yield Buffer.alloc(10, 3)
      }
      await rejectsWith(store.put(`${p}late`, Readable.from(late()), { size: 2000 }), 'OBJECT_SIZE_MISMATCH', 422)
      assert.deepEqual(await readAll(await store.get(`${p}late`)), before)
      // A shorter body that stops after a pause: the store has begun writing the object when the put is cut off.
      async function* stalls() {
        yield Buffer.alloc(1000, 4)
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      await rejectsWith(store.put(`${p}stalled`, Readable.from(stalls()), { size: 2000 }), 'OBJECT_SIZE_MISMATCH', 422)
      assert.deepEqual(await collect(store.list(p)), [`${p}late`])
    })
  })
}
