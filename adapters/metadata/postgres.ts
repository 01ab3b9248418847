// Metadata on a PostgreSQL server through the `postgres` client, with a bounded pool.
import type { Sql, SqlRunner } from '../ports.ts'
import { OID, mapSqlError, parseInt8, parseTimestamp } from './common.ts'

export interface PostgresOptions {
  host: string
  port: number
  database: string
  user: string
  password: string
  poolSize: number
  connectTimeoutSec: number
}

export async function createPostgresSql(opts: PostgresOptions): Promise<Sql> {
  const { default: postgres } = await import('postgres')
  const client = postgres({
    host: opts.host,
    port: opts.port,
    database: opts.database,
    username: opts.user,
    password: opts.password || undefined,
    max: opts.poolSize,
    connect_timeout: opts.connectTimeoutSec,
    idle_timeout: 60,
    connection: { TimeZone: 'UTC', application_name: 'quarry' },
    onnotice: () => {},
    types: {
      int8: { to: OID.INT8, from: [OID.INT8], serialize: (v: unknown) => String(v), parse: parseInt8 },
      timestamptz: {
        to: OID.TIMESTAMPTZ,
        from: [OID.TIMESTAMPTZ, OID.TIMESTAMP],
        serialize: (v: unknown) => (v instanceof Date ? v.toISOString() : String(v)),
        parse: parseTimestamp,
      },
    },
  })

  const run = async <T>(exec: (text: string, params: unknown[]) => Promise<unknown>, text: string, params: readonly unknown[] = []) => {
    try {
      return [...((await exec(text, params as unknown[])) as Iterable<T>)]
    } catch (err) {
      throw mapSqlError(err, 'postgres')
    }
  }

  return {
    name: 'postgres',
    query: <T>(text: string, params?: readonly unknown[]) => run<T>((t, p) => client.unsafe(t, p as never[]), text, params),
    async transaction(fn) {
      try {
        return (await client.begin(async (tx) => {
          const runner: SqlRunner = {
            query: <T>(text: string, params?: readonly unknown[]) => run<T>((t, p) => tx.unsafe(t, p as never[]), text, params),
          }
          return fn(runner)
        })) as never
      } catch (err) {
        throw mapSqlError(err, 'postgres')
      }
    },
    async ping() {
      try {
        await client.unsafe('SELECT 1')
        return true
      } catch {
        return false
      }
    },
    async close() {
      await client.end({ timeout: 5 })
    },
  }
}
