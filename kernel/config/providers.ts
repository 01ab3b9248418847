// Embedding provider families, their default models and the dimensions of well-known models: one table for
// the settings check (load.ts) and the embedder choice (adapters/embedders), so the two never disagree.

/** The built-in offline embedder's only model; a change to its features needs a new name (adapters/embedders/builtin.ts). */
export const BUILTIN_MODEL = 'quarry-hash-v1'

/** The older service's provider names (notes.md): each behaves as its family and defaults to that family's model. */
export const PROVIDER_ALIASES: Readonly<Record<string, 'local' | 'hosted'>> = Object.freeze({ ollama: 'local', openai: 'hosted' })

export type ProviderFamily = 'builtin' | 'local' | 'hosted' | 'generic'

/** builtin, local (Ollama API), hosted (OpenAI API) or generic (another OpenAI-compatible endpoint at a full URL). */
export function providerFamily(name: string): ProviderFamily {
  const n = name.trim() || 'builtin'
  if (n === 'builtin' || n === 'local' || n === 'hosted') return n
  return PROVIDER_ALIASES[n] ?? 'generic'
}

export function defaultModel(providerName: string): string {
  const family = providerFamily(providerName)
  if (family === 'builtin') return BUILTIN_MODEL
  if (family === 'local') return 'bge-m3'
  return 'text-embedding-3-small'
}

/** Native output sizes of well-known models (Ollama tags and organisation prefixes are ignored). */
export const KNOWN_MODEL_DIMENSIONS: Readonly<Record<string, number>> = Object.freeze({
  'bge-m3': 1024,
  'nomic-embed-text': 768,
  'text-embedding-3-small': 1536,
  'text-embedding-3-large': 3072,
  'text-embedding-ada-002': 1536,
  'mxbai-embed-large': 1024,
  'all-minilm': 384,
})

/** The native dimensions of a known model, else undefined. `BAAI/bge-m3`, `bge-m3:latest` and `bge-m3` are one model. */
export function knownDimensions(model: string): number | undefined {
  const key = model.trim().toLowerCase().replace(/:[^/]*$/, '').split('/').pop() ?? ''
  return KNOWN_MODEL_DIMENSIONS[key]
}

/** embedding.model as it will be used: the configured one, else the provider family's default. */
export function effectiveModel(providerName: string, model: string | undefined): string {
  return model?.trim() || defaultModel(providerName)
}
