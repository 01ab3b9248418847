// One import at a time into a KB (plugins/transfer/hold.ts), on PGlite and on PostgreSQL: a second taker waits
// until the first releases; a holder that stopped renewing is taken over once its hold runs out, and its next fenced
// write fails with HoldLost instead of writing beside the new holder; a KB deleted while a taker waits ends the wait.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it, type TestContext } from 'node:test'
import { createPgliteSql } from '../../../adapters/metadata/pglite.ts'
import { createPostgresSql } from '../../../adapters/metadata/postgres.ts'
import { migrate } from '../../../adapters/metadata/migrate.ts'
import type { Sql } from '../../../adapters/ports.ts'
import { createLogger } from '../../../kernel/log.ts'
import { HoldLost, ImportHold } from '../../../plugins/transfer/hold.ts'
import { createTempDatabase } from '../../helpers/pg.ts'
import { serviceUrl, skipUnless } from '../../helpers/services.ts'

const log = createLogger('SILENT')

async function transferRow(sql: Sql, kbId: string): Promise<void> {
  await sql.query('INSERT INTO knowledge_bases (kb_id) VALUES ($1)', [kbId])
  await sql.query(`INSERT INTO kb_transfers (kb_id, archive_id, source_kb_id, state) VALUES ($1, 'a', 'src', 'running')`, [kbId])
}

function holdCases(open: () => Promise<{ sql: Sql; done: () => Promise<void> }>): void {
  /** A migrated database, closed after the test, with a KB whose import is running. */
  const withKb = async (t: TestContext, kbId: string): Promise<Sql> => {
    const { sql, done } = await open()
    t.after(done)
    await migrate(sql)
    await transferRow(sql, kbId)
    return sql
  }

  it('a second taker waits until the first releases, then holds the KB', async (t) => {
    const sql = await withKb(t, 'k1')
    const a = new ImportHold(sql, 'k1', log)
    const b = new ImportHold(sql, 'k1', log)
    assert.equal(await a.take(), true)
    let bHolds = false
    const waiting = b.take().then((ok) => (bHolds = ok))
    await new Promise((r) => setTimeout(r, 300))
    assert.equal(bHolds, false, 'b waits while a holds the KB')
    await a.update(sql, 'documents = documents + 1', [])
    await a.release()
    await waiting
    assert.equal(bHolds, true)
    await assert.rejects(a.update(sql, 'documents = documents + 1', []), HoldLost)
    await b.update(sql, 'documents = documents + 1', [])
    assert.deepEqual(await sql.query('SELECT documents, holder FROM kb_transfers WHERE kb_id = $1', ['k1']), [{ documents: 2, holder: b.token }])
    await b.release()
    assert.deepEqual(await sql.query('SELECT holder, held_until FROM kb_transfers WHERE kb_id = $1', ['k1']), [{ holder: null, held_until: null }])
  })

  it('a hold that ran out is taken over; the old holder\'s next write fails and writes nothing', async (t) => {
    const sql = await withKb(t, 'k2')
    const dead = new ImportHold(sql, 'k2', log)
    assert.equal(await dead.take(), true)
    await dead.release().catch(() => {})
    // As a holder killed with kill -9 leaves it: its token, a held_until in the past.
    await sql.query(`UPDATE kb_transfers SET holder = $2, held_until = now() - interval '1 second' WHERE kb_id = $1`, ['k2', dead.token])
    const next = new ImportHold(sql, 'k2', log)
    assert.equal(await next.take(), true)
    await assert.rejects(dead.update(sql, `last_doc_id = 'x'`, []), HoldLost)
    assert.throws(() => dead.check(), HoldLost)
    assert.deepEqual(await sql.query('SELECT last_doc_id, holder FROM kb_transfers WHERE kb_id = $1', ['k2']), [{ last_doc_id: null, holder: next.token }])
    await next.release()
  })

  it('a KB deleted while a taker waits ends the wait with false; an abort ends it with the abort', async (t) => {
    const sql = await withKb(t, 'k3')
    const a = new ImportHold(sql, 'k3', log)
    assert.equal(await a.take(), true)
    const waiting = new ImportHold(sql, 'k3', log).take()
    const aborted = new AbortController()
    const cancelled = new ImportHold(sql, 'k3', log).take(aborted.signal)
    aborted.abort(new Error('client gone'))
    await assert.rejects(cancelled, /client gone/)
    await sql.query('DELETE FROM knowledge_bases WHERE kb_id = $1', ['k3'])
    assert.equal(await waiting, false)
    await a.release()
  })
}

describe('import hold: PGlite', () => {
  holdCases(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'quarry-hold-'))
    const sql = await createPgliteSql({ dir })
    return { sql, done: async () => { await sql.close(); rmSync(dir, { recursive: true, force: true }) } }
  })
})

describe('import hold: PostgreSQL', { skip: skipUnless('postgres') }, () => {
  holdCases(async () => {
    const db = await createTempDatabase(serviceUrl('postgres')!)
    const sql = await createPostgresSql({ host: db.host, port: db.port, database: db.database, user: db.user, password: db.password, poolSize: 4, connectTimeoutSec: 5 })
    return { sql, done: async () => { await sql.close(); await db.drop() } }
  })
})
