// The AuthzBus (types.ts): how a role, KB or config change reaches the caches of every process at once. With the
// services it is Redis pub/sub on a dedicated subscriber connection (one channel per key prefix); with the embedded
// engines one process owns data_dir, so an in-process fan-out is the whole bus.
import { randomBytes } from 'node:crypto'
import type { Redis as RedisClient } from 'ioredis'
import { openRedis, redisWhere, type RedisConnectionOptions } from '../../adapters/cache/redis-connection.ts'
import type { Logger } from '../../kernel/log.ts'
import type { AuthzBus, AuthzEvent } from './types.ts'

type Listener = (event: AuthzEvent) => void

/** In-process listeners; a listener that throws must not keep the others from hearing the event. */
class Fanout {
  private readonly listeners = new Set<Listener>()
  constructor(private readonly log: Logger) {}

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener)
    return () => void this.listeners.delete(listener)
  }

  emit(event: AuthzEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event)
      } catch (err) {
        this.log.error({ err, event }, 'authz event listener failed')
      }
    }
  }
}

export function createLocalBus(log: Logger): AuthzBus {
  const fanout = new Fanout(log)
  return {
    publish: async (event) => fanout.emit(event),
    subscribe: (listener) => fanout.subscribe(listener),
    close: async () => {},
  }
}

const isEvent = (v: unknown): v is AuthzEvent =>
  typeof v === 'object' && v !== null && ['user', 'kb', 'config', 'invites', 'all'].includes((v as { type?: unknown }).type as string)

/** How long a publisher waits for the other processes to confirm an event (a dead one must not hold a write). */
export const ACK_TIMEOUT_MS = 2_000

/**
 * Redis pub/sub. Each process tags what it publishes with its own id and ignores its own messages (they were
 * applied locally already). A receiver confirms on the publisher's own ack channel once it has applied the event,
 * and publish() returns when every process PUBLISH reached has confirmed (or after ACK_TIMEOUT_MS): the change's
 * response is sent only then, so the next request anywhere sees it, whichever socket its process reads first. While the subscriber is down, other processes' changes are missed: every cache is
 * dropped when it goes down and again when it is back (an 'all' event), and `live()` says not to store
 * anything in between, so nothing read during the gap outlives it.
 */
export async function createRedisBus(options: RedisConnectionOptions, log: Logger): Promise<AuthzBus & { live(): boolean }> {
  const fanout = new Fanout(log)
  const channel = `${options.prefix ?? 'quarry'}:authz:events`
  const origin = randomBytes(8).toString('hex')
  const ackChannel = (o: string) => `${channel}:ack:${o}`
  let serial = 0
  /** Publishes awaiting confirmations, by id. */
  const waiting = new Map<number, { got: number; expected: number; done: () => void }>()
  // The subscriber retries for ever (a pub/sub connection carries no commands that could hang a request).
  // Named, so an operator (or a test) can tell it apart in CLIENT LIST.
  const subscriber: RedisClient = await openRedis(options, { maxRetriesPerRequest: null, lazyConnect: true, connectionName: `${options.prefix ?? 'quarry'}-authz-events` })
  const publisher: RedisClient = await openRedis(options)
  let live = false
  let closed = false
  subscriber.on('error', (err) => log.warn({ err: err.message, redis: redisWhere(options) }, 'authz event subscriber error'))
  publisher.on('error', () => {})
  subscriber.on('message', (ch: string, text: string) => {
    if (ch === ackChannel(origin)) {
      const w = waiting.get(Number(text))
      if (w && ++w.got >= w.expected) w.done()
      return
    }
    if (ch !== channel) return
    let msg: { origin?: unknown; id?: unknown; event?: unknown }
    try {
      msg = JSON.parse(text)
    } catch {
      return
    }
    if (msg.origin === origin || typeof msg.origin !== 'string' || !isEvent(msg.event)) return
    fanout.emit(msg.event)
    publisher.publish(ackChannel(msg.origin), String(msg.id)).catch(() => {})
  })
  subscriber.on('close', () => {
    if (!live) return
    live = false
    if (!closed) log.warn({ redis: redisWhere(options) }, 'authz event subscriber disconnected: caches dropped until it is back')
    fanout.emit({ type: 'all' })
  })
  // ioredis re-subscribes on reconnect; 'ready' follows each (re)connection.
  subscriber.on('ready', () => {
    if (live) return
    live = true
    fanout.emit({ type: 'all' })
  })
  await subscriber.connect()
  await subscriber.subscribe(channel, ackChannel(origin))
  live = true

  return {
    live: () => live,
    async publish(event) {
      fanout.emit(event)
      const id = ++serial
      // Confirmations may arrive before PUBLISH answers with how many to expect.
      const w = { got: 0, expected: Infinity, done: () => {} }
      const confirmed = new Promise<void>((resolve) => (w.done = resolve))
      waiting.set(id, w)
      const timer = setTimeout(() => {
        log.warn({ event, confirmed: w.got, expected: w.expected }, 'authz event not confirmed by every process in time')
        w.done()
      }, ACK_TIMEOUT_MS)
      try {
        // The count includes this process's own subscriber, which does not confirm.
        w.expected = (await publisher.publish(channel, JSON.stringify({ origin, id, event }))) - 1
        if (w.got >= w.expected) w.done()
        await confirmed
      } catch (err) {
        // The change is committed; the others drop their caches when their subscriber reconnects (and at TTL).
        log.warn({ err: (err as Error).message, event, redis: redisWhere(options) }, 'authz event could not be published')
      } finally {
        clearTimeout(timer)
        waiting.delete(id)
      }
    },
    subscribe: (listener) => fanout.subscribe(listener),
    async close() {
      closed = true
      subscriber.disconnect()
      publisher.disconnect()
    },
  }
}
