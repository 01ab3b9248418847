import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createPgliteSql } from '../../adapters/metadata/pglite.ts'
import { createPostgresSql } from '../../adapters/metadata/postgres.ts'
import { migrate } from '../../adapters/metadata/migrate.ts'
import { AppError } from '../../kernel/errors.ts'
import { createTempDatabase, type TempDatabase } from '../helpers/pg.ts'
import { serviceUrl, skipUnless } from '../helpers/services.ts'
import { metadataContract } from './metadata.contract.ts'

describe('metadata: PGlite', () => {
  const dir = mkdtempSync(join(tmpdir(), 'quarry-pglite-'))
  metadataContract('pglite', () => createPgliteSql({ dir }))

  it('keeps data across a restart of the process-level handle', async (t) => {
    const d = mkdtempSync(join(tmpdir(), 'quarry-pglite-'))
    t.after(() => rmSync(d, { recursive: true, force: true }))
    let sql = await createPgliteSql({ dir: d })
    await migrate(sql)
    await sql.query(`INSERT INTO knowledge_bases (kb_id, tags) VALUES ('persist', $1::jsonb)`, [['x']])
    await sql.close()
    sql = await createPgliteSql({ dir: d })
    const rows = await sql.query<{ tags: string[] }>(`SELECT tags FROM knowledge_bases WHERE kb_id = 'persist'`)
    assert.deepEqual(rows[0].tags, ['x'])
    assert.deepEqual(await migrate(sql), [])
    await sql.close()
    assert.equal(await sql.ping(), false)
  })

  it('cleans up', () => rmSync(dir, { recursive: true, force: true }))
})

describe('metadata: PostgreSQL', { skip: skipUnless('postgres') }, () => {
  let db: TempDatabase
  const open = async () => {
    db ??= await createTempDatabase(serviceUrl('postgres')!)
    return createPostgresSql({ host: db.host, port: db.port, database: db.database, user: db.user, password: db.password, poolSize: 4, connectTimeoutSec: 5 })
  }
  metadataContract('postgres', open)

  it('answers 503 when the server cannot be reached', async () => {
    const sql = await createPostgresSql({ host: '127.0.0.1', port: 1, database: 'x', user: 'x', password: '', poolSize: 1, connectTimeoutSec: 2 })
    const err = await sql.query('SELECT 1').then(() => null, (e: unknown) => e)
    assert.ok(err instanceof AppError, `expected AppError, got ${String(err)}`)
    assert.equal(err.status, 503)
    assert.match(err.message, /Database unavailable/)
    assert.equal(await sql.ping(), false)
    await sql.close()
  })

  it('drops its database', async () => {
    if (db) await db.drop()
  })
})
