// postgres.js 3.4.9 as `npm install` leaves it (adapters/postgres-driver-patch.mjs mends two faults that end the
// process when PostgreSQL goes away): each fault played in a child process on the test server, which must live and
// give its queries catchable errors; then the metadata driver on a PostgreSQL of the test's own, stopped hard and
// started again three times under a load of queries: the process lives and the pool answers again after each start.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, it } from 'node:test'
import { driverRoot, mendInstalledDriver } from '../../adapters/postgres-driver-patch.mjs'
import { createPostgresSql } from '../../adapters/metadata/postgres.ts'
import { AppError } from '../../kernel/errors.ts'
import { startOwnedPostgres } from '../helpers/servers.ts'
import { serviceUrl, skipUnless } from '../helpers/services.ts'
import { waitFor } from '../helpers/wait.ts'

const child = fileURLToPath(new URL('./postgres-driver-child.mjs', import.meta.url))
const play = (which: string) => {
  const run = spawnSync(process.execPath, [child, which, serviceUrl('postgres')!], { encoding: 'utf8', timeout: 30_000 })
  return { status: run.status, out: run.stdout, err: run.stderr }
}

describe('postgres.js: the mended driver', () => {
  it('was mended by npm install in each of its copies', () => {
    const done = mendInstalledDriver(driverRoot(), false)
    assert.equal(done.skipped, false, `postgres.js ${done.version} is installed; the patch is for 3.4.9`)
    assert.equal(done.files.length, 3)
    for (const f of done.files) assert.equal(f.changed, false, `${f.file} was not mended yet`)
  })

  it('settles a query sent on a closed connection with CONNECTION_CLOSED instead of ending the process', { skip: skipUnless('postgres') }, () => {
    const run = play('write-after-close')
    assert.equal(run.status, 0, `the child ended with ${run.status}:\n${run.out}\n${run.err}`)
    assert.match(run.out, /^after close: CONNECTION_CLOSED$/m)
    assert.match(run.out, /^again: CONNECTION_CLOSED$/m)
    assert.match(run.out, /^another connection: 2$/m)
    assert.match(run.out, /^lived$/m)
  })

  it("lives when a new connection's array-types query fails", { skip: skipUnless('postgres') }, () => {
    const run = play('types-query-fails')
    assert.equal(run.status, 0, `the child ended with ${run.status}:\n${run.out}\n${run.err}`)
    // The query the connection was opened for gets its own answer: cancelled by the same timeout.
    assert.match(run.out, /^first query: 57014$/m)
    assert.match(run.out, /^lived$/m)
  })
})

describe('metadata: PostgreSQL stopped hard under load', { skip: skipUnless('postgres') }, () => {
  it('lives through three immediate stops and answers again after each start', async (t) => {
    const pg = await startOwnedPostgres()
    t.after(() => pg.close())
    const sql = await createPostgresSql({ host: '127.0.0.1', port: pg.port, database: 'postgres', user: 'postgres', password: '', poolSize: 4, connectTimeoutSec: 5 })
    t.after(() => sql.close())
    let ok = 0
    let stop = false
    const failures = new Map<string, number>()
    const load = async () => {
      while (!stop) {
        try {
          const rows = await sql.query<{ n: number }>('SELECT $1::int + 1 AS n', [ok])
          assert.equal(typeof rows[0].n, 'number')
          ok++
        } catch (err) {
          assert.ok(err instanceof AppError, `expected an AppError, got ${String(err)}`)
          failures.set(`${err.status}`, (failures.get(`${err.status}`) ?? 0) + 1)
          await new Promise((r) => setTimeout(r, 2))
        }
      }
    }
    const loops = Array.from({ length: 8 }, load)
    for (let round = 0; round < 3; round++) {
      const before = ok
      await waitFor(async () => ok > before + 200, `queries answered after start ${round}`, 15_000)
      await pg.stop('kill')
      await new Promise((r) => setTimeout(r, 100))
      await pg.start()
    }
    const before = ok
    await waitFor(async () => ok > before + 200, 'queries answered after the last start', 15_000)
    stop = true
    await Promise.all(loops)
    // Every failure was a connection failure (503), and there were some: the stops happened under load.
    assert.deepEqual([...failures.keys()], ['503'])
  })
})
