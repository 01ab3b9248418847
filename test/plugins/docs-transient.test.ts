// Which failures of a run are a store's passing fault (retried) and which are the document's own (it fails at once).
import assert from 'node:assert/strict'
import { createServer } from 'node:net'
import { describe, it } from 'node:test'
import postgres from 'postgres'
import { AppError, serviceUnavailable, storageFailure } from '../../kernel/errors.ts'
import { isTransient, retryDelayMs, TRANSIENT_RETRIES } from '../../plugins/docs/transient.ts'

/** A real refused connection: a port that was free a moment ago. */
async function refusedError(): Promise<unknown> {
  const srv = createServer()
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r))
  const port = (srv.address() as { port: number }).port
  await new Promise<void>((r) => srv.close(() => r()))
  return fetch(`http://127.0.0.1:${port}/`).then(() => null, (err: unknown) => err)
}

describe('transient failures', () => {
  it('a refused connection, wrapped as the stores wrap it, is transient', async () => {
    const refused = await refusedError()
    assert.ok(refused, 'the connection was refused')
    assert.equal(isTransient(refused), true)
    assert.equal(isTransient(storageFailure('Object storage http://x: get failed', refused)), true)
    assert.equal(isTransient(new Error('validate failed', { cause: storageFailure('get failed', refused) })), true)
  })

  it('PostgreSQL going away (a real connection to a port nobody listens on) is transient', async () => {
    const sql = postgres('postgres://postgres@127.0.0.1:1/none', { max: 1, connect_timeout: 2, onnotice: () => {} })
    const err = await sql`SELECT 1`.then(() => null, (e: unknown) => e)
    await sql.end({ timeout: 1 })
    assert.ok(err)
    assert.equal(isTransient(err), true, String((err as Error).message))
  })

  it('503s are transient; a document\'s own faults are not', () => {
    assert.equal(isTransient(serviceUnavailable('Queue unavailable: Redis at 127.0.0.1:6379 is not reachable')), true)
    assert.equal(isTransient(new AppError('FILE_TOO_LARGE', 422, 'too large')), false)
    assert.equal(isTransient(new Error('unsupported file format: a.xyz')), false)
    assert.equal(isTransient(storageFailure('stored different bytes (ETag a, sent MD5 b)')), false)
    assert.equal(isTransient(Object.assign(new Error('syntax'), { code: '42601' })), false)
    assert.equal(isTransient(Object.assign(new Error('S3 503'), { $metadata: { httpStatusCode: 503 } })), true)
    assert.equal(isTransient(Object.assign(new Error('S3 403'), { $metadata: { httpStatusCode: 403 } })), false)
  })

  it('retries back off from 1 s to at most 60 s', () => {
    const delays = Array.from({ length: TRANSIENT_RETRIES }, (_, i) => retryDelayMs(i + 1))
    assert.deepEqual(delays.slice(0, 4), [1000, 2000, 4000, 8000])
    assert.ok(delays.every((d, i) => i === 0 || d >= delays[i - 1]))
    assert.equal(Math.max(...delays), 60_000)
  })
})
