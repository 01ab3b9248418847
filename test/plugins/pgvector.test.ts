// The documents and search suites with the vectors in PostgreSQL (vector_store: pgvector) on the services driver
// set: the smallest scale-out, PostgreSQL + Redis + S3, with no vector server of its own. The driver's own cases are
// in test/adapters/pgvector.test.ts.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { startApp } from '../helpers/app.ts'
import { skipUnlessPgvector } from '../helpers/pg.ts'
import { skipUnless } from '../helpers/services.ts'
import { docsSuite } from './docs.suite.ts'
import { searchSuite } from './search.suite.ts'

const skip = skipUnless('redis') || (await skipUnlessPgvector())
const opts = { services: true, vectorStore: 'pgvector' as const }

describe('documents on PostgreSQL (pgvector) + Redis + S3', { skip }, () => docsSuite('pgvector', opts))

describe('search on PostgreSQL (pgvector) + Redis + S3', { skip }, () => searchSuite('pgvector', opts))

describe('pgvector as the vector store of the service', { skip }, () => {
  it('/ready names pgvector, and the vectors are in the metadata database', async (t) => {
    const svc = await startApp(t, opts)
    const res = await svc.request('/ready')
    const body = await res.json() as Record<string, unknown>
    assert.equal(res.status, 200, JSON.stringify(body))
    assert.deepEqual(body.checks, { postgres: true, redis: true, pgvector: true, s3: true, builtin: true })
    assert.equal(svc.app.adapters.vectors.name, 'pgvector')
    assert.equal((await svc.request('/api/kb', { method: 'POST', json: { kb_id: 'pgv-kb' } })).status, 201)
    await svc.app.adapters.vectors.ensureCollection('pgv-kb', 64)
    const rows = await svc.app.adapters.sql.query<{ kb_id: string; dims: number }>('SELECT kb_id, dims FROM quarry_vector_collections')
    assert.deepEqual(rows, [{ kb_id: 'pgv-kb', dims: 64 }])
  })
})
