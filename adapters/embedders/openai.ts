// provider.name `hosted` (alias `openai`), and any name other than builtin/local: an OpenAI-compatible embeddings API.
// POST {model, input: [...], encoding_format: 'float'} answers {data: [{index, embedding}, ...]}.
import type { Embedder } from '../ports.ts'
import { providerFamily } from '../../kernel/config/providers.ts'
import { AppError } from '../../kernel/errors.ts'
import { createHttpEmbedder, joinUrl, parseUrl, takeCredentials, type HttpEmbedderOptions } from './http.ts'

export const OPENAI_DEFAULT_URL = 'https://api.openai.com'

export interface OpenAIEmbedderOptions extends HttpEmbedderOptions {
  /** provider.name: 'hosted' or the name of another OpenAI-compatible provider. Defaults to 'hosted'. */
  name?: string
  url?: string
  apiKey?: string
  model: string
  dimensions: number
}

/**
 * Where the embeddings are POSTed and where readiness is read, from provider.name and provider.url.
 *
 * - A URL whose path already ends in `/embeddings` is the endpoint itself, for any name.
 * - `hosted` (and `openai`): url is the API host (default https://api.openai.com) and the endpoint is {url}/v1/embeddings;
 *   a url that already ends in a version segment (`/v1`, `/v1beta`, `/v2`) gets only `/embeddings`.
 * - any other name: url is required and is the API base including its version prefix, as the spec says
 *   (`https://host/v1`, `https://host/api/v1`, `https://host/compatible-mode/v1`): {url}/embeddings. A bare
 *   host (no path) cannot be that, so it gets the conventional `/v1/embeddings`.
 *
 * The models listing (ping) sits beside the endpoint: `.../embeddings` becomes `.../models`.
 */
export function openAIEndpoints(name: string, url: string | undefined): { embeddings: URL; models: URL } {
  const hosted = providerFamily(name) === 'hosted'
  const raw = (url ?? '').trim()
  if (!raw && !hosted) {
    throw new AppError(
      'EMBEDDING_CONFIG',
      500,
      `provider.url is required for provider '${name}': the URL of its OpenAI-compatible API including the version prefix (e.g. https://host/v1)`,
    )
  }
  const u = parseUrl(raw || OPENAI_DEFAULT_URL, 'provider.url')
  u.hash = ''
  const path = u.pathname.replace(/\/+$/, '')
  let endpoint: string
  if (/\/embeddings$/.test(path)) endpoint = path
  else if (hosted) endpoint = /\/v\d+[a-z0-9]*$/i.test(path) ? `${path}/embeddings` : `${path}/v1/embeddings`
  else endpoint = path === '' ? '/v1/embeddings' : `${path}/embeddings`
  const embeddings = new URL(u.href)
  embeddings.pathname = endpoint
  const models = new URL(u.href)
  models.pathname = endpoint.replace(/\/embeddings$/, '/models')
  return { embeddings, models }
}

function decodeEmbedding(e: unknown): ArrayLike<number> {
  if (Array.isArray(e)) return e as number[]
  // A server that ignores encoding_format may still send base64 little-endian float32.
  if (typeof e === 'string') {
    const bytes = Buffer.from(e, 'base64')
    if (bytes.length % 4 !== 0) throw new Error('a base64 embedding is not a whole number of float32 values')
    const out = new Float32Array(bytes.length / 4)
    for (let i = 0; i < out.length; i++) out[i] = bytes.readFloatLE(i * 4)
    return out
  }
  throw new Error('an embedding is neither an array of numbers nor base64')
}

export function createOpenAIEmbedder(opts: OpenAIEmbedderOptions): Embedder {
  const name = opts.name ?? 'hosted'
  const { embeddings, models } = openAIEndpoints(name, opts.url)
  const { url: endpoint, authorization, password } = takeCredentials(embeddings)
  const headers: Record<string, string> = {}
  if (opts.apiKey) headers.authorization = `Bearer ${opts.apiKey}`
  else if (authorization) headers.authorization = authorization
  return createHttpEmbedder(
    {
      name,
      model: opts.model,
      dimensions: opts.dimensions,
      endpoint: endpoint.href,
      headers,
      // OpenAI rejects an empty string in `input` (400); a single space embeds as "nothing" instead.
      body: (batch) => ({ model: opts.model, input: batch.map((t) => (t === '' ? ' ' : t)), encoding_format: 'float' }),
      parse(answer, count) {
        const data = (answer as { data?: unknown } | null)?.data
        if (!Array.isArray(data)) throw new Error('no "data" array')
        if (data.length !== count) throw new Error(`${data.length} embeddings for ${count} inputs`)
        const out: (ArrayLike<number> | undefined)[] = new Array(count)
        data.forEach((item: unknown, position) => {
          const { index, embedding } = (item ?? {}) as { index?: unknown; embedding?: unknown }
          // The API documents `index`; answers are usually in order, but only the index is a promise.
          const at = index === undefined ? position : index
          if (typeof at !== 'number' || !Number.isInteger(at) || at < 0 || at >= count) throw new Error(`bad index ${JSON.stringify(index)}`)
          if (out[at] !== undefined) throw new Error(`index ${at} appears twice`)
          out[at] = decodeEmbedding(embedding)
        })
        return out as ArrayLike<number>[]
      },
      pingUrls: [takeCredentials(models).url.href],
      secrets: [opts.apiKey ?? '', authorization ?? '', password ?? ''],
    },
    opts,
  )
}
