// POST /api/search (spec 4.10) through HTTP.
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, type StartOptions, type StartedApp } from '../helpers/app.ts'
import { startFakeRerankServer } from '../helpers/fake-rerank-server.ts'
import { rescoredRows } from '../../adapters/vectors/rescore.ts'
import { md, newKb, prose, settle, upload } from './docs.suite.ts'

type Json = any

const fast = { queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 } }

export async function ingest(svc: StartedApp, kb: string, files: Record<string, string>): Promise<Record<string, string>> {
  const ids: Record<string, string> = {}
  for (const [name, text] of Object.entries(files)) ids[name] = ((await (await upload(svc, kb, name, text)).json()) as Json).doc_id
  for (const [name, id] of Object.entries(ids)) assert.equal((await settle(svc, kb, id)).status, 'indexed', name)
  return ids
}

export const search = async (svc: StartedApp, body: unknown) => {
  const res = await svc.request('/api/search', { method: 'POST', json: body })
  return { status: res.status, body: (await res.json()) as Json }
}

export function searchSuite(label: string, opts: StartOptions): void {
  const withSettings = (settings: Record<string, unknown>) => ({ ...opts, settings: { ...fast, ...opts.settings, ...settings } })

  it(`${label}: hybrid across KBs: reciprocal-rank scores, every result field, meta, unknown KBs contribute nothing`, async (t) => {
    const svc = await startApp(t, withSettings({}))
    const k1 = await newKb(svc)
    const k2 = await newKb(svc)
    await ingest(svc, k1, { 'glacier.md': md('Glaciers', `Glacier ice flows slowly downhill. ${prose('ice', 6)}`), 'orchard.md': md('Orchards', prose('apple', 8)) })
    await ingest(svc, k2, { 'glacier-notes.md': md('More on glaciers', `A glacier carves valleys. ${prose('valley', 6)}`), 'violin.md': md('Violins', prose('music', 8)) })
    const { status, body } = await search(svc, { query: 'glacier ice valleys', kb_ids: [k1, k2, 'no-such-kb'], options: { top_k: 4 } })
    assert.equal(status, 200)
    assert.equal(body.query, 'glacier ice valleys')
    assert.equal(body.results.length, 4)
    const r0 = body.results[0]
    for (const k of ['chunk_id', 'kb_id', 'doc_id', 'title', 'source_type', 'source', 'doc_type', 'chunk_index', 'page_num', 'page_label', 'text', 'score', 'updated_at', 'merged', 'parent_chunk_id']) assert.ok(k in r0, k)
    assert.equal(r0.rerank_score, null, 'present, null when not reranked')
    assert.equal(r0.merged, false)
    // The first result of each KB scores 1/(60+1); the second of each 1/(60+2).
    const scores = body.results.map((r: Json) => r.score)
    assert.deepEqual(scores, [0.016393, 0.016393, 0.016129, 0.016129])
    assert.deepEqual(new Set(body.results.slice(0, 2).map((r: Json) => r.kb_id)), new Set([k1, k2]))
    assert.ok(body.results.slice(0, 2).every((r: Json) => /glacier/i.test(r.title)), 'the glacier documents rank first in each KB')
    assert.deepEqual(Object.keys(body.meta), ['total_candidates', 'returned', 'search_mode', 'score_threshold', 'reranked', 'rerank_provider', 'rerank_fallback', 'cache_status', 'latency_ms'])
    assert.equal(body.meta.search_mode, 'hybrid')
    assert.equal(body.meta.score_threshold, 0)
    assert.equal(body.meta.returned, 4)
    // The merged list before reranking: each KB's list (at most top_k) pooled, before the final top_k cut.
    const perKb = [await svc.app.adapters.vectors.count(k1), await svc.app.adapters.vectors.count(k2)].map((n) => Math.min(4, n))
    assert.equal(body.meta.total_candidates, perKb[0] + perKb[1])
    const one = await search(svc, { query: 'glacier ice valleys', kb_ids: [k1, k2], options: { top_k: 1 } })
    assert.equal(one.body.meta.returned, 1)
    assert.equal(one.body.meta.total_candidates, 2, 'one per KB: what was merged, not every chunk each KB fused')
    assert.equal(body.meta.reranked, false)
    assert.equal(body.meta.rerank_provider, 'none')
    assert.equal(body.meta.rerank_fallback, false)
    assert.equal(typeof body.meta.latency_ms, 'number')

    const none = await search(svc, { query: 'glacier', kb_ids: ['no-such-kb'] })
    assert.equal(none.status, 200)
    assert.deepEqual(none.body.results, [])
  })

  it(`${label}: a search over several KBs gives each KB's dense list its share of the chunks searched as effort; hybrid asks for dense ranks only`, async (t) => {
    const svc = await startApp(t, withSettings({}))
    const big = await newKb(svc)
    const small = await newKb(svc)
    await ingest(svc, big, { 'a.md': md('Alpha', prose('river', 6)), 'b.md': md('Beta', prose('forest', 6)), 'c.md': md('Gamma', prose('desert', 6)) })
    await ingest(svc, small, { 'd.md': md('Delta', prose('harbour', 6)) })
    const vectors = svc.app.adapters.vectors
    const sizes = { [big]: await vectors.count(big), [small]: await vectors.count(small) }
    assert.ok(sizes[big] > sizes[small] && sizes[small] > 0)
    const seen: { kb: string; effort: number | undefined; dense: boolean; rankOnly: boolean | undefined; limit: number }[] = []
    const original = vectors.search
    vectors.search = (kb, q) => {
      seen.push({ kb, effort: q.effort, dense: q.dense !== undefined, rankOnly: q.rankOnly, limit: q.limit })
      return original.call(vectors, kb, q)
    }
    t.after(() => void (vectors.search = original))
    for (const mode of ['hybrid', 'similarity']) {
      seen.length = 0
      const many = await search(svc, { query: 'river harbour', kb_ids: [big, small, 'no-such-kb'], options: { mode } })
      assert.equal(many.status, 200)
      assert.ok(many.body.results.length > 0)
      // Hybrid fusion reads the dense ranks only; similarity shows the dense scores, which must be exact: over
      // several KBs it asks for ranks too where the store can rescore the best of them afterwards (rescoreAcrossKbs).
      assert.deepEqual(seen.map((x) => x.rankOnly), seen.map(() => mode === 'hybrid' || vectors.rescore !== undefined))
      // Hybrid: a KB with an effort share asks only the ranks its fusion weighs (one KB alone asks 40): with the
      // built-in embedder's in-KB k of 3, ranks whose 4/(3 + rank) is at least 1/6, the first 21.
      assert.equal(svc.app.settings.retrieval.hybrid.kb_rrf_k, 3)
      const topK = svc.app.settings.retrieval.top_k
      assert.ok(topK <= 10)
      const asked = seen.filter((x) => x.effort !== undefined).map((x) => x.limit)
      // Similarity in two steps asks each KB for as many candidates as the margin of all (rescoreAcrossKbs).
      const similar = vectors.rescore !== undefined ? rescoredRows(topK) : topK
      assert.deepEqual(asked, [mode === 'hybrid' ? 21 : similar, mode === 'hybrid' ? 21 : similar], 'the two KBs holding chunks')
      const byKb = Object.fromEntries(seen.map((x) => [x.kb, x.effort]))
      const total = sizes[big] + sizes[small]
      assert.ok(Math.abs(byKb[big]! - sizes[big] / total) < 1e-12, `${mode}: ${byKb[big]}`)
      assert.ok(Math.abs(byKb[small]! - sizes[small] / total) < 1e-12, `${mode}: ${byKb[small]}`)
      assert.equal(byKb['no-such-kb'], undefined, 'a KB without chunks gets no share')
      // One KB searched alone: the whole effort.
      seen.length = 0
      assert.equal((await search(svc, { query: 'river', kb_ids: [small], options: { mode } })).status, 200)
      assert.deepEqual(seen.map((x) => [x.effort, x.limit]), [[undefined, mode === 'hybrid' ? 40 : svc.app.settings.retrieval.top_k]])
    }
    // Sparse only (alpha 0): no dense list, so no sizes are asked for.
    seen.length = 0
    assert.equal((await search(svc, { query: 'river', kb_ids: [big, small], options: { hybrid: { alpha: 0 } } })).status, 200)
    assert.deepEqual(seen.map((x) => [x.dense, x.effort]), [[false, undefined], [false, undefined]])
  })

  it(`${label}: similarity over several KBs answers as the exact search, rescoring only the best of all KBs' candidates`, async (t) => {
    const svc = await startApp(t, withSettings({ chunking: { chunk_size: 300, chunk_overlap: 30 } }))
    const kbs = [await newKb(svc), await newKb(svc), await newKb(svc)]
    const topics = ['river', 'forest', 'desert', 'harbour', 'glacier', 'meadow']
    for (const [i, kb] of kbs.entries()) {
      await ingest(svc, kb, Object.fromEntries(topics.map((w, j) => [`${i}-${j}.md`, md(`${w} ${i}`, prose(topics[(i + j) % topics.length], 3 + j))])))
    }
    const vectors = svc.app.adapters.vectors
    for (const kb of kbs) assert.ok((await vectors.count(kb)) >= 13, 'each KB holds more chunks than the margin of all')
    const service = svc.app.use<{ search(input: unknown): Promise<Json> }>('search')
    const rescored: number[] = []
    const original = vectors.rescore
    if (original !== undefined) {
      vectors.rescore = (kb, dense, hits) => {
        rescored.push(hits.length)
        return original.call(vectors, kb, dense, hits)
      }
    }
    t.after(() => void (vectors.rescore = original))
    const queries = ['river forest', 'glacier harbour meadow', 'desert', 'forest meadow river glacier']
    const options = { mode: 'similarity', top_k: 3 }
    const answers: Json[] = []
    for (const query of queries) answers.push(await service.search({ query, kb_ids: kbs, options }))
    // top_k and the margin one KB's search rescores (rescoredRows(3) = 13) of the 39 candidates of each query.
    if (original !== undefined) assert.equal(rescored.reduce((a, b) => a + b, 0), 13 * queries.length, JSON.stringify(rescored))
    // The same searches, each KB's list scored exactly by its own search (a store without rescore).
    vectors.rescore = undefined
    for (const [i, query] of queries.entries()) {
      const exact = await service.search({ query, kb_ids: kbs, options })
      assert.equal(exact.results.length, 3, query)
      assert.deepEqual(answers[i].results.map((x: Json) => [x.chunk_id, x.score]), exact.results.map((x: Json) => [x.chunk_id, x.score]), query)
      // Each KB's top_k, as one step counts them.
      assert.deepEqual([answers[i].meta.total_candidates, exact.meta.total_candidates], [9, 9], query)
    }
  })

  it(`${label}: every chunk is encoded with its document title, and returned without it`, async (t) => {
    const svc = await startApp(t, withSettings({ chunking: { chunk_size: 300, chunk_overlap: 30 } }))
    const kb = await newKb(svc)
    await ingest(svc, kb, { 'guide.md': md('Xylophonist field guide', prose('guide', 12)), 'other.md': md('Other notes', prose('other', 12)) })
    const { body } = await search(svc, { query: 'xylophonist', kb_ids: [kb], options: { 'hybrid.alpha': 0, top_k: 20 } })
    const later = body.results.filter((r: Json) => r.chunk_index > 0)
    assert.ok(later.length >= 2, 'later chunks of the guide are found by the title word alone')
    for (const r of body.results) assert.equal(r.source, 'guide.md')
    for (const r of later) assert.ok(!/xylophonist/i.test(r.text), 'the returned text is the chunk as written')
  })

  it(`${label}: alpha picks the lists: 0.0 is sparse only, 1.0 is dense only; similarity filters by min_score per KB`, async (t) => {
    // Full-size vectors: at the tests' usual 64 dimensions hashed features collide too much for cosines to mean much.
    const svc = await startApp(t, withSettings({ embedding: { vector_size: 1024 } }))
    const kb = await newKb(svc)
    await ingest(svc, kb, {
      'zebra.md': md('Notes', `The rare word xylophonist appears here once. ${prose('zeta', 6)}`),
      'other.md': md('Other', prose('omega', 8)),
    })
    const sparseOnly = await search(svc, { query: 'xylophonist', kb_ids: [kb], options: { 'hybrid.alpha': 0 } })
    assert.equal(sparseOnly.body.results[0].source, 'zebra.md')
    assert.equal(sparseOnly.body.results.length, 1, 'sparse only: only chunks sharing a term')
    const denseOnly = await search(svc, { query: 'xylophonist', kb_ids: [kb], options: { hybrid: { alpha: 1 } } })
    const sim = await search(svc, { query: 'xylophonist', kb_ids: [kb], options: { mode: 'similarity' } })
    assert.deepEqual(denseOnly.body.results.map((r: Json) => r.chunk_id), sim.body.results.map((r: Json) => r.chunk_id), 'alpha 1.0 ranks like dense similarity')
    assert.equal(sim.body.meta.search_mode, 'similarity')
    const cos = sim.body.results.map((r: Json) => r.score)
    assert.deepEqual(cos, [...cos].sort((a: number, b: number) => b - a))
    assert.ok(cos[0] > 0 && cos[0] <= 1)
    assert.equal(sim.body.results[0].source, 'zebra.md')
    const cut = (cos[0] + cos[cos.length - 1]) / 2
    const filtered = await search(svc, { query: 'xylophonist', kb_ids: [kb], options: { mode: 'similarity', 'similarity.min_score': cut } })
    assert.ok(filtered.body.results.length < cos.length)
    assert.ok(filtered.body.results.every((r: Json) => r.score >= cut))
    assert.equal(filtered.body.meta.score_threshold, cut)
  })

  it(`${label}: bad requests answer 422 with the reason`, async (t) => {
    const svc = await startApp(t, withSettings({}))
    const kb = await newKb(svc)
    const cases: [unknown, RegExp][] = [
      [{ kb_ids: [kb] }, /Field required/],
      [{ query: '', kb_ids: [kb] }, /query must be 1 to 4096 characters/],
      [{ query: '   ', kb_ids: [kb] }, /must not be blank/],
      [{ query: 'x'.repeat(100 * 1024), kb_ids: [kb] }, /query must be 1 to 4096 characters/],
      [{ query: 'x', kb_ids: [kb], options: { top_k: 0 } }, /top_k must be an integer between 1 and 100/],
      [{ query: 'x', kb_ids: [kb], options: { top_k: 101 } }, /top_k must be an integer between 1 and 100/],
      [{ query: 'x', kb_ids: [kb], options: { hybrid: { alpha: 1.5 } } }, /hybrid\.alpha must be between 0\.0 and 1\.0/],
      [{ query: 'x', kb_ids: [kb], options: { 'similarity.min_score': -0.1 } }, /similarity\.min_score must be between 0\.0 and 1\.0/],
      [{ query: 'x', kb_ids: [kb], options: { mode: 'keyword' } }, /mode must be 'hybrid' or 'similarity'/],
    ]
    for (const [body, msg] of cases) {
      const res = await search(svc, body)
      assert.equal(res.status, 422, JSON.stringify(body).slice(0, 80))
      assert.match(JSON.stringify(res.body.detail), msg)
    }
    for (const body of [{ query: 'x', kb_ids: [] }, { query: 'x' }]) {
      const res = await search(svc, body)
      assert.equal(res.status, 422)
      assert.deepEqual(res.body, { detail: 'kb_ids must contain at least one entry.' })
    }
  })

  it(`${label}: deleted and outdated documents never appear, and deleting a KB mid-search gives no 500`, async (t) => {
    const svc = await startApp(t, withSettings({}))
    const kb = await newKb(svc)
    const base = md('Harbor', `The harbor lantern guides ships. ${prose('harbor', 10)}`)
    const ids = await ingest(svc, kb, { 'harbor.md': base, 'meadow.md': md('Meadow', `Meadow flowers. ${prose('meadow', 10)}`) })
    const copy = ((await (await upload(svc, kb, 'harbor-copy.md', base)).json()) as Json).doc_id
    assert.equal((await settle(svc, kb, copy)).status, 'outdated')
    await svc.request(`/api/kb/${kb}/docs/${ids['meadow.md']}`, { method: 'DELETE' })
    await settle(svc, kb, ids['meadow.md'], ['deleted'])
    const res = await search(svc, { query: 'harbor lantern meadow flowers', kb_ids: [kb], options: { top_k: 20 } })
    assert.ok(res.body.results.length > 0)
    assert.ok(res.body.results.every((r: Json) => r.doc_id === ids['harbor.md']), JSON.stringify(res.body.results.map((r: Json) => r.source)))

    const inflight = Array.from({ length: 20 }, () => search(svc, { query: 'harbor lantern', kb_ids: [kb] }))
    const del = svc.request(`/api/kb/${kb}`, { method: 'DELETE' })
    const all = await Promise.all(inflight)
    assert.equal((await del).status, 200)
    assert.ok(all.every((r) => r.status === 200), all.map((r) => r.status).join(','))
    assert.deepEqual((await search(svc, { query: 'harbor', kb_ids: [kb] })).body.results, [])
  })

  it(`${label}: reranking: both switches on, rerank_score and top_n; slow or failing rerankers fall back`, async (t) => {
    const rr = await startFakeRerankServer()
    t.after(() => rr.close())
    const svc = await startApp(t, withSettings({ retrieval: { rerank: { enabled: true, url: rr.url, model: 'rerank-test', top_n: 2, timeout_sec: 1 } } }))
    const kb = await newKb(svc)
    await ingest(svc, kb, {
      'a.md': md('Compass', `compass theorem crystal ${prose('a1', 5)}`),
      'b.md': md('Lantern', `lantern meadow compass ${prose('b1', 5)}`),
      'c.md': md('Galaxy', `galaxy orchard ${prose('c1', 5)}`),
    })
    const q = { query: 'compass lantern meadow', kb_ids: [kb], options: { top_k: 3 } }
    const fused = await search(svc, { ...q, options: { ...q.options, rerank: { enabled: false } } })
    assert.equal(fused.body.meta.reranked, false, 'the request can switch reranking off')
    assert.equal(fused.body.meta.rerank_provider, 'none')

    const res = await search(svc, q)
    assert.equal(res.status, 200)
    assert.equal(res.body.meta.reranked, true)
    assert.equal(res.body.meta.rerank_provider, 'rerankvendor')
    assert.equal(res.body.results.length, 2, 'rerank.top_n results kept')
    assert.ok(res.body.results.every((r: Json) => typeof r.rerank_score === 'number'))
    assert.ok(res.body.results[0].rerank_score >= res.body.results[1].rerank_score)
    assert.equal(res.body.results[0].source, 'b.md', 'most query words')
    const sent = rr.requests.at(-1)!
    assert.equal(sent.path, '/v1/rerank')
    assert.equal(sent.body.model, 'rerank-test')
    assert.equal(sent.body.query, 'compass lantern meadow')
    assert.equal(sent.body.top_n, 2)
    assert.deepEqual(sent.body.documents, fused.body.results.map((r: Json) => r.text), 'the fused results are what is reranked')

    // The reranked answer is cached (and would be served while the reranker is down): start from an empty cache.
    assert.equal((await svc.request('/api/search/cache', { method: 'DELETE' })).status, 200)
    for (const mode of ['slow', 'fail', 'garbage'] as const) {
      rr.mode = mode
      const fb = await search(svc, q)
      assert.equal(fb.status, 200, mode)
      assert.equal(fb.body.meta.reranked, false)
      assert.equal(fb.body.meta.rerank_fallback, true, mode)
      assert.equal(fb.body.meta.rerank_provider, 'rerankvendor', 'the configured provider is named on fallback too')
      assert.equal(fb.body.meta.total_candidates, fused.body.meta.total_candidates)
      assert.deepEqual(fb.body.results.map((r: Json) => r.chunk_id), fused.body.results.slice(0, 2).map((r: Json) => r.chunk_id), 'rerank.top_n results, in fused order')
      assert.ok(fb.body.results.every((r: Json) => r.rerank_score === null))
    }

    // Nothing found, nothing reranked: the provider is "none" (notes.md), though reranking was asked for.
    rr.mode = 'ok'
    const empty = await search(svc, { query: 'compass', kb_ids: [await newKb(svc)] })
    assert.deepEqual([empty.body.results, empty.body.meta.reranked, empty.body.meta.rerank_provider], [[], false, 'none'])
  })

  it(`${label}: reranking is off unless the global setting is on; without fallback a failing reranker is 502`, async (t) => {
    const rr = await startFakeRerankServer()
    t.after(() => rr.close())
    const off = await startApp(t, withSettings({ retrieval: { rerank: { enabled: false, url: rr.url } } }))
    const kb = await newKb(off)
    await ingest(off, kb, { 'a.md': md('A', prose('rr', 5)) })
    const res = await search(off, { query: 'policy', kb_ids: [kb], options: { rerank: { enabled: true } } })
    assert.equal(res.body.meta.reranked, false)
    assert.equal(rr.requests.length, 0)

    rr.mode = 'fail'
    const strict = await startApp(t, withSettings({ retrieval: { rerank: { enabled: true, url: rr.url, fallback_on_error: false } } }))
    const kb2 = await newKb(strict)
    await ingest(strict, kb2, { 'a.md': md('A', prose('rr', 5)) })
    const failed = await search(strict, { query: 'policy', kb_ids: [kb2] })
    assert.equal(failed.status, 502)
    assert.match(failed.body.detail, /reranker .* answered 500/)
  })

  it(`${label}: auto-merge returns the parent text when enough of its children match, climbing levels`, async (t) => {
    const svc = await startApp(t, withSettings({}))
    const kb = await newKb(svc, {
      'chunking.strategy': 'hierarchical', 'chunking.chunk_size': [2048, 512, 128], 'chunking.chunk_overlap': 0, 'chunking.min_chunk_chars': 10,
      'retrieval.auto_merge.enabled': true, 'retrieval.auto_merge.merge_threshold': 0.3,
    })
    const topic = 'Lantern harbor compass glacier. '.repeat(12)
    const ids = await ingest(svc, kb, { 'deep.md': md('Deep', `${topic}\n\n${prose('filler', 30)}`) })
    const res = await search(svc, { query: 'lantern harbor compass glacier', kb_ids: [kb], options: { top_k: 10, mode: 'similarity' } })
    assert.equal(res.status, 200)
    const merged = res.body.results.filter((r: Json) => r.merged)
    assert.ok(merged.length >= 1, JSON.stringify(res.body.results.map((r: Json) => [r.chunk_id, r.merged])))
    for (const m of merged) {
      assert.equal(m.chunk_index, null)
      assert.equal(m.doc_id, ids['deep.md'])
      const [row] = await svc.app.adapters.sql.query<Json>('SELECT text, level, parent_chunk_id FROM parent_chunks WHERE chunk_id = $1', [m.chunk_id])
      assert.equal(m.text, row.text, 'the text is the parent text')
      assert.equal(m.parent_chunk_id, row.parent_chunk_id)
    }
    assert.ok(merged.some((m: Json) => /-p0-/.test(m.chunk_id)), 'merging climbed to the top level')

    // the same KB with auto-merge off through its override: leaves only
    await svc.request(`/api/kb/${kb}/settings/overrides`, { method: 'PATCH', json: { overrides: { 'retrieval.auto_merge.enabled': false } } })
    await new Promise((r) => setTimeout(r, 2100)) // per-KB merge settings are cached for 2 s
    const leaves = await search(svc, { query: 'lantern harbor compass glacier', kb_ids: [kb], options: { top_k: 10, mode: 'similarity' } })
    assert.ok(leaves.body.results.every((r: Json) => !r.merged && r.chunk_index !== null))
  })
}
