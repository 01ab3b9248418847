// The search_cache settings reach the cache: with room for one answer, a second query evicts the first.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from '../helpers/app.ts'
import { md, newKb, prose, settle, upload } from './docs.suite.ts'
import { searchRaw } from './search-cache.suite.ts'

test('search_cache.max_entries bounds the in-process cache', async (t) => {
  const svc = await startApp(t, { settings: { queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 }, search_cache: { max_entries: 1 } } })
  const kb = await newKb(svc)
  const id = ((await (await upload(svc, kb, 'glacier.md', md('Glaciers', `Glacier ice flows slowly downhill. ${prose('ice', 6)}`))).json()) as any).doc_id
  assert.equal((await settle(svc, kb, id)).status, 'indexed')
  const ask = async (query: string) => (await searchRaw(svc, { query, kb_ids: [kb] })).body.meta.cache_status
  assert.equal(await ask('glacier ice'), 'miss')
  assert.equal(await ask('glacier ice'), 'hit')
  assert.equal(await ask('slowly downhill'), 'miss')
  assert.equal(await ask('glacier ice'), 'miss', 'the first answer was evicted by the second')
})
