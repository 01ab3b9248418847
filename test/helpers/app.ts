// Starts the whole service on an ephemeral port with a temporary data folder, on the embedded default or,
// with `services`, on PostgreSQL + Redis + S3 (s3rver), the vectors then in pgvector with `vectorStore: 'pgvector'`.
// Everything is torn down by t.after.
import { cpSync, existsSync, mkdtempSync, renameSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import type { TestContext } from 'node:test'
import { createPgliteSql } from '../../adapters/metadata/pglite.ts'
import { migrate } from '../../adapters/metadata/migrate.ts'
import type { Adapters } from '../../adapters/ports.ts'
import { createApp, type App } from '../../kernel/app.ts'
import { resolveSettings } from '../../kernel/config/load.ts'
import { createLogger, isLogLevel, type Logger } from '../../kernel/log.ts'
import type { Plugin } from '../../kernel/plugin.ts'
import { defaultPlugins } from '../../kernel/plugins.ts'
import { createTempDatabase } from './pg.ts'
import { serviceUrl } from './services.ts'

export interface StartedApp {
  app: App
  url: string
  dataDir: string
  /** fetch relative to the service. */
  request(path: string, init?: RequestInit & { json?: unknown }): Promise<Response>
  /** With `services`: stops the S3 server (to test object-storage failures). */
  stopS3?: () => Promise<void>
}

export interface StartOptions {
  /** Raw settings merged over the test defaults (as if read from YAML). */
  settings?: Record<string, any>
  /** Run on PostgreSQL + Redis + s3rver instead of the embedded engines. */
  services?: boolean
  /** The vector store (settings vector_store); 'pgvector' needs `services` (its tables go in the test's database). */
  vectorStore?: 'embedded' | 'pgvector'
  plugins?: Plugin<any>[]
  listen?: boolean
  /** The service's logger (default silent): the security suite reads what it writes. */
  log?: Logger
}

/**
 * The logger of a test's service: silent, unless QUARRY_TEST_LOG names a level (DEBUG, INFO, WARNING, ERROR), which
 * writes the services' log lines at that level and above to standard output, where the runner shows them (how the
 * fuzz run's 500 of transfer-owner was traced to its cause).
 */
function testLogger(): Logger {
  const level = process.env.QUARRY_TEST_LOG
  if (level === undefined || level === '') return createLogger('SILENT')
  if (!isLogLevel(level)) throw new Error(`QUARRY_TEST_LOG must be DEBUG, INFO, WARNING or ERROR, not ${level}`)
  return createLogger(level)
}

/**
 * A migrated PGlite database made once per test run and copied into each new embedded data folder: initdb and the
 * migrations take 7 s of wall time (10 s of CPU), a copy a fraction of one, and an app opening the copy finds every
 * migration applied. It is made in the run's shared folder (QUARRY_TEST_SHARED, set by test/scratch.mjs) by the first
 * test process that needs it, built beside and renamed into place so that a process never copies half of one; two
 * processes that start at once may both build it, and the second one's copy is dropped. Without that folder, once per
 * test process. Tests of a fresh database itself (start-up, migrations) open PGlite directly and never see this.
 */
let pgliteTemplate: Promise<string> | undefined
const migratedPglite = () =>
  (pgliteTemplate ??= (async () => {
    const shared = process.env.QUARRY_TEST_SHARED
    const final = shared === undefined ? undefined : join(shared, 'pglite-template')
    if (final !== undefined && existsSync(final)) return final
    const dir = mkdtempSync(join(shared ?? tmpdir(), 'quarry-pglite-template-'))
    if (final === undefined) process.once('exit', () => rmSync(dir, { recursive: true, force: true }))
    try {
      const sql = await createPgliteSql({ dir })
      try {
        await migrate(sql)
      } finally {
        await sql.close()
      }
    } catch (err) {
      if (final !== undefined) rmSync(dir, { recursive: true, force: true })
      throw err
    }
    if (final === undefined) return dir
    try {
      renameSync(dir, final)
    } catch (err) {
      // Another process renamed its own first (a folder that is not empty cannot be renamed over).
      rmSync(dir, { recursive: true, force: true })
      if (!existsSync(final)) throw err
    }
    return final
  })())

/** Copies the migrated PGlite database into a data folder that a service (of this process or a child) opens next. */
export async function seedPglite(dataDir: string): Promise<void> {
  cpSync(await migratedPglite(), join(dataDir, 'pglite'), { recursive: true })
}

/**
 * The kernel alone with `plugins`, listening on an ephemeral port, closed when the test ends: for routes that touch
 * no storage port (kernel and transport tests).
 */
export async function startKernel(t: { after(fn: () => unknown): void }, plugins: Plugin<any>[]): Promise<{ app: App; port: number; url: string }> {
  const { settings } = resolveSettings({ server: { shutdown_grace_sec: 1 } })
  const app = await createApp({ settings, plugins, adapters: {} as Adapters, log: createLogger('SILENT') })
  t.after(() => app.close())
  const port = await app.listen(0, '127.0.0.1')
  return { app, port, url: `http://127.0.0.1:${port}` }
}

export async function startApp(t: TestContext | { after(fn: () => unknown): void }, opts: StartOptions = {}): Promise<StartedApp> {
  const dataDir = mkdtempSync(join(tmpdir(), 'quarry-test-'))
  // The folder holds a copy of the PGlite template (39 MB) in /dev/shm, that is in memory: it goes when the test ends,
  // and when the process exits should the test's clean-up not run or fail before it.
  const removeDir = () => rmSync(dataDir, { recursive: true, force: true })
  process.once('exit', removeDir)
  const cleanups: (() => Promise<void> | void)[] = [removeDir]
  const raw: Record<string, any> = {
    data_dir: dataDir,
    logging: { level: 'ERROR' },
    embedding: { vector_size: 64 },
    server: { shutdown_grace_sec: 2 },
    ...opts.settings,
  }
  let stopS3: (() => Promise<void>) | undefined
  if (opts.services) {
    const pgUrl = serviceUrl('postgres')
    const redisUrl = serviceUrl('redis')
    if (!pgUrl || !redisUrl) throw new Error('services requested but TEST_POSTGRES_URL / TEST_REDIS_URL are not set')
    const db = await createTempDatabase(pgUrl)
    cleanups.push(() => db.drop())
    const { startS3rver } = await import('./s3rver.ts')
    const s3 = await startS3rver()
    let s3Closed = false
    stopS3 = async () => {
      if (!s3Closed) await s3.close()
      s3Closed = true
    }
    cleanups.push(() => stopS3!())
    const r = new URL(redisUrl)
    raw.postgres = { host: db.host, port: db.port, user: db.user, dbname: db.database, ...raw.postgres }
    raw.redis = { host: r.hostname, port: Number(r.port || 6379), db: 0, key_prefix: `qt-${randomBytes(4).toString('hex')}`, ...raw.redis }
    raw.s3 = { endpoint: s3.endpoint, access_key: s3.accessKey, secret_key: s3.secretKey, rag_bucket: s3.bucket, insecure: true, ...raw.s3 }
  }
  if (opts.vectorStore !== undefined) {
    if (opts.vectorStore === 'pgvector' && !opts.services) throw new Error('vectorStore pgvector needs services: true (PostgreSQL)')
    raw.vector_store ??= opts.vectorStore
  }
  if (!opts.services && raw.data_dir === dataDir && !raw.postgres?.host) await seedPglite(dataDir)
  const { settings } = resolveSettings(raw, { REDIS_PASSWORD: undefined })
  const app = await createApp({ settings, plugins: opts.plugins ?? defaultPlugins(), log: opts.log ?? testLogger() })
  cleanups.unshift(() => app.close())
  t.after(async () => {
    // Every step runs though an earlier one fails (a service that fails to close still has its folder removed); the
    // first failure is the test's.
    let failure: unknown = null
    for (const c of cleanups) {
      try {
        await c()
      } catch (err) {
        failure ??= err
      }
    }
    process.removeListener('exit', removeDir)
    if (failure !== null) throw failure
  })
  let url = ''
  if (opts.listen !== false) {
    const port = await app.listen(0, '127.0.0.1')
    url = `http://127.0.0.1:${port}`
  }
  return {
    app,
    url,
    dataDir,
    stopS3,
    request(path, init = {}) {
      const { json, ...rest } = init
      const headers = new Headers(rest.headers)
      if (json !== undefined) headers.set('content-type', 'application/json')
      return fetch(url + path, { ...rest, headers, body: json !== undefined ? JSON.stringify(json) : rest.body })
    },
  }
}

export const uniqueId = (prefix = 'kb') => `${prefix}-${randomBytes(4).toString('hex')}`
