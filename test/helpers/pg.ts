// A fresh PostgreSQL database per test suite, dropped afterwards, so suites never see each other's rows.
import { randomBytes } from 'node:crypto'
import postgres from 'postgres'
import { serviceUrl, servicesRequired } from './services.ts'

export interface TempDatabase {
  host: string
  port: number
  user: string
  password: string
  database: string
  drop(): Promise<void>
}

export async function createTempDatabase(url: string): Promise<TempDatabase> {
  const u = new URL(url)
  const admin = postgres(url, { max: 1, onnotice: () => {} })
  const database = `quarry_t_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`
  try {
    await admin.unsafe(`CREATE DATABASE ${database}`)
  } finally {
    await admin.end()
  }
  return {
    host: u.hostname,
    port: Number(u.port || 5432),
    user: decodeURIComponent(u.username || 'postgres'),
    password: decodeURIComponent(u.password),
    database,
    async drop() {
      const a = postgres(url, { max: 1, onnotice: () => {} })
      try {
        await a.unsafe(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
      } finally {
        await a.end()
      }
    },
  }
}

/**
 * For describe(..., { skip }) of suites on the pgvector driver: a reason when TEST_POSTGRES_URL is not set or its
 * server has no pgvector to create (shared/vendor/install-pgvector.sh installs it); in CI (QUARRY_REQUIRE_SERVICES=1)
 * a missing extension fails the run instead.
 */
export async function skipUnlessPgvector(): Promise<string | false> {
  const url = serviceUrl('postgres')
  if (!url) return 'TEST_POSTGRES_URL not set'
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  try {
    if ((await sql`SELECT 1 FROM pg_available_extensions WHERE name = 'vector'`).length > 0) return false
  } finally {
    await sql.end()
  }
  const reason = 'the PostgreSQL server of TEST_POSTGRES_URL has no pgvector (shared/vendor/install-pgvector.sh builds and installs it)'
  if (servicesRequired()) throw new Error(`${reason}, but QUARRY_REQUIRE_SERVICES=1: the pgvector suites must run`)
  return reason
}
