// The in-memory signature index of dedup stages 1-2 against a real PGlite database.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import type { SqlRunner } from '../../adapters/ports.ts'
import { createPgliteSql } from '../../adapters/metadata/pglite.ts'
import { migrate } from '../../adapters/metadata/migrate.ts'
import { finishIndexed, SignatureIndex, type Signatures } from '../../plugins/docs/dedup.ts'
import { resolveSettings } from '../../kernel/config/load.ts'

const cfg = resolveSettings({}).settings.dedup

function signature(seed: number): Signatures {
  const minhash = new Uint32Array(128).map((_, i) => (Math.imul(seed + 1, 2654435761) ^ Math.imul(i + 1, 40503)) >>> 0)
  return { simhash: (BigInt(seed) * 0x9e3779b97f4a7c15n & 0xffffffffffffffffn).toString(16).padStart(16, '0'), bands: [`b${seed}`], minhash, title: `title ${seed}` }
}

describe('dedup signature index', () => {
  it('reads the database at most once per refresh interval and sees its own commits at once', async (t) => {
    const sql = await createPgliteSql()
    t.after(() => sql.close())
    await migrate(sql)
    let selects = 0
    const counting: SqlRunner = {
      query: (text, params) => {
        if (/FROM dedup_signatures/.test(text)) selects++
        return sql.query(text, params)
      },
    }
    await sql.query("INSERT INTO knowledge_bases (kb_id) VALUES ('kb')")
    const insertDoc = (id: string) => sql.query(`INSERT INTO documents (doc_id, kb_id, source, status) VALUES ($1, 'kb', $2, 'running')`, [id, `${id}.txt`])
    await insertDoc('aaaaaaaaaaaaaaa1')
    const sigA = signature(1)
    const index = new SignatureIndex(60_000)
    assert.deepEqual(await index.screen(counting, 'kb', 'new0000000000001', signature(2), cfg), { verdict: 'unique' })
    assert.equal(selects, 1)
    // Committed by this process: added to the index, found identical without another read.
    const seq = await finishIndexed(sql, 'kb', 'aaaaaaaaaaaaaaa1', sigA, { chunk_count: 1, embedding_model: 'm', title: 't', doc_type: 'txt' })
    assert.ok(seq !== null && seq > 0)
    index.add('kb', 'aaaaaaaaaaaaaaa1', sigA, seq)
    assert.deepEqual(await index.screen(counting, 'kb', 'new0000000000002', sigA, cfg), { verdict: 'identical', match: 'aaaaaaaaaaaaaaa1' })
    assert.equal(selects, 1, 'no signature read within the refresh interval')

    // Written by another process: seen once the interval has passed.
    await insertDoc('bbbbbbbbbbbbbbb1')
    const sigB = signature(3)
    await finishIndexed(sql, 'kb', 'bbbbbbbbbbbbbbb1', sigB, { chunk_count: 1, embedding_model: 'm', title: 't', doc_type: 'txt' })
    const fresh = new SignatureIndex(0)
    assert.deepEqual(await fresh.screen(counting, 'kb', 'new0000000000003', sigB, cfg), { verdict: 'identical', match: 'bbbbbbbbbbbbbbb1' })
    assert.equal(await index.screen(counting, 'kb', 'new0000000000004', sigB, cfg).then((v) => v.verdict), 'unique', 'the stale view does not know it yet')
  })
})
