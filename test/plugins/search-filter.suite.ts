// Metadata filters on search (`options.filter`, issue 16 part 5) through HTTP, on either driver set: applied
// inside each KB's store before its top-k cut, tags choosing the KBs, the 422s, and the cache keyed by both.
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, uniqueId, type StartOptions, type StartedApp } from '../helpers/app.ts'
import { md, newKb, prose } from './docs.suite.ts'
import { searchRaw } from './search-cache.suite.ts'
import { ingest } from './search.suite.ts'

type Json = any

const fast = { queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 } }

const docIds = (a: { body: Json }) => a.body.results.map((r: Json) => r.doc_id as string)

/** 30 short documents: 27 about glaciers, then 3 unrelated ones of another type, indexed after `between`. */
async function thirtyDocs(svc: StartedApp) {
  const kb = await newKb(svc, { 'dedup.enabled': false })
  const common = Object.values(await ingest(svc, kb, Object.fromEntries(Array.from({ length: 27 }, (_, i) =>
    [`common-${String(i).padStart(2, '0')}.md`, md(`Glacier note ${i}`, `Glacier ice and moraine, glacier ice again. ${prose(`common-${i}`, 2)}`)]))))
  // Payload times are the indexing clock's (this machine's): a strict gap on both sides of `between`.
  await new Promise((r) => setTimeout(r, 20))
  const between = new Date().toISOString()
  await new Promise((r) => setTimeout(r, 20))
  const rare = Object.values(await ingest(svc, kb, Object.fromEntries(Array.from({ length: 3 }, (_, i) =>
    [`rare-${i}.txt`, `Orchard notes ${i}\n\n${prose(`rare-${i}`, 2)}\n`]))))
  return { kb, common, rare, between }
}

export function searchFilterSuite(label: string, opts: StartOptions): void {
  // Full-size vectors: at the tests' usual 64 dimensions hashed features collide too much for the ranking to be clear.
  const withSettings = (settings: Record<string, unknown> = {}) => ({ ...opts, settings: { ...fast, embedding: { vector_size: 1024 }, ...opts.settings, ...settings } })

  it(`${label}: doc_type, source_prefix, doc_ids, source_type and the time window filter inside the index: top_k is still filled`, async (t) => {
    const svc = await startApp(t, withSettings())
    const { kb, common, rare, between } = await thirtyDocs(svc)
    const query = 'glacier ice moraine'
    for (const mode of ['similarity', 'hybrid']) {
      const ask = (filter?: Json) => searchRaw(svc, { query, kb_ids: [kb], options: { mode, top_k: 3, ...(filter && { filter }) } })
      const plain = await ask()
      assert.equal(plain.status, 200)
      assert.equal(plain.body.results.length, 3)
      // What makes this a test of filtering before the cut: none of the three kept documents is in the unfiltered top 3.
      assert.ok(docIds(plain).every((id: string) => common.includes(id)), `${mode}: the glacier notes rank first unfiltered`)
      const outside = common.filter((id) => !docIds(plain).includes(id)).slice(-3)

      const cases: [Json, string[]][] = [
        [{ doc_type: 'txt' }, rare],
        [{ doc_type: ['txt', 'pdf'] }, rare],
        [{ source_prefix: 'rare-' }, rare],
        [{ doc_ids: outside }, outside],
        [{ updated_after: between }, rare],
        [{ updated_after: between, updated_before: '2999-01-01T00:00:00Z', source_type: 's3' }, rare],
      ]
      for (const [filter, kept] of cases) {
        const res = await ask(filter)
        assert.equal(res.status, 200, JSON.stringify(res.body))
        assert.equal(res.body.results.length, 3, `${mode} ${JSON.stringify(filter)}: top_k filled`)
        assert.deepEqual(new Set(docIds(res)), new Set(kept), `${mode} ${JSON.stringify(filter)}`)
      }
      const before = await ask({ updated_before: between })
      assert.equal(before.body.results.length, 3)
      assert.ok(docIds(before).every((id: string) => common.includes(id)), `${mode}: before the window: the earlier documents`)
      // A source_prefix is a prefix, case-sensitive; conditions are all met or nothing is.
      assert.deepEqual((await ask({ source_prefix: 'Rare-' })).body.results, [])
      assert.deepEqual((await ask({ source_prefix: 'rare-', doc_type: 'md' })).body.results, [])
      assert.deepEqual((await ask({ source_type: 'web' })).body.results, [])
      assert.deepEqual(docIds(await ask({ source_type: ['web', 's3'] })), docIds(plain))
      const one = await ask({ doc_ids: [rare[1]] })
      assert.ok(one.body.results.length >= 1 && docIds(one).every((id: string) => id === rare[1]), 'fewer matches than top_k: all of them')
    }
  })

  it(`${label}: tags choose the KBs among kb_ids; a tag change applies at once; other conditions apply in each`, async (t) => {
    const svc = await startApp(t, withSettings())
    const kbs: Record<string, string> = {}
    for (const [name, tags] of [['hr', ['hr']], ['eng', ['eng']], ['both', ['hr', 'legal']]] as const) {
      const id = uniqueId()
      assert.equal((await svc.request('/api/kb', { method: 'POST', json: { kb_id: id, tags } })).status, 201)
      kbs[name] = id
      await ingest(svc, id, {
        [`${name}-a.md`]: md(`Lantern ${name}`, `The harbour lantern guides ships. ${prose(`${name}-a`, 3)}`),
        [`${name}-b.txt`]: `Lantern log ${name}\n\nA lantern in the lighthouse. ${prose(`${name}-b`, 3)}\n`,
      })
    }
    const all = [kbs.hr, kbs.eng, kbs.both, 'no-such-kb']
    const ask = (filter: Json) => searchRaw(svc, { query: 'harbour lantern', kb_ids: all, options: { top_k: 20, filter } })
    const kbsOf = (a: { body: Json }) => new Set(a.body.results.map((r: Json) => r.kb_id))

    assert.deepEqual(kbsOf(await ask({ tags: 'hr' })), new Set([kbs.hr, kbs.both]))
    assert.deepEqual(kbsOf(await ask({ tags: ['eng', 'legal'] })), new Set([kbs.eng, kbs.both]))
    const mixed = await ask({ tags: ['hr'], doc_type: 'txt' })
    assert.deepEqual(kbsOf(mixed), new Set([kbs.hr, kbs.both]))
    assert.ok(mixed.body.results.every((r: Json) => r.doc_type === 'txt'))
    const none = await ask({ tags: 'finance' })
    assert.equal(none.status, 200)
    assert.deepEqual(none.body.results, [])
    // Tags only narrow what kb_ids names: a tagged KB left out of kb_ids stays out.
    assert.deepEqual(kbsOf(await searchRaw(svc, { query: 'harbour lantern', kb_ids: [kbs.eng], options: { filter: { tags: 'hr' } } })), new Set())

    assert.equal((await ask({ tags: 'hr' })).body.meta.cache_status, 'hit')
    assert.equal((await svc.request(`/api/kb/${kbs.eng}`, { method: 'PATCH', json: { tags: ['eng', 'hr'] } })).status, 200)
    const after = await ask({ tags: 'hr' })
    assert.equal(after.body.meta.cache_status, 'miss', 'the KBs a tag names are read per request')
    assert.deepEqual(kbsOf(after), new Set([kbs.hr, kbs.eng, kbs.both]))
  })

  it(`${label}: the cache keeps filtered and unfiltered answers apart; filters meaning the same share an answer`, async (t) => {
    const svc = await startApp(t, withSettings())
    const { kb, rare } = await thirtyDocs(svc)
    const q = (filter?: Json) => ({ query: 'glacier ice moraine', kb_ids: [kb], options: { top_k: 3, ...(filter && { filter }) } })
    const filtered = await searchRaw(svc, q({ doc_type: ['txt', 'pdf'] }))
    assert.equal(filtered.body.meta.cache_status, 'miss')
    assert.deepEqual(new Set(docIds(filtered)), new Set(rare))
    const plain = await searchRaw(svc, q())
    assert.equal(plain.body.meta.cache_status, 'miss', 'an unfiltered search is never served the filtered answer')
    assert.ok(docIds(plain).every((id: string) => !rare.includes(id)))
    assert.equal((await searchRaw(svc, q({ doc_type: ['pdf', 'txt', 'txt'] }))).body.meta.cache_status, 'hit', 'order and repeats do not matter')
    assert.equal((await searchRaw(svc, q({ doc_type: 'txt' }))).body.meta.cache_status, 'miss')
    assert.equal((await searchRaw(svc, q({ doc_type: ['txt'] }))).body.meta.cache_status, 'hit', 'one value or a list of one')
    assert.equal((await searchRaw(svc, q({}))).body.meta.cache_status, 'hit', 'an empty filter is no filter')
  })

  it(`${label}: bad filters answer 422 in the detail-list shape, naming the field`, async (t) => {
    const svc = await startApp(t, withSettings())
    const kb = await newKb(svc)
    const cases: [Json, string, RegExp][] = [
      [{ doc_typ: 'md' }, 'doc_typ', /Unexpected property/],
      [{ doc_type: [] }, 'doc_type', /doc_type must be a non-empty string or a list of 1 to 100 of them/],
      [{ doc_type: '' }, 'doc_type', /doc_type must be a non-empty string/],
      [{ tags: [] }, 'tags', /tags must be a non-empty string/],
      [{ doc_ids: [] }, 'doc_ids', /doc_ids must list 1 to 1000 doc_ids/],
      [{ doc_ids: ['not-an-id'] }, 'doc_ids', /16 lowercase hex characters/],
      [{ source_prefix: '' }, 'source_prefix', /source_prefix must be 1 to 2048 characters/],
      [{ updated_after: 'yesterday' }, 'updated_after', /updated_after must be an RFC 3339 date/],
      [{ updated_before: '2024-05-01T12:00:00' }, 'updated_before', /updated_before must be an RFC 3339 date/],
      [{ updated_after: '2024-02-30' }, 'updated_after', /updated_after is not a valid date: '2024-02-30'/],
      [{ updated_after: '2024-05-02', updated_before: '2024-05-01' }, 'updated_after', /updated_after must be earlier than updated_before/],
      [{ updated_after: '2024-05-01T00:00:00Z', updated_before: '2024-05-01' }, 'updated_after', /updated_after must be earlier than updated_before/],
    ]
    for (const [filter, field, msg] of cases) {
      const res = await searchRaw(svc, { query: 'x', kb_ids: [kb], options: { filter } })
      assert.equal(res.status, 422, JSON.stringify(filter))
      assert.ok(Array.isArray(res.body.detail), JSON.stringify(res.body))
      const issue = res.body.detail.find((d: Json) => JSON.stringify(d.loc).includes(field))
      assert.ok(issue, `${JSON.stringify(filter)}: ${JSON.stringify(res.body.detail)}`)
      assert.deepEqual(issue.loc.slice(0, 3), ['body', 'options', 'filter'])
      assert.equal(typeof issue.type, 'string')
      if (field === 'doc_typ') assert.equal(issue.type, 'extra_forbidden', 'a misspelt field is refused, never ignored')
      assert.match(issue.msg, msg, JSON.stringify(filter))
    }
    for (const filter of [null, 'md', ['md']]) {
      const res = await searchRaw(svc, { query: 'x', kb_ids: [kb], options: { filter } })
      assert.equal(res.status, 422, JSON.stringify(filter))
      assert.ok(Array.isArray(res.body.detail))
    }
  })

  it(`${label}: the filter is described in the OpenAPI document`, async (t) => {
    const svc = await startApp(t, withSettings())
    const doc = (await (await svc.request('/openapi.json')).json()) as Json
    const text = JSON.stringify(doc)
    for (const field of ['doc_ids', 'source_type', 'doc_type', 'source_prefix', 'tags', 'updated_after', 'updated_before']) {
      assert.ok(text.includes(`"${field}"`), field)
    }
    assert.match(text, /top_k is still filled when that many match/)
    assert.match(text, /Only the knowledge bases \(of kb_ids\) holding this tag/)
  })
}
