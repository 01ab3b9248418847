// The top-level `vector_store` key: which vector driver runs, and the settings that cannot work together.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { chooseDrivers, usesDataDir } from '../../adapters/index.ts'
import { ConfigError, resolveSettings } from '../../kernel/config/load.ts'

const problemsOf = (raw: Record<string, unknown>): string[] => {
  try {
    resolveSettings(raw)
    return []
  } catch (err) {
    if (err instanceof ConfigError) return err.problems
    throw err
  }
}

describe('vector_store', () => {
  it('defaults to auto: today\'s rule, qdrant when qdrant.host is set and embedded otherwise', () => {
    assert.equal(resolveSettings({}).settings.vector_store, 'auto')
    assert.equal(chooseDrivers(resolveSettings({}).settings).vectors, 'embedded')
    assert.equal(chooseDrivers(resolveSettings({ qdrant: { host: 'q' } }).settings).vectors, 'qdrant')
    assert.equal(chooseDrivers(resolveSettings({ postgres: { host: 'db' } }).settings).vectors, 'embedded')
  })

  it('names the driver when set', () => {
    const pg = resolveSettings({ vector_store: 'pgvector', postgres: { host: 'db' }, redis: { host: 'r' }, s3: { endpoint: 's3:9000' } }).settings
    assert.equal(chooseDrivers(pg).vectors, 'pgvector')
    assert.equal(usesDataDir(pg), false, 'PostgreSQL + Redis + S3 keep nothing under data_dir')
    const { settings, warnings } = resolveSettings({ vector_store: 'embedded', qdrant: { host: 'q' } })
    assert.equal(chooseDrivers(settings).vectors, 'embedded')
    assert.ok(warnings.some((w) => /qdrant\.host is set but vector_store is embedded/.test(w)), warnings.join('; '))
    assert.equal(chooseDrivers(resolveSettings({ vector_store: 'qdrant', qdrant: { host: 'q' } }).settings).vectors, 'qdrant')
  })

  it('refuses settings that cannot work, naming the key', () => {
    assert.match(problemsOf({ vector_store: 'pgvector' }).join('\n'), /vector_store: pgvector .* needs postgres\.host/)
    assert.match(problemsOf({ vector_store: 'qdrant' }).join('\n'), /vector_store: qdrant needs qdrant\.host/)
    assert.match(problemsOf({ vector_store: 'pgvector', postgres: { host: 'db' }, embedding: { vector_size: 4096 } }).join('\n'), /at most 4000 dimensions/)
    assert.match(problemsOf({ vector_store: 'milvus' }).join('\n'), /^vector_store/)
    assert.deepEqual(problemsOf({ vector_store: 'pgvector', postgres: { host: 'db' }, embedding: { vector_size: 3072 } }), [])
  })
})
