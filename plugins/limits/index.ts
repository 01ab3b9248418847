// [ENT] Limits of the access-controlled edition (spec 8): the per-KB document cap and per-user rate limiting.
// Absent in the base edition (no authz service): neither applies there.
import { createMemoryRateCounter } from '../../adapters/ratelimit/memory.ts'
import type { RateCounter } from '../../adapters/ratelimit/counter.ts'
import { definePlugin } from '../../kernel/plugin.ts'
import type { AuthzService } from '../authz/types.ts'
import type { DocsPlugin } from '../docs/index.ts'
import { createRateLimiter } from './rate-limit.ts'
import { compileRules } from './rules.ts'

export interface LimitsService {
  /** The rate limiter's counter store, or null when rate_limit.enabled is false. */
  counter: RateCounter | null
}

export default definePlugin<LimitsService | null>({
  name: 'limits',
  dependsOn: ['authz', 'docs'],
  async register(ctx) {
    const authz = ctx.use<AuthzService | null>('authz')
    if (!authz) return null
    const { settings } = ctx

    // Document cap: the runtime max_docs_count (0 = unlimited); super-admins bypass it (Infinity: never refused,
    // but serialised with the capped additions). Connector syncs have no caller and are always capped.
    const docs = ctx.use<DocsPlugin>('docs')
    docs.service.setDocumentCap(async (_kbId, caller) => {
      const max = (await authz.config.get()).max_docs_count
      return max > 0 && caller?.is_super_admin ? Number.POSITIVE_INFINITY : max
    })

    if (!settings.rate_limit.enabled) return { counter: null }
    const rules = compileRules(settings.rate_limit)
    let counter: RateCounter
    if (settings.redis.host) {
      const { createRedisRateCounter } = await import('../../adapters/ratelimit/redis.ts')
      const r = settings.redis
      counter = await createRedisRateCounter({ host: r.host, port: r.port, password: r.password, db: r.db, prefix: r.key_prefix })
    } else counter = createMemoryRateCounter()
    const limiter = createRateLimiter(rules, counter, ctx.log)
    // After authentication (this plugin depends on authz, whose hook runs first): per user; super-admins and
    // requests without a caller (public routes) are not counted.
    ctx.hooks.onRequest(async (req) => {
      const caller = req.caller
      if (!caller || caller.is_super_admin) return
      await limiter.check(caller.user_id, req.path)
    })
    ctx.log.info({ rules: settings.rate_limit.rules.length, default: settings.rate_limit.default, store: counter.name }, 'rate limiting on')
    return { counter }
  },
  close: async (service) => {
    await service?.counter?.close()
  },
})
