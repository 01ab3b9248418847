// POST /api/search (spec 4.10) and the search cache of the older service (DELETE /api/search/cache).
// [ENT] The access hook narrows kb_ids to the KBs the caller may read (route access `filter`); when the client
// named KBs and none of them remains the answer is an empty result (200). kb_ids empty or missing is the same 422
// as in the base edition (notes.md): the client named nothing.
import { ValidationError } from '../../kernel/errors.ts'
import { definePlugin, rawReply, Reply } from '../../kernel/plugin.ts'
import { allFilteredOut } from '../authz/access.ts'
import { ErrorResponse } from '../../kernel/schemas.ts'
import { createCachedSearch, settingsFingerprint } from './cache.ts'
import { CacheClearQuery, CacheClearResponse, SearchBody, SearchResponse } from './schemas.ts'
import { createSearchService, type SearchInput, type SearchOutput, type SearchService, type SearchTiming } from './service.ts'

export type { SearchService }

const ms = (v: number) => v.toFixed(1)

/** rawReply's headers for an answer from the cache: serverTiming({ cache: 'hit', kb: [] }). */
const HIT_HEADERS: Readonly<Record<string, string>> = Object.freeze({ 'content-type': 'application/json', 'server-timing': 'cache;desc="hit"' })

/**
 * The Server-Timing header (W3C Server Timing) of a search: cache hit or miss, then the stages that ran, one `kb`
 * entry per KB searched (desc names it). kb_ids are [a-z0-9_-], so they need no escaping in the quoted desc.
 */
export function serverTiming(t: SearchTiming): string {
  const parts: string[] = []
  if (t.cache) parts.push(`cache;desc="${t.cache}"`)
  if (t.embed !== undefined) parts.push(`embed;dur=${ms(t.embed)}`)
  for (const [kb, dur] of t.kb) parts.push(`kb;desc="${kb.replace(/["\\]/g, '')}";dur=${ms(dur)}`)
  if (t.fusion !== undefined) parts.push(`fusion;dur=${ms(t.fusion)}`)
  if (t.rerank !== undefined) parts.push(`rerank;dur=${ms(t.rerank)}`)
  return parts.join(', ')
}

/** A search's answer as sent; a hit ran no stage: its headers are always these (the kernel copies them into each response). */
const answer = (body: string | Uint8Array, timing: SearchTiming): Reply => timing.cache === 'hit'
  ? new Reply(200, body, HIT_HEADERS, 'raw')
  : rawReply(200, body, 'application/json', { 'server-timing': serverTiming(timing) })

export default definePlugin<SearchService>({
  name: 'search',
  dependsOn: ['kb', 'authz'],
  register(ctx) {
    const service = createSearchService(ctx.adapters, ctx.settings, ctx.log)
    /** [ENT] No readable KB left: the normal envelope with nothing in it (the request is still validated). */
    const emptyAnswer = (input: SearchInput): SearchOutput => {
      if (input.query.trim().length === 0) throw new ValidationError([{ loc: ['body', 'query'], msg: 'query must not be blank', type: 'string_too_short' }])
      const opts = service.resolveOptions(input.options)
      return {
        query: input.query,
        results: [],
        meta: {
          total_candidates: 0, returned: 0, search_mode: opts.mode, score_threshold: opts.mode === 'similarity' ? opts.min_score : 0.0,
          reranked: false, rerank_provider: 'none', rerank_fallback: false, cache_status: 'miss', latency_ms: 0,
        },
      }
    }
    const cached = createCachedSearch(service, ctx.adapters.searchCache, settingsFingerprint(ctx.settings.retrieval, ctx.adapters.embedder), ctx.log)
    ctx.route({
      method: 'POST', path: '/api/search', summary: 'Search one or many knowledge bases (hybrid or similarity)', tags: ['search'],
      body: SearchBody, access: { level: 'viewer', kb: { from: 'body', name: 'kb_ids', filter: true } },
      // Clients repeat searches (what the cache is for): their bodies are kept parsed and validated by the kernel.
      repeatBodies: true,
      description: '[ENT] KBs of kb_ids the caller cannot read are dropped; none left: 200 with no results (kb_ids empty or missing: 422). '
        + 'The Server-Timing header splits the time: cache (hit or miss), embed, kb (one per KB searched, desc = kb_id), fusion, rerank (ms).',
      responses: { 200: { description: 'Results and meta', schema: SearchResponse }, 422: { description: 'kb_ids empty, or a bad query or option', schema: ErrorResponse } },
      // Serialised once (or taken from the cache as text, or as bytes), straight to the wire. Not an async function:
      // a hit from a cache in this process is answered without a promise (cache.ts searchBody), in uWS's data
      // callback, as GET /health is in its handler.
      handler: (req) => {
        if (allFilteredOut(req)) return emptyAnswer(req.body)
        const timing: SearchTiming = { kb: [] }
        const body = cached.searchBody(req.body, timing)
        return typeof body === 'string' || body instanceof Uint8Array ? answer(body, timing) : body.then((b) => answer(b, timing))
      },
    })
    ctx.route({
      method: 'DELETE', path: '/api/search/cache', summary: 'Clear cached search answers, of one knowledge base or all', tags: ['search'],
      description: 'Answers are also invalidated by every write to a knowledge base; this removes them from the cache store.',
      query: CacheClearQuery, access: { level: 'super_admin' },
      responses: { 200: { description: 'How many cached answers were removed', schema: CacheClearResponse } },
      handler: async (req) => {
        const kbId = req.query.kb_id ?? null
        return { status: 'cleared' as const, kb_id: kbId, cleared_count: await cached.clear(kbId ?? undefined) }
      },
    })
    return service
  },
})
