// The search service's plan without waiting (planNow): the HTTP route takes it on most cache hits, so it must be
// the plan plan() gives, or null where plan() has something to look up (tags, merge settings not read recently).
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { SearchService } from '../../plugins/search/service.ts'
import { startApp } from '../helpers/app.ts'
import { newKb } from './docs.suite.ts'

const plain = (p: unknown) => JSON.parse(JSON.stringify(p, (_k, v) => (v instanceof Map ? [...v] : v)))

describe('search planNow', () => {
  it('gives plan()\'s plan once the KBs\' merge settings were read, null before and for a tag filter, the same errors', async (t) => {
    const svc = await startApp(t)
    const a = await newKb(svc)
    const b = await newKb(svc)
    const service = svc.app.use<SearchService>('search')
    const inputs = [
      { query: 'glacier', kb_ids: [a] },
      { query: 'glacier ice', kb_ids: [b, a, b], options: { mode: 'similarity', top_k: 3, similarity: { min_score: 0.2 } } },
      { query: 'ice', kb_ids: [a, b], options: { 'hybrid.alpha': 0.3, rerank: { enabled: false }, filter: { doc_type: 'md', updated_after: '2024-01-01' } } },
    ]
    // Nothing read yet: no plan without waiting.
    for (const input of inputs) assert.equal(service.planNow(input as never), null)
    for (const input of inputs) {
      const planned = await service.plan(input as never)
      const now = service.planNow(input as never)
      assert.notEqual(now, null)
      assert.deepEqual(plain(now), plain(planned))
    }
    // Tags choose KBs through the metadata store: always plan().
    assert.equal(service.planNow({ query: 'ice', kb_ids: [a], options: { filter: { tags: ['x'] } } } as never), null)
    // The same refusals as plan().
    for (const bad of [{ query: 'ice', kb_ids: [] }, { query: '   ', kb_ids: [a] }, { query: 'ice', kb_ids: [a], options: { filter: { updated_after: '2024-02-30' } } }]) {
      const err = await service.plan(bad as never).then(() => null, (e: unknown) => e as { status?: number; message: string })
      assert.ok(err, JSON.stringify(bad))
      assert.throws(() => service.planNow(bad as never), (e: { status?: number; message: string }) => e.message === err.message && e.status === err.status)
    }
  })
})
