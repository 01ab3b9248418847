// POST /api/search (spec 4.10).
import { definePlugin, rawReply } from '../../kernel/plugin.ts'
import { ErrorResponse } from '../../kernel/schemas.ts'
import { SearchBody, SearchResponse } from './schemas.ts'
import { createSearchService, type SearchService } from './service.ts'

export type { SearchService }

export default definePlugin<SearchService>({
  name: 'search',
  dependsOn: ['kb'],
  register(ctx) {
    const service = createSearchService(ctx.adapters, ctx.settings, ctx.log)
    ctx.route({
      method: 'POST', path: '/api/search', summary: 'Search one or many knowledge bases (hybrid or similarity)', tags: ['search'],
      body: SearchBody, access: { level: 'viewer', kb: { from: 'body', name: 'kb_ids' } },
      responses: { 200: { description: 'Results and meta', schema: SearchResponse }, 422: { description: 'kb_ids empty, or a bad query or option', schema: ErrorResponse } },
      // Serialised once, straight to the wire.
      handler: async (req) => rawReply(200, JSON.stringify(await service.search(req.body, req.caller)), 'application/json'),
    })
    return service
  },
})
