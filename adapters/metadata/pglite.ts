// Embedded metadata store: PGlite (PostgreSQL compiled to WebAssembly) in a folder of data_dir, hosted in a
// thread of its own (pglite-thread.mjs). One connection: PGlite serialises queries itself, and a transaction
// holds it exclusively until its end message.
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import { WORKER_YOUNG_GENERATION_MB } from '../../kernel/allocator.ts'
import { serviceUnavailable } from '../../kernel/errors.ts'
import type { Sql, SqlRunner } from '../ports.ts'

export interface PgliteOptions {
  /** Folder of the database; undefined = in memory (tests). */
  dir?: string
}

/** A message to the metadata thread (pglite-thread.mjs). */
type Request =
  | { id: number; op: 'query'; text: string; params: unknown[]; tx?: number }
  | { id: number; op: 'begin' }
  | { id: number; op: 'end'; tx: number; commit: boolean }
  | { id: number; op: 'close' }

/** The thread's answer to the request of the same id. */
type Reply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: SerializedError }

interface SerializedError {
  message: string
  name: string
  /** SQLSTATE and the other fields of a PostgreSQL error (code, detail, constraint...). */
  fields: Record<string, unknown>
}

type WithoutId<T> = T extends unknown ? Omit<T, 'id'> : never
type Pending = { resolve(v: unknown): void; reject(e: unknown): void }

const revive = (e: SerializedError): Error => Object.assign(new Error(e.message), e.fields, { name: e.name })

/** A metadata thread whose database is open. */
async function startThread(dir: string | undefined): Promise<Worker> {
  // Plain JavaScript with no TypeScript hooks (pglite-thread.mjs says why): no execArgv, so not even an inherited --import tsx.
  // Its young generation as the compute pool's workers' (kernel/allocator.ts).
  const worker = new Worker(new URL('./pglite-thread.mjs', import.meta.url), {
    workerData: { dir }, execArgv: [], resourceLimits: { maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB },
  })
  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error) => reject(err)
    worker.once('error', onError)
    worker.once('message', (m: { ready: boolean; error?: SerializedError }) => {
      worker.off('error', onError)
      if (m.ready) resolve()
      else reject(revive(m.error!))
    })
  })
  return worker
}

/**
 * Creates the database of a new folder (PostgreSQL's initdb) in a child process, which exits once it is on disk.
 * initdb's memory, made in a thread of the service, stayed with the process after that thread ended: glibc keeps the
 * heap it freed. A service started on a new folder then held about 60 MB more RSS for its whole life than one started
 * on an existing folder (issue 17: 248 against 189 MB for this thread alone; 128 against 46 MB of malloc heap).
 */
export async function createDatabase(dir: string): Promise<void> {
  const script = fileURLToPath(new URL('./pglite-thread.mjs', import.meta.url))
  // No execArgv: plain JavaScript, as in the thread (no TypeScript hooks).
  const child = spawn(process.execPath, [script, dir], { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
  const code = await new Promise<number | string>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (c, signal) => resolve(c ?? signal ?? 'unknown'))
  })
  if (code !== 0) throw new Error(`Creating the metadata database in ${dir} failed (exit ${code}): ${stderr.trim().split('\n').at(-1)}`)
}

export async function createPgliteSql(opts: PgliteOptions = {}): Promise<Sql> {
  if (opts.dir) mkdirSync(opts.dir, { recursive: true })
  const fresh = opts.dir !== undefined && !existsSync(join(opts.dir, 'PG_VERSION'))
  if (fresh) await createDatabase(opts.dir!)
  const worker = await startThread(opts.dir)
  const pending = new Map<number, Pending>()
  let nextId = 1
  let dead: Error | null = null
  let closed = false

  const failAll = (err: Error) => {
    dead = err
    for (const p of pending.values()) p.reject(err)
    pending.clear()
  }
  worker.on('message', (m: Reply) => {
    const p = pending.get(m.id)
    if (!p) return
    pending.delete(m.id)
    if (pending.size === 0) worker.unref()
    if (m.ok) p.resolve(m.value)
    else p.reject(revive(m.error))
  })
  worker.on('error', (err) => failAll(serviceUnavailable(`Database unavailable (pglite): ${err.message}`, err)))
  worker.on('exit', (code) => failAll(serviceUnavailable(`Database unavailable (pglite): its thread exited (code ${code})`)))
  // The thread keeps the process alive only while a call is waiting for it.
  worker.unref()

  function call<T>(req: WithoutId<Request>): Promise<T> {
    if (dead) return Promise.reject(dead)
    const id = nextId++
    return new Promise<T>((resolve, reject) => {
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject })
      if (pending.size === 1) worker.ref()
      worker.postMessage({ ...req, id })
    })
  }

  const query = <T>(text: string, params: readonly unknown[] = []): Promise<T[]> => call<T[]>({ op: 'query', text, params: params as unknown[] })

  return {
    name: 'pglite',
    query,
    async transaction(fn) {
      const tx = await call<number>({ op: 'begin' })
      const runner: SqlRunner = { query: <T>(text: string, params: readonly unknown[] = []) => call<T[]>({ op: 'query', text, params: params as unknown[], tx }) }
      let result
      try {
        result = await fn(runner)
      } catch (err) {
        await call({ op: 'end', tx, commit: false }).catch(() => undefined)
        throw err
      }
      await call({ op: 'end', tx, commit: true })
      return result
    },
    async ping() {
      if (closed || dead) return false
      try {
        await query('SELECT 1')
        return true
      } catch {
        return false
      }
    },
    async close() {
      if (closed) return
      closed = true
      if (!dead) await call({ op: 'close' }).catch(() => undefined)
      await worker.terminate()
    },
  }
}
