// One Redis connection as every Quarry Redis client opens it (the search cache, shared secrets, the queue): lazy,
// bounded connect time, fail fast when down.
import type { Redis as RedisClient, RedisOptions } from 'ioredis'

export interface RedisConnectionOptions {
  host: string
  port?: number
  /** Empty = no password. */
  password?: string
  db?: number
  /** Prefix of every key written, so deployments can share one Redis. */
  prefix?: string
  /** Time allowed to open a connection (default 2000 ms), so a down Redis fails fast. */
  connectTimeoutMs?: number
}

/** host:port[/db], for messages. */
export const redisWhere = (o: RedisConnectionOptions) => `${o.host}:${o.port ?? 6379}${o.db ? `/${o.db}` : ''}`

export async function openRedis(o: RedisConnectionOptions, overrides: Partial<RedisOptions> = {}): Promise<RedisClient> {
  const { Redis } = await import('ioredis')
  return new Redis({
    host: o.host,
    port: o.port ?? 6379,
    password: o.password || undefined,
    db: o.db ?? 0,
    lazyConnect: true,
    connectTimeout: o.connectTimeoutMs ?? 2000,
    // A command waits through one reconnect at most, then fails: a down Redis answers 503 quickly
    // instead of holding requests while ioredis keeps reconnecting in the background.
    maxRetriesPerRequest: 1,
    retryStrategy: (times) => Math.min(times * 100, 1000),
    ...overrides,
  })
}
