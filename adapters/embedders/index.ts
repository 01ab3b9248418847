// Chooses the embedding driver from provider.name: builtin (offline, the default), local (Ollama),
// hosted (OpenAI) or any other name (a generic OpenAI-compatible endpoint).
import { AppError } from '../../kernel/errors.ts'
import type { Embedder } from '../ports.ts'
import { BUILTIN_MODEL, createBuiltinEmbedder } from './builtin.ts'
import type { HttpEmbedderOptions } from './http.ts'
import { createOllamaEmbedder } from './ollama.ts'
import { createOpenAIEmbedder } from './openai.ts'

export { BUILTIN_MODEL, createBuiltinEmbedder, embedText, embedTexts } from './builtin.ts'
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

export function defaultModel(providerName: string): string {
  if (providerName === 'builtin') return BUILTIN_MODEL
  if (providerName === 'local') return 'bge-m3'
  return 'text-embedding-3-small'
}

/** The native dimensions of a known model, else undefined. `BAAI/bge-m3`, `bge-m3:latest` and `bge-m3` are one model. */
export function knownDimensions(model: string): number | undefined {
  const key = model.trim().toLowerCase().replace(/:[^/]*$/, '').split('/').pop() ?? ''
  return KNOWN_MODEL_DIMENSIONS[key]
}

/**
 * The configuration problem of this model and vector size, or null. The builtin embedder produces any
 * size; an unknown remote model is checked by its first answer (EMBEDDING_DIMENSION_MISMATCH).
 */
export function modelDimensionsProblem(providerName: string, model: string, dimensions: number): string | null {
  if (!Number.isInteger(dimensions) || dimensions < 1) return `embedding.vector_size must be a positive integer, got ${dimensions}`
  if (providerName === 'builtin') return null
  const known = knownDimensions(model)
  if (known !== undefined && known !== dimensions) {
    return `embedding.vector_size is ${dimensions}, but embedding model '${model}' produces ${known}-dimensional vectors: set embedding.vector_size to ${known}`
  }
  return null
}

export function createEmbedder(settings: EmbedderSettings, http: HttpEmbedderOptions = {}): Embedder {
  const name = settings.name.trim() || 'builtin'
  const model = settings.model?.trim() || defaultModel(name)
  const { dimensions } = settings
  const problem = modelDimensionsProblem(name, model, dimensions)
  if (problem) throw new AppError('EMBEDDING_CONFIG', 500, problem)
  if (name === 'builtin') {
    if (model !== BUILTIN_MODEL) {
      throw new AppError('EMBEDDING_CONFIG', 500, `embedding model '${model}' is not available with provider.name builtin: its only model is '${BUILTIN_MODEL}' (or leave embedding.model empty)`)
    }
    return createBuiltinEmbedder({ dimensions, model })
  }
  if (name === 'local') return createOllamaEmbedder({ ...http, url: settings.url, apiKey: settings.apiKey, model, dimensions })
  return createOpenAIEmbedder({ ...http, name, url: settings.url, apiKey: settings.apiKey, model, dimensions })
}
