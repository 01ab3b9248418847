import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parse } from 'yaml'
import { BUILTIN_FUSION_PROFILE, ConfigError, findSettingsFile, loadSettings, resolveSettings } from '../../kernel/config/load.ts'
import { PROFILED_KEYS, renderExample } from '../../kernel/config/example.ts'
import { flatten, leafSchemas } from '../../kernel/config/tree.ts'

const problemsOf = (raw: unknown, env = {}): string[] => {
  try {
    resolveSettings(raw, env)
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${err}`)
    return err.problems
  }
  return []
}

describe('settings: defaults and sources', () => {
  it('fills every section with the documented defaults', () => {
    const { settings } = resolveSettings({})
    assert.equal(settings.server.port, 8000)
    assert.equal(settings.data_dir, './data')
    assert.equal(settings.provider.name, 'builtin')
    assert.equal(settings.embedding.vector_size, 1024)
    assert.equal(settings.chunking.chunk_size, 1024)
    assert.equal(settings.chunking.chunk_overlap, 128)
    assert.equal(settings.dedup.simhash.hamming_similar_threshold, 5)
    assert.equal(settings.retrieval.hybrid.rrf_k, 60)
    assert.equal(settings.retrieval.rerank.timeout_sec, 5)
    assert.equal(settings.queue_poll.max_per_poll, 5)
    assert.equal(settings.ingestion.html_extraction_policy, 'lenient')
    assert.equal(settings.ingestion.pdf_ocr_fallback.engine, 'rapidocr')
    assert.equal(settings.authz.super_admin_role, 'rag-super-admin')
    assert.equal(settings.smtp.port, 1025)
    assert.equal(settings.rate_limit.default, '120/minute')
    assert.equal(settings.mcp.transport, 'streamable-http')
    for (const section of ['dagster', 's3', 'postgres', 'qdrant', 'redis', 'queue_worker', 'queue_poll', 'provider', 'ingestion', 'dedup', 'chunking', 'embedding', 'retrieval', 'knowledge_bases', 'mcp', 'tracing', 'logging', 'oidc', 'authz', 'smtp', 'rate_limit']) {
      assert.ok(section in settings, `section ${section}`)
    }
  })

  it('gives hybrid search the built-in embedder profile only when the fusion keys are unset', () => {
    const builtin = resolveSettings({}).settings.retrieval.hybrid
    assert.equal(builtin.alpha, BUILTIN_FUSION_PROFILE.alpha)
    assert.equal(builtin.kb_rrf_k, BUILTIN_FUSION_PROFILE.kb_rrf_k)
    assert.equal(builtin.rrf_k, 60, 'the fusion across KBs keeps the specification default')
    const explicit = resolveSettings({ retrieval: { hybrid: { alpha: 0.5 } } }).settings.retrieval.hybrid
    assert.equal(explicit.alpha, 0.5)
    assert.equal(explicit.kb_rrf_k, BUILTIN_FUSION_PROFILE.kb_rrf_k)
    const model = resolveSettings({ provider: { name: 'local' }, embedding: { model: 'bge-m3' } }).settings.retrieval.hybrid
    assert.deepEqual({ alpha: model.alpha, kb_rrf_k: model.kb_rrf_k, rrf_k: model.rrf_k }, { alpha: 0.5, kb_rrf_k: 0, rrf_k: 60 })
    assert.match(problemsOf({ retrieval: 'fast' })[0], /^retrieval/)
    assert.match(problemsOf({ retrieval: { hybrid: 3 } })[0], /^retrieval\.hybrid/)
  })

  it('freezes the result', () => {
    const { settings } = resolveSettings({})
    assert.ok(Object.isFrozen(settings) && Object.isFrozen(settings.chunking))
  })

  it('reads secrets and conventions from the environment', () => {
    const { settings } = resolveSettings({}, {
      S3_SECRET_KEY: 's3s', POSTGRES_PASSWORD: 'pgp', REDIS_PASSWORD: 'rp', HOSTED_API_KEY: 'hk', RERANKER_API_KEY: 'rk',
      TRACING_SECRET_KEY: 'tk', OIDC_ADMIN_CLIENT_ID: 'oid', OIDC_ADMIN_CLIENT_SECRET: 'os', SMTP_USERNAME: 'su', SMTP_PASSWORD: 'sp',
      DATA_DIR: '/var/quarry', PORT: '9123',
    })
    assert.equal(settings.s3.secret_key, 's3s')
    assert.equal(settings.postgres.password, 'pgp')
    assert.equal(settings.redis.password, 'rp')
    assert.equal(settings.provider.api_key, 'hk')
    assert.equal(settings.retrieval.rerank.api_key, 'rk')
    assert.equal(settings.tracing.langfuse_secret_key, 'tk')
    assert.equal(settings.oidc.admin_client_id, 'oid')
    assert.equal(settings.oidc.admin_client_secret, 'os')
    assert.equal(settings.smtp.username, 'su')
    assert.equal(settings.smtp.password, 'sp')
    assert.equal(settings.data_dir, '/var/quarry')
    assert.equal(settings.server.port, 9123)
  })

  it('finds the file: --config, then SETTINGS_PATH, then ./settings.yaml, else defaults', () => {
    const dir = mkdtempSync(join(tmpdir(), 'quarry-cfg-'))
    try {
      assert.equal(findSettingsFile({ argv: [], env: {}, cwd: dir }), existsApp() ? '/app/settings.yaml' : null)
      writeFileSync(join(dir, 'settings.yaml'), 'queue_worker: { max_workers: 7 }\n')
      assert.equal(findSettingsFile({ argv: [], env: {}, cwd: dir }), join(dir, 'settings.yaml'))
      writeFileSync(join(dir, 'other.yaml'), 'queue_worker: { max_workers: 9 }\n')
      assert.equal(findSettingsFile({ argv: [], env: { SETTINGS_PATH: 'other.yaml' }, cwd: dir }), join(dir, 'other.yaml'))
      assert.equal(findSettingsFile({ argv: ['--config', 'x.yaml'], env: { SETTINGS_PATH: 'other.yaml' }, cwd: dir }), join(dir, 'x.yaml'))
      assert.equal(findSettingsFile({ argv: ['--config=y.yaml'], env: {}, cwd: dir }), join(dir, 'y.yaml'))
      const loaded = loadSettings({ argv: [], env: { SETTINGS_PATH: 'other.yaml' }, cwd: dir })
      assert.equal(loaded.settings.queue_worker.max_workers, 9)
      assert.equal(loaded.source, join(dir, 'other.yaml'))
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('reports unreadable and malformed files', () => {
    const dir = mkdtempSync(join(tmpdir(), 'quarry-cfg-'))
    try {
      writeFileSync(join(dir, 'bad.yaml'), 'chunking: [unclosed\n')
      assert.throws(() => loadSettings({ argv: ['--config', join(dir, 'bad.yaml')], env: {} }), /not valid YAML/)
      assert.throws(() => loadSettings({ argv: ['--config', join(dir, 'missing.yaml')], env: {} }), /cannot read the settings file/)
      writeFileSync(join(dir, 'list.yaml'), '- a\n- b\n')
      assert.throws(() => loadSettings({ argv: ['--config', join(dir, 'list.yaml')], env: {} }), /YAML mapping/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

function existsApp(): boolean {
  try {
    readFileSync('/app/settings.yaml')
    return true
  } catch {
    return false
  }
}

describe('settings: validation lists every problem', () => {
  it('rejects chunk_overlap above 15 % of the smallest chunk_size', () => {
    const p = problemsOf({ chunking: { chunk_size: 512, chunk_overlap: 100 } })
    assert.equal(p.length, 1)
    assert.match(p[0], /chunk_overlap: 100 is above 15 % of the smallest chunk_size \(512\); at most 76/)
    assert.deepEqual(problemsOf({ chunking: { chunk_size: 512, chunk_overlap: 76 } }), [])
    assert.match(problemsOf({ chunking: { strategy: 'hierarchical', chunk_size: [2048, 256], chunk_overlap: 128 } })[0], /smallest chunk_size \(256\)/)
  })

  it('rejects hierarchical sizes that do not descend, and lists for other strategies', () => {
    assert.match(problemsOf({ chunking: { strategy: 'hierarchical', chunk_size: [512, 1024], chunk_overlap: 10 } })[0], /strictly descending/)
    assert.match(problemsOf({ chunking: { strategy: 'hierarchical', chunk_size: 1024 } })[0], /descending list of at least 2/)
    assert.match(problemsOf({ chunking: { strategy: 'recursive', chunk_size: [1024, 512], chunk_overlap: 10 } })[0], /takes one size/)
    assert.deepEqual(problemsOf({ chunking: { strategy: 'hierarchical', chunk_size: [2048, 512, 128], chunk_overlap: 16 } }), [])
  })

  it('rejects hamming_similar below hamming_identical', () => {
    assert.match(problemsOf({ dedup: { simhash: { hamming_identical_threshold: 4, hamming_similar_threshold: 3 } } })[0], /hamming_similar_threshold \(3\) must be at least/)
  })

  it('warns when max_per_poll is above max_workers', () => {
    const { warnings } = resolveSettings({ queue_worker: { max_workers: 2 }, queue_poll: { max_per_poll: 4 } })
    assert.ok(warnings.some((w) => /max_per_poll \(4\) is above queue_worker.max_workers \(2\)/.test(w)), warnings.join('\n'))
  })

  it('names the new keys for removed ones', () => {
    const p = problemsOf({ provider: { ollama_url: 'http://x', openai_api_key: 'k' } })
    assert.equal(p.length, 2)
    assert.ok(p.some((m) => /ollama_url.*provider\.url/.test(m)))
    assert.ok(p.some((m) => /openai_api_key.*provider\.api_key/.test(m)))
  })

  it('warns about unknown keys and keeps going', () => {
    const { warnings, settings } = resolveSettings({ chunking: { chunk_sise: 100 }, mystery: 1 })
    assert.ok(warnings.includes("unknown setting 'chunking.chunk_sise' is ignored"))
    assert.ok(warnings.includes("unknown setting 'mystery' is ignored"))
    assert.equal(settings.chunking.chunk_size, 1024)
  })

  it('checks types, ranges and enums with the key named', () => {
    const p = problemsOf({ redis: { db: 16 }, retrieval: { mode: 'fuzzy', hybrid: { alpha: 2 } }, queue_worker: { max_workers: 'five' } })
    assert.ok(p.some((m) => m.startsWith('redis.db:') && /less than or equal to 15/.test(m)), p.join('\n'))
    assert.ok(p.some((m) => m.startsWith('retrieval.mode:') && /'hybrid', 'similarity'/.test(m)), p.join('\n'))
    assert.ok(p.some((m) => m.startsWith('retrieval.hybrid.alpha:')), p.join('\n'))
    assert.ok(p.some((m) => m.startsWith('queue_worker.max_workers:')), p.join('\n'))
  })

  it('rejects a vector_size that does not match a known model', () => {
    assert.match(problemsOf({ provider: { name: 'local' }, embedding: { model: 'bge-m3', vector_size: 768 } })[0], /does not match model 'bge-m3', which produces 1024/)
    assert.deepEqual(problemsOf({ provider: { name: 'local' }, embedding: { model: 'nomic-embed-text', vector_size: 768 } }), [])
  })

  it('accepts the older provider names ollama and openai with their families\' default models and sizes', () => {
    const ollama = resolveSettings({ provider: { name: 'ollama' } }).settings
    assert.deepEqual([ollama.provider.name, ollama.embedding.model, ollama.embedding.vector_size], ['ollama', '', 1024], 'bge-m3, no URL needed')
    const openai = resolveSettings({ provider: { name: 'openai' } }).settings
    assert.deepEqual([openai.provider.name, openai.embedding.vector_size], ['openai', 1536], 'text-embedding-3-small')
    assert.equal(resolveSettings({ provider: { name: 'hosted' } }).settings.embedding.vector_size, 1536, 'the canonical name too')
    assert.equal(resolveSettings({ provider: { name: 'local' } }).settings.embedding.vector_size, 1024)
    assert.equal(resolveSettings({ provider: { name: 'ollama' }, embedding: { model: 'nomic-embed-text' } }).settings.embedding.vector_size, 768, 'the default follows an explicit model')
    assert.equal(resolveSettings({ provider: { name: 'ollama' }, embedding: { model: 'my-own-model' } }).settings.embedding.vector_size, 1024, 'unknown model: the schema default')
    assert.equal(resolveSettings({ provider: { name: 'openai' }, embedding: { vector_size: 1536 } }).settings.embedding.vector_size, 1536)
    assert.equal(resolveSettings({}).settings.embedding.vector_size, 1024, 'builtin keeps 1024')
    assert.deepEqual(problemsOf({ provider: { name: 'ollama', url: 'http://gpu:11434' } }), [])
  })

  it('names the alias default model when an explicit vector_size conflicts with it', () => {
    assert.deepEqual(problemsOf({ provider: { name: 'openai' }, embedding: { vector_size: 1024 } }), [
      "embedding.vector_size: 1024 does not match model 'text-embedding-3-small' (the default of provider 'openai', an alias of 'hosted'), which produces 1536 dimensions: set it to 1536 or leave it unset",
    ])
    assert.match(problemsOf({ provider: { name: 'ollama' }, embedding: { vector_size: 1536 } })[0], /'bge-m3' \(the default of provider 'ollama', an alias of 'local'\), which produces 1024/)
    assert.match(problemsOf({ provider: { name: 'ollama' }, embedding: { model: 'text-embedding-3-small', vector_size: 1024 } })[0], /does not match model 'text-embedding-3-small', which produces 1536/)
    assert.match(problemsOf({ provider: { name: 'acme' } })[0], /provider 'acme' is a generic OpenAI-compatible endpoint and needs its full URL/, 'other names are still generic')
  })

  it('reads a single kb_creator_roles string as a one-item list', () => {
    assert.deepEqual(resolveSettings({ authz: { kb_creator_roles: 'makers' } }).settings.authz.kb_creator_roles, ['makers'])
  })

  it('validates pre-registered knowledge bases', () => {
    assert.ok(problemsOf({ knowledge_bases: [{ id: 'Bad Id' }] }).some((m) => m.startsWith('knowledge_bases.0.id')))
    assert.match(problemsOf({ knowledge_bases: [{ id: 'a' }, { id: 'a' }] })[0], /listed twice/)
  })
})

describe('settings.example.yaml', () => {
  it('is what the schema renders (regenerate with: npx tsx kernel/config/example.ts > settings.example.yaml)', () => {
    assert.equal(readFileSync('settings.example.yaml', 'utf8'), renderExample())
  })

  it('documents every key and parses to the defaults', () => {
    const text = readFileSync('settings.example.yaml', 'utf8')
    const parsed = parse(text)
    // Keys whose default depends on the provider are there commented out: uncommented, they are documented keys.
    const profiled = new Set([...PROFILED_KEYS].map((k) => k.slice(k.lastIndexOf('.') + 1)))
    const uncommented = text.replace(/^(\s*)# ([a-z_]+): /gm, (line, indent: string, key: string) => (profiled.has(key) ? `${indent}${key}: ` : line))
    const documented = new Set(flatten(parse(uncommented)).keys())
    for (const key of PROFILED_KEYS) assert.ok(!flatten(parsed).has(key), `${key} is commented out`)
    for (const key of leafSchemas().keys()) assert.ok(documented.has(key), `settings.example.yaml lacks ${key}`)
    assert.deepEqual(resolveSettings(parsed).settings, resolveSettings({}).settings)
  })
})
