// The knowledge-base and settings-override API (spec 4.2, 4.3) through HTTP; run on both driver sets.
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, uniqueId, type StartOptions } from '../helpers/app.ts'

type Json = any

export function kbApiSuite(label: string, opts: StartOptions): void {
  it(`${label}: creates, lists, reads, patches and deletes a knowledge base`, async (t) => {
    const svc = await startApp(t, opts)
    const id = uniqueId()
    let res = await svc.request('/api/kb', { method: 'POST', json: { kb_id: id, kb_name: 'Handbook', description: 'HR docs', tags: ['hr', 'policy'] } })
    assert.equal(res.status, 201)
    assert.deepEqual(await res.json(), { kb_id: id, status: 'created' })

    res = await svc.request(`/api/kb/${id}`)
    assert.equal(res.status, 200)
    const kb = await res.json() as Json
    assert.equal(kb.kb_id, id)
    assert.equal(kb.kb_name, 'Handbook')
    assert.equal(kb.description, 'HR docs')
    assert.deepEqual(kb.tags, ['hr', 'policy'])
    assert.equal(kb.status, 'active')
    assert.match(kb.created_at, /^\d{4}-\d\d-\d\dT/)
    assert.match(kb.updated_at, /^\d{4}-\d\d-\d\dT/)

    res = await svc.request('/api/kb')
    const list = await res.json() as Json
    assert.ok(list.knowledge_bases.some((k: Json) => k.kb_id === id))

    res = await svc.request(`/api/kb/${id}`, { method: 'PATCH', json: { tags: ['only'] } })
    assert.equal(res.status, 200)
    assert.deepEqual(await res.json(), { kb_id: id, status: 'updated' })
    const patched = await (await svc.request(`/api/kb/${id}`)).json() as Json
    assert.deepEqual(patched.tags, ['only'], 'tags are replaced whole')
    assert.equal(patched.kb_name, 'Handbook', 'fields not passed are unchanged')
    assert.equal(patched.description, 'HR docs')
    assert.ok(patched.updated_at >= kb.updated_at)

    res = await svc.request(`/api/kb/${id}`, { method: 'DELETE' })
    assert.equal(res.status, 200)
    assert.deepEqual(await res.json(), { kb_id: id, status: 'deleted', s3_objects_deleted: 0 })
    assert.equal((await svc.request(`/api/kb/${id}`)).status, 404)
  })

  it(`${label}: defaults, duplicates, bad ids and missing KBs`, async (t) => {
    const svc = await startApp(t, opts)
    const id = uniqueId()
    assert.equal((await svc.request('/api/kb', { method: 'POST', json: { kb_id: id } })).status, 201)
    const kb = await (await svc.request(`/api/kb/${id}`)).json() as Json
    assert.equal(kb.kb_name, '')
    assert.deepEqual(kb.tags, [])

    let res = await svc.request('/api/kb', { method: 'POST', json: { kb_id: id, kb_name: 'again' } })
    assert.equal(res.status, 409)
    assert.deepEqual(await res.json(), { detail: `KB already exists: ${id}` })

    for (const bad of ['Upper', '-lead', 'has space', 'a'.repeat(64), '', 'dot.ted', '한글']) {
      res = await svc.request('/api/kb', { method: 'POST', json: { kb_id: bad } })
      assert.equal(res.status, 422, `kb_id ${JSON.stringify(bad)}`)
      const d = (await res.json() as Json).detail[0]
      assert.deepEqual(d.loc, ['body', 'kb_id'])
      assert.match(d.msg, /kb_id must be 1-63 characters/)
    }
    res = await svc.request('/api/kb', { method: 'POST', json: { kb_name: 'no id' } })
    assert.equal(res.status, 422)
    assert.equal((await res.json() as Json).detail[0].type, 'missing')
    res = await svc.request('/api/kb', { method: 'POST', json: { kb_id: uniqueId(), tags: 'not-a-list' } })
    assert.equal(res.status, 422)

    for (const [method, path] of [['GET', '/api/kb/ghost'], ['PATCH', '/api/kb/ghost'], ['DELETE', '/api/kb/ghost'], ['GET', '/api/kb/ghost/settings'], ['GET', '/api/kb/ghost/settings/overrides'], ['PUT', '/api/kb/ghost/settings/overrides'], ['DELETE', '/api/kb/ghost/settings/overrides'], ['GET', '/api/kb/ghost/settings/schema']]) {
      res = await svc.request(path, { method, json: method === 'PUT' ? { overrides: {} } : method === 'PATCH' ? { kb_name: 'x' } : undefined })
      assert.equal(res.status, 404, `${method} ${path}`)
      assert.deepEqual(await res.json(), { detail: 'KB not found: ghost' })
    }
  })

  it(`${label}: the list is sorted by kb_id unless sort_by/sort_order say otherwise; an omitted description is null`, async (t) => {
    const svc = await startApp(t, opts)
    const stem = uniqueId().slice(0, 40)
    // Created in an order that is neither kb_id's nor kb_name's.
    const kbs = [[`${stem}-c`, 'Alpha'], [`${stem}-a`, 'Charlie'], [`${stem}-b`, 'Bravo']]
    for (const [kb_id, kb_name] of kbs) assert.equal((await svc.request('/api/kb', { method: 'POST', json: { kb_id, kb_name } })).status, 201)
    const order = async (q: string) => {
      const res = await svc.request(`/api/kb${q}`)
      assert.equal(res.status, 200, q)
      return ((await res.json()) as Json).knowledge_bases.filter((k: Json) => k.kb_id.startsWith(stem)).map((k: Json) => k.kb_id.slice(-1))
    }
    assert.deepEqual(await order(''), ['a', 'b', 'c'], 'default: kb_id ascending')
    assert.deepEqual(await order('?sort_order=desc'), ['c', 'b', 'a'])
    assert.deepEqual(await order('?sort_by=kb_name'), ['c', 'b', 'a'], 'Alpha, Bravo, Charlie')
    assert.deepEqual(await order('?sort_by=kb_name&sort_order=desc'), ['a', 'b', 'c'])
    assert.deepEqual(await order('?sort_by=created_at&sort_order=asc'), ['c', 'a', 'b'])
    assert.deepEqual(await order('?sort_by=created_at&sort_order=desc'), ['b', 'a', 'c'])
    assert.equal((await order('?sort_by=status')).length, 3)
    await svc.request(`/api/kb/${stem}-a`, { method: 'PATCH', json: { tags: ['touched'] } })
    assert.deepEqual((await order('?sort_by=updated_at&sort_order=desc'))[0], 'a')
    for (const bad of ['sort_by=name', 'sort_by=description', 'sort_order=up', 'sort_order=ASC']) {
      const res = await svc.request(`/api/kb?${bad}`)
      assert.equal(res.status, 422, bad)
      assert.equal(((await res.json()) as Json).detail[0].loc[0], 'query')
    }

    const kb = async (id: string) => (await (await svc.request(`/api/kb/${id}`)).json()) as Json
    assert.equal((await kb(`${stem}-a`)).description, null, 'omitted on create: null')
    assert.ok(((await (await svc.request('/api/kb')).json()) as Json).knowledge_bases.some((k: Json) => k.kb_id === `${stem}-a` && k.description === null))
    const withNull = `${stem}-n`
    assert.equal((await svc.request('/api/kb', { method: 'POST', json: { kb_id: withNull, description: null } })).status, 201, 'a client sending null is accepted')
    assert.equal((await kb(withNull)).description, null)
    await svc.request(`/api/kb/${withNull}`, { method: 'PATCH', json: { description: 'Set' } })
    assert.equal((await kb(withNull)).description, 'Set')
    await svc.request(`/api/kb/${withNull}`, { method: 'PATCH', json: { kb_name: 'renamed' } })
    assert.equal((await kb(withNull)).description, 'Set', 'a PATCH without description keeps it')
    await svc.request(`/api/kb/${withNull}`, { method: 'PATCH', json: { description: null } })
    assert.equal((await kb(withNull)).description, null, 'PATCH with null clears it')
    const empty = `${stem}-e`
    await svc.request('/api/kb', { method: 'POST', json: { kb_id: empty, description: '' } })
    assert.equal((await kb(empty)).description, '', 'an empty description is kept as given')
  })

  it(`${label}: delete removes the KB's stored objects and vectors, and counts the objects`, async (t) => {
    const svc = await startApp(t, opts)
    const id = uniqueId()
    const other = uniqueId()
    for (const k of [id, other]) await svc.request('/api/kb', { method: 'POST', json: { kb_id: k } })
    const { objects, vectors, embedder } = svc.app.adapters
    await objects.put(`${id}/a/one.txt`, Buffer.from('one'))
    await objects.put(`${id}/b/two.txt`, Buffer.from('two'))
    await objects.put(`${other}/keep.txt`, Buffer.from('keep'))
    await vectors.ensureCollection(id, embedder.dimensions)
    const [dense] = await embedder.embed(['hello'])
    await vectors.upsert(id, [{
      dense, sparse: { indices: new Uint32Array([1]), values: new Float32Array([1]) },
      payload: { chunk_id: 'c1', kb_id: id, doc_id: 'd1', chunk_index: 0, title: 't', source_type: 's3', source: 'one.txt', doc_type: 'txt', page_num: 1, page_label: '1', text: 'hello', start: 0, end: 5, parent_chunk_id: null, updated_at: new Date().toISOString() },
    }])
    assert.equal(await vectors.count(id), 1)
    const res = await svc.request(`/api/kb/${id}`, { method: 'DELETE' })
    assert.deepEqual(await res.json(), { kb_id: id, status: 'deleted', s3_objects_deleted: 2 })
    assert.equal(await vectors.hasCollection(id), false)
    assert.equal(await objects.head(`${id}/a/one.txt`), null)
    assert.notEqual(await objects.head(`${other}/keep.txt`), null)
  })

  it(`${label}: settings overrides: effective view, schema, PUT/PATCH/DELETE and validation in order`, async (t) => {
    const svc = await startApp(t, { ...opts, settings: { ...opts.settings, retrieval: { rerank: { api_key: 'topsecret' } } } })
    const id = uniqueId()
    await svc.request('/api/kb', { method: 'POST', json: { kb_id: id } })

    let eff = await (await svc.request(`/api/kb/${id}/settings`)).json() as Json
    assert.deepEqual(Object.keys(eff).sort(), ['chunking', 'dedup', 'ingestion', 'retrieval'])
    assert.equal(eff.chunking.chunk_size, 1024)
    assert.equal(eff.retrieval.auto_merge.enabled, false)
    assert.ok(!('api_key' in eff.retrieval.rerank), 'the rerank api_key is left out, not even masked')
    assert.ok(!JSON.stringify(eff).includes('topsecret'))
    assert.equal(eff.retrieval.rerank.model, 'rerank-v3.5', 'the rest of the rerank section stays')
    assert.ok(!('postgres' in eff) && !('s3' in eff))

    const schema = (await (await svc.request(`/api/kb/${id}/settings/schema`)).json() as Json).schema
    // What the older service's settings form reads: description is the field's label, group the section the
    // key lives in, chunk_size an int of 64..8192 (the hierarchical list stays valid through validation, below).
    assert.deepEqual(schema['chunking.chunk_size'], {
      type: 'int', enum: null, default: 1024, min: 64, max: 8192, overridable: true, description: 'Chunk Size', group: 'chunking',
      help: schema['chunking.chunk_size'].help,
    })
    assert.match(schema['chunking.chunk_size'].help, /hierarchical: a descending list/)
    assert.deepEqual(schema['chunking.chunk_overlap'], {
      type: 'int', enum: null, default: 128, min: 0, max: 8192, overridable: true, description: 'Chunk Overlap', group: 'chunking',
      help: schema['chunking.chunk_overlap'].help,
    })
    assert.equal(schema['chunking.strategy'].type, 'enum')
    assert.deepEqual(schema['chunking.strategy'].enum, ['recursive', 'semantic', 'hierarchical'])
    assert.deepEqual([schema['chunking.strategy'].min, schema['chunking.strategy'].max], [null, null])
    assert.deepEqual({ ...schema['dedup.enabled'], help: '' }, { type: 'bool', enum: null, default: true, min: null, max: null, overridable: true, description: 'Enable Dedup', group: 'dedup', help: '' })
    for (const [key, entry] of Object.entries(schema) as [string, Json][]) {
      assert.deepEqual(Object.keys(entry).sort(), ['default', 'description', 'enum', 'group', 'help', 'max', 'min', 'overridable', 'type'], `${key} carries the eight keys and help`)
      assert.match(entry.description, /^[A-Z][A-Za-z0-9 ()-]{1,40}$/, `${key}: a short form label`)
      assert.ok(entry.help !== '' && entry.help !== entry.description, `${key}: the explaining text is in help`)
      assert.equal(entry.group, key.split('.').at(-2), `${key}: grouped under its section`)
    }
    const groups = new Set(Object.values(schema).map((e: Json) => e.group))
    for (const g of ['ingestion', 'image_captioning', 'dedup', 'simhash', 'minhash', 'chunk_compare', 'chunking', 'retrieval', 'hybrid', 'similarity', 'rerank', 'auto_merge']) assert.ok(groups.has(g), g)
    assert.equal(schema['retrieval.hybrid.alpha'].group, 'hybrid')
    assert.equal(schema['retrieval.auto_merge.enabled'].group, 'auto_merge')
    assert.equal(schema['retrieval.auto_merge.enabled'].description, 'Enable Auto-Merge')
    assert.equal(schema['ingestion.max_file_size_mb'].description, 'Max File Size (MB)')
    assert.equal(schema['retrieval.top_k'].description, 'Top K')
    assert.equal(schema['dedup.simhash.ngram'].overridable, false)
    assert.equal(schema['ingestion.parser_plugins'].overridable, false)
    assert.equal(schema['retrieval.top_k'].overridable, false)
    assert.equal(schema['retrieval.auto_merge.merge_threshold'].overridable, true)
    assert.equal(schema['dedup.simhash.hamming_identical_threshold'].group, 'simhash')
    for (const k of ['ingestion.image_captioning.enabled', 'ingestion.pdf_ocr_fallback.min_chars_per_page', 'ingestion.table_layout.scan_region_min_score']) assert.ok(schema[k], k)
    assert.ok(!('retrieval.rerank.api_key' in schema), 'secrets are not listed')

    let res = await svc.request(`/api/kb/${id}/settings/overrides`)
    assert.deepEqual(await res.json(), { overrides: {} })

    res = await svc.request(`/api/kb/${id}/settings/overrides`, { method: 'PUT', json: { overrides: { 'chunking.chunk_size': 512, 'chunking.chunk_overlap': 64, 'retrieval.auto_merge.enabled': true } } })
    assert.equal(res.status, 200)
    assert.deepEqual(await res.json(), { kb_id: id, overrides: { 'chunking.chunk_size': 512, 'chunking.chunk_overlap': 64, 'retrieval.auto_merge.enabled': true } })
    eff = await (await svc.request(`/api/kb/${id}/settings`)).json() as Json
    assert.equal(eff.chunking.chunk_size, 512)
    assert.equal(eff.retrieval.auto_merge.enabled, true)
    assert.equal(eff.retrieval.top_k, 5)

    // Clearing the overlap alone would bring back the global 128, above 15 % of the overridden 512: refused.
    res = await svc.request(`/api/kb/${id}/settings/overrides`, { method: 'PATCH', json: { overrides: { 'chunking.chunk_overlap': null } } })
    assert.equal(res.status, 422)
    assert.match((await res.json() as Json).detail[0].msg, /128 is above 15 % of the smallest chunk_size \(512\)/)
    res = await svc.request(`/api/kb/${id}/settings/overrides`, { method: 'PATCH', json: { overrides: { 'chunking.chunk_overlap': null, 'chunking.chunk_size': null, 'dedup.enabled': false } } })
    assert.deepEqual(await res.json(), { kb_id: id, overrides: { 'retrieval.auto_merge.enabled': true, 'dedup.enabled': false } })

    // The schema shows chunk_size as an int; validation still takes the hierarchical strategy's list, with the
    // int's bounds on every size.
    const hierarchical = { 'chunking.strategy': 'hierarchical', 'chunking.chunk_size': [2048, 512], 'chunking.chunk_overlap': 32 }
    res = await svc.request(`/api/kb/${id}/settings/overrides`, { method: 'PUT', json: { overrides: hierarchical } })
    assert.equal(res.status, 200, await res.clone().text())
    assert.deepEqual((await (await svc.request(`/api/kb/${id}/settings`)).json() as Json).chunking.chunk_size, [2048, 512])
    for (const bad of [[2048, 32], [9000, 512], [2048]]) {
      res = await svc.request(`/api/kb/${id}/settings/overrides`, { method: 'PUT', json: { overrides: { ...hierarchical, 'chunking.chunk_size': bad } } })
      assert.equal(res.status, 422, JSON.stringify(bad))
    }
    for (const bad of [32, 9000]) {
      res = await svc.request(`/api/kb/${id}/settings/overrides`, { method: 'PATCH', json: { overrides: { 'chunking.strategy': 'recursive', 'chunking.chunk_size': bad } } })
      assert.equal(res.status, 422, String(bad))
    }

    res = await svc.request(`/api/kb/${id}/settings/overrides`, { method: 'PUT', json: { overrides: { 'dedup.enabled': false } } })
    assert.deepEqual(await res.json(), { kb_id: id, overrides: { 'dedup.enabled': false } }, 'PUT replaces: absent keys reset')

    // Step 1: section prefix; step 2: key exists and is overridable; step 3: type/range/enum.
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ 'postgres.host': 'x' }, 'override_section', /only keys under ingestion\., chunking\., dedup\., retrieval\./],
      [{ 'chunking.chunk_sise': 1 }, 'override_unknown_key', /unknown setting 'chunking.chunk_sise'/],
      [{ 'retrieval.top_k': 3 }, 'override_not_allowed', /not overridable/],
      [{ 'dedup.simhash.ngram': 4 }, 'override_not_allowed', /not overridable/],
      [{ 'ingestion.parser_plugins': [] }, 'override_not_allowed', /not overridable/],
      [{ 'chunking.chunk_overlap': 'big' }, 'int_type', /integer/i],
      [{ 'chunking.chunk_overlap': 1.5 }, 'int_type', /integer/i],
      [{ 'retrieval.auto_merge.merge_threshold': 1.5 }, 'less_than_equal', /less than or equal to 1/],
      [{ 'chunking.strategy': 'magic' }, 'union_type', /'recursive', 'semantic', 'hierarchical'/],
      [{ 'chunking.chunk_overlap': 600 }, 'value_error', /above 15 % of the smallest chunk_size/],
    ]
    for (const [overrides, type, msg] of cases) {
      for (const method of ['PUT', 'PATCH']) {
        res = await svc.request(`/api/kb/${id}/settings/overrides`, { method, json: { overrides } })
        assert.equal(res.status, 422, `${method} ${JSON.stringify(overrides)}`)
        const d = (await res.json() as Json).detail[0]
        assert.equal(d.type, type, JSON.stringify(d))
        assert.match(d.msg, msg)
        assert.equal(d.loc[0], 'body')
      }
    }
    res = await svc.request(`/api/kb/${id}/settings/overrides`, { method: 'PATCH', json: { overrides: { 'postgres.host': 'x', 'chunking.nope': 1, 'chunking.min_chunk_chars': -1 } } })
    assert.equal((await res.json() as Json).detail.length, 3, 'every problem is listed')
    assert.deepEqual(await (await svc.request(`/api/kb/${id}/settings/overrides`)).json(), { overrides: { 'dedup.enabled': false } }, 'a refused write changes nothing')

    res = await svc.request(`/api/kb/${id}/settings/overrides`, { method: 'PUT', json: { nope: 1 } })
    assert.equal(res.status, 422)

    res = await svc.request(`/api/kb/${id}/settings/overrides`, { method: 'DELETE' })
    assert.deepEqual(await res.json(), { kb_id: id, status: 'overrides_cleared' })
    assert.deepEqual(await (await svc.request(`/api/kb/${id}/settings/overrides`)).json(), { overrides: {} })
  })

  it(`${label}: pre-registered knowledge bases are created when absent and never modified`, async (t) => {
    const id = uniqueId()
    const svc = await startApp(t, { ...opts, settings: { ...opts.settings, knowledge_bases: [{ id, name: 'Pre', description: 'from settings', tags: ['s'] }] } })
    const kb = await (await svc.request(`/api/kb/${id}`)).json() as Json
    assert.equal(kb.kb_name, 'Pre')
    assert.deepEqual(kb.tags, ['s'])
    const bare = uniqueId()
    const svc2 = await startApp(t, { ...opts, settings: { ...opts.settings, knowledge_bases: [{ id: bare }] } })
    const pre = await (await svc2.request(`/api/kb/${bare}`)).json() as Json
    assert.deepEqual([pre.kb_name, pre.description, pre.tags], ['', null, []], 'a pre-registered KB without description has null')
    await svc.request(`/api/kb/${id}`, { method: 'PATCH', json: { kb_name: 'Renamed' } })
    const service = svc.app.use<{ ensurePreregistered(k: unknown[]): Promise<string[]> }>('kb')
    assert.deepEqual(await service.ensurePreregistered([{ id, name: 'Pre', description: '', tags: [] }]), [])
    assert.equal((await (await svc.request(`/api/kb/${id}`)).json() as Json).kb_name, 'Renamed')
  })
}
