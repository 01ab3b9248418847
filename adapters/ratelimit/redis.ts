// Rate-limit counters in Redis, shared by every process of a deployment: <prefix>:rl:<rule>:<user_id>, one
// script per request (INCRBY, and PEXPIRE when the window starts; it answers the count and the time left).
// The client never queues or retries a command: while Redis is down every hit throws at once and the limiter
// lets the request pass (fail open) instead of holding it.
import type { Redis as RedisClient } from 'ioredis'
import { openRedis, redisWhere, type RedisConnectionOptions } from '../cache/redis-connection.ts'
import type { RateCounter, WindowCount } from './counter.ts'

// KEYS: the counter. ARGV: weight, window ms. A key left without expiry (cannot happen in one script, but a
// restore or a manual SET could) gets one, so no counter lives for ever.
const HIT = `local n = redis.call('INCRBY', KEYS[1], ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2])
end
return {n, ttl}`

export interface RedisRateCounterOptions extends RedisConnectionOptions {
  /** Longest wait for an answer before the request passes unchecked (default 500 ms). */
  commandTimeoutMs?: number
}

export async function createRedisRateCounter(options: RedisRateCounterOptions): Promise<RateCounter> {
  const prefix = `${options.prefix ?? 'quarry'}:rl`
  const client: RedisClient = await openRedis(options, {
    lazyConnect: false, enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: options.commandTimeoutMs ?? 500,
  })
  // Reported by hit() as it fails; ioredis keeps reconnecting in the background.
  client.on('error', () => {})
  // The first requests are counted too: wait for the connection, or its first failure (then the limiter fails
  // open until a reconnect succeeds), never longer than the connect timeout.
  await new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer)
      client.off('ready', done)
      client.off('error', done)
      resolve()
    }
    const timer = setTimeout(done, options.connectTimeoutMs ?? 2000)
    client.once('ready', done)
    client.once('error', done)
  })
  client.defineCommand('quarryRateHit', { numberOfKeys: 1, lua: HIT })
  const script = client as unknown as { quarryRateHit(key: string, weight: number, windowMs: number): Promise<[number, number]> }
  const where = redisWhere(options)
  return {
    name: 'redis',
    async hit(key, weight, windowMs): Promise<WindowCount> {
      if (client.status !== 'ready') throw new Error(`Redis at ${where} is not connected (${client.status})`)
      const [count, ttlMs] = await script.quarryRateHit(`${prefix}:${key}`, weight, windowMs)
      return { count: Number(count), ttlMs: Number(ttlMs) }
    },
    async close() {
      client.disconnect()
    },
  }
}
