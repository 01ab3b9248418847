// A fresh PostgreSQL database per test suite, dropped afterwards, so suites never see each other's rows.
import { randomBytes } from 'node:crypto'
import postgres from 'postgres'

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
