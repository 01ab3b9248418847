// The Redis queue, shared by every process on every machine that points at one Redis. Per topic:
//   <prefix>:q:<topic>:ready     LIST of ids, FIFO
//   <prefix>:q:<topic>:delayed   ZSET id -> due time (ms)
//   <prefix>:q:<topic>:inflight  ZSET id -> lease deadline (ms)
//   <prefix>:q:<topic>:msg       HASH id -> {"attempts":n,"key":...,"id":...,"payload":...}
// Every move between these runs inside one Lua script, and all times are the Redis server's clock, so
// two consumers never hold one message inside its lease whatever their machines' clocks say.
// A message reserved before a restart is handed out again once its lease runs out (attempts + 1).
import { randomUUID } from 'node:crypto'
import type { Redis as RedisClient } from 'ioredis'
import { AppError, serviceUnavailable } from '../../kernel/errors.ts'
import { openRedis, redisWhere, type RedisConnectionOptions } from '../cache/redis-connection.ts'
import type { Queue, QueueDepth, QueueMessage } from '../ports.ts'
import { checkDelay, checkEnqueue, checkReserve, checkTopic } from './checks.ts'

/** The queue's keys live under `prefix` (default `quarry`). */
export type RedisQueueOptions = RedisConnectionOptions

/** Redis server time in ms; the scripts use it instead of any client's clock. */
const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`

// KEYS: ready, delayed, msg. ARGV: id, message JSON, delay ms, wake channel.
const ENQUEUE = `${NOW}
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
local delay = tonumber(ARGV[3])
if delay > 0 then
  redis.call('ZADD', KEYS[2], now + delay, ARGV[1])
else
  redis.call('RPUSH', KEYS[1], ARGV[1])
  redis.call('PUBLISH', ARGV[4], '1')
end
return 1`

// KEYS: ready, delayed, inflight, msg. ARGV: max, lease ms.
// The attempts counter leads the message JSON, so it is bumped by string surgery and the payload is
// never decoded and re-encoded by cjson (which would turn [] into {} and round big numbers).
const RESERVE = `${NOW}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 1000)) do
  redis.call('ZREM', KEYS[2], id)
  redis.call('RPUSH', KEYS[1], id)
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 1000)) do
  redis.call('ZREM', KEYS[3], id)
  local raw = redis.call('HGET', KEYS[4], id)
  if raw then
    local n = string.match(raw, '^{"attempts":(%d+),')
    if n then
      redis.call('HSET', KEYS[4], id, '{"attempts":' .. string.format('%d', tonumber(n) + 1) .. ',' .. string.sub(raw, string.len(n) + 14))
    end
    redis.call('RPUSH', KEYS[1], id)
  end
end
local out = {}
local max = tonumber(ARGV[1])
local deadline = now + tonumber(ARGV[2])
while #out < max do
  local id = redis.call('LPOP', KEYS[1])
  if not id then break end
  local raw = redis.call('HGET', KEYS[4], id)
  if raw then
    redis.call('ZADD', KEYS[3], deadline, id)
    out[#out + 1] = raw
  end
end
return out`

// KEYS: ready, delayed, inflight, msg. ARGV: id, delay ms.
const DEFER = `${NOW}
if redis.call('HEXISTS', KEYS[4], ARGV[1]) == 0 then return 0 end
if redis.call('ZREM', KEYS[3], ARGV[1]) == 0 then redis.call('LREM', KEYS[1], 0, ARGV[1]) end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
return 1`

// KEYS: ready, delayed, msg. ARGV: the text '"key":<key as JSON>,' that follows the attempts field.
const REMOVE_BY_KEY = `local needle = ARGV[1]
local function matches(raw)
  local comma = string.find(raw, ',', 1, true)
  return comma ~= nil and string.sub(raw, comma + 1, comma + string.len(needle)) == needle
end
local removed = 0
local keep = {}
local ready = redis.call('LRANGE', KEYS[1], 0, -1)
for _, id in ipairs(ready) do
  local raw = redis.call('HGET', KEYS[3], id)
  if raw and matches(raw) then
    redis.call('HDEL', KEYS[3], id)
    removed = removed + 1
  elseif raw then
    keep[#keep + 1] = id
  end
end
if #keep < #ready then
  redis.call('DEL', KEYS[1])
  for i = 1, #keep, 1000 do
    redis.call('RPUSH', KEYS[1], unpack(keep, i, math.min(i + 999, #keep)))
  end
end
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local raw = redis.call('HGET', KEYS[3], id)
  if not raw then
    redis.call('ZREM', KEYS[2], id)
  elseif matches(raw) then
    redis.call('ZREM', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
    removed = removed + 1
  end
end
return removed`

// KEYS: msg. ARGV: the texts '"key":<key as JSON>,' of the keys asked about. Returns the indexes (1-based) of
// those some message carries: a message's key text runs from its first comma to the ',"id":' after it (a
// quote inside a key is escaped, so that text cannot occur inside one).
const PRESENT = `local wanted = {}
for i, needle in ipairs(ARGV) do wanted[needle] = i end
local found = {}
for _, raw in ipairs(redis.call('HVALS', KEYS[1])) do
  local comma = string.find(raw, ',', 1, true)
  local stop = comma and string.find(raw, ',"id":', comma + 1, true)
  if stop then
    local needle = string.sub(raw, comma + 1, stop)
    local i = wanted[needle]
    if i then
      found[#found + 1] = i
      wanted[needle] = nil
    end
  end
end
return found`

// KEYS: ready, delayed, inflight. Due and expired messages count as ready, as reserve would see them.
const DEPTH = `${NOW}
local due = redis.call('ZCOUNT', KEYS[2], '-inf', now)
local expired = redis.call('ZCOUNT', KEYS[3], '-inf', now)
return {redis.call('LLEN', KEYS[1]) + due + expired, redis.call('ZCARD', KEYS[2]) - due, redis.call('ZCARD', KEYS[3]) - expired}`

/** How a message's JSON spells its key, with the comma after it: what REMOVE_BY_KEY and PRESENT match on. */
const keyText = (key: string) => `"key":${JSON.stringify(key)},`

type Args = (string | number)[]
interface Scripts {
  quarryEnqueue(...args: Args): Promise<number>
  quarryReserve(...args: Args): Promise<string[]>
  quarryDefer(...args: Args): Promise<number>
  quarryRemoveByKey(...args: Args): Promise<number>
  quarryPresent(...args: Args): Promise<number[]>
  quarryDepth(...args: Args): Promise<number[]>
}

export async function createRedisQueue(options: RedisQueueOptions): Promise<Queue> {
  if (!options?.host) throw new Error('createRedisQueue: host is required')
  const prefix = options.prefix ?? 'quarry'
  const where = redisWhere(options)
  const client = await openRedis(options)
  let lastError: Error | undefined
  // Without a listener ioredis prints every connection error; the commands report them instead.
  client.on('error', (err: Error) => (lastError = err))
  client.defineCommand('quarryEnqueue', { numberOfKeys: 3, lua: ENQUEUE })
  client.defineCommand('quarryReserve', { numberOfKeys: 4, lua: RESERVE })
  client.defineCommand('quarryDefer', { numberOfKeys: 4, lua: DEFER })
  client.defineCommand('quarryRemoveByKey', { numberOfKeys: 3, lua: REMOVE_BY_KEY })
  client.defineCommand('quarryPresent', { numberOfKeys: 1, lua: PRESENT })
  client.defineCommand('quarryDepth', { numberOfKeys: 3, lua: DEPTH })
  const scripts = client as unknown as Scripts

  // The server's run_id, read at each (re)connect (the first connect included: the client connects lazily): another
  // one is a restarted server, whose keys may be gone.
  const lossListeners = new Set<() => void>()
  let runId: string | null = null
  const readRunId = async () => /run_id:(\w+)/.exec(await client.info('server'))?.[1] ?? null
  client.on('ready', () => {
    void readRunId().then((id) => {
      if (id === null || id === runId) return
      const restarted = runId !== null
      runId = id
      if (!restarted) return
      for (const listener of lossListeners) {
        try {
          listener()
        } catch {
          // A listener's failure is not the queue's.
        }
      }
    }, () => {})
  })

  let subscriber: RedisClient | undefined
  const listeners = new Map<string, Set<() => void>>()
  let closed = false

  const keys = (topic: string) => {
    const base = `${prefix}:q:${topic}`
    return { ready: `${base}:ready`, delayed: `${base}:delayed`, inflight: `${base}:inflight`, msg: `${base}:msg`, wake: `${base}:wake` }
  }

  const unavailable = (op: string, err: unknown): AppError => {
    if (err instanceof AppError) return err
    const e = err as Error
    const cause = lastError && lastError !== e && !e?.message?.includes(lastError.message) ? ` (last connection error: ${lastError.message})` : ''
    return serviceUnavailable(`Queue unavailable: Redis at ${where} failed during ${op}: ${e?.message ?? String(err)}${cause}`, err)
  }

  async function run<R>(op: string, fn: () => Promise<R>): Promise<R> {
    if (closed) throw serviceUnavailable(`Redis queue (${where}) is closed`)
    // Between failed connection attempts a command would only wait for the next one to fail too.
    if (client.status === 'reconnecting' || client.status === 'end') {
      throw serviceUnavailable(`Queue unavailable: Redis at ${where} is not reachable during ${op}${lastError ? `: ${lastError.message}` : ''}`, lastError)
    }
    try {
      return await fn()
    } catch (err) {
      throw unavailable(op, err)
    }
  }

  function getSubscriber(): RedisClient {
    if (subscriber) return subscriber
    const sub = client.duplicate()
    sub.on('error', () => {
      // Wake-ups are hints; consumers still poll, so a lost subscription costs latency only.
    })
    sub.on('message', (channel: string) => {
      for (const listener of listeners.get(channel) ?? []) {
        try {
          listener()
        } catch {
          // A listener's failure is not the queue's.
        }
      }
    })
    return (subscriber = sub)
  }

  return {
    name: 'redis',

    async enqueue<T>(topic: string, key: string, payload: T, opts: { delayMs?: number } = {}): Promise<string> {
      const { delayMs, payloadJson } = checkEnqueue(topic, key, payload, opts)
      const id = randomUUID()
      const k = keys(topic)
      const json = `{"attempts":0,${keyText(key)}"id":"${id}","payload":${payloadJson}}`
      await run('enqueue', () => scripts.quarryEnqueue(k.ready, k.delayed, k.msg, id, json, delayMs, k.wake))
      return id
    },

    async reserve<T = unknown>(topic: string, max: number, leaseMs: number): Promise<QueueMessage<T>[]> {
      checkReserve(topic, max, leaseMs)
      const k = keys(topic)
      const raws = await run('reserve', () => scripts.quarryReserve(k.ready, k.delayed, k.inflight, k.msg, max, Math.ceil(leaseMs)))
      return raws.map((raw) => {
        const m = JSON.parse(raw) as { attempts: number; key: string; id: string; payload: T }
        return { id: m.id, key: m.key, payload: m.payload, attempts: m.attempts }
      })
    },

    async ack(topic, id) {
      checkTopic(topic)
      const k = keys(topic)
      // An id left in the ready list (its lease ran out before the ack) is skipped by reserve once its body is gone.
      await run('ack', () => client.multi().zrem(k.inflight, id).zrem(k.delayed, id).hdel(k.msg, id).exec())
    },

    async defer(topic, id, delayMs) {
      checkTopic(topic)
      checkDelay(delayMs)
      const k = keys(topic)
      await run('defer', () => scripts.quarryDefer(k.ready, k.delayed, k.inflight, k.msg, id, Math.ceil(delayMs)))
    },

    async removeByKey(topic, key) {
      checkTopic(topic)
      const k = keys(topic)
      return run('removeByKey', () => scripts.quarryRemoveByKey(k.ready, k.delayed, k.msg, keyText(key)))
    },

    async present(topic, wanted) {
      checkTopic(topic)
      const unique = [...new Set(wanted)]
      if (unique.length === 0) return new Set()
      const hits = await run('present', () => scripts.quarryPresent(keys(topic).msg, ...unique.map(keyText)))
      return new Set(hits.map((n) => unique[n - 1]))
    },

    async depth(topic): Promise<QueueDepth> {
      checkTopic(topic)
      const k = keys(topic)
      const [ready, delayed, inflight] = await run('depth', () => scripts.quarryDepth(k.ready, k.delayed, k.inflight))
      return { ready, delayed, inflight }
    },

    subscribe(topic, listener) {
      checkTopic(topic)
      const channel = keys(topic).wake
      let set = listeners.get(channel)
      if (!set) {
        listeners.set(channel, (set = new Set()))
        if (!closed) getSubscriber().subscribe(channel).catch(() => {})
      }
      set.add(listener)
      return () => {
        const current = listeners.get(channel)
        if (!current?.delete(listener) || current.size > 0) return
        listeners.delete(channel)
        if (!closed) subscriber?.unsubscribe(channel).catch(() => {})
      }
    },

    onLoss(listener) {
      lossListeners.add(listener)
      return () => void lossListeners.delete(listener)
    },

    async ping() {
      if (closed || client.status === 'reconnecting' || client.status === 'end') return false
      try {
        return (await client.ping()) === 'PONG'
      } catch {
        return false
      }
    },

    async close() {
      if (closed) return
      closed = true
      listeners.clear()
      await Promise.all([client, subscriber].map((c) => (c ? shutdown(c) : undefined)))
    },
  }
}

/** QUIT when connected (lets replies in flight arrive); otherwise stop reconnecting at once. */
async function shutdown(c: RedisClient): Promise<void> {
  if (c.status === 'ready') {
    try {
      await c.quit()
      return
    } catch {
      // fall through
    }
  }
  c.disconnect()
}
