// One contract for both metadata drivers: the same SQL must give the same JS values on PGlite and PostgreSQL.
import { it } from 'node:test'
import assert from 'node:assert/strict'
import type { Sql } from '../../adapters/ports.ts'
import { listMigrations, migrate } from '../../adapters/metadata/migrate.ts'
import { isUniqueViolation } from '../../adapters/metadata/common.ts'

/** A database of its own, with no migration applied, and how to remove it. */
export type FreshSql = () => Promise<{ sql: Sql; remove(): Promise<void> }>

export function metadataContract(name: string, open: () => Promise<Sql>, fresh: FreshSql): void {
  const withSql = async (fn: (sql: Sql) => Promise<void>) => {
    const sql = await open()
    try {
      await fn(sql)
    } finally {
      await sql.close()
    }
  }

  it(`${name}: migrations apply once and record their versions`, () => withSql(async (sql) => {
    const all = listMigrations().map((m) => m.version)
    assert.ok(all.length >= 1)
    const first = await migrate(sql)
    const second = await migrate(sql)
    assert.deepEqual(second, [])
    const rows = await sql.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version')
    assert.deepEqual(rows.map((r) => r.version), all)
    assert.ok(first.length === all.length || first.length === 0)
    for (const table of ['knowledge_bases', 'kb_settings_overrides', 'documents', 'parent_chunks', 'dedup_signatures', 'dedup_bands', 'connectors']) {
      const t = await sql.query('SELECT 1 FROM information_schema.tables WHERE table_name = $1', [table])
      assert.equal(t.length, 1, `table ${table}`)
    }
  }))

  it(`${name}: an upgrade empties the band keys of a database written before 008, keeps its documents and signatures, and an earlier process can still write its band keys`, async () => {
    const { sql, remove } = await fresh()
    try {
      const before = listMigrations().filter((m) => m.version < 8)
      assert.ok(before.length >= 1 && before.length < listMigrations().length)
      await migrate(sql, before)
      await sql.query("INSERT INTO knowledge_bases (kb_id) VALUES ('kb-up')")
      await sql.query("INSERT INTO documents (doc_id, kb_id, source, status) VALUES ('doc-up', 'kb-up', 'a.txt', 'indexed')")
      await sql.query("INSERT INTO dedup_signatures (doc_id, kb_id, simhash, minhash) VALUES ('doc-up', 'kb-up', 'ff', '\\x01'::bytea)")
      await sql.query("INSERT INTO dedup_bands (kb_id, band, doc_id) VALUES ('kb-up', '0:ff', 'doc-up'), ('kb-up', '1:00', 'doc-up')")
      assert.deepEqual(await migrate(sql), listMigrations().filter((m) => m.version >= 8).map((m) => m.version))
      assert.deepEqual(await sql.query('SELECT count(*)::int AS n FROM dedup_bands'), [{ n: 0 }])
      assert.deepEqual(await sql.query("SELECT doc_id, status FROM documents WHERE kb_id = 'kb-up'"), [{ doc_id: 'doc-up', status: 'indexed' }])
      assert.deepEqual(await sql.query("SELECT doc_id, simhash FROM dedup_signatures WHERE kb_id = 'kb-up'"), [{ doc_id: 'doc-up', simhash: 'ff' }])
      // What a process of an earlier version does with the table when it finishes and removes a document.
      await sql.query("WITH old AS (DELETE FROM dedup_bands WHERE doc_id = $1) INSERT INTO dedup_bands (kb_id, band, doc_id) SELECT 'kb-up', b, $1 FROM unnest($2::text[]) AS b ON CONFLICT DO NOTHING", ['doc-up', ['0:aa', '1:bb']])
      assert.deepEqual(await sql.query('SELECT count(*)::int AS n FROM dedup_bands'), [{ n: 2 }])
      await sql.query('WITH b AS (DELETE FROM dedup_bands WHERE doc_id = $1) DELETE FROM dedup_signatures WHERE doc_id = $1', ['doc-up'])
      assert.deepEqual(await sql.query('SELECT count(*)::int AS n FROM dedup_bands'), [{ n: 0 }])
    } finally {
      await sql.close()
      await remove()
    }
  })

  it(`${name}: returns the same JS types for timestamps, int8, jsonb, arrays, bytea and null`, () => withSql(async (sql) => {
    await migrate(sql)
    const rows = await sql.query<Record<string, unknown>>(
      `SELECT now() AS ts, 12345678901::bigint AS big, count(*) AS n, $1::jsonb AS doc, ARRAY['a','b'] AS arr,
              '\\x0102ff'::bytea AS bin, NULL::text AS nothing, 1.5::float8 AS f, true AS b`,
      [{ nested: { list: [1, 'x'] } }],
    )
    const r = rows[0]
    assert.equal(typeof r.ts, 'string')
    assert.match(r.ts as string, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    assert.ok(Math.abs(Date.parse(r.ts as string) - Date.now()) < 60_000)
    assert.equal(r.big, 12345678901)
    assert.equal(r.n, 1)
    assert.deepEqual(r.doc, { nested: { list: [1, 'x'] } })
    assert.deepEqual(r.arr, ['a', 'b'])
    assert.deepEqual([...(r.bin as Uint8Array)], [1, 2, 255])
    assert.equal(r.nothing, null)
    assert.equal(r.f, 1.5)
    assert.equal(r.b, true)
  }))

  it(`${name}: a text value that starts with U+FEFF comes back as stored (PGlite's decoder dropped the mark)`, () => withSql(async (sql) => {
    await migrate(sql)
    for (const v of ['\uFEFF', '\uFEFFabc', '\uFEFF\uFEFFx', 'a\uFEFF']) {
      const [r] = await sql.query<{ v: string; n: number; arr: string[]; doc: unknown }>(
        'SELECT $1::text AS v, length($1::text) AS n, ARRAY[$1::text] AS arr, to_jsonb($1::text) AS doc', [v])
      assert.equal(r.v, v, `the value ${JSON.stringify(v)}`)
      assert.equal(r.n, v.length)
      assert.deepEqual(r.arr, [v])
      assert.equal(r.doc, v)
    }
    // Stored in a table and read back by what it holds: the owner row of a KB handed to the user id '\uFEFF'.
    const kb = `bom-${Date.now()}`
    await sql.query(`INSERT INTO knowledge_bases (kb_id, kb_name) VALUES ($1, 'BOM')`, [kb])
    try {
      await sql.query(`INSERT INTO kb_members (kb_id, user_id, role, granted_by) VALUES ($1, $2, 'owner', 'x')`, [kb, '\uFEFF'])
      const owner = await sql.query<{ user_id: string }>(`SELECT user_id FROM kb_members WHERE kb_id = $1 AND role = 'owner'`, [kb])
      assert.deepEqual(owner, [{ user_id: '\uFEFF' }])
      const moved = await sql.query<{ user_id: string }>(`UPDATE kb_members SET role = 'admin' WHERE kb_id = $1 AND user_id = $2 RETURNING user_id`, [kb, owner[0].user_id])
      assert.equal(moved.length, 1, 'the row is found again by the id read back')
    } finally {
      await sql.query('DELETE FROM knowledge_bases WHERE kb_id = $1', [kb])
    }
  }))

  it(`${name}: transactions commit, roll back on a throw, and see their own writes`, () => withSql(async (sql) => {
    await migrate(sql)
    const kb = `tx-${Math.random().toString(36).slice(2, 8)}`
    await sql.transaction(async (tx) => {
      await tx.query('INSERT INTO knowledge_bases (kb_id) VALUES ($1)', [kb])
      const inside = await tx.query('SELECT kb_id FROM knowledge_bases WHERE kb_id = $1', [kb])
      assert.equal(inside.length, 1)
    })
    assert.equal((await sql.query('SELECT 1 FROM knowledge_bases WHERE kb_id = $1', [kb])).length, 1)
    await assert.rejects(sql.transaction(async (tx) => {
      await tx.query('UPDATE knowledge_bases SET kb_name = $2 WHERE kb_id = $1', [kb, 'changed'])
      throw new Error('boom')
    }), /boom/)
    const after = await sql.query<{ kb_name: string }>('SELECT kb_name FROM knowledge_bases WHERE kb_id = $1', [kb])
    assert.equal(after[0].kb_name, '')
  }))

  it(`${name}: unique violations are recognisable, cascades delete document rows`, () => withSql(async (sql) => {
    await migrate(sql)
    const kb = `uv-${Math.random().toString(36).slice(2, 8)}`
    await sql.query('INSERT INTO knowledge_bases (kb_id) VALUES ($1)', [kb])
    const err = await sql.query('INSERT INTO knowledge_bases (kb_id) VALUES ($1)', [kb]).then(() => null, (e: unknown) => e)
    assert.ok(isUniqueViolation(err), `expected a unique violation, got ${String(err)}`)
    await sql.query(`INSERT INTO documents (doc_id, kb_id, source, status) VALUES ('0123456789abcdef', $1, 'a.txt', 'pending')`, [kb])
    const dup = await sql.query(`INSERT INTO documents (doc_id, kb_id, source, status) VALUES ('0123456789abcdee', $1, 'a.txt', 'pending')`, [kb]).then(() => null, (e: unknown) => e)
    assert.ok(isUniqueViolation(dup), 'documents are unique on (kb_id, source)')
    await sql.query('DELETE FROM knowledge_bases WHERE kb_id = $1', [kb])
    assert.equal((await sql.query('SELECT 1 FROM documents WHERE kb_id = $1', [kb])).length, 0)
  }))

  it(`${name}: concurrent queries and transactions do not interleave wrongly`, () => withSql(async (sql) => {
    await migrate(sql)
    const kb = `cc-${Math.random().toString(36).slice(2, 8)}`
    await sql.query('INSERT INTO knowledge_bases (kb_id, kb_name) VALUES ($1, $2)', [kb, '0'])
    // 20 read-modify-write increments under row locks must add up exactly.
    await Promise.all(Array.from({ length: 20 }, () => sql.transaction(async (tx) => {
      const [row] = await tx.query<{ kb_name: string }>('SELECT kb_name FROM knowledge_bases WHERE kb_id = $1 FOR UPDATE', [kb])
      await tx.query('UPDATE knowledge_bases SET kb_name = $2 WHERE kb_id = $1', [kb, String(Number(row.kb_name) + 1)])
    })))
    const [final] = await sql.query<{ kb_name: string }>('SELECT kb_name FROM knowledge_bases WHERE kb_id = $1', [kb])
    assert.equal(final.kb_name, '20')
  }))

  it(`${name}: ping answers true while open`, () => withSql(async (sql) => {
    assert.equal(await sql.ping(), true)
  }))
}
