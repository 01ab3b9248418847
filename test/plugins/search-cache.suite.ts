// The search cache (notes.md, wire details) through HTTP: meta.cache_status, DELETE /api/search/cache, and
// invalidation by every write that can change an answer, on both driver sets.
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, type StartOptions, type StartedApp } from '../helpers/app.ts'
import { md, newKb, prose, settle, upload } from './docs.suite.ts'

type Json = any

const fast = { queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 } }

export interface Answer {
  status: number
  text: string
  body: Json
}

export async function searchRaw(svc: StartedApp, body: unknown): Promise<Answer> {
  const res = await svc.request('/api/search', { method: 'POST', json: body })
  const text = await res.text()
  return { status: res.status, text, body: JSON.parse(text) }
}

/** The answer with the two fields a hit may differ in blanked. */
export const comparable = (text: string) => {
  const out = text.replace(/"cache_status":"(hit|miss)","latency_ms":\d+}}$/, '"cache_status":"-","latency_ms":-}}')
  assert.notEqual(out, text, 'cache_status and latency_ms close the answer')
  return out
}

async function add(svc: StartedApp, kb: string, name: string, text: string): Promise<string> {
  const id = ((await (await upload(svc, kb, name, text)).json()) as Json).doc_id
  assert.equal((await settle(svc, kb, id)).status, 'indexed', name)
  return id
}

const clearCache = async (svc: StartedApp, kbId?: string) => {
  const res = await svc.request(`/api/search/cache${kbId === undefined ? '' : `?kb_id=${encodeURIComponent(kbId)}`}`, { method: 'DELETE' })
  return { status: res.status, body: (await res.json()) as Json }
}

export function searchCacheSuite(label: string, opts: StartOptions): void {
  const withSettings = (settings: Record<string, unknown>) => ({ ...opts, settings: { ...fast, ...opts.settings, ...settings } })

  it(`${label}: a hit is the miss byte for byte but cache_status and latency_ms; every write to the KB misses at once`, async (t) => {
    const svc = await startApp(t, withSettings({}))
    const kb = await newKb(svc)
    const first = await add(svc, kb, 'glacier.md', md('Glaciers', `Glacier ice flows slowly downhill. ${prose('ice', 6)}`))
    const second = await add(svc, kb, 'moraine.md', md('Moraines', `A glacier leaves moraines of rock. ${prose('rock', 6)}`))
    const q = { query: 'glacier ice moraine', kb_ids: [kb], options: { top_k: 10 } }
    const sources = (a: Answer) => new Set(a.body.results.map((r: Json) => r.source))

    const miss = await searchRaw(svc, q)
    assert.equal(miss.status, 200)
    assert.equal(miss.body.meta.cache_status, 'miss')
    const hit = await searchRaw(svc, q)
    assert.equal(hit.body.meta.cache_status, 'hit')
    assert.equal(comparable(hit.text), comparable(miss.text))
    assert.deepEqual(sources(hit), new Set(['glacier.md', 'moraine.md']))
    // The key: query, options, KBs.
    assert.equal((await searchRaw(svc, { ...q, options: { top_k: 3 } })).body.meta.cache_status, 'miss')
    assert.equal((await searchRaw(svc, { ...q, options: { top_k: 10, mode: 'similarity' } })).body.meta.cache_status, 'miss')
    assert.equal((await searchRaw(svc, { ...q, query: 'glacier ice' })).body.meta.cache_status, 'miss')
    assert.equal((await searchRaw(svc, q)).body.meta.cache_status, 'hit')

    // upload -> indexed
    await add(svc, kb, 'icefall.md', md('Icefalls', `Glacier ice breaks at an icefall. ${prose('fall', 6)}`))
    let after = await searchRaw(svc, q)
    assert.equal(after.body.meta.cache_status, 'miss', 'a new document misses at once')
    assert.ok(sources(after).has('icefall.md'))
    assert.equal((await searchRaw(svc, q)).body.meta.cache_status, 'hit')

    // delete (soft)
    assert.equal((await svc.request(`/api/kb/${kb}/docs/${second}`, { method: 'DELETE' })).status, 202)
    await settle(svc, kb, second, ['deleted'])
    after = await searchRaw(svc, q)
    assert.equal(after.body.meta.cache_status, 'miss', 'a deleted document misses at once')
    assert.ok(!sources(after).has('moraine.md'))
    assert.equal((await searchRaw(svc, q)).body.meta.cache_status, 'hit')

    // re-indexed: the same text, written again (its results carry the new updated_at)
    const before = await searchRaw(svc, q)
    assert.equal(before.body.meta.cache_status, 'hit')
    assert.equal((await svc.request(`/api/kb/${kb}/docs/${first}/reindex?force=true`, { method: 'POST' })).status, 202)
    // The 202 has moved it to pending already: settling waits for this indexing.
    assert.equal((await settle(svc, kb, first)).status, 'indexed')
    after = await searchRaw(svc, q)
    assert.equal(after.body.meta.cache_status, 'miss', 'a re-indexed document misses at once')
    const stamp = (a: Answer) => a.body.results.find((r: Json) => r.doc_id === first).updated_at
    assert.ok(stamp(after) > stamp(before))

    // a similar newer document makes the older one outdated
    const older = await add(svc, kb, 'crevasse.md', md('Crevasses', `Crevasses open where glacier ice bends. ${prose('crevasse', 12)}`))
    assert.ok(sources(await searchRaw(svc, q)).has('crevasse.md'))
    assert.equal((await searchRaw(svc, q)).body.meta.cache_status, 'hit')
    const newerId = ((await (await upload(svc, kb, 'crevasse-v2.md', md('Crevasses', `Crevasses open where glacier ice bends. ${prose('crevasse', 12)} One more line at the end.`))).json()) as Json).doc_id
    const newer = (await settle(svc, kb, newerId)).status
    const olderNow = ((await (await svc.request(`/api/kb/${kb}/docs/${older}/status`)).json()) as Json).status
    after = await searchRaw(svc, q)
    if (olderNow === 'outdated') {
      // judged similar: the newer one is indexed and the older one leaves search
      assert.equal(newer, 'indexed')
      assert.equal(after.body.meta.cache_status, 'miss')
      assert.ok(!sources(after).has('crevasse.md') && sources(after).has('crevasse-v2.md'))
    }
    // Whatever dedup decided, the answer is the one an empty cache gives.
    await clearCache(svc)
    assert.equal(comparable(after.text), comparable((await searchRaw(svc, q)).text))

    // the KB deleted
    assert.equal((await svc.request(`/api/kb/${kb}`, { method: 'DELETE' })).status, 200)
    after = await searchRaw(svc, q)
    assert.equal(after.body.meta.cache_status, 'miss')
    assert.deepEqual(after.body.results, [])
  })

  it(`${label}: DELETE /api/search/cache clears one KB's answers or all of them; per-KB settings key the answers`, async (t) => {
    const svc = await startApp(t, withSettings({}))
    const k1 = await newKb(svc)
    const k2 = await newKb(svc)
    await add(svc, k1, 'a.md', md('Harbour', `The harbour lantern guides ships. ${prose('harbour', 6)}`))
    await add(svc, k2, 'b.md', md('Lighthouse', `The lighthouse lantern turns. ${prose('light', 6)}`))
    const q = (kbIds: string[]) => ({ query: 'lantern', kb_ids: kbIds })
    const status = async (kbIds: string[]) => (await searchRaw(svc, q(kbIds))).body.meta.cache_status
    for (const ids of [[k1], [k2], [k1, k2]]) {
      assert.equal(await status(ids), 'miss')
      assert.equal(await status(ids), 'hit')
    }
    assert.deepEqual(await clearCache(svc, k1), { status: 200, body: { status: 'cleared', kb_id: k1, cleared_count: 2 } })
    assert.equal(await status([k1]), 'miss')
    assert.equal(await status([k1, k2]), 'miss')
    assert.equal(await status([k2]), 'hit', 'the other KB keeps its answers')
    assert.deepEqual(await clearCache(svc, 'no-such-kb'), { status: 200, body: { status: 'cleared', kb_id: 'no-such-kb', cleared_count: 0 } })
    assert.deepEqual(await clearCache(svc), { status: 200, body: { status: 'cleared', kb_id: null, cleared_count: 3 } })
    for (const ids of [[k1], [k2], [k1, k2]]) assert.equal(await status(ids), 'miss')
    assert.deepEqual(await clearCache(svc), { status: 200, body: { status: 'cleared', kb_id: null, cleared_count: 3 } })
    assert.deepEqual(await clearCache(svc), { status: 200, body: { status: 'cleared', kb_id: null, cleared_count: 0 } })
    assert.equal((await clearCache(svc, '')).status, 422)

    // A per-KB retrieval setting changes the answer: it is part of the key (read as often as search reads it, 2 s).
    for (const ids of [[k1], [k2]]) {
      assert.equal(await status(ids), 'miss')
      assert.equal(await status(ids), 'hit')
    }
    const patched = await svc.request(`/api/kb/${k1}/settings/overrides`, { method: 'PATCH', json: { overrides: { 'retrieval.auto_merge.merge_threshold': 0.9 } } })
    assert.equal(patched.status, 200)
    await new Promise((r) => setTimeout(r, 2100))
    assert.equal(await status([k1]), 'miss')
    assert.equal(await status([k1]), 'hit')
    assert.equal(await status([k2]), 'hit', 'the unchanged KB still hits once its settings are read again')
  })
}
