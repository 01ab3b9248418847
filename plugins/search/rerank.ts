// The reranker: a Cohere/Jina-compatible API, POST {url}/v1/rerank {model, query, documents, top_n}
// answering {results: [{index, relevance_score}]} (notes.md), with a timeout.
import { AppError } from '../../kernel/errors.ts'

export interface RerankOptions {
  url: string
  apiKey: string
  model: string
  timeoutMs: number
}

export interface Reranked {
  index: number
  relevance_score: number
}

const DEFAULT_URL = 'https://api.cohere.com'

export function rerankEndpoint(url: string): string {
  const base = (url || DEFAULT_URL).replace(/\/+$/, '')
  if (/\/rerank$/.test(base)) return base
  return /\/v\d+$/.test(base) ? `${base}/rerank` : `${base}/v1/rerank`
}

export async function rerank(opts: RerankOptions, query: string, documents: readonly string[], topN: number): Promise<Reranked[]> {
  const endpoint = rerankEndpoint(opts.url)
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (opts.apiKey) headers.authorization = `Bearer ${opts.apiKey}`
  let res: Response
  try {
    res = await fetch(endpoint, {
      method: 'POST',
      headers,
      body: JSON.stringify({ model: opts.model, query, documents, top_n: topN }),
      signal: AbortSignal.timeout(opts.timeoutMs),
    })
  } catch (err) {
    const timedOut = (err as Error).name === 'TimeoutError'
    throw new AppError('RERANK_UNAVAILABLE', 502, timedOut ? `reranker at ${endpoint} timed out after ${opts.timeoutMs} ms` : `reranker at ${endpoint} is unreachable: ${(err as Error).message}`)
  }
  const text = await res.text()
  if (!res.ok) throw new AppError('RERANK_FAILED', 502, `reranker at ${endpoint} answered ${res.status}: ${text.slice(0, 200).replaceAll(opts.apiKey || '\u0000', '***')}`)
  let body: { results?: { index?: unknown; relevance_score?: unknown }[] }
  try {
    body = JSON.parse(text)
  } catch {
    throw new AppError('RERANK_FAILED', 502, `reranker at ${endpoint} answered something that is not JSON`)
  }
  const results = body.results
  if (!Array.isArray(results)) throw new AppError('RERANK_FAILED', 502, `reranker at ${endpoint} answered without a results list`)
  const out: Reranked[] = []
  for (const r of results) {
    if (typeof r.index !== 'number' || typeof r.relevance_score !== 'number' || r.index < 0 || r.index >= documents.length) {
      throw new AppError('RERANK_FAILED', 502, `reranker at ${endpoint} answered an invalid result ${JSON.stringify(r)}`)
    }
    out.push({ index: r.index, relevance_score: r.relevance_score })
  }
  return out.sort((a, b) => b.relevance_score - a.relevance_score).slice(0, topN)
}
