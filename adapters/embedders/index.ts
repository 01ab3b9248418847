// Chooses the embedding driver from provider.name: builtin (offline, the default), local (Ollama; alias
// ollama), hosted (OpenAI; alias openai) or any other name (a generic OpenAI-compatible endpoint).
import { BUILTIN_MODEL, effectiveModel, knownDimensions, providerFamily } from '../../kernel/config/providers.ts'
import { AppError } from '../../kernel/errors.ts'
import type { Embedder } from '../ports.ts'
import { createBuiltinEmbedder } from './builtin.ts'
import type { HttpEmbedderOptions } from './http.ts'
import { createOllamaEmbedder } from './ollama.ts'
import { createOpenAIEmbedder } from './openai.ts'

export { createBuiltinEmbedder, embedText, embedTexts } from './builtin.ts'
export { BUILTIN_MODEL, defaultModel, KNOWN_MODEL_DIMENSIONS, knownDimensions, PROVIDER_ALIASES } from '../../kernel/config/providers.ts'
export { createOllamaEmbedder } from './ollama.ts'
export { createOpenAIEmbedder, openAIEndpoints } from './openai.ts'
export type { HttpEmbedderOptions, RetryEvent } from './http.ts'

export interface EmbedderSettings {
  /** provider.name */
  name: string
  /** provider.url; empty = the provider's default endpoint. */
  url?: string
  /** provider.api_key */
  apiKey?: string
  /** embedding.model; empty = the default model of the provider family. */
  model?: string
  /** embedding.vector_size */
  dimensions: number
}

/**
 * The configuration problem of this model and vector size, or null. The builtin embedder produces any
 * size; an unknown remote model is checked by its first answer (EMBEDDING_DIMENSION_MISMATCH).
 */
export function modelDimensionsProblem(providerName: string, model: string, dimensions: number): string | null {
  if (!Number.isInteger(dimensions) || dimensions < 1) return `embedding.vector_size must be a positive integer, got ${dimensions}`
  if (providerFamily(providerName) === 'builtin') return null
  const known = knownDimensions(model)
  if (known !== undefined && known !== dimensions) {
    return `embedding.vector_size is ${dimensions}, but embedding model '${model}' produces ${known}-dimensional vectors: set embedding.vector_size to ${known}`
  }
  return null
}

export function createEmbedder(settings: EmbedderSettings, http: HttpEmbedderOptions = {}): Embedder {
  // The name is kept as given (it names the readiness check); the family decides the protocol.
  const name = settings.name.trim() || 'builtin'
  const family = providerFamily(name)
  const model = effectiveModel(name, settings.model)
  const { dimensions } = settings
  const problem = modelDimensionsProblem(name, model, dimensions)
  if (problem) throw new AppError('EMBEDDING_CONFIG', 500, problem)
  if (family === 'builtin') {
    if (model !== BUILTIN_MODEL) {
      throw new AppError('EMBEDDING_CONFIG', 500, `embedding model '${model}' is not available with provider.name builtin: its only model is '${BUILTIN_MODEL}' (or leave embedding.model empty)`)
    }
    return createBuiltinEmbedder({ dimensions, model })
  }
  if (family === 'local') return createOllamaEmbedder({ ...http, name, url: settings.url, apiKey: settings.apiKey, model, dimensions })
  return createOpenAIEmbedder({ ...http, name, url: settings.url, apiKey: settings.apiKey, model, dimensions })
}
