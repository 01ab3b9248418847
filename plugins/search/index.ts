// POST /api/search (spec 4.10) and the search cache of the older service (DELETE /api/search/cache).
import { definePlugin, rawReply } from '../../kernel/plugin.ts'
import { ErrorResponse } from '../../kernel/schemas.ts'
import { createCachedSearch, settingsFingerprint } from './cache.ts'
import { CacheClearQuery, CacheClearResponse, SearchBody, SearchResponse } from './schemas.ts'
import { createSearchService, type SearchService } from './service.ts'

export type { SearchService }

export default definePlugin<SearchService>({
  name: 'search',
  dependsOn: ['kb'],
  register(ctx) {
    const service = createSearchService(ctx.adapters, ctx.settings, ctx.log)
    const cached = createCachedSearch(service, ctx.adapters.searchCache, settingsFingerprint(ctx.settings.retrieval, ctx.adapters.embedder), ctx.log)
    ctx.route({
      method: 'POST', path: '/api/search', summary: 'Search one or many knowledge bases (hybrid or similarity)', tags: ['search'],
      body: SearchBody, access: { level: 'viewer', kb: { from: 'body', name: 'kb_ids' } },
      responses: { 200: { description: 'Results and meta', schema: SearchResponse }, 422: { description: 'kb_ids empty, or a bad query or option', schema: ErrorResponse } },
      // Serialised once (or taken from the cache as text), straight to the wire.
      handler: async (req) => rawReply(200, await cached.searchJson(req.body), 'application/json'),
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
