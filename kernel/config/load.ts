// Settings are read once at start: the YAML file, then the named environment secrets, then validation that
// fills defaults and freezes the result. Bad settings stop the start with every problem listed.
// This is the only module that reads process.env.
import { existsSync, readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { parse as parseYaml } from 'yaml'
import { Value } from '@sinclair/typebox/value'
import { allocatorWarning } from '../allocator.ts'
import { clip } from '../errors.ts'
import { issues } from '../validate.ts'
import { effectiveModel, knownDimensions, PROVIDER_ALIASES, providerFamily } from './providers.ts'
import { REMOVED_KEYS, SettingsSchema, type Settings } from './schema.ts'
import { deepFreeze, flatten, getPath, isPlainObject, leafSchemas, setPath } from './tree.ts'

export class ConfigError extends Error {
  readonly problems: string[]
  constructor(source: string, problems: string[]) {
    super(`Invalid settings (${source}):\n${problems.map((p) => `  - ${p}`).join('\n')}`)
    this.name = 'ConfigError'
    this.problems = problems
  }
}

export interface LoadedSettings {
  settings: Readonly<Settings>
  /** The file read, or 'built-in defaults'. */
  source: string
  warnings: string[]
}

export interface LoadOptions {
  argv?: readonly string[]
  env?: Readonly<Record<string, string | undefined>>
  cwd?: string
}

/** --config <path>, then SETTINGS_PATH, then ./settings.yaml, then /app/settings.yaml, else none. */
export function findSettingsFile(opts: LoadOptions = {}): string | null {
  const argv = opts.argv ?? process.argv.slice(2)
  const env = opts.env ?? process.env
  const cwd = opts.cwd ?? process.cwd()
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--config' && argv[i + 1]) return resolve(cwd, argv[i + 1])
    if (argv[i].startsWith('--config=')) return resolve(cwd, argv[i].slice('--config='.length))
  }
  if (env.SETTINGS_PATH) return resolve(cwd, env.SETTINGS_PATH)
  for (const candidate of [resolve(cwd, 'settings.yaml'), '/app/settings.yaml']) {
    if (existsSync(candidate)) return candidate
  }
  return null
}

export function loadSettings(opts: LoadOptions = {}): LoadedSettings {
  const file = findSettingsFile(opts)
  let raw: unknown = {}
  if (file) {
    let text: string
    try {
      text = readFileSync(file, 'utf8')
    } catch (err) {
      throw new ConfigError(file, [`cannot read the settings file: ${(err as Error).message}`])
    }
    try {
      raw = parseYaml(text) ?? {}
    } catch (err) {
      throw new ConfigError(file, [`not valid YAML: ${(err as Error).message}`])
    }
  }
  const env = opts.env ?? process.env
  const { settings, warnings } = resolveSettings(raw, env, file ?? 'built-in defaults')
  // Not a setting, but read from the environment all the same: the malloc arenas glibc was started with.
  const allocator = allocatorWarning(env)
  return { settings, source: file ?? 'built-in defaults', warnings: allocator === null ? warnings : [...warnings, allocator] }
}

const ENV_OVERRIDES: { env: string; key: string; parse: (v: string) => unknown }[] = [
  { env: 'DATA_DIR', key: 'data_dir', parse: (v) => v },
  { env: 'PORT', key: 'server.port', parse: (v) => (/^\d+$/.test(v) ? Number(v) : v) },
]

/** Validates a raw settings object (as parsed from YAML) and returns frozen settings with defaults. */
export function resolveSettings(
  raw: unknown,
  env: Readonly<Record<string, string | undefined>> = {},
  source = 'settings',
): { settings: Readonly<Settings>; warnings: string[] } {
  const problems: string[] = []
  const warnings: string[] = []
  if (!isPlainObject(raw)) throw new ConfigError(source, ['the settings file must be a YAML mapping of sections'])
  const value = structuredClone(raw) as Record<string, unknown>

  const leaves = leafSchemas()
  for (const key of flatten(value).keys()) {
    const removed = REMOVED_KEYS[key]
    if (removed) problems.push(removed)
    else if (!leaves.has(key) && !isUnderLeaf(key, leaves)) warnings.push(`unknown setting '${key}' is ignored`)
  }

  for (const [key, schema] of leaves) {
    const envName = (schema as { env?: string }).env
    if (envName && env[envName] !== undefined && env[envName] !== '') setPath(value, key, env[envName])
  }
  for (const { env: name, key, parse } of ENV_OVERRIDES) {
    const v = env[name]
    if (v !== undefined && v !== '') setPath(value, key, parse(v))
  }

  applyProviderProfile(value)
  applyModelDimensions(value)
  const filled = Value.Default(SettingsSchema, value) as Record<string, unknown>
  const authz = filled.authz as { kb_creator_roles?: unknown } | undefined
  if (authz && typeof authz.kb_creator_roles === 'string') authz.kb_creator_roles = [authz.kb_creator_roles]

  for (const issue of issues(Value.Errors(SettingsSchema, filled), 'settings')) {
    problems.push(`${issue.loc.slice(1).join('.')}: ${issue.msg}`)
  }
  if (problems.length === 0) {
    const settings = filled as Settings
    problems.push(...checkKbRules(settings))
    problems.push(...checkDeploymentRules(settings, warnings))
  }
  if (problems.length > 0) throw new ConfigError(source, problems)
  return { settings: deepFreeze(filled as Settings), warnings }
}

/**
 * Fusion defaults that depend on the embedder. The built-in embedder's dense vectors are hashed lexical
 * features: a weaker, correlated copy of the sparse signal, so weighting the two lists equally pulls the
 * sparse ranking down (SciFact nDCG@10: sparse 0.68, alpha 0.5 0.63). Where it reorders the sparse list's first
 * page it is right and wrong about as often (alpha 0.2, in-KB k 3: 14 queries better and 15 worse of SciFact's
 * 300, 0 and 1 of autorag-ko's 114; bench/eval/tune.ts), so hybrid with it keeps the sparse ranking there: with
 * in-KB k 3, no dense rank can carry a chunk across the sparse list's first ten when
 * alpha / (k + 1) < (1 - alpha) (1 / (k + 10) - 1 / (k + 11)), that is alpha < 0.0215. The dense list still orders
 * what the sparse one ranks lower and adds what it does not find. Unless the settings say otherwise; real
 * embedding models keep the specification's defaults (alpha 0.5, rrf_k 60).
 */
export const BUILTIN_FUSION_PROFILE = Object.freeze({ alpha: 0.02, kb_rrf_k: 3 })

function applyProviderProfile(value: Record<string, unknown>): void {
  const provider = value.provider as { name?: unknown } | undefined
  const name = provider?.name ?? 'builtin'
  if (name !== 'builtin') return
  // A section given as something other than a mapping is left alone, for validation to report.
  const retrieval = value.retrieval
  if (retrieval !== undefined && !isPlainObject(retrieval)) return
  const hybrid = getPath(value, 'retrieval.hybrid')
  if (hybrid !== undefined && !isPlainObject(hybrid)) return
  for (const [key, v] of Object.entries(BUILTIN_FUSION_PROFILE)) {
    const path = `retrieval.hybrid.${key}`
    if (getPath(value, path) === undefined) setPath(value, path, v)
  }
}

/**
 * embedding.vector_size, when unset, is the native size of the model in use (the configured one or the
 * provider family's default), so `provider.name: openai` alone means text-embedding-3-small at 1536 and
 * `ollama` bge-m3 at 1024. An unknown model keeps the schema default; a size that is set is checked instead.
 */
function applyModelDimensions(value: Record<string, unknown>): void {
  const name = getPath(value, 'provider.name') ?? 'builtin'
  const model = getPath(value, 'embedding.model') ?? ''
  if (typeof name !== 'string' || typeof model !== 'string') return
  const embedding = value.embedding
  if (embedding !== undefined && !isPlainObject(embedding)) return
  if (getPath(value, 'embedding.vector_size') !== undefined || providerFamily(name) === 'builtin') return
  const dims = knownDimensions(effectiveModel(name, model))
  if (dims !== undefined) setPath(value, 'embedding.vector_size', dims)
}

/** Values under an array or free-form leaf (knowledge_bases[0].id, rate_limit.rules...) are checked by its schema. */
function isUnderLeaf(key: string, leaves: Map<string, unknown>): boolean {
  const parts = key.split('.')
  for (let i = parts.length - 1; i > 0; i--) if (leaves.has(parts.slice(0, i).join('.'))) return true
  return false
}

/** Rules spanning several keys of the per-KB sections; also applied to a KB's effective settings. */
export function checkKbRules(s: Pick<Settings, 'chunking' | 'dedup'>): string[] {
  const problems: string[] = []
  const { strategy, chunk_size: size, chunk_overlap: overlap } = s.chunking
  const sizes = Array.isArray(size) ? size : [size]
  if (strategy === 'hierarchical') {
    if (!Array.isArray(size) || size.length < 2) {
      problems.push('chunking.chunk_size: the hierarchical strategy needs a descending list of at least 2 sizes, e.g. [2048, 512, 128]')
    } else if (size.some((v, i) => i > 0 && v >= size[i - 1])) {
      problems.push(`chunking.chunk_size: hierarchical sizes must be strictly descending, got [${size.join(', ')}]`)
    }
  } else if (Array.isArray(size)) {
    problems.push(`chunking.chunk_size: the ${strategy} strategy takes one size, not a list (lists are for strategy hierarchical)`)
  }
  const smallest = Math.min(...sizes)
  if (overlap > smallest * 0.15) {
    problems.push(`chunking.chunk_overlap: ${overlap} is above 15 % of the smallest chunk_size (${smallest}); at most ${Math.floor(smallest * 0.15)} is allowed`)
  }
  const { hamming_identical_threshold: identical, hamming_similar_threshold: similar } = s.dedup.simhash
  if (similar < identical) {
    problems.push(`dedup.simhash.hamming_similar_threshold (${similar}) must be at least dedup.simhash.hamming_identical_threshold (${identical})`)
  }
  const cc = s.dedup.chunk_compare
  if (cc.body_similar_threshold > cc.body_identical_threshold) {
    problems.push(`dedup.chunk_compare.body_similar_threshold (${cc.body_similar_threshold}) must not exceed body_identical_threshold (${cc.body_identical_threshold})`)
  }
  return problems
}

function checkDeploymentRules(s: Settings, warnings: string[]): string[] {
  const problems: string[] = []
  if (s.queue_poll.max_per_poll > s.queue_worker.max_workers) {
    warnings.push(`queue_poll.max_per_poll (${s.queue_poll.max_per_poll}) is above queue_worker.max_workers (${s.queue_worker.max_workers}); keep it at or below`)
  }
  if (s.postgres.host && s.postgres.pool_size <= s.queue_worker.max_workers) {
    warnings.push(`postgres.pool_size (${s.postgres.pool_size}) should be a little above queue_worker.max_workers (${s.queue_worker.max_workers})`)
  }
  const family = providerFamily(s.provider.name)
  const model = effectiveModel(s.provider.name, s.embedding.model)
  const known = family === 'builtin' ? undefined : knownDimensions(model)
  if (known !== undefined && known !== s.embedding.vector_size) {
    const which = s.embedding.model.trim() ? `model '${model}'` : `model '${model}' (the default of provider '${s.provider.name}'${PROVIDER_ALIASES[s.provider.name] ? `, an alias of '${PROVIDER_ALIASES[s.provider.name]}'` : ''})`
    problems.push(`embedding.vector_size: ${s.embedding.vector_size} does not match ${which}, which produces ${known} dimensions: set it to ${known} or leave it unset`)
  }
  if (s.dedup.simhash.simhash_bits % s.dedup.simhash.num_bands !== 0) {
    problems.push(`dedup.simhash.num_bands (${s.dedup.simhash.num_bands}) must divide simhash_bits (${s.dedup.simhash.simhash_bits})`)
  }
  if (s.vector_store === 'pgvector' && !s.postgres.host) {
    problems.push("vector_store: pgvector keeps the vectors in PostgreSQL (the pgvector extension) and needs postgres.host; the embedded PGlite has no pgvector")
  }
  if (s.vector_store === 'pgvector' && s.embedding.vector_size > 4000) {
    problems.push(`vector_store: pgvector indexes at most 4000 dimensions (halfvec); embedding.vector_size is ${s.embedding.vector_size}: use vector_store embedded or qdrant`)
  }
  if (s.vector_store === 'qdrant' && !s.qdrant.host) problems.push('vector_store: qdrant needs qdrant.host')
  if ((s.vector_store === 'embedded' || s.vector_store === 'pgvector') && s.qdrant.host) {
    warnings.push(`qdrant.host is set but vector_store is ${s.vector_store}: Qdrant is not used`)
  }
  const kbIds = new Set<string>()
  for (const kb of s.knowledge_bases) {
    if (kbIds.has(kb.id)) problems.push(`knowledge_bases: id '${kb.id}' is listed twice`)
    kbIds.add(kb.id)
  }
  if (family === 'generic' && !s.provider.url) {
    problems.push(`provider.url: provider '${s.provider.name}' is a generic OpenAI-compatible endpoint and needs its full URL`)
  }
  problems.push(...tracingProblems(s.tracing))
  return problems
}

/**
 * Tracing asked for but pointed nowhere: a settings error, refused with the others before any store opens (not
 * when the metrics plugin registers, after the metadata database was made), and not dropped span by span later.
 */
export function tracingProblems(t: Readonly<Settings['tracing']>): string[] {
  if (!t.enabled) return []
  const problems: string[] = []
  let url: URL | null = null
  try {
    url = new URL(t.langfuse_baseurl)
  } catch {
    // reported below
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    problems.push(`tracing.enabled is true but tracing.langfuse_baseurl is not an http(s) URL: '${clip(t.langfuse_baseurl)}'`)
  }
  if (!t.langfuse_public_key || !t.langfuse_secret_key) {
    problems.push('tracing.enabled is true but tracing.langfuse_public_key or the secret key (env TRACING_SECRET_KEY) is empty')
  }
  return problems
}
