// Statements made together go out as one (plugins/docs/coalesce.ts), each call keeping its own answer: the
// worker's claims (one winner per document, null for what is not pending) and upload inserts (null for a name
// that exists, 404 KB_NOT_FOUND for a KB that does not).
import { after, describe, it, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import type { Sql } from '../../adapters/ports.ts'
import { createPgliteSql } from '../../adapters/metadata/pglite.ts'
import { createPostgresSql } from '../../adapters/metadata/postgres.ts'
import { migrate } from '../../adapters/metadata/migrate.ts'
import { createDocRepo } from '../../plugins/docs/repo.ts'
import { createTempDatabase, type TempDatabase } from '../helpers/pg.ts'
import { serviceUrl, skipUnless } from '../helpers/services.ts'

function claimsSuite(open: () => Promise<Sql>) {
  /** A migrated database holding the KBs named, closed when the test ends. */
  const opened = async (t: TestContext, ...kbs: string[]) => {
    const sql = await open()
    t.after(() => sql.close())
    await migrate(sql)
    await sql.query('INSERT INTO knowledge_bases (kb_id) SELECT unnest($1::text[])', [kbs])
    return sql
  }

  it('inserts concurrent uploads in one statement, each with its own answer', async (t) => {
    const sql = await opened(t, 'ka')
    await sql.query(`INSERT INTO documents (doc_id, kb_id, source, status) VALUES ('old', 'ka', 'taken.txt', 'indexed')`)
    let inserts = 0
    const counting: Sql = { ...sql, query: (text, params) => {
      if (/^\s*INSERT INTO documents/.test(text)) inserts++
      return sql.query(text, params)
    } }
    const repo = createDocRepo(counting, { chunkStrategy: 'recursive' })
    const doc = (id: string, source: string, kb = 'ka') => ({ doc_id: id, kb_id: kb, source, status: 'pending' as const, title: source, source_type: 's3', doc_type: 'txt', file_size: 12, etag: `e-${id}` })
    const got = await Promise.all([doc('n1', 'a.txt'), doc('n2', 'taken.txt'), doc('n3', 'b.txt'), doc('n4', 'a.txt')].map((d) => repo.insert(d)))
    assert.equal(inserts, 1, 'inserts made together are one statement')
    assert.deepEqual(got.map((r) => r?.doc_id ?? null), ['n1', null, 'n3', null], 'a name that exists, or came first in the batch, answers null')
    assert.equal(got[0]?.status, 'pending')
    assert.equal(got[0]?.file_size, 12)
    assert.equal(got[2]?.etag, 'e-n3')
    assert.ok(got[0]?.doc_created_at, 'received now')
    // A missing KB fails only its own insert.
    const mixed = await Promise.allSettled([repo.insert(doc('m1', 'c.txt')), repo.insert(doc('m2', 'd.txt', 'nope')), repo.insert(doc('m3', 'e.txt'))])
    assert.equal(mixed[0].status === 'fulfilled' && mixed[0].value?.doc_id, 'm1')
    assert.equal(mixed[1].status, 'rejected')
    assert.equal((mixed[1] as PromiseRejectedResult).reason.code, 'KB_NOT_FOUND')
    assert.equal(mixed[2].status === 'fulfilled' && mixed[2].value?.doc_id, 'm3')
    const rows = await sql.query<{ doc_id: string }>('SELECT doc_id FROM documents ORDER BY doc_id')
    assert.deepEqual(rows.map((r) => r.doc_id), ['m1', 'm3', 'n1', 'n3', 'old'])
  })

  it('claims a batch in one statement, one winner per document, overrides included', async (t) => {
    const sql = await opened(t, 'ka', 'kb')
    await sql.query(`INSERT INTO kb_settings_overrides (kb_id, overrides) VALUES ('kb', '{"chunking.strategy": "hierarchical"}'::jsonb)`)
    const ids = Array.from({ length: 6 }, (_, i) => `doc${i}`)
    for (const [i, id] of ids.entries()) {
      await sql.query(`INSERT INTO documents (doc_id, kb_id, source, status) VALUES ($1, $2, $3, $4)`, [id, i % 2 ? 'kb' : 'ka', `${id}.txt`, i === 5 ? 'indexed' : 'pending'])
    }
    let updates = 0
    const counting: Sql = { ...sql, query: (text, params) => {
      if (/^\s*UPDATE documents/.test(text)) updates++
      return sql.query(text, params)
    } }
    const repo = createDocRepo(counting, { chunkStrategy: 'recursive' })
    // doc0 twice in the same batch; doc5 is not pending; `missing` does not exist.
    const asked = ['doc0', 'doc1', 'doc0', 'doc2', 'doc3', 'doc4', 'doc5', 'missing']
    const got = await Promise.all(asked.map((id) => repo.claimIngest(id)))
    assert.equal(updates, 1, 'claims made together are one statement')
    assert.equal(got[0]?.doc_id, 'doc0')
    assert.equal(got[2], null, 'the second claim of doc0 in the batch loses')
    for (const i of [1, 3, 4, 5]) assert.equal(got[i]?.doc_id, asked[i])
    assert.equal(got[6], null)
    assert.equal(got[7], null)
    for (const d of got.filter((d) => d !== null)) {
      assert.equal(d.status, 'running')
      const odd = Number(d.doc_id.slice(3)) % 2 === 1
      assert.deepEqual(d.kb_overrides, odd ? { 'chunking.strategy': 'hierarchical' } : null)
      assert.equal(d.chunk_strategy, odd ? 'hierarchical' : 'recursive')
    }
    const rows = await sql.query<{ doc_id: string; status: string }>('SELECT doc_id, status FROM documents ORDER BY doc_id')
    assert.deepEqual(rows.map((r) => r.status), ['running', 'running', 'running', 'running', 'running', 'indexed'])
    // Claimed already: a later claim finds nothing, and a claim made while one is written joins the next statement.
    const first = repo.claimIngest('doc1')
    await Promise.resolve()
    const second = repo.claimIngest('doc2')
    const third = repo.claimIngest('doc3')
    assert.deepEqual(await Promise.all([first, second, third]), [null, null, null])
    assert.equal(updates, 3)
  })

  it('rejects every claim of a batch whose statement fails, and claims again afterwards', async (t) => {
    const sql = await opened(t, 'ka')
    await sql.query(`INSERT INTO documents (doc_id, kb_id, source, status) VALUES ('d1', 'ka', 'd1.txt', 'pending')`)
    let fail = true
    const flaky: Sql = { ...sql, query: (text, params) => (fail && /^\s*UPDATE/.test(text) ? Promise.reject(new Error('database went away')) : sql.query(text, params)) }
    const repo = createDocRepo(flaky, { chunkStrategy: 'recursive' })
    const results = await Promise.allSettled([repo.claimIngest('d1'), repo.claimIngest('d2')])
    assert.deepEqual(results.map((r) => r.status), ['rejected', 'rejected'])
    fail = false
    assert.equal((await repo.claimIngest('d1'))?.status, 'running')
  })
}

describe('document claims: PGlite', () => {
  claimsSuite(() => createPgliteSql())
})

describe('document claims: PostgreSQL', { skip: skipUnless('postgres') }, () => {
  let db: TempDatabase | undefined
  after(() => db?.drop())
  claimsSuite(async () => {
    // A database per test: each migrates from scratch.
    if (db) await db.drop()
    db = await createTempDatabase(serviceUrl('postgres')!)
    return createPostgresSql({ host: db.host, port: db.port, database: db.database, user: db.user, password: db.password, poolSize: 2, connectTimeoutSec: 5 })
  })
})
