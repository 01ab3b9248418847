// The search cache shared by every instance that points at one Redis:
//   <prefix>:sc:v:<kb_id>   the KB's index version (string integer; never deleted, so it only grows)
//   <prefix>:sc:e:<key>:<sha1 of the versions>   a cached answer, with the entry lifetime
//   <prefix>:sc:all          ZSET answer key -> expiry (ms): the bound on how many answers are kept
//   <prefix>:sc:k:<kb_id>    ZSET answer key -> expiry (ms): the answers that include the KB, for clear(kb_id)
// A version is created from the Redis clock in microseconds and then only incremented, so a version key that was
// lost (flushed, evicted) comes back larger than any value it had: an old answer can never match it again.
// All times are the Redis server's clock.
import { serviceUnavailable } from '../../kernel/errors.ts'
import type { SearchCache } from '../ports.ts'
import { openRedis, redisWhere, type RedisConnectionOptions } from './redis-connection.ts'

export interface RedisSearchCacheOptions extends RedisConnectionOptions {
  ttlMs: number
  maxEntries: number
}

const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`
const FRESH_VERSION = `local t = redis.call('TIME')
local fresh = t[1] .. string.format('%06d', tonumber(t[2]))`

// KEYS: version keys. ARGV: entry key prefix. Returns {versions, value}; {} when a KB has no version.
const LOOKUP = `local vs = redis.call('MGET', unpack(KEYS))
for i = 1, #vs do
  if not vs[i] then return {} end
end
return {vs, redis.call('GET', ARGV[1] .. ':' .. redis.sha1hex(table.concat(vs, '.')))}`

// KEYS: all index, then one index per KB. ARGV: entry key prefix, versions joined by '.', value, ttl ms, max entries.
const STORE = `${NOW}
local key = ARGV[1] .. ':' .. redis.sha1hex(ARGV[2])
local ttl = tonumber(ARGV[4])
local expires = now + ttl
redis.call('SET', key, ARGV[3], 'PX', ttl)
for i = 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  redis.call('ZADD', KEYS[i], expires, key)
  redis.call('PEXPIRE', KEYS[i], ttl)
end
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[5])
if over > 0 then
  local oldest = redis.call('ZPOPMIN', KEYS[1], over)
  for i = 1, #oldest, 2 do redis.call('DEL', oldest[i]) end
end
return 1`

// KEYS: version keys.
const INIT = `${FRESH_VERSION}
for i = 1, #KEYS do redis.call('SET', KEYS[i], fresh, 'NX') end
return 1`

// KEYS: the version key.
const BUMP = `if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('INCR', KEYS[1]) end
${FRESH_VERSION}
redis.call('SET', KEYS[1], fresh)
return 0`

// KEYS: the index to clear (the KB's, or the all index), the all index. Counts the answers that still existed.
const CLEAR = `local n = 0
for _, key in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  n = n + redis.call('DEL', key)
  if KEYS[1] ~= KEYS[2] then redis.call('ZREM', KEYS[2], key) end
end
redis.call('DEL', KEYS[1])
return n`

interface Scripts {
  quarryCacheLookup(...args: (string | number)[]): Promise<[string[], string | null] | []>
  quarryCacheStore(...args: (string | number)[]): Promise<number>
  quarryCacheInit(...args: (string | number)[]): Promise<number>
  quarryCacheBump(...args: (string | number)[]): Promise<number>
  quarryCacheClear(...args: (string | number)[]): Promise<number>
}

export async function createRedisSearchCache(options: RedisSearchCacheOptions): Promise<SearchCache> {
  if (!options?.host) throw new Error('createRedisSearchCache: host is required')
  if (!(options.ttlMs > 0)) throw new Error('createRedisSearchCache: ttlMs must be > 0')
  if (!(options.maxEntries >= 1)) throw new Error('createRedisSearchCache: maxEntries must be >= 1')
  const prefix = `${options.prefix ?? 'quarry'}:sc`
  const where = redisWhere(options)
  const client = await openRedis(options)
  let lastError: Error | undefined
  client.on('error', (err: Error) => (lastError = err))
  client.defineCommand('quarryCacheLookup', { lua: LOOKUP })
  client.defineCommand('quarryCacheStore', { lua: STORE })
  client.defineCommand('quarryCacheInit', { lua: INIT })
  client.defineCommand('quarryCacheBump', { numberOfKeys: 1, lua: BUMP })
  client.defineCommand('quarryCacheClear', { numberOfKeys: 2, lua: CLEAR })
  const scripts = client as unknown as Scripts
  let closed = false

  const versionKey = (kbId: string) => `${prefix}:v:${kbId}`
  const entryPrefix = (key: string) => `${prefix}:e:${key}`
  const allIndex = `${prefix}:all`
  const kbIndex = (kbId: string) => `${prefix}:k:${kbId}`

  async function run<R>(op: string, fn: () => Promise<R>): Promise<R> {
    if (closed) throw serviceUnavailable(`Search cache (Redis at ${where}) is closed`)
    if (client.status === 'reconnecting' || client.status === 'end') {
      throw serviceUnavailable(`Search cache unavailable: Redis at ${where} is not reachable during ${op}${lastError ? `: ${lastError.message}` : ''}`, lastError)
    }
    try {
      return await fn()
    } catch (err) {
      throw serviceUnavailable(`Search cache unavailable: Redis at ${where} failed during ${op}: ${(err as Error)?.message ?? String(err)}`, err)
    }
  }

  return {
    name: 'redis',
    async lookup(key, kbIds) {
      // Scripts with a variable key count: the count leads the arguments.
      const out = await run('lookup', () => scripts.quarryCacheLookup(kbIds.length, ...kbIds.map(versionKey), entryPrefix(key)))
      if (out.length === 0) return { versions: null, value: null }
      return { versions: out[0], value: out[1] ?? null }
    },
    async store(key, kbIds, versions, value) {
      await run('store', () => scripts.quarryCacheStore(1 + kbIds.length, allIndex, ...kbIds.map(kbIndex),
        entryPrefix(key), versions.join('.'), value, options.ttlMs, options.maxEntries))
    },
    async init(kbIds) {
      if (kbIds.length > 0) await run('init', () => scripts.quarryCacheInit(kbIds.length, ...kbIds.map(versionKey)))
    },
    async bump(kbId) {
      await run('bump', () => scripts.quarryCacheBump(versionKey(kbId)))
    },
    async clear(kbId) {
      return run('clear', () => scripts.quarryCacheClear(kbId === undefined ? allIndex : kbIndex(kbId), allIndex))
    },
    async close() {
      if (closed) return
      closed = true
      try {
        await client.quit()
      } catch {
        client.disconnect()
      }
    },
  }
}
