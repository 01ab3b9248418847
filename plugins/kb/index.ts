import { definePlugin } from '../../kernel/plugin.ts'
import { registerKbRoutes } from './routes.ts'
import { createKbService, type KbService } from './service.ts'

export type { KbService }

export default definePlugin<KbService>({
  name: 'kb',
  async register(ctx) {
    const service = createKbService(ctx.adapters, ctx.settings)
    const created = await service.ensurePreregistered(ctx.settings.knowledge_bases)
    if (created.length > 0) ctx.log.info({ kb_ids: created }, 'pre-registered knowledge bases created')
    registerKbRoutes(ctx, service)
    return service
  },
})
