// The Queue contract: every driver runs these cases (test/adapters/queue.test.ts).
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, it, type TestContext } from 'node:test'
import type { Queue, QueueMessage } from '../../adapters/ports.ts'

/** One queue's storage (a folder, a Redis prefix); open() may be called again to simulate a restart. */
export interface QueueHarness {
  open(): Promise<Queue>
}

export interface QueueTraits {
  /**
   * When messages reserved but not acked before a restart come back: at once (the embedded queue, whose
   * leases die with the process) or when their lease runs out (Redis, whose leases outlive any process).
   */
  restartRedelivery: 'immediate' | 'after-lease'
  /** Two consumers on two driver instances over one store (Redis), or on one instance (embedded). */
  separateInstances: boolean
}

export type QueueHarnessFactory = (t: TestContext) => Promise<QueueHarness>

const topicName = () => `t-${randomBytes(4).toString('hex')}`

/** Reserves until pred holds for what was received; bounded, so a broken driver fails instead of hanging. */
async function reserveUntil<T>(q: Queue, topic: string, pred: (got: QueueMessage<T>[]) => boolean, opts: { max?: number; leaseMs?: number; ack?: boolean } = {}): Promise<QueueMessage<T>[]> {
  const got: QueueMessage<T>[] = []
  const deadline = Date.now() + 15_000
  while (!pred(got)) {
    if (Date.now() > deadline) assert.fail(`gave up waiting: received ${got.length} messages`)
    const batch = await q.reserve<T>(topic, opts.max ?? 10, opts.leaseMs ?? 60_000)
    for (const m of batch) {
      got.push(m)
      if (opts.ack) await q.ack(topic, m.id)
    }
    if (batch.length === 0) await sleep(20)
  }
  return got
}

export function queueContract(name: string, harness: QueueHarnessFactory, traits: QueueTraits): void {
  describe(`Queue contract: ${name}`, () => {
    const openQueue = async (t: TestContext) => {
      const h = await harness(t)
      const q = await h.open()
      t.after(() => q.close())
      return { h, q, topic: topicName() }
    }

    it('answers ping', async (t) => {
      const { q } = await openQueue(t)
      assert.equal(await q.ping(), true)
    })

    it('hands out ready messages first in, first out', async (t) => {
      const { q, topic } = await openQueue(t)
      const ids: string[] = []
      for (let i = 0; i < 6; i++) ids.push(await q.enqueue(topic, `doc${i}`, { n: i }))
      assert.equal(new Set(ids).size, 6)
      const got = await q.reserve<{ n: number }>(topic, 10, 60_000)
      assert.deepEqual(got.map((m) => m.id), ids)
      assert.deepEqual(got.map((m) => m.payload.n), [0, 1, 2, 3, 4, 5])
      assert.deepEqual(got.map((m) => m.key), ['doc0', 'doc1', 'doc2', 'doc3', 'doc4', 'doc5'])
      assert.ok(got.every((m) => m.attempts === 0))
    })

    it('reserves at most max messages', async (t) => {
      const { q, topic } = await openQueue(t)
      for (let i = 0; i < 5; i++) await q.enqueue(topic, 'k', i)
      assert.equal((await q.reserve(topic, 2, 60_000)).length, 2)
      assert.equal((await q.reserve(topic, 2, 60_000)).length, 2)
      assert.equal((await q.reserve(topic, 2, 60_000)).length, 1)
      assert.equal((await q.reserve(topic, 2, 60_000)).length, 0)
      assert.deepEqual(await q.reserve('never-used-topic-' + topicName(), 5, 1000), [])
    })

    it('ack removes a message for good, even past its lease', async (t) => {
      const { q, topic } = await openQueue(t)
      await q.enqueue(topic, 'k', 'x')
      const [m] = await q.reserve(topic, 1, 100)
      await q.ack(topic, m.id)
      assert.deepEqual(await q.depth(topic), { ready: 0, delayed: 0, inflight: 0 })
      await sleep(250)
      assert.deepEqual(await q.reserve(topic, 5, 100), [])
      assert.deepEqual(await q.depth(topic), { ready: 0, delayed: 0, inflight: 0 })
    })

    it('delivers again, with attempts + 1, a message whose lease ran out', async (t) => {
      const { q, topic } = await openQueue(t)
      const id = await q.enqueue(topic, 'k', { body: 'again' })
      const [first] = await q.reserve(topic, 1, 100)
      assert.equal(first.id, id)
      assert.equal(first.attempts, 0)
      const [again] = await reserveUntil<{ body: string }>(q, topic, (got) => got.length > 0, { max: 1, leaseMs: 60_000 })
      assert.equal(again.id, id)
      assert.equal(again.attempts, 1)
      assert.deepEqual(again.payload, { body: 'again' })
      await q.ack(topic, again.id)
      assert.deepEqual(await q.depth(topic), { ready: 0, delayed: 0, inflight: 0 })
    })

    it('defer: not ready before the delay, ready after it, attempts unchanged', async (t) => {
      const { q, topic } = await openQueue(t)
      const late = await q.enqueue(topic, 'late', 1)
      const soon = await q.enqueue(topic, 'soon', 2)
      const [a, b] = await q.reserve(topic, 2, 60_000)
      assert.deepEqual([a.id, b.id], [late, soon])
      await q.defer(topic, late, 60_000)
      assert.deepEqual(await q.reserve(topic, 5, 60_000), [])
      assert.deepEqual(await q.depth(topic), { ready: 0, delayed: 1, inflight: 1 })
      await q.defer(topic, soon, 100)
      const [back] = await reserveUntil(q, topic, (got) => got.length > 0)
      assert.equal(back.id, soon)
      assert.equal(back.attempts, 0)
      assert.deepEqual(await q.depth(topic), { ready: 0, delayed: 1, inflight: 1 })
    })

    it('enqueue with delayMs holds the message until it is due', async (t) => {
      const { q, topic } = await openQueue(t)
      await q.enqueue(topic, 'far', 'far', { delayMs: 60_000 })
      const near = await q.enqueue(topic, 'near', 'near', { delayMs: 100 })
      const now = await q.enqueue(topic, 'now', 'now')
      const first = await q.reserve(topic, 5, 60_000)
      assert.deepEqual(first.map((m) => m.id), [now])
      const [due] = await reserveUntil(q, topic, (got) => got.length > 0)
      assert.equal(due.id, near)
      assert.equal(due.payload, 'near')
      assert.deepEqual(await q.depth(topic), { ready: 0, delayed: 1, inflight: 2 })
    })

    it('removeByKey drops only waiting messages of that exact key', async (t) => {
      const { q, topic } = await openQueue(t)
      const key = 'doc "1" 문서'
      const leased = await q.enqueue(topic, key, 'leased')
      assert.equal((await q.reserve(topic, 1, 60_000))[0].id, leased)
      await q.enqueue(topic, key, 'ready one')
      await q.enqueue(topic, key, 'delayed one', { delayMs: 60_000 })
      const other = await q.enqueue(topic, `${key}2`, 'longer key')
      const prefixOf = await q.enqueue(topic, 'doc', 'shorter key')
      assert.equal(await q.removeByKey(topic, key), 2)
      assert.equal(await q.removeByKey(topic, key), 0)
      assert.equal(await q.removeByKey(topic, 'no such key'), 0)
      assert.deepEqual(await q.depth(topic), { ready: 2, delayed: 0, inflight: 1 })
      const rest = await q.reserve(topic, 10, 60_000)
      assert.deepEqual(rest.map((m) => m.id), [other, prefixOf])
    })

    it('present names the keys some message carries, ready, delayed or in flight, and no other', async (t) => {
      const { q, topic } = await openQueue(t)
      const key = 'doc "1" 문서'
      assert.deepEqual(await q.present(topic, [key]), new Set())
      const acked = await q.enqueue(topic, 'acked', 'done')
      assert.equal((await q.reserve(topic, 1, 60_000))[0].id, acked)
      await q.ack(topic, acked)
      await q.enqueue(topic, key, 'leased')
      await q.reserve(topic, 1, 60_000)
      await q.enqueue(topic, 'delayed', 'later', { delayMs: 60_000 })
      await q.enqueue(topic, 'ready', { key: 'in the payload' })
      await q.enqueue(topic, 'removed', 'gone')
      await q.removeByKey(topic, 'removed')
      const asked = [key, 'delayed', 'ready', 'acked', 'removed', 'doc', 'in the payload', `${key}2`, key]
      assert.deepEqual(await q.present(topic, asked), new Set([key, 'delayed', 'ready']))
      assert.deepEqual(await q.present(topic, []), new Set())
      assert.deepEqual(await q.present(`${topic}-other`, asked), new Set(), 'another topic holds none of them')
    })

    it('depth counts ready, delayed and inflight', async (t) => {
      const { q, topic } = await openQueue(t)
      assert.deepEqual(await q.depth(topic), { ready: 0, delayed: 0, inflight: 0 })
      for (let i = 0; i < 3; i++) await q.enqueue(topic, 'r', i)
      for (let i = 0; i < 2; i++) await q.enqueue(topic, 'd', i, { delayMs: 60_000 })
      await q.reserve(topic, 1, 60_000)
      assert.deepEqual(await q.depth(topic), { ready: 2, delayed: 2, inflight: 1 })
    })

    it('keeps payloads and keys exactly', async (t) => {
      const { q, topic } = await openQueue(t)
      const payload = {
        text: '한국어 "quoted" \\ back\nline',
        tricky: '{"attempts":5,"key":"x",',
        empty: [],
        emptyObject: {},
        nested: { list: [1, 2.5, -3, null, true, false], big: 2 ** 52 + 1 },
        nothing: null,
      }
      await q.enqueue(topic, '키 "with" quotes', payload)
      await q.enqueue(topic, '', 'plain string')
      await q.enqueue(topic, 'u', undefined)
      const got = await q.reserve(topic, 3, 60_000)
      assert.deepEqual(got[0].payload, payload)
      assert.equal(got[0].key, '키 "with" quotes')
      assert.equal(got[1].payload, 'plain string')
      assert.equal(got[1].key, '')
      assert.equal(got[2].payload, null)
    })

    it('ack and defer of unknown ids do nothing', async (t) => {
      const { q, topic } = await openQueue(t)
      await q.enqueue(topic, 'k', 1)
      await q.ack(topic, 'no-such-id')
      await q.defer(topic, 'no-such-id', 1000)
      assert.deepEqual(await q.depth(topic), { ready: 1, delayed: 0, inflight: 0 })
    })

    it('refuses bad arguments', async (t) => {
      const { q, topic } = await openQueue(t)
      await assert.rejects(q.reserve(topic, 0, 1000), TypeError)
      await assert.rejects(q.reserve(topic, 1, 0), TypeError)
      await assert.rejects(q.enqueue('', 'k', 1), TypeError)
      await assert.rejects(q.enqueue(topic, 'k', 1, { delayMs: -1 }), TypeError)
      await assert.rejects(q.enqueue(topic, 'k', () => 1), TypeError)
    })

    it('two concurrent consumers never share a leased message and together get each exactly once', async (t) => {
      const { h, q, topic } = await openQueue(t)
      const other = traits.separateInstances ? await h.open() : q
      if (other !== q) t.after(() => other.close())
      const total = 60
      await Promise.all(Array.from({ length: total }, (_, i) => q.enqueue(topic, `k${i % 7}`, i)))
      const seen: string[] = []
      const consume = async (queue: Queue) => {
        const deadline = Date.now() + 15_000
        while (seen.length < total && Date.now() < deadline) {
          const batch = await queue.reserve<number>(topic, 3, 60_000)
          for (const m of batch) seen.push(m.id)
          // Hold the lease across a turn of the event loop, so the other consumer reserves meanwhile.
          await sleep(batch.length === 0 ? 10 : 1)
          for (const m of batch) await queue.ack(topic, m.id)
        }
      }
      await Promise.all([consume(q), consume(other), consume(q), consume(other)])
      assert.equal(seen.length, total)
      assert.equal(new Set(seen).size, total)
      assert.deepEqual(await q.depth(topic), { ready: 0, delayed: 0, inflight: 0 })
    })

    it(`loses nothing across a restart (reserved messages come back ${traits.restartRedelivery === 'immediate' ? 'at once' : 'after their lease'})`, async (t) => {
      const { h, q, topic } = await openQueue(t)
      const ids: string[] = []
      for (let i = 0; i < 50; i++) ids.push(await q.enqueue(topic, `doc${i}`, { i }))
      const leased = await q.reserve<{ i: number }>(topic, 10, 1500)
      assert.deepEqual(leased.map((m) => m.id), ids.slice(0, 10))
      await q.close()

      const reopened = await h.open()
      t.after(() => reopened.close())
      if (traits.restartRedelivery === 'immediate') {
        assert.deepEqual(await reopened.depth(topic), { ready: 50, delayed: 0, inflight: 0 })
      }
      const got = await reserveUntil<{ i: number }>(reopened, topic, (g) => new Set(g.map((m) => m.id)).size >= 50, { max: 50, ack: true })
      assert.equal(got.length, 50)
      assert.deepEqual(new Set(got.map((m) => m.id)), new Set(ids))
      for (const m of got) {
        const i = ids.indexOf(m.id)
        assert.equal(m.payload.i, i)
        assert.equal(m.attempts, i < 10 ? 1 : 0, `message ${i}`)
      }
      if (traits.restartRedelivery === 'immediate') assert.deepEqual(got.map((m) => m.id), ids)
      assert.deepEqual(await reopened.depth(topic), { ready: 0, delayed: 0, inflight: 0 })
    })

    it('keeps delayed messages across a restart', async (t) => {
      const { h, q, topic } = await openQueue(t)
      const far = await q.enqueue(topic, 'far', 1, { delayMs: 60_000 })
      const soon = await q.enqueue(topic, 'soon', 2, { delayMs: 150 })
      await q.close()
      const reopened = await h.open()
      t.after(() => reopened.close())
      const [m] = await reserveUntil(reopened, topic, (g) => g.length > 0)
      assert.equal(m.id, soon)
      assert.notEqual(m.id, far)
      assert.deepEqual(await reopened.depth(topic), { ready: 0, delayed: 1, inflight: 1 })
    })

    it('subscribe calls the listener after an enqueue, and stops after unsubscribe', async (t) => {
      const { q, topic } = await openQueue(t)
      let firstCalls = 0
      const stopFirst = q.subscribe(topic, () => firstCalls++)
      let wake!: () => void
      let woken = new Promise<void>((r) => (wake = r))
      const stopSecond = q.subscribe(topic, () => wake())
      t.after(stopSecond)
      // A fresh subscription may need a moment to reach the server; enqueue until the listener hears one.
      const deadline = Date.now() + 10_000
      for (let heard = false; !heard; ) {
        if (Date.now() > deadline) assert.fail('listener never called')
        await q.enqueue(topic, 'k', 1)
        heard = await Promise.race([woken.then(() => true), sleep(200).then(() => false)])
      }
      assert.ok(firstCalls >= 1)
      stopFirst()
      const before = firstCalls
      woken = new Promise<void>((r) => (wake = r))
      await q.enqueue(topic, 'k', 2)
      await woken
      await sleep(20)
      assert.equal(firstCalls, before)
    })
  })
}
