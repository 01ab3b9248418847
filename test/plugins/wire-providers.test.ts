// The older service's provider names through the whole service: `provider.name: ollama` (or `openai`) with no
// model and no vector size starts, reports ready under that name, and indexes and searches with the family's
// default model, against a local server speaking the provider's HTTP API.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { startApp } from '../helpers/app.ts'
import { startFakeEmbeddingServer } from '../helpers/fake-embedding-server.ts'
import { md, newKb, prose, settle, upload } from './docs.suite.ts'

type Json = any

describe('provider aliases of the older service', () => {
  for (const [name, model, dimensions, path] of [['ollama', 'bge-m3', 1024, '/api/embed'], ['openai', 'text-embedding-3-small', 1536, '/v1/embeddings']] as const) {
    it(`${name}: starts with the default model ${model} (${dimensions} dimensions), indexes and searches`, async (t) => {
      const server = await startFakeEmbeddingServer({ dimensions })
      t.after(() => server.close())
      // `embedding: {}` drops the test default vector size: the size must come from the alias's model.
      const svc = await startApp(t, { settings: { provider: { name, url: server.url }, embedding: {}, queue_poll: { poll_interval_sec: 0.2 } } })
      assert.equal(svc.app.settings.embedding.vector_size, dimensions)

      const ready = await (await svc.request('/ready')).json() as Json
      assert.equal(ready.provider, name)
      assert.equal(ready.checks[name], true, JSON.stringify(ready))

      const kb = await newKb(svc)
      const up = await (await upload(svc, kb, 'leave.md', md('Leave policy', prose(`alias-${name}`, 12)))).json() as Json
      const doc = await settle(svc, kb, up.doc_id)
      assert.equal(doc.status, 'indexed', doc.last_error)
      assert.equal(doc.embedding_model, model)
      const sent = server.embedRequests()
      assert.ok(sent.length > 0 && sent.every((r) => r.path === path && (r.body as { model: string }).model === model), 'every embedding went to the family API with its default model')

      const res = await svc.request('/api/search', { method: 'POST', json: { query: 'leave policy', kb_ids: [kb], options: { mode: 'similarity' } } })
      assert.equal(res.status, 200)
      assert.equal(((await res.json()) as Json).results[0]?.doc_id, up.doc_id)
    })
  }
})
