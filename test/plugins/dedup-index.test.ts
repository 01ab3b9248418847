// The dedup decision of plugins/docs/dedup.ts: the in-memory signature index of stages 1-2 (against a real
// PGlite database where it reads one), the stage-1 confirmation, stage 3's chunk score and the title rule.
import { after, describe, it, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import type { Sql, SqlRunner } from '../../adapters/ports.ts'
import { createPgliteSql } from '../../adapters/metadata/pglite.ts'
import { createPostgresSql } from '../../adapters/metadata/postgres.ts'
import { migrate } from '../../adapters/metadata/migrate.ts'
import { dedupSignatures, jaccardEstimate, simhashFromHex, titleSimilarity } from '../../compute/dedup/index.ts'
import {
  chunkScore, commitUnlessLate, compare, countedSignatureWrites, finishIndexed, IDENTICAL_MIN_JACCARD, laterVerdict, KbSignatures, noteSignatureWrite, screenEntries, SignatureIndex, textScore, titleChanged, type Candidate, type Signatures,
} from '../../plugins/docs/dedup.ts'
import { domainText, editEvery25th, replaceTenth } from './dedup-quality.suite.ts'
import { mulberry32 } from '../../bench/lib/rng.ts'
import { resolveSettings } from '../../kernel/config/load.ts'
import { createTempDatabase, type TempDatabase } from '../helpers/pg.ts'
import { serviceUrl, skipUnless } from '../helpers/services.ts'

const cfg = resolveSettings({}).settings.dedup

function signature(seed: number): Signatures {
  const minhash = new Uint32Array(128).map((_, i) => (Math.imul(seed + 1, 2654435761) ^ Math.imul(i + 1, 40503)) >>> 0)
  return { simhash: (BigInt(seed) * 0x9e3779b97f4a7c15n & 0xffffffffffffffffn).toString(16).padStart(16, '0'), minhash, title: `title ${seed}` }
}

describe('dedup signature index', () => {
  it('a revision supersedes in the statement that indexes it, and only while it is still running (issue 42)', async (t) => {
    const sql = await createPgliteSql()
    t.after(() => sql.close())
    await migrate(sql)
    await sql.query("INSERT INTO knowledge_bases (kb_id) VALUES ('kb')")
    const insert = (id: string, status: string) => sql.query('INSERT INTO documents (doc_id, kb_id, source, status) VALUES ($1, $2, $3, $4)', [id, 'kb', `${id}.txt`, status])
    const statusOf = async (id: string) => (await sql.query<{ status: string; duplicate_of: string | null; dedup: any }>('SELECT status, duplicate_of, dedup FROM documents WHERE doc_id = $1', [id]))[0]
    const fields = { chunk_count: 1, embedding_model: 'm', title: 't', doc_type: 'txt' }
    const older = { verdict: 'similar' as const, stage: 3 as const, score: 0.8, matched_doc_id: 'new0000000000001', reason: 'superseded' }
    await insert('old0000000000001', 'indexed')
    await insert('new0000000000001', 'running')
    const done = await finishIndexed(sql, 'kb', 'new0000000000001', signature(1), fields, null, { docId: 'old0000000000001', dedup: older })
    assert.equal(done?.superseded, true)
    assert.equal((await statusOf('new0000000000001')).status, 'indexed')
    assert.deepEqual(await statusOf('old0000000000001'), { status: 'outdated', duplicate_of: 'new0000000000001', dedup: older })
    // a revision failed through the API meanwhile supersedes nothing
    await insert('old0000000000002', 'indexed')
    await insert('new0000000000002', 'failed')
    assert.equal(await finishIndexed(sql, 'kb', 'new0000000000002', signature(2), fields, null, { docId: 'old0000000000002', dedup: older }), null)
    assert.equal((await statusOf('old0000000000002')).status, 'indexed')
    // an older document that left indexed meanwhile stays as it is
    await insert('old0000000000003', 'deleted')
    await insert('new0000000000003', 'running')
    assert.deepEqual(await finishIndexed(sql, 'kb', 'new0000000000003', signature(3), fields, null, { docId: 'old0000000000003', dedup: older }), { seq: (await sql.query<{ seq: number }>("SELECT seq FROM dedup_signatures WHERE doc_id = 'new0000000000003'"))[0].seq, superseded: false })
    assert.equal((await statusOf('old0000000000003')).status, 'deleted')
  })

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
    const seq = (await finishIndexed(sql, 'kb', 'aaaaaaaaaaaaaaa1', sigA, { chunk_count: 1, embedding_model: 'm', title: 't', doc_type: 'txt' }))!.seq
    assert.ok(seq > 0)
    // The signature row alone: band keys are read by nothing and no longer written (migration 008).
    assert.deepEqual(await sql.query('SELECT count(*)::int AS n FROM dedup_bands'), [{ n: 0 }])
    assert.deepEqual(await sql.query("SELECT doc_id FROM dedup_signatures WHERE kb_id = 'kb'"), [{ doc_id: 'aaaaaaaaaaaaaaa1' }])
    index.add('kb', 'aaaaaaaaaaaaaaa1', sigA, seq)
    assert.deepEqual(await index.screen(counting, 'kb', 'new0000000000002', sigA, cfg), { verdict: 'identical', match: 'aaaaaaaaaaaaaaa1', title: 'title 1' })
    assert.equal(selects, 1, 'no signature read within the refresh interval')

    // Written by another process: seen once the interval has passed.
    await insertDoc('bbbbbbbbbbbbbbb1')
    const sigB = signature(3)
    await finishIndexed(sql, 'kb', 'bbbbbbbbbbbbbbb1', sigB, { chunk_count: 1, embedding_model: 'm', title: 't', doc_type: 'txt' })
    const fresh = new SignatureIndex(0)
    assert.deepEqual(await fresh.screen(counting, 'kb', 'new0000000000003', sigB, cfg), { verdict: 'identical', match: 'bbbbbbbbbbbbbbb1', title: 'title 3' })
    assert.equal(await index.screen(counting, 'kb', 'new0000000000004', sigB, cfg).then((v) => v.verdict), 'unique', 'the stale view does not know it yet')
  })

  it('a refresh reads only the signatures committed since the last one and not held already; a row is read whole once', async (t) => {
    const sql = await createPgliteSql()
    t.after(() => sql.close())
    await migrate(sql)
    const read: number[] = []
    const counting: SqlRunner = {
      query: async <T,>(text: string, params?: readonly unknown[]) => {
        const rows = await sql.query<T>(text, params)
        if (/FROM dedup_signatures/.test(text)) read.push(rows.length)
        return rows
      },
    }
    await sql.query("INSERT INTO knowledge_bases (kb_id) VALUES ('kb')")
    const index = new SignatureIndex(0) // every screen refreshes
    const docs = 60
    let others = 0
    for (let i = 0; i < docs; i++) {
      const id = `doc${String(i).padStart(13, '0')}`
      await sql.query(`INSERT INTO documents (doc_id, kb_id, source, status) VALUES ($1, 'kb', $2, 'running')`, [id, `${id}.txt`])
      assert.equal((await index.screen(counting, 'kb', id, signature(100 + i), cfg)).verdict, 'unique')
      const sig = signature(100 + i)
      const seq = (await finishIndexed(sql, 'kb', id, sig, { chunk_count: 1, embedding_model: 'm', title: 't', doc_type: 'txt' }))!.seq
      // every third committed by another process: this index learns of it only by reading it
      if (i % 3 === 2) others++
      else index.add('kb', id, sig, seq)
    }
    assert.equal(read.length, docs)
    // Each read holds what another process committed since the last (one row here), never what this index holds:
    // reading every signature of the KB had made each refresh cost O(KB size), and a bulk ingest quadratic; reading
    // the window again (REREAD) whole cost a 512-byte MinHash per row each time.
    assert.ok(Math.max(...read) <= 1, `rows read per refresh: ${read.join(' ')}`)
    assert.equal(read.reduce((a, b) => a + b, 0), others - 1, 'each other process\'s row read once (the last one after the last screen)')
    // Everything committed is still known: an identical copy of the first document is found, and of another process's.
    assert.deepEqual(await index.screen(counting, 'kb', 'copy000000000001', signature(100), cfg), { verdict: 'identical', match: 'doc0000000000000', title: 'title 100' })
    assert.deepEqual(await index.screen(counting, 'kb', 'copy000000000002', signature(159), cfg), { verdict: 'identical', match: 'doc0000000000059', title: 'title 159' })
  })

  it('stage 1: a SimHash match without shared word shingles is dropped; a weak one goes to stage 3', async () => {
    const entries = new KbSignatures()
    const a = signature(1)
    entries.set('a', simhashFromHex(a.simhash), a.minhash, a.title, 1)
    const keep = (c: Candidate[]) => Promise.resolve(c)
    // same SimHash, no MinHash value in common: n-grams of one domain, not the same text
    const collision = { ...signature(2), simhash: a.simhash }
    assert.deepEqual(await screenEntries(entries, 'x', collision, cfg, keep), { verdict: 'unique' })
    // same SimHash, Jaccard 0.5: shares text, but not enough to skip the document unseen
    const half = { ...signature(3), simhash: a.simhash, minhash: a.minhash.map((v, i) => (i % 2 === 0 ? v : signature(3).minhash[i])) }
    const v = await screenEntries(entries, 'x', half, cfg, keep)
    assert.equal(v.verdict, 'compare')
    if (v.verdict === 'compare') assert.deepEqual(v.candidates.map((c) => [c.doc_id, c.stage, c.jaccard]), [['a', 1, 0.5]])
    const most = { ...half, minhash: a.minhash.map((v, i) => (i < 128 * IDENTICAL_MIN_JACCARD ? v : signature(3).minhash[i])) }
    assert.equal((await screenEntries(entries, 'x', most, cfg, keep)).verdict, 'identical')
    // The same signatures with the places of the sampled shingles: the 12 values not shared are lower than the
    // candidate's, so those shingles are missing from it. Spread between shared ones they are scattered word
    // edits (identical); next to each other they are one replaced passage, and stage 3 decides.
    const lower = most.minhash.map((v, i) => (v === a.minhash[i] ? v : Math.min(v, a.minhash[i] - 1)))
    const scattered = Uint32Array.from({ length: 128 }, (_, i) => (i < 116 ? i * 10 : (i - 116) * 100 + 5))
    const passage = Uint32Array.from({ length: 128 }, (_, i) => (i < 116 ? i * 10 : 2000 + i))
    assert.equal((await screenEntries(entries, 'x', { ...most, minhash: lower, positions: scattered }, cfg, keep)).verdict, 'identical')
    assert.equal((await screenEntries(entries, 'x', { ...most, minhash: lower, positions: passage }, cfg, keep)).verdict, 'compare')
  })

  it('textScore: scattered word edits keep the text whole, a replaced passage counts, other text is not found', () => {
    const sigOf = (text: string) => dedupSignatures(text)
    // a short document (1,500 characters, one or two chunks), where chunk vectors tell least
    const body = domainText(21, 1500)
    const original = sigOf(body)
    const te = textScore(sigOf(editEvery25th(body)), original.minhash)!
    assert.ok(te >= cfg.chunk_compare.body_identical_threshold, `scattered edits: identical (${te})`)
    const tr = textScore(sigOf(replaceTenth(body, 0.4, 22)), original.minhash)!
    assert.ok(tr >= cfg.chunk_compare.body_similar_threshold && tr < cfg.chunk_compare.body_identical_threshold, `a passage replaced: similar (${tr})`)
    assert.ok(textScore(sigOf(domainText(23, 1500)), original.minhash)! < 0.2, 'another text of the domain')
    // a document inside one three times its size is not identical to it
    assert.ok(textScore(original, sigOf(`${body}\n\n${domainText(24, 3000)}`).minhash)! < 0.5)
    // no positions (a signature from before they existed) or a text of a few words: no evidence
    assert.equal(textScore({ minhash: original.minhash }, original.minhash), null)
    assert.equal(textScore(sigOf('a few words only'), sigOf('a few words only').minhash), null)
  })

  it('stage 3 takes the text evidence when the chunk vectors confirm the match, the chunk score otherwise', async () => {
    const body = domainText(31, 1500)
    const sig = dedupSignatures(replaceTenth(body, 0.5, 32))
    const cand: Candidate = { doc_id: 'a', stage: 1, closeness: 6, jaccard: 0.8, title: 't', minhash: dedupSignatures(body).minhash }
    const v = Float32Array.from({ length: 8 }, (_, i) => (i === 0 ? 1 : 0))
    const w = Float32Array.from({ length: 8 }, (_, i) => (i === 1 ? 1 : 0))
    // one chunk each, the same vector: the chunk score alone says identical
    assert.equal((await compare([cand], [v], async () => [v], cfg)).verdict, 'identical')
    const withText = await compare([cand], [v], async () => [v], cfg, sig)
    assert.equal(withText.verdict, 'similar')
    assert.equal(withText.verdict === 'similar' && withText.score, textScore(sig, cand.minhash))
    // orthogonal chunk vectors: no chunk pair reaches chunk_match_threshold, the text evidence is not asked
    assert.equal((await compare([cand], [v], async () => [w], cfg, sig)).verdict, 'unique')
  })

  it('stages 1-2 over packed signatures find exactly what a comparison of every full signature finds', () => {
    const r = mulberry32(7)
    const entries = new KbSignatures()
    const all: [string, Signatures][] = []
    const queries = Array.from({ length: 20 }, (_, q) => signature(1000 + q))
    for (let i = 0; i < 3000; i++) {
      // some entries share 20-80 % of a query's MinHash values and its title, some only the title
      const q = queries[i % queries.length]
      const share = i % 7 === 0 ? 0.2 + r() * 0.6 : 0
      const base = signature(i)
      const sig = { ...base, minhash: base.minhash.map((v, k) => (r() < share ? q.minhash[k] : v)), title: i % 5 === 0 ? q.title : base.title }
      all.push([`d${i}`, sig])
      entries.set(`d${i}`, simhashFromHex(sig.simhash), sig.minhash, sig.title, i + 1)
    }
    // a deleted entry is never found, and its slot is reused
    entries.delete('d0')
    entries.set('z', simhashFromHex(all[0][1].simhash), all[0][1].minhash, all[0][1].title, 9999)
    all[0][0] = 'z'
    const m = cfg.minhash
    let found = 0
    for (const q of queries) {
      const got = entries.scan('self', { ...q, simhash: 'ffffffffffffffff' }, cfg).stage2().map((c) => c.doc_id).sort()
      const want = all.filter(([, s]) => {
        const j = jaccardEstimate(q.minhash, s.minhash)
        return j >= m.jaccard_threshold || (j >= m.title_only_min_jaccard_floor && titleSimilarity(q.title, s.title) >= m.title_fuzzy_threshold)
      }).map(([id]) => id).sort()
      assert.deepEqual(got, want)
      found += got.length
    }
    assert.ok(found > 50, `only ${found} candidates: the case is too easy`)
    assert.equal(entries.size, 3000)
  })

  it('stage 3 counts passages with a near-copy, not vectors that only share the background', () => {
    const dims = 256
    const r = mulberry32(3)
    const unit = (v: Float32Array) => {
      const n = Math.hypot(...v)
      return v.map((x) => x / n)
    }
    const random = () => Float32Array.from({ length: dims }, () => r() - 0.5)
    // every passage of the domain shares one component (cosine about 0.6 between any two)
    const common = random()
    const passage = () => unit(random().map((x, i) => x + 1.6 * common[i]))
    const near = (v: Float32Array) => unit(v.map((x) => x + (r() - 0.5) * 0.04))
    const docA = Array.from({ length: 10 }, passage)
    const docB = Array.from({ length: 10 }, passage)
    const rawMean = docB.reduce((s, v) => s + Math.max(...docA.map((w) => w.reduce((t, x, i) => t + x * v[i], 0))), 0) / 10
    assert.ok(rawMean > 0.5, `the background is high (${rawMean})`)
    assert.ok(chunkScore(docB, docA, 0.5) < 0.1, 'unrelated passages of one domain do not add up')
    assert.ok(chunkScore(docA.map(near), docA, 0.5) >= 0.95, 'small edits everywhere: identical')
    const revised = docA.map((v, i) => (i === 4 ? passage() : v))
    const s = chunkScore(revised, docA, 0.5)
    assert.ok(s >= 0.75 && s < 0.95, `one passage in ten replaced: similar (${s})`)
    // a document contained in one three times longer is not identical to it
    assert.ok(chunkScore(docA, [...docA, ...docB, ...Array.from({ length: 10 }, passage)], 0.5) < 0.4)
    // one chunk against one chunk: no background to measure, the cosine stands
    assert.ok(Math.abs(chunkScore([docA[0]], [docA[1]], 0.5) - docA[0].reduce((t, x, i) => t + x * docA[1][i], 0)) < 1e-6)
  })

  it('an identical body under another title is "title changed"; other verdicts pass unchanged', () => {
    assert.deepEqual(titleChanged({ verdict: 'identical', match: 'a', score: 1, title: 'draft' }, 'final'), { verdict: 'title_changed', match: 'a', score: 1 })
    assert.deepEqual(titleChanged({ verdict: 'identical', match: 'a', score: 1, title: 'final' }, 'final'), { verdict: 'identical', match: 'a', score: 1, title: 'final' })
    assert.deepEqual(titleChanged({ verdict: 'similar', match: 'a', score: 0.8, title: 'draft' }, 'final'), { verdict: 'similar', match: 'a', score: 0.8, title: 'draft' })
    assert.deepEqual(titleChanged({ verdict: 'unique' }, 'final'), { verdict: 'unique' })
  })
})

/**
 * The commit of a screened document (commitUnlessLate), where two processes (two signature indexes) index a copy
 * and its original at the same moment: each screened before the other was indexed.
 */
function commitSuite(open: () => Promise<Sql>, processes: () => Promise<(typeof import('../../plugins/docs/dedup.ts'))[]>) {
  const fields = { chunk_count: 1, embedding_model: 'm', title: 't', doc_type: 'txt' }
  const opened = async (t: TestContext) => {
    const sql = await open()
    t.after(() => sql.close())
    await migrate(sql)
    await sql.query("INSERT INTO knowledge_bases (kb_id) VALUES ('kb'), ('other')")
    return sql
  }
  const running = (sql: Sql, id: string, kb = 'kb') => sql.query(`INSERT INTO documents (doc_id, kb_id, source, status) VALUES ($1, $2, $3, 'running')`, [id, kb, `${id}.txt`])

  it('of a copy and its original committed at once, the second to commit finds the first and writes nothing', async (t) => {
    const sql = await opened(t)
    const sig = signature(7)
    const ids = ['orig000000000001', 'copy000000000001']
    for (const id of ids) await running(sql, id)
    const modules = await processes()
    const indexes = modules.map((m) => new m.SignatureIndex(0))
    const screens = await Promise.all(ids.map((id, i) => indexes[i].screenFrom(sql, 'kb', id, sig, cfg)))
    assert.deepEqual(screens.map((s) => s.early), [{ verdict: 'unique' }, { verdict: 'unique' }], 'neither was indexed when the other was screened')
    // Each commit takes a while after its rescreen: without the turns both would rescreen before either committed.
    const rounds = await Promise.all(ids.map((id, i) => modules[i].commitUnlessLate(sql, indexes[i], 'kb', id, sig, cfg, screens[i].seen, new Set(), async (tx) => {
      await new Promise((r) => setTimeout(r, 100))
      return finishIndexed(tx, 'kb', id, sig, fields)
    })))
    const done = rounds.filter((r) => 'done' in r)
    const late = rounds.filter((r) => 'late' in r)
    assert.equal(done.length, 1, JSON.stringify(rounds))
    assert.equal(late.length, 1)
    const first = ids[rounds.indexOf(done[0])]
    const second = ids[rounds.indexOf(late[0])]
    assert.deepEqual('late' in late[0] && late[0].late, { verdict: 'identical', match: first, title: 'title 7' })
    const seq = 'done' in done[0] ? done[0].done!.seq : -1
    assert.equal(late[0].seen, seq, 'the rescreen read up to the first commit')
    // the second wrote nothing: it is still running, without a signature
    assert.deepEqual(await sql.query('SELECT doc_id, status FROM documents ORDER BY status'), [{ doc_id: first, status: 'indexed' }, { doc_id: second, status: 'running' }])
    assert.deepEqual(await sql.query('SELECT doc_id FROM dedup_signatures'), [{ doc_id: first }])
    // judged once, not again: tried again from where it read, with the first judged, it commits
    const again = await commitUnlessLate(sql, indexes[rounds.indexOf(late[0])], 'kb', second, sig, cfg, late[0].seen, new Set([first]), (tx) => finishIndexed(tx, 'kb', second, sig, fields))
    assert.ok('done' in again && again.done !== null, JSON.stringify(again))
  })

  it('a rescreen reads only what committed after the screen, in its own KB, leaving out what was judged', async (t) => {
    const sql = await opened(t)
    const index = new SignatureIndex(0)
    const commit = async (id: string, seed: number, kb = 'kb') => {
      await running(sql, id, kb)
      return (await finishIndexed(sql, kb, id, signature(seed), fields))!.seq
    }
    const before = await commit('aaaaaaaaaaaaaaa1', 1)
    const { seen } = await index.screenFrom(sql, 'kb', 'new0000000000001', signature(2), cfg)
    assert.equal(seen, before)
    await commit('bbbbbbbbbbbbbbb1', 3, 'other') // same text, another KB
    const b = await commit('ccccccccccccccc1', 4)
    // the copy of a document screened already is not found again; one committed since is
    assert.deepEqual(await index.rescreen(sql, 'kb', 'new0000000000001', signature(1), cfg, seen, new Set()), { early: { verdict: 'unique' }, seen: b })
    assert.deepEqual(await index.rescreen(sql, 'kb', 'new0000000000001', signature(4), cfg, seen, new Set()), { early: { verdict: 'identical', match: 'ccccccccccccccc1', title: 'title 4' }, seen: b })
    assert.deepEqual(await index.rescreen(sql, 'kb', 'new0000000000001', signature(4), cfg, seen, new Set(['ccccccccccccccc1'])), { early: { verdict: 'unique' }, seen: b })
    assert.deepEqual(await index.rescreen(sql, 'kb', 'new0000000000001', signature(3), cfg, seen, new Set()), { early: { verdict: 'unique' }, seen: b })
    // what this process committed itself (`add`) is screened from memory: its row is not read again
    await running(sql, 'ddddddddddddddd1')
    const d = (await finishIndexed(sql, 'kb', 'ddddddddddddddd1', signature(5), fields))!.seq
    index.add('kb', 'ddddddddddddddd1', signature(5), d)
    const read: number[] = []
    const counting: SqlRunner = { query: async <T,>(text: string, params?: readonly unknown[]) => {
      const rows = await sql.query<T>(text, params)
      if (/FROM dedup_signatures/.test(text)) read.push(rows.length)
      return rows
    } }
    assert.deepEqual(await index.rescreen(counting, 'kb', 'new0000000000001', signature(5), cfg, b, new Set()), { early: { verdict: 'identical', match: 'ddddddddddddddd1', title: 'title 5' }, seen: d })
    assert.deepEqual(read, [0], 'one read, and no row in it')
  })
}

// PGlite has one process (it holds the data folder): two workers of it. On PostgreSQL, two processes: the module
// loaded twice, each with its own turns, so that only the advisory lock keeps them apart.
const oneProcess = async () => {
  const m = await import('../../plugins/docs/dedup.ts')
  return [m, m]
}
const another = '../../plugins/docs/dedup.ts?another-process'
const twoProcesses = async () => [await import('../../plugins/docs/dedup.ts'), (await import(another)) as typeof import('../../plugins/docs/dedup.ts')]

describe('dedup commit: PGlite', () => {
  commitSuite(() => createPgliteSql(), oneProcess)
})

describe('dedup commit: PGlite, the only writer', () => {
  const fields = { chunk_count: 1, embedding_model: 'm', title: 't', doc_type: 'txt' }
  const opened = async (t: TestContext) => {
    const sql = await createPgliteSql()
    t.after(() => sql.close())
    await migrate(sql)
    await sql.query("INSERT INTO knowledge_bases (kb_id) VALUES ('kb')")
    const running = (id: string) => sql.query(`INSERT INTO documents (doc_id, kb_id, source, status) VALUES ($1, 'kb', $2, 'running')`, [id, `${id}.txt`])
    return { sql, running }
  }

  it('a rescreen reads no signature while its index holds every write counted, and reads what another writer counted', async (t) => {
    const { sql, running } = await opened(t)
    // The handle the writes are counted on: the adapters' one, shared by the apps of a process that share adapters.
    let reads = 0
    const db: Sql = { ...sql, query: <T,>(text: string, params?: readonly unknown[]) => {
      if (/FROM dedup_signatures/.test(text)) reads++
      return sql.query<T>(text, params)
    } }
    // Two indexes on one handle: two apps of one process sharing their adapters, each with its pipeline.
    const [a, b] = [new SignatureIndex(60_000), new SignatureIndex(60_000)]
    const screen = (index: SignatureIndex, id: string, seed: number) => index.screenFrom(db, 'kb', id, signature(seed), cfg)
    const commit = async (index: SignatureIndex, id: string, seed: number, since: number) => {
      const before = reads
      const round = await commitUnlessLate(db, index, 'kb', id, signature(seed), cfg, since, new Set(), (tx) => finishIndexed(tx, 'kb', id, signature(seed), fields))
      return { round, read: reads > before }
    }

    await running('aaaaaaaaaaaaaaa1')
    const first = await commit(a, 'aaaaaaaaaaaaaaa1', 1, (await screen(a, 'aaaaaaaaaaaaaaa1', 1)).seen)
    assert.equal(first.read, true, 'a KB not read in this rescreen yet is read')
    await running('aaaaaaaaaaaaaaa2')
    const second = await commit(a, 'aaaaaaaaaaaaaaa2', 2, (await screen(a, 'aaaaaaaaaaaaaaa2', 2)).seen)
    assert.equal(second.read, false, 'every write held: nothing read')
    assert.ok('done' in second.round && second.round.done !== null)

    // The other index commits a document after a copy of it was screened by this one: this one's rescreen reads it.
    await running('copy000000000003')
    const copyScreen = await screen(a, 'copy000000000003', 3)
    assert.deepEqual(copyScreen.early, { verdict: 'unique' })
    await running('bbbbbbbbbbbbbbb3')
    assert.equal((await commit(b, 'bbbbbbbbbbbbbbb3', 3, (await screen(b, 'bbbbbbbbbbbbbbb3', 3)).seen)).read, true)
    const copy = await commit(a, 'copy000000000003', 3, copyScreen.seen)
    assert.equal(copy.read, true, 'a write of the other index is read')
    assert.deepEqual('late' in copy.round && copy.round.late, { verdict: 'identical', match: 'bbbbbbbbbbbbbbb3', title: 'title 3' })

    // A write counted by another writer (an import: noteSignatureWrite) is read at the next rescreen and found.
    await running('copy000000000004')
    const importedScreen = await screen(a, 'copy000000000004', 4)
    await sql.query(`INSERT INTO documents (doc_id, kb_id, source, status) VALUES ('imported00000004', 'kb', 'imported.txt', 'running')`)
    await finishIndexed(sql, 'kb', 'imported00000004', signature(4), fields)
    noteSignatureWrite(db, 'kb')
    const found = await commit(a, 'copy000000000004', 4, importedScreen.seen)
    assert.equal(found.read, true)
    assert.deepEqual('late' in found.round && found.round.late, { verdict: 'identical', match: 'imported00000004', title: 'title 4' })

    // Held again after that read: the next commit reads nothing, and its rescreen's position is what memory holds.
    await running('aaaaaaaaaaaaaaa5')
    const fifth = await commit(a, 'aaaaaaaaaaaaaaa5', 5, found.round.seen)
    assert.equal(fifth.read, false)
    assert.equal(fifth.round.seen, found.round.seen, 'nothing committed since the last read')
    const rows = await sql.query<{ doc_id: string; status: string }>("SELECT doc_id, status FROM documents WHERE status = 'indexed' ORDER BY doc_id")
    assert.deepEqual(rows.map((r) => r.doc_id), ['aaaaaaaaaaaaaaa1', 'aaaaaaaaaaaaaaa2', 'aaaaaaaaaaaaaaa5', 'bbbbbbbbbbbbbbb3', 'imported00000004'])
  })

  it('a copy and its original screened together by one index: the one committed first is held, and the copy found without a read', async (t) => {
    const { sql, running } = await opened(t)
    const index = new SignatureIndex(60_000)
    for (const id of ['orig000000000001', 'copy000000000001']) await running(id)
    const [orig, copy] = [await index.screenFrom(sql, 'kb', 'orig000000000001', signature(9), cfg), await index.screenFrom(sql, 'kb', 'copy000000000001', signature(9), cfg)]
    assert.deepEqual([orig.early, copy.early], [{ verdict: 'unique' }, { verdict: 'unique' }])
    const commit = (id: string, since: number) => commitUnlessLate(sql, index, 'kb', id, signature(9), cfg, since, new Set(), (tx) => finishIndexed(tx, 'kb', id, signature(9), fields))
    assert.ok('done' in (await commit('orig000000000001', orig.seen)))
    const writes = countedSignatureWrites(sql, 'kb')
    const late = await commit('copy000000000001', copy.seen)
    assert.deepEqual('late' in late && late.late, { verdict: 'identical', match: 'orig000000000001', title: 'title 9' })
    assert.equal(countedSignatureWrites(sql, 'kb'), writes, 'the copy wrote nothing')
  })

  it('after dropKb, a rescreen that made the entry anew reads until a refresh has read it', async (t) => {
    const { sql, running } = await opened(t)
    const index = new SignatureIndex(0) // every screen refreshes
    await running('second0000000001')
    const second = await index.screenFrom(sql, 'kb', 'second0000000001', signature(11), cfg)
    // a copy of it written by another writer in this process (an import), counted
    await running('imported00000001')
    await finishIndexed(sql, 'kb', 'imported00000001', signature(11), fields)
    noteSignatureWrite(sql, 'kb')
    await running('first00000000001')
    const first = await index.screenFrom(sql, 'kb', 'first00000000001', signature(12), cfg)
    assert.ok(first.seen > second.seen)
    index.dropKb('kb')
    const commit = (id: string, seed: number, since: number) => commitUnlessLate(sql, index, 'kb', id, signature(seed), cfg, since, new Set(), (tx) => finishIndexed(tx, 'kb', id, signature(seed), fields))
    assert.ok('done' in (await commit('first00000000001', 12, first.seen)))
    const late = await commit('second0000000001', 11, second.seen)
    assert.deepEqual('late' in late && late.late, { verdict: 'identical', match: 'imported00000001', title: 'title 11' })
  })
})

describe('dedup commit: PostgreSQL', { skip: skipUnless('postgres') }, () => {
  let db: TempDatabase | undefined
  after(() => db?.drop())
  commitSuite(async () => {
    if (db) await db.drop()
    db = await createTempDatabase(serviceUrl('postgres')!)
    return createPostgresSql({ host: db.host, port: db.port, database: db.database, user: db.user, password: db.password, poolSize: 4, connectTimeoutSec: 5 })
  }, twoProcesses)
  it('the module loaded twice is two processes: each has its own turns', async () => {
    const [a, b] = await twoProcesses()
    assert.notEqual(a.commitUnlessLate, b.commitUnlessLate)
  })
})

describe('the verdict after a rescreen at the commit', () => {
  it('a copy of a newer document is not indexed; otherwise the stronger relation stands, the first of one kind', () => {
    const v = (verdict: 'identical' | 'similar' | 'title_changed' | 'sibling' | 'overlap', match: string) => ({ verdict, match, score: 0.9 })
    const unique = { verdict: 'unique' as const }
    assert.deepEqual(laterVerdict(unique, unique), unique)
    assert.deepEqual(laterVerdict(unique, v('sibling', 'x')), v('sibling', 'x'))
    assert.deepEqual(laterVerdict(v('sibling', 'a'), v('identical', 'x')), v('identical', 'x'))
    assert.deepEqual(laterVerdict(v('similar', 'a'), v('identical', 'x')), v('identical', 'x'))
    assert.deepEqual(laterVerdict(v('overlap', 'a'), v('similar', 'x')), v('similar', 'x'))
    assert.deepEqual(laterVerdict(v('similar', 'a'), v('title_changed', 'x')), v('similar', 'a'))
    assert.deepEqual(laterVerdict(v('title_changed', 'a'), v('sibling', 'x')), v('title_changed', 'a'))
    assert.deepEqual(laterVerdict(v('sibling', 'a'), v('overlap', 'x')), v('sibling', 'a'))
    assert.deepEqual(laterVerdict(v('sibling', 'a'), unique), v('sibling', 'a'))
    // the document judged against is no longer indexed (the late one superseded it): the late verdict stands
    assert.deepEqual(laterVerdict(v('similar', 'a'), v('similar', 'x'), false), v('similar', 'x'))
    assert.deepEqual(laterVerdict(v('title_changed', 'a'), v('title_changed', 'x'), false), v('title_changed', 'x'))
    assert.deepEqual(laterVerdict(v('similar', 'a'), v('sibling', 'x'), false), v('sibling', 'x'))
    assert.deepEqual(laterVerdict(v('similar', 'a'), unique, false), unique)
  })
})
