// Knowledge bases (spec 4.2) and their settings overrides (4.3); the access-controlled edition's KB rules (creation,
// my_role, list scoping) come from the authz service, null in the base edition.
import { definePlugin } from '../../kernel/plugin.ts'
import type { AuthzService } from '../authz/types.ts'
import { registerKbRoutes } from './routes.ts'
import { createKbService, type KbService } from './service.ts'

export type { KbService }

export default definePlugin<KbService>({
  name: 'kb',
  dependsOn: ['authz'],
  async register(ctx) {
    const service = createKbService(ctx.adapters, ctx.settings)
    const created = await service.ensurePreregistered(ctx.settings.knowledge_bases)
    if (created.length > 0) ctx.log.info({ kb_ids: created }, 'pre-registered knowledge bases created')
    registerKbRoutes(ctx, service, ctx.use<AuthzService | null>('authz'))
    return service
  },
})
