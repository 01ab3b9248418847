import { Type } from '@sinclair/typebox'
import { Timestamp } from '../../kernel/schemas.ts'
import { SearchFilter } from './filter.ts'

/** Longer queries are refused with 422: no retrieval model reads that much, and it bounds the work per request. */
export const MAX_QUERY_CHARS = 4096
export const TOP_K_MAX = 100

const unit = (name: string) => Type.Number({ minimum: 0, maximum: 1, errorMessage: `${name} must be between 0.0 and 1.0` })
const topK = (name: string) => Type.Integer({ minimum: 1, maximum: TOP_K_MAX, errorMessage: `${name} must be an integer between 1 and ${TOP_K_MAX}` })
const Mode = Type.Union([Type.Literal('hybrid'), Type.Literal('similarity')], { errorMessage: "mode must be 'hybrid' or 'similarity'" })

/** Options as nested objects ({hybrid: {alpha}}) or as dot-keys ({"hybrid.alpha": ...}), both as the older clients send them. */
export const SearchOptions = Type.Object({
  mode: Type.Optional(Mode),
  top_k: Type.Optional(topK('top_k')),
  hybrid: Type.Optional(Type.Object({ alpha: Type.Optional(unit('hybrid.alpha')) })),
  similarity: Type.Optional(Type.Object({ min_score: Type.Optional(unit('similarity.min_score')) })),
  rerank: Type.Optional(Type.Object({ enabled: Type.Optional(Type.Boolean()), top_n: Type.Optional(topK('rerank.top_n')) })),
  'hybrid.alpha': Type.Optional(unit('hybrid.alpha')),
  'similarity.min_score': Type.Optional(unit('similarity.min_score')),
  'rerank.enabled': Type.Optional(Type.Boolean()),
  'rerank.top_n': Type.Optional(topK('rerank.top_n')),
  filter: Type.Optional(SearchFilter),
})

export const SearchBody = Type.Object({
  query: Type.String({ minLength: 1, maxLength: MAX_QUERY_CHARS, errorMessage: `query must be 1 to ${MAX_QUERY_CHARS} characters` }),
  kb_ids: Type.Optional(Type.Array(Type.String(), { maxItems: 100 })),
  options: Type.Optional(SearchOptions),
})

const Nullable = <T extends ReturnType<typeof Type.Integer> | ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()])

export const SearchResult = Type.Object({
  chunk_id: Type.String(),
  kb_id: Type.String(),
  doc_id: Type.String(),
  title: Type.String(),
  source_type: Type.String(),
  source: Type.String(),
  doc_type: Type.String(),
  chunk_index: Nullable(Type.Integer()),
  page_num: Type.Integer(),
  page_label: Type.String(),
  text: Type.String(),
  score: Type.Number(),
  rerank_score: Type.Union([Type.Number(), Type.Null()], { description: 'The reranker\'s relevance; null when the results were not reranked.' }),
  updated_at: Timestamp,
  merged: Type.Boolean(),
  parent_chunk_id: Nullable(Type.String()),
}, { title: 'SearchResult' })

export const SearchResponse = Type.Object({
  query: Type.String(),
  results: Type.Array(SearchResult),
  meta: Type.Object({
    total_candidates: Type.Integer(),
    returned: Type.Integer(),
    search_mode: Type.String(),
    score_threshold: Type.Number(),
    reranked: Type.Boolean(),
    rerank_provider: Type.String(),
    rerank_fallback: Type.Boolean(),
    cache_status: Type.Union([Type.Literal('hit'), Type.Literal('miss')], { description: 'hit: the answer came from the search cache.' }),
    latency_ms: Type.Integer(),
  }),
})

export const CacheClearQuery = Type.Object({
  kb_id: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'Only the answers that include this knowledge base; omitted: every answer.' })),
})

export const CacheClearResponse = Type.Object({
  status: Type.Literal('cleared'),
  kb_id: Type.Union([Type.String(), Type.Null()]),
  cleared_count: Type.Integer({ description: 'Cached answers removed.' }),
})
