// ObjectStore drivers: the shared contract against local files and against S3 (s3rver, in-process),
// then what only one driver does.
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { promises as fs, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { after, before, describe, it } from 'node:test'
import { createLocalObjectStore } from '../../adapters/objects/local.ts'
import { createS3ObjectStore, s3EndpointUrl } from '../../adapters/objects/s3.ts'
import type { ObjectStore } from '../../adapters/ports.ts'
import { startS3rver, type S3rverHandle } from '../helpers/s3rver.ts'
import { chunked, collect, objectStoreContract, readAll } from './objects.contract.ts'

const md5 = (data: Uint8Array) => createHash('md5').update(data).digest('hex')
const tempDir = () => fs.mkdtemp(join(tmpdir(), 'quarry-objects-'))

describe('local object store', () => {
  const dirs: string[] = []
  after(async () => {
    for (const d of dirs) await fs.rm(d, { recursive: true, force: true })
  })
  const open = async () => {
    const dir = await tempDir()
    dirs.push(dir)
    return { dir, store: await createLocalObjectStore({ dir }) }
  }

  objectStoreContract('local', async () => (await open()).store)

  it('keeps objects as plain files under dir/objects, one folder per key segment', async () => {
    const { dir, store } = await open()
    await store.put('kb1/doc 1/보고서.txt', Buffer.from('plain'))
    assert.equal(await fs.readFile(join(dir, 'objects', 'kb1', 'doc 1', '보고서.txt'), 'utf8'), 'plain')
    await store.close()
  })

  it('leaves no file descriptor open after reading small and large objects', async () => {
    const { store } = await open()
    const small = Buffer.from('small object')
    const large = Buffer.alloc(300 * 1024, 7)
    await store.put('kb1/d/small.txt', small)
    await store.put('kb1/d/large.bin', large)
    const openFds = () => readdirSync('/proc/self/fd').length
    const read = async (key: string) => {
      const parts: Buffer[] = []
      for await (const c of await store.get(key)) parts.push(c as Buffer)
      return Buffer.concat(parts)
    }
    const before = openFds()
    for (let i = 0; i < 20; i++) {
      assert.deepEqual(await read('kb1/d/small.txt'), small)
      assert.deepEqual(await read('kb1/d/large.bin'), large)
    }
    await new Promise((r) => setImmediate(r))
    assert.ok(openFds() <= before, `${openFds() - before} descriptors left open`)
    await store.close()
  })

  it('writes nothing outside its folder for traversal keys', async () => {
    const { dir, store } = await open()
    const outside = join(dir, '..', `escape-${randomBytes(4).toString('hex')}.txt`)
    await assert.rejects(store.put(`../../${outside.split('/').pop()}`, Buffer.from('x')), { status: 422, code: 'OBJECT_KEY_INVALID' })
    await assert.rejects(fs.access(outside), { code: 'ENOENT' })
    await assert.rejects(store.put('kb/../../x', Buffer.from('x')), { status: 422 })
    assert.deepEqual(await collect(store.list('')), [])
    await store.close()
  })

  it('keeps the old object intact when a write fails midway, and leaves no temp file', async () => {
    const { dir, store } = await open()
    const old = Buffer.from('the old content')
    await store.put('kb/doc.txt', old)
    const failing = new Readable({
      read() {
        this.push(Buffer.alloc(64 * 1024, 7))
        this.destroy(new Error('client went away'))
      },
    })
    await assert.rejects(store.put('kb/doc.txt', failing))
    assert.deepEqual(await readAll(await store.get('kb/doc.txt')), old)
    assert.equal((await store.head('kb/doc.txt'))?.etag, md5(old))
    assert.deepEqual(await fs.readdir(join(dir, 'tmp')), [])
    await store.close()
  })

  it('recomputes the etag when the sidecar no longer matches the file (a crash between the two renames)', async () => {
    const { dir, store } = await open()
    await store.put('kb/a.txt', Buffer.from('version one'), { contentType: 'text/plain' })
    const replaced = Buffer.from('version two, written behind the store')
    await fs.writeFile(join(dir, 'objects', 'kb', 'a.txt'), replaced)
    const info = await store.head('kb/a.txt')
    assert.equal(info?.size, replaced.length)
    assert.equal(info?.etag, md5(replaced))
    await store.close()
  })

  it('answers 409 when a key would be both an object and a folder', async () => {
    const { store } = await open()
    await store.put('kb/a', Buffer.from('x'))
    await assert.rejects(store.put('kb/a/b', Buffer.from('y')), { status: 409, code: 'OBJECT_KEY_CONFLICT' })
    await store.put('kb/c/d', Buffer.from('z'))
    await assert.rejects(store.put('kb/c', Buffer.from('w')), { status: 409, code: 'OBJECT_KEY_CONFLICT' })
    assert.deepEqual((await collect(store.list('kb/'))).sort(), ['kb/a', 'kb/c/d'])
    await store.close()
  })

  it('prunes emptied folders and removes stale temp files at open', async () => {
    const { dir, store } = await open()
    await store.put('kb/deep/er/x.txt', Buffer.from('x'))
    assert.equal(await store.deletePrefix('kb/'), 1)
    assert.deepEqual(await fs.readdir(join(dir, 'objects')), [])
    await store.close()
    const stale = join(dir, 'tmp', 'left-by-a-crash')
    await fs.writeFile(stale, 'half')
    const old = new Date(Date.now() - 2 * 60 * 60 * 1000)
    await fs.utimes(stale, old, old)
    const fresh = join(dir, 'tmp', 'being-written-by-another-process')
    await fs.writeFile(fresh, 'half')
    const reopened = await createLocalObjectStore({ dir })
    assert.deepEqual(await fs.readdir(join(dir, 'tmp')), ['being-written-by-another-process'])
    assert.equal(await reopened.ping(), true)
    await reopened.close()
    assert.equal(await reopened.ping(), false)
  })
})

describe('S3 object store (s3rver)', () => {
  let s3: S3rverHandle
  const stores: ObjectStore[] = []
  const open = async (over: Partial<Parameters<typeof createS3ObjectStore>[0]> = {}) => {
    const store = await createS3ObjectStore({
      endpoint: s3.endpoint,
      accessKey: s3.accessKey,
      secretKey: s3.secretKey,
      bucket: s3.bucket,
      region: s3.region,
      insecure: true,
      ...over,
    })
    stores.push(store)
    return store
  }

  before(async () => {
    s3 = await startS3rver()
  })
  after(async () => {
    for (const store of stores) await store.close()
    await s3?.close()
  })

  // Small pages and a small memory spool, so list paging, batched deletes and the spool file all run.
  objectStoreContract('s3', () => open({ pageSize: 2, memorySpoolBytes: 1024 * 1024 }))

  it('works with the default page size and an endpoint given as host:port', async () => {
    const store = await open({ endpoint: s3.endpoint.replace('http://', ''), insecure: true })
    const keys = Array.from({ length: 5 }, (_, i) => `defaults/k${i}`)
    for (const key of keys) await store.put(key, Buffer.from(key))
    assert.deepEqual(await collect(store.list('defaults/')), keys)
    assert.equal(await store.deletePrefix('defaults/'), keys.length)
    assert.deepEqual(await collect(store.list('defaults/')), [])
  })

  it('builds endpoint URLs from host:port or a URL', () => {
    assert.equal(s3EndpointUrl('minio:9000', true), 'http://minio:9000')
    assert.equal(s3EndpointUrl('minio:9000', false), 'https://minio:9000')
    assert.equal(s3EndpointUrl('https://s3.example.com/', true), 'https://s3.example.com')
    assert.throws(() => s3EndpointUrl('  '))
  })

  it('answers 502 naming the bucket and the operation, without the secret, when the endpoint is down', async () => {
    const secret = `very-secret-${randomBytes(6).toString('hex')}`
    const store = await open({ endpoint: '127.0.0.1:1', insecure: true, secretKey: secret, bucket: 'down-bucket', maxAttempts: 1 })
    const calls: [string, () => Promise<unknown>][] = [
      ['put', () => store.put('kb/x', Buffer.from('x'))],
      ['put', () => store.put('kb/y', Readable.from([Buffer.from('y')]), { size: 1 })],
      ['get', () => store.get('kb/x')],
      ['head', () => store.head('kb/x')],
      ['delete', () => store.delete(['kb/x'])],
      ['list', () => collect(store.list('kb/'))],
      ['deletePrefix', () => store.deletePrefix('kb/')],
    ]
    for (const [op, call] of calls) {
      await assert.rejects(call(), (err: unknown) => {
        const e = err as { status?: number; code?: string; message: string }
        assert.equal(e.status, 502, op)
        assert.equal(e.code, 'STORAGE_UNAVAILABLE')
        assert.match(e.message, /down-bucket/)
        assert.ok(e.message.includes(op === 'delete' ? 'head' : op), `${op}: ${e.message}`)
        assert.ok(!e.message.includes(secret))
        return true
      })
    }
    assert.equal(await store.ping(), false)
  })

  it('answers 502 without leaking the secret when the credentials are refused', async () => {
    // s3rver does not check SigV4 signatures, only that the access key exists.
    const secret = `the-secret-${randomBytes(6).toString('hex')}`
    const store = await open({ accessKey: 'NOT-A-KEY', secretKey: secret, maxAttempts: 1 })
    await assert.rejects(store.put('kb/x', Buffer.from('x')), (err: unknown) => {
      const e = err as { status?: number; message: string }
      assert.equal(e.status, 502)
      assert.match(e.message, /InvalidAccessKeyId/)
      assert.ok(!e.message.includes(secret), e.message)
      return true
    })
    assert.equal(await store.ping(), false)
  })

  it('does not create a missing bucket: ping is false and calls fail clearly', async () => {
    const store = await open({ bucket: `missing-${randomBytes(4).toString('hex')}` })
    assert.equal(await store.ping(), false)
    await assert.rejects(store.put('kb/x', Buffer.from('x')), (err: unknown) => {
      const e = err as { status?: number; message: string }
      assert.equal(e.status, 502)
      assert.match(e.message, /missing-[0-9a-f]{8}/)
      assert.match(e.message, /does not exist/)
      return true
    })
  })

  it('streams a large body of unknown size through a spool file', async () => {
    const store = await open({ memorySpoolBytes: 256 * 1024 })
    const data = randomBytes(1024 * 1024 + 17)
    const info = await store.put('spool/big.bin', chunked(data, 50_000))
    assert.equal(info.size, data.length)
    assert.equal(info.etag, md5(data))
    assert.equal((await store.head('spool/big.bin'))?.etag, md5(data))
    assert.equal(md5(await readAll(await store.get('spool/big.bin'))), md5(data))
  })
})
