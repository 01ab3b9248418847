// Embedded metadata store: PGlite (PostgreSQL compiled to WebAssembly) in a folder of data_dir.
// One connection: PGlite serialises queries itself, and a transaction holds it exclusively.
import { mkdirSync } from 'node:fs'
import type { Sql, SqlRunner } from '../ports.ts'
import { OID, parseInt8, parseTimestamp } from './common.ts'

export interface PgliteOptions {
  /** Folder of the database; undefined = in memory (tests). */
  dir?: string
}

export async function createPgliteSql(opts: PgliteOptions = {}): Promise<Sql> {
  const { PGlite } = await import('@electric-sql/pglite')
  if (opts.dir) mkdirSync(opts.dir, { recursive: true })
  // relaxedDurability: a query returns once PGlite handed its writes to the OS, without waiting for the flush.
  // A killed process loses nothing (the OS has the pages); only an OS crash can lose the last moments, and
  // the document states are built to be recovered from that (heartbeats, idempotent re-queueing).
  const db = new PGlite(opts.dir, {
    relaxedDurability: true,
    parsers: { [OID.INT8]: parseInt8, [OID.TIMESTAMPTZ]: parseTimestamp, [OID.TIMESTAMP]: parseTimestamp },
  })
  await db.waitReady
  await db.exec("SET TIME ZONE 'UTC'")
  let closed = false

  const query = async <T>(text: string, params: readonly unknown[] = []): Promise<T[]> =>
    (await db.query<T>(text, params as unknown[])).rows

  return {
    name: 'pglite',
    query,
    async transaction(fn) {
      return db.transaction(async (tx) => {
        const runner: SqlRunner = {
          query: async <T>(text: string, params: readonly unknown[] = []) => (await tx.query<T>(text, params as unknown[])).rows,
        }
        return fn(runner)
      })
    },
    async ping() {
      if (closed) return false
      try {
        await db.query('SELECT 1')
        return true
      } catch {
        return false
      }
    },
    async close() {
      if (closed) return
      closed = true
      await db.close()
    },
  }
}
