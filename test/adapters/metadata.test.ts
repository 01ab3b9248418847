import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { cpSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createDatabase, createPgliteSql } from '../../adapters/metadata/pglite.ts'
import { createPostgresSql } from '../../adapters/metadata/postgres.ts'
import { migrate } from '../../adapters/metadata/migrate.ts'
import { AppError } from '../../kernel/errors.ts'
import { createTempDatabase, type TempDatabase } from '../helpers/pg.ts'
import { serviceUrl, skipUnless } from '../helpers/services.ts'
import { metadataContract } from './metadata.contract.ts'

describe('metadata: PGlite', () => {
  // PGlite's initdb takes 7 s: one new database is made here (createDatabase, as createPgliteSql does for a new folder)
  // and each test that needs a database nobody has used gets a copy of it, which PGlite opens as it would that one.
  // The tests of making a database make their own.
  let fresh: Promise<string> | undefined
  const freshCopy = async (): Promise<string> => {
    const made = await (fresh ??= (async () => {
      const d = mkdtempSync(join(tmpdir(), 'quarry-pglite-fresh-'))
      await createDatabase(d)
      return d
    })())
    const d = mkdtempSync(join(tmpdir(), 'quarry-pglite-'))
    cpSync(made, d, { recursive: true })
    return d
  }
  let dir: string | undefined
  metadataContract('pglite', async () => createPgliteSql({ dir: (dir ??= await freshCopy()) }), async () => {
    const d = await freshCopy()
    return { sql: await createPgliteSql({ dir: d }), remove: async () => rmSync(d, { recursive: true, force: true }) }
  })

  it('keeps data across a restart of the process-level handle', async (t) => {
    const d = await freshCopy()
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

  it('creates the database of a new folder in a child process that exits, then opens it', async (t) => {
    const d = mkdtempSync(join(tmpdir(), 'quarry-pglite-'))
    t.after(() => rmSync(d, { recursive: true, force: true }))
    await createDatabase(d)
    // On disk once the child has exited, and what the thread opens (no second initdb: the tables made here stay).
    assert.ok(existsSync(join(d, 'PG_VERSION')))
    const sql = await createPgliteSql({ dir: d })
    t.after(() => sql.close())
    await sql.query('CREATE TABLE made_here (x int)')
    await sql.close()
    const again = await createPgliteSql({ dir: d })
    assert.deepEqual(await again.query('SELECT count(*)::int AS n FROM made_here'), [{ n: 0 }])
    await again.close()
  })

  it('says which folder could not be created, with the child\'s reason', async (t) => {
    const d = mkdtempSync(join(tmpdir(), 'quarry-pglite-'))
    t.after(() => rmSync(d, { recursive: true, force: true }))
    // A file where the folder should be: initdb cannot write there.
    const path = join(d, 'not-a-folder')
    writeFileSync(path, 'x')
    await assert.rejects(createDatabase(path), (err: Error) => {
      assert.match(err.message, /^Creating the metadata database in .*not-a-folder failed \(exit [1-9]\d*\): \S/)
      return true
    })
  })

  describe('prepared statements', () => {
    let d: string
    let sql: Awaited<ReturnType<typeof createPgliteSql>>
    const preparedCount = async (text: string) =>
      (await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement = $1', [text]))[0].n

    it('runs each text as one statement, prepared on first use', async () => {
      d = await freshCopy()
      sql = await createPgliteSql({ dir: d })
      const text = 'SELECT $1::int + 1 AS n'
      assert.equal(await preparedCount(text), 0)
      for (const x of [1, 41, -3]) assert.deepEqual(await sql.query(text, [x]), [{ n: x + 1 }])
      assert.equal(await preparedCount(text), 1)
    })

    it('binds every kind of parameter with the types the statement declares', async () => {
      await sql.query('CREATE TABLE kinds (t text, a text[], i int[], b bytea, j jsonb, f boolean, n bigint, at timestamptz, x int)')
      const at = new Date('2026-11-24T10:11:12.345Z')
      const row = { t: "it's", a: ['x', 'y,z', '"q"', 'with space'], i: [1, -2, 3], b: new Uint8Array([0, 1, 254, 255]), j: { k: [1, 'two'], nested: { ok: true } }, f: false, n: 9007199254740993n, at, x: null }
      await sql.query('INSERT INTO kinds VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)', [row.t, row.a, row.i, row.b, row.j, row.f, row.n, row.at, row.x])
      const [got] = await sql.query<Record<string, unknown>>('SELECT t, a, i, b, j, f, n::text AS n, at, x FROM kinds')
      assert.equal(got.t, row.t)
      assert.deepEqual(got.a, row.a)
      assert.deepEqual(got.i, row.i)
      assert.deepEqual([...(got.b as Uint8Array)], [...row.b])
      assert.deepEqual(got.j, row.j)
      assert.equal(got.f, false)
      assert.equal(got.n, '9007199254740993')
      assert.equal(new Date(got.at as string).getTime(), at.getTime())
      assert.equal(got.x, null)
      // An untyped parameter takes the type its place in the statement gives it.
      assert.deepEqual(await sql.query('SELECT count(*)::int AS n FROM kinds WHERE t = ANY($1)', [["it's", 'other']]), [{ n: 1 }])
    })

    it('stays usable after a failing statement, inside a transaction and outside', async () => {
      const syntax = await sql.query('SELEC 1').then(() => null, (e: { code?: string }) => e)
      assert.equal(syntax?.code, '42601')
      const bad = await sql.query('SELECT $1::int AS n', ['not a number']).then(() => null, (e: { code?: string }) => e)
      assert.equal(bad?.code, '22P02')
      assert.deepEqual(await sql.query('SELECT $1::int AS n', [7]), [{ n: 7 }])
      const inTx = await sql.transaction(async (tx) => {
        await tx.query('INSERT INTO kinds (t) VALUES ($1)', ['rolled back'])
        await tx.query('SELECT 1 / $1::int', [0])
      }).then(() => null, (e: { code?: string }) => e)
      assert.equal(inTx?.code, '22012')
      assert.deepEqual(await sql.query('SELECT count(*)::int AS n FROM kinds WHERE t = $1', ['rolled back']), [{ n: 0 }])
      const n = await sql.transaction(async (tx) => {
        await tx.query('INSERT INTO kinds (t) VALUES ($1)', ['kept'])
        return (await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM kinds'))[0].n
      })
      assert.equal(n, 2)
    })

    it('prepares a statement again when its table changed shape', async () => {
      const text = 'SELECT * FROM kinds WHERE t = $1'
      assert.equal((await sql.query<Record<string, unknown>>(text, ['kept']))[0].extra, undefined)
      await sql.query("ALTER TABLE kinds ADD COLUMN extra text DEFAULT 'new'")
      assert.equal((await sql.query<Record<string, unknown>>(text, ['kept']))[0].extra, 'new')
      // Inside a transaction the stale statement fails it once; the next transaction prepares it again.
      await sql.query("ALTER TABLE kinds ADD COLUMN more text DEFAULT 'more'")
      const inTx = () => sql.transaction(async (tx) => (await tx.query<Record<string, unknown>>(text, ['kept']))[0].more)
      const failed = await inTx().then(() => null, (e: { code?: string }) => e)
      assert.equal(failed?.code, '0A000')
      assert.equal(await inTx(), 'more')
    })

    it('closes the least recently used statements past its cap', async () => {
      const first = 'SELECT 0 AS n, $1::int AS m'
      await sql.query(first, [1])
      for (let i = 1; i <= 300; i++) await sql.query(`SELECT ${i} AS n, $1::int AS m`, [i])
      const [{ n }] = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_prepared_statements')
      assert.ok(n <= 256, `${n} statements prepared`)
      assert.equal(await preparedCount(first), 0)
      assert.equal(await preparedCount('SELECT 300 AS n, $1::int AS m'), 1)
      assert.deepEqual(await sql.query(first, [5]), [{ n: 0, m: 5 }])
      await sql.close()
      rmSync(d, { recursive: true, force: true })
    })
  })

  it('cleans up', async () => {
    for (const d of [dir, await fresh]) if (d !== undefined) rmSync(d, { recursive: true, force: true })
  })
})

describe('metadata: PostgreSQL', { skip: skipUnless('postgres') }, () => {
  let db: TempDatabase
  const open = async () => {
    db ??= await createTempDatabase(serviceUrl('postgres')!)
    return createPostgresSql({ host: db.host, port: db.port, database: db.database, user: db.user, password: db.password, poolSize: 4, connectTimeoutSec: 5 })
  }
  metadataContract('postgres', open, async () => {
    const fresh = await createTempDatabase(serviceUrl('postgres')!)
    const sql = await createPostgresSql({ host: fresh.host, port: fresh.port, database: fresh.database, user: fresh.user, password: fresh.password, poolSize: 2, connectTimeoutSec: 5 })
    return { sql, remove: () => fresh.drop() }
  })

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
