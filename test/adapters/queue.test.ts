// Queue drivers: the shared contract against the embedded journal queue (always) and Redis (when
// TEST_REDIS_URL is set), then what only one driver does.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { promises as fs } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, it, type TestContext } from 'node:test'
import { createEmbeddedQueue } from '../../adapters/queue/embedded.ts'
import { createRedisQueue, type RedisQueueOptions } from '../../adapters/queue/redis.ts'
import { startOwnedRedis } from '../helpers/servers.ts'
import { serviceUrl, skipUnless } from '../helpers/services.ts'
import { queueContract, type QueueHarness } from './queue.contract.ts'

const tempDir = async (t: TestContext) => {
  const dir = await fs.mkdtemp(join(tmpdir(), 'quarry-queue-'))
  t.after(() => fs.rm(dir, { recursive: true, force: true }))
  return dir
}

const journalLines = async (dir: string) => (await fs.readFile(join(dir, 'queue.journal'), 'utf8')).split('\n').filter(Boolean).length

describe('embedded queue', () => {
  queueContract(
    'embedded',
    async (t): Promise<QueueHarness> => {
      const dir = await tempDir(t)
      return { open: () => createEmbeddedQueue({ dir }) }
    },
    { restartRedelivery: 'immediate', separateInstances: false },
  )

  it('compacts the journal and keeps every live message', async (t) => {
    const dir = await tempDir(t)
    const q = await createEmbeddedQueue({ dir, compactMinRecords: 50 })
    const ids: string[] = []
    for (let i = 0; i < 100; i++) ids.push(await q.enqueue('jobs', `doc${i}`, { i }))
    await q.enqueue('later', 'd', 'delayed', { delayMs: 60_000 })
    const got = await q.reserve<{ i: number }>('jobs', 100, 60_000)
    assert.equal(got.length, 100)
    for (const m of got.slice(0, 90)) await q.ack('jobs', m.id)
    // 101 enqueues, 100 leases and 90 acks were written; compaction leaves about one line per live message. Acks do
    // not wait for their flush, so neither does the compaction after it: the journal is read until it is done.
    let lines = await journalLines(dir)
    for (let tries = 0; lines >= 60 && tries < 100; tries++) {
      await sleep(50)
      lines = await journalLines(dir)
    }
    assert.ok(lines < 60, `journal still has ${lines} lines`)
    await q.close()

    const reopened = await createEmbeddedQueue({ dir, compactMinRecords: 50 })
    t.after(() => reopened.close())
    assert.deepEqual(await reopened.depth('jobs'), { ready: 10, delayed: 0, inflight: 0 })
    assert.deepEqual(await reopened.depth('later'), { ready: 0, delayed: 1, inflight: 0 })
    const back = await reopened.reserve<{ i: number }>('jobs', 20, 60_000)
    assert.deepEqual(back.map((m) => m.id), ids.slice(90))
    assert.deepEqual(back.map((m) => m.payload.i), [90, 91, 92, 93, 94, 95, 96, 97, 98, 99])
    assert.ok(back.every((m) => m.attempts === 1))
    assert.equal(await reopened.removeByKey('later', 'd'), 1)
  })

  it('flushes leases and acks with the next fsync someone waits for, not with one of their own', async (t) => {
    const dir = await tempDir(t)
    // The real datasync, counted (every journal flush that waits for the disk calls it once).
    const probe = await fs.open(join(dir, 'probe'), 'w')
    const proto = Object.getPrototypeOf(probe) as { datasync(): Promise<void> }
    await probe.close()
    const real = proto.datasync
    let syncs = 0
    proto.datasync = function (this: unknown) {
      syncs++
      return real.call(this)
    }
    t.after(() => (proto.datasync = real))
    const q = await createEmbeddedQueue({ dir })
    const ids = [await q.enqueue('jobs', 'a', 1), await q.enqueue('jobs', 'b', 2)]
    assert.equal(syncs, 2, 'each enqueue waits for its own fsync')
    const got = await q.reserve('jobs', 2, 60_000)
    await q.ack('jobs', got[0].id)
    await sleep(50)
    assert.equal(syncs, 2, 'a lease and an ack wait for no fsync and cause none')
    await q.enqueue('jobs', 'c', 3)
    assert.equal(syncs, 3)
    await q.close()
    // All of it reached the journal: after a clean close the acked message is gone and the leased one is back.
    const reopened = await createEmbeddedQueue({ dir })
    t.after(() => reopened.close())
    const back = await reopened.reserve<number>('jobs', 10, 60_000)
    assert.deepEqual(back.map((m) => m.id).slice(0, 1), [ids[1]])
    assert.deepEqual(back.map((m) => m.payload), [2, 3])
    assert.equal(back[0].attempts, 1)
  })

  it('drops a torn last record at open and keeps appending cleanly', async (t) => {
    const dir = await tempDir(t)
    const q = await createEmbeddedQueue({ dir })
    const a = await q.enqueue('jobs', 'a', 'first')
    await q.close()
    await fs.appendFile(join(dir, 'queue.journal'), '{"o":"put","t":"jobs","i":"torn","k":"b","p":')
    const q2 = await createEmbeddedQueue({ dir })
    const b = await q2.enqueue('jobs', 'b', 'second')
    await q2.close()
    const q3 = await createEmbeddedQueue({ dir })
    t.after(() => q3.close())
    const got = await q3.reserve('jobs', 10, 60_000)
    assert.deepEqual(got.map((m) => m.id), [a, b])
  })

  it('loses no acknowledged enqueue when the process is killed', async (t) => {
    const dir = await tempDir(t)
    const module = fileURLToPath(new URL('../../adapters/queue/embedded.ts', import.meta.url))
    const script = `
      const { createEmbeddedQueue } = await import(${JSON.stringify(module)})
      const q = await createEmbeddedQueue({ dir: ${JSON.stringify(dir)} })
      const ids = []
      for (let i = 0; i < 20; i++) ids.push(await q.enqueue('jobs', 'k' + i, i))
      await q.reserve('jobs', 5, 60000)
      process.stdout.write(JSON.stringify(ids), () => process.kill(process.pid, 'SIGKILL'))
    `
    const run = promisify(execFile)
    const out = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script]).catch((err: { stdout?: string }) => err)
    const ids = JSON.parse(String(out.stdout)) as string[]
    assert.equal(ids.length, 20)
    // The killed process left its lock behind; a dead owner's lock is taken over.
    const q = await createEmbeddedQueue({ dir })
    t.after(() => q.close())
    const got = await q.reserve<number>('jobs', 50, 60_000)
    assert.deepEqual(got.map((m) => m.id), ids)
    assert.deepEqual(got.map((m) => m.payload), Array.from({ length: 20 }, (_, i) => i))
  })

  it('refuses a second open of the same folder', async (t) => {
    const dir = await tempDir(t)
    const q = await createEmbeddedQueue({ dir })
    t.after(() => q.close())
    await assert.rejects(createEmbeddedQueue({ dir }), /already open/)
  })

  it('wakes subscribers when a delayed message comes due', async (t) => {
    const dir = await tempDir(t)
    const q = await createEmbeddedQueue({ dir })
    t.after(() => q.close())
    // The queue's due-timer is unref'd (a hint must not keep a process alive); this test must stay alive for it.
    const alive = setInterval(() => {}, 1000)
    t.after(() => clearInterval(alive))
    let wake!: () => void
    const woken = new Promise<void>((r) => (wake = r))
    const stop = q.subscribe('jobs', () => wake())
    t.after(stop)
    await q.enqueue('jobs', 'k', 1, { delayMs: 100 })
    await woken
    const got = await q.reserve('jobs', 1, 60_000)
    assert.equal(got.length, 1)
  })

  it('answers 503 once closed', async (t) => {
    const dir = await tempDir(t)
    const q = await createEmbeddedQueue({ dir })
    await q.close()
    assert.equal(await q.ping(), false)
    await assert.rejects(q.enqueue('jobs', 'k', 1), { status: 503 })
    await assert.rejects(q.reserve('jobs', 1, 1000), { status: 503 })
  })
})

function redisOptions(): RedisQueueOptions {
  const url = new URL(serviceUrl('redis') ?? 'redis://127.0.0.1:6379')
  return {
    host: url.hostname,
    port: url.port ? Number(url.port) : 6379,
    password: decodeURIComponent(url.password) || undefined,
    db: url.pathname.length > 1 ? Number(url.pathname.slice(1)) : 0,
  }
}

/** Deletes every key under prefix. */
async function dropPrefix(prefix: string): Promise<void> {
  const { Redis } = await import('ioredis')
  const o = redisOptions()
  const redis = new Redis({ host: o.host, port: o.port, password: o.password, db: o.db })
  try {
    let cursor = '0'
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500)
      if (keys.length > 0) await redis.del(...keys)
      cursor = next
    } while (cursor !== '0')
  } finally {
    redis.disconnect()
  }
}

describe('redis queue', { skip: skipUnless('redis') }, () => {
  const runPrefix = `quarry-test-${process.pid}-${randomBytes(3).toString('hex')}`
  let n = 0
  const harness = async (t: TestContext): Promise<QueueHarness> => {
    const prefix = `${runPrefix}-${++n}`
    t.after(() => dropPrefix(prefix))
    return { open: () => createRedisQueue({ ...redisOptions(), prefix }) }
  }

  queueContract('redis', harness, { restartRedelivery: 'after-lease', separateInstances: true })

  it('keeps its keys under <prefix>:q:<topic>:{ready,delayed,inflight,msg}', async (t) => {
    const prefix = `${runPrefix}-layout`
    t.after(() => dropPrefix(prefix))
    const q = await createRedisQueue({ ...redisOptions(), prefix })
    t.after(() => q.close())
    await q.enqueue('jobs', 'a', 1)
    await q.enqueue('jobs', 'b', 2, { delayMs: 60_000 })
    await q.enqueue('jobs', 'c', 3)
    await q.reserve('jobs', 1, 60_000)
    const { Redis } = await import('ioredis')
    const o = redisOptions()
    const redis = new Redis({ host: o.host, port: o.port, password: o.password, db: o.db })
    t.after(() => redis.disconnect())
    assert.equal(await redis.llen(`${prefix}:q:jobs:ready`), 1)
    assert.equal(await redis.zcard(`${prefix}:q:jobs:delayed`), 1)
    assert.equal(await redis.zcard(`${prefix}:q:jobs:inflight`), 1)
    assert.equal(await redis.hlen(`${prefix}:q:jobs:msg`), 3)
  })

  it('answers 503 quickly when Redis is down, and ping is false', { timeout: 10_000 }, async (t) => {
    const q = await createRedisQueue({ host: '127.0.0.1', port: 1, prefix: `${runPrefix}-down` })
    t.after(() => q.close())
    await assert.rejects(q.enqueue('jobs', 'k', 1), (err: unknown) => {
      const e = err as { status?: number; code?: string; message: string }
      assert.equal(e.status, 503)
      assert.equal(e.code, 'SERVICE_UNAVAILABLE')
      assert.match(e.message, /127\.0\.0\.1:1/)
      return true
    })
    await assert.rejects(q.reserve('jobs', 1, 1000), { status: 503 })
    assert.equal(await q.ping(), false)
  })

  it('tells its listeners when its server came back as another instance (a restart that lost the keys), not on a reconnect to the same one', { timeout: 60_000 }, async (t) => {
    // A redis-server of the test's own: it is restarted here.
    const own = await startOwnedRedis({ persist: false })
    t.after(() => own.close())
    const q = await createRedisQueue({ host: '127.0.0.1', port: own.port, prefix: 'loss' })
    t.after(() => q.close())
    let losses = 0
    const off = q.onLoss!(() => losses++)
    await q.enqueue('jobs', 'a', 1)
    // A dropped connection to the same server is no loss.
    const { Redis } = await import('ioredis')
    const admin = new Redis({ host: '127.0.0.1', port: own.port })
    t.after(() => admin.disconnect())
    await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
    await waitUntil(async () => (await q.depth('jobs').catch(() => null))?.ready === 1)
    await sleep(300)
    assert.equal(losses, 0, 'a reconnect to the same server is no loss')
    await own.stop('kill')
    await own.start()
    await waitUntil(async () => {
      await q.depth('jobs').catch(() => null)
      return losses === 1
    })
    assert.deepEqual(await q.depth('jobs'), { ready: 0, delayed: 0, inflight: 0 }, 'the restarted server lost the message')
    off()
    await own.stop('kill')
    await own.start()
    await waitUntil(async () => (await q.ping()))
    await sleep(300)
    assert.equal(losses, 1, 'a listener removed is not called')
  })

  it('two instances never hold the same message inside its lease, even under contention', async (t) => {
    const h = await harness(t)
    const queues = await Promise.all([h.open(), h.open(), h.open()])
    t.after(() => Promise.all(queues.map((q) => q.close())))
    const topic = 'contended'
    await Promise.all(Array.from({ length: 30 }, (_, i) => queues[0].enqueue(topic, 'k', i)))
    // Everyone reserves at once, nobody acks: with a long lease each message goes to exactly one caller.
    const batches = await Promise.all(Array.from({ length: 12 }, (_, i) => queues[i % 3].reserve(topic, 4, 60_000)))
    const ids = batches.flat().map((m) => m.id)
    assert.equal(ids.length, 30)
    assert.equal(new Set(ids).size, 30)
    await sleep(1)
    assert.deepEqual(await queues[1].reserve(topic, 10, 60_000), [])
  })
})

async function waitUntil(probe: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error('timed out')
    await sleep(50)
  }
}
