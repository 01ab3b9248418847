// SharedSecrets drivers (adapters/ports.ts): a file per secret under data_dir (embedded engines), or one Redis
// key per secret (services), created with "only if absent" so that instances starting together agree on one.
import { randomBytes } from 'node:crypto'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { serviceUnavailable } from '../../kernel/errors.ts'
import type { SharedSecrets } from '../ports.ts'
import { openRedis, redisWhere, type RedisConnectionOptions } from './redis-connection.ts'

const SIZE = 32
const NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/

function checkName(name: string): void {
  if (!NAME.test(name)) throw new Error(`secret name must match ${NAME}: ${name}`)
}

function cached(read: (name: string) => Promise<Buffer>): (name: string, opts?: { fresh?: boolean }) => Promise<Buffer> {
  const known = new Map<string, Promise<Buffer>>()
  return (name, opts) => {
    checkName(name)
    let p = opts?.fresh ? undefined : known.get(name)
    if (!p) {
      p = read(name)
      known.set(name, p)
      p.catch(() => known.delete(name))
    }
    return p
  }
}

export function createFileSecrets(dir: string): SharedSecrets {
  return {
    name: 'file',
    get: cached(async (name) => {
      const file = join(dir, name)
      await mkdir(dir, { recursive: true, mode: 0o700 })
      try {
        await writeFile(file, randomBytes(SIZE).toString('hex'), { flag: 'wx', mode: 0o600 })
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
      }
      const hex = (await readFile(file, 'utf8')).trim()
      if (!/^[0-9a-f]{64}$/.test(hex)) throw new Error(`${file} does not hold a secret (64 hex digits); remove it to have a new one made`)
      return Buffer.from(hex, 'hex')
    }),
    async close() {},
  }
}

/** Reads are rare (once per name, and again when asked fresh), so each opens a connection and closes it. */
export function createRedisSecrets(options: RedisConnectionOptions): SharedSecrets {
  return {
    name: 'redis',
    get: cached(async (name) => {
      // No reconnecting: the one command fails and the caller asks again later.
      const client = await openRedis(options, { retryStrategy: () => null })
      client.on('error', () => {})
      const key = `${options.prefix ?? 'quarry'}:secret:${name}`
      try {
        await client.set(key, randomBytes(SIZE).toString('hex'), 'NX')
        const hex = await client.get(key)
        if (!hex || !/^[0-9a-f]{64}$/.test(hex)) throw new Error(`${key} does not hold a secret (64 hex digits)`)
        return Buffer.from(hex, 'hex')
      } catch (err) {
        throw serviceUnavailable(`Shared secret unavailable: Redis at ${redisWhere(options)}: ${(err as Error).message}`, err)
      } finally {
        client.disconnect()
      }
    }),
    async close() {},
  }
}
