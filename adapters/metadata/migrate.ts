// Versioned SQL migrations (migrations/NNN_name.sql), applied at start in order, each in its own
// transaction, under an advisory lock so that several processes starting at once apply each exactly once.
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Sql } from '../ports.ts'

const DIR = join(dirname(fileURLToPath(import.meta.url)), 'migrations')
const LOCK_KEY = 7_314_159_265

export interface Migration {
  version: number
  name: string
  sql: string
}

export function listMigrations(dir = DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d+_.+\.sql$/.test(f))
    .map((f) => ({ version: Number.parseInt(f, 10), name: f.replace(/\.sql$/, ''), sql: readFileSync(join(dir, f), 'utf8') }))
    .sort((a, b) => a.version - b.version)
}

/** Applies what is missing; returns the versions applied by this call. */
export async function migrate(sql: Sql, migrations: Migration[] = listMigrations()): Promise<number[]> {
  await sql.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
  const applied: number[] = []
  for (const m of migrations) {
    const done = await sql.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock($1)', [LOCK_KEY])
      const rows = await tx.query('SELECT 1 FROM schema_migrations WHERE version = $1', [m.version])
      if (rows.length > 0) return false
      for (const statement of splitStatements(m.sql)) await tx.query(statement)
      await tx.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name])
      return true
    })
    if (done) applied.push(m.version)
  }
  return applied
}

/** Splits a migration file on semicolons at the end of a line (our files hold no functions or strings with ';'). */
function splitStatements(text: string): string[] {
  return text
    .split(/;\s*$/m)
    .map((s) => s.replace(/^\s*--.*$/gm, '').trim())
    .filter((s) => s.length > 0)
}
