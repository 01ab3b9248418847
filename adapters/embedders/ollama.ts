// provider.name `local`: an Ollama server (or anything speaking its native API). POST {url}/api/embed with
// {model, input: [...]} answers {embeddings: [[...], ...]} in input order.
import type { Embedder } from '../ports.ts'
import { createHttpEmbedder, joinUrl, parseUrl, takeCredentials, type HttpEmbedderOptions } from './http.ts'

export const OLLAMA_DEFAULT_URL = 'http://localhost:11434'

export interface OllamaEmbedderOptions extends HttpEmbedderOptions {
  /** A bare host (`http://gpu-box:11434`), optionally with a path prefix when behind a proxy. */
  url?: string
  model: string
  dimensions: number
  /** Sent as a Bearer token when set (an Ollama behind an authenticating proxy, or a hosted Ollama). */
  apiKey?: string
  /** Defaults to 'local'. */
  name?: string
}

/**
 * The server base from provider.url: empty means localhost:11434, a missing scheme means http (as
 * OLLAMA_HOST does), and an endpoint path pasted by mistake (/api/embed, /api, /v1) is taken off, so
 * `http://h:11434/v1` and `http://h:11434/api/embed` both mean the server at http://h:11434.
 */
export function ollamaBaseUrl(url: string | undefined): URL {
  let raw = (url ?? '').trim() || OLLAMA_DEFAULT_URL
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(raw)) raw = `http://${raw}`
  const u = parseUrl(raw, 'provider.url')
  u.pathname = u.pathname.replace(/\/+$/, '').replace(/\/(api\/embed|api\/embeddings|api|v1)$/, '')
  u.hash = ''
  return u
}

export function createOllamaEmbedder(opts: OllamaEmbedderOptions): Embedder {
  const { url: base, authorization, password } = takeCredentials(ollamaBaseUrl(opts.url))
  const headers: Record<string, string> = {}
  if (opts.apiKey) headers.authorization = `Bearer ${opts.apiKey}`
  else if (authorization) headers.authorization = authorization
  return createHttpEmbedder(
    {
      name: opts.name ?? 'local',
      model: opts.model,
      dimensions: opts.dimensions,
      endpoint: joinUrl(base, '/api/embed'),
      headers,
      body: (batch) => ({ model: opts.model, input: batch }),
      parse(answer, count) {
        const embeddings = (answer as { embeddings?: unknown } | null)?.embeddings
        if (!Array.isArray(embeddings)) throw new Error('no "embeddings" array')
        if (embeddings.length !== count) throw new Error(`${embeddings.length} embeddings for ${count} inputs`)
        for (const e of embeddings) if (!Array.isArray(e)) throw new Error('an embedding is not an array of numbers')
        return embeddings as number[][]
      },
      // The readiness rule is {url}/v1/models (Ollama's OpenAI-compatible listing). A proxy or an older
      // server may expose only the native API, where /v1/models is a 404: /api/tags then proves the same.
      pingUrls: [joinUrl(base, '/v1/models'), joinUrl(base, '/api/tags')],
      secrets: [opts.apiKey ?? '', authorization ?? '', password ?? ''],
    },
    opts,
  )
}
