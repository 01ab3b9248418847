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
    assert.deepEqual(await res.json(), { detail: `Knowledge base '${id}' already exists` })

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
      assert.deepEqual(await res.json(), { detail: "Knowledge base 'ghost' not found" })
    }
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
    assert.equal(eff.retrieval.rerank.api_key, '***', 'secrets are masked')
    assert.ok(!('postgres' in eff) && !('s3' in eff))

    const schema = (await (await svc.request(`/api/kb/${id}/settings/schema`)).json() as Json).schema
    assert.deepEqual(schema['chunking.chunk_overlap'], {
      type: 'int', default: 128, min: 0, max: 8192, overridable: true, group: 'chunking',
      description: schema['chunking.chunk_overlap'].description,
    })
    assert.equal(schema['chunking.strategy'].type, 'enum')
    assert.deepEqual(schema['chunking.strategy'].enum, ['recursive', 'semantic', 'hierarchical'])
    assert.equal(schema['dedup.simhash.ngram'].overridable, false)
    assert.equal(schema['ingestion.parser_plugins'].overridable, false)
    assert.equal(schema['retrieval.top_k'].overridable, false)
    assert.equal(schema['retrieval.auto_merge.merge_threshold'].overridable, true)
    assert.equal(schema['dedup.simhash.hamming_identical_threshold'].group, 'dedup.simhash')
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
    await svc.request(`/api/kb/${id}`, { method: 'PATCH', json: { kb_name: 'Renamed' } })
    const service = svc.app.use<{ ensurePreregistered(k: unknown[]): Promise<string[]> }>('kb')
    assert.deepEqual(await service.ensurePreregistered([{ id, name: 'Pre', description: '', tags: [] }]), [])
    assert.equal((await (await svc.request(`/api/kb/${id}`)).json() as Json).kb_name, 'Renamed')
  })
}
