// The access-controlled edition ([ENT]): on when `oidc.issuer_url` is set, absent otherwise (the base edition
// registers no hook, so its requests take the kernel's synchronous path exactly as before, and ctx.use('authz')
// returns null to the plugins that depend on this one).
// Authentication (authn.ts) runs onRequest for every non-public route and sets req.caller; the access check
// (access.ts) runs onValidated and applies each route's declared `access` through the role cache (roles.ts),
// which every change invalidates in every process through the AuthzBus (bus.ts). This plugin depends on no other:
// kb, docs, connectors, search and mcp depend on it and call its service for rules a declaration cannot express.
import type { Settings } from '../../kernel/config/schema.ts'
import { definePlugin } from '../../kernel/plugin.ts'
import { createAccessControl, createAccessHook } from './access.ts'
import { createAuthenticator } from './authn.ts'
import { createLocalBus, createRedisBus } from './bus.ts'
import { createConfigStore } from './config.ts'
import { createKbCreator } from './kb-create.ts'
import { createMembership, type Membership } from './members.ts'
import { createRoleStore } from './roles.ts'
import { registerSystemRoutes } from './system.ts'
import type { AuthzBus, AuthzService, KbResolver } from './types.ts'

export type { AuthzService }

interface Running extends AuthzService {
  close(): Promise<void>
}

const openBus = async (s: Readonly<Settings>, log: Parameters<typeof createLocalBus>[0]): Promise<AuthzBus & { live?(): boolean }> =>
  s.redis.host
    ? createRedisBus({ host: s.redis.host, port: s.redis.port, password: s.redis.password, db: s.redis.db, prefix: s.redis.key_prefix }, log)
    : createLocalBus(log)

export default definePlugin<AuthzService | null>({
  name: 'authz',
  async register(ctx) {
    const { settings } = ctx
    const { oidc, authz } = settings
    if (!oidc.issuer_url) return null
    const { sql } = ctx.adapters
    const authenticator = createAuthenticator({
      issuerUrl: oidc.issuer_url,
      audience: oidc.audience,
      jwksCacheTtlSeconds: oidc.jwks_cache_ttl_seconds,
      superAdminGroup: authz.super_admin_role,
      log: ctx.log,
    })
    const bus = await openBus(settings, ctx.log)
    // Nothing read while the Redis subscriber is down is cached: an invalidation published meanwhile is missed.
    const storable = bus.live ? () => bus.live!() : undefined
    const roles = createRoleStore({ sql, bus, ttlSeconds: authz.role_cache_ttl_seconds, storable })
    const config = createConfigStore({
      sql, bus, ttlSeconds: authz.role_cache_ttl_seconds, storable,
      defaults: { kb_authz_enabled: false, max_docs_count: authz.max_docs_count },
    })
    const access = createAccessControl({ sql, roles, config })
    const resolvers = new Map<string, KbResolver>()
    const membership: Membership = createMembership({ sql, settings, log: ctx.log, roles, access, config, bus })

    ctx.hooks.onRequest(async (req, route) => {
      if (route.access.level === 'public') return
      const caller = await authenticator.authenticate(req.headers.authorization)
      req.caller = caller
      // Profile observation and pending-invite activation, before this request's own access check.
      await membership.onAuthenticated(caller)
    })
    ctx.hooks.onValidated(createAccessHook({ sql, access, resolvers }))
    registerSystemRoutes(ctx, { sql, settings, config })
    membership.registerRoutes(ctx)

    ctx.log.info({ issuer: oidc.issuer_url, audience: oidc.audience || null, bus: settings.redis.host ? 'redis' : 'in-process' },
      'access-controlled edition: bearer tokens required')
    const service: Running = {
      authenticate: authenticator.authenticate,
      access,
      roles,
      config,
      registerResolver(name, resolve) {
        if (resolvers.has(name)) throw new Error(`KB resolver '${name}' is registered twice`)
        resolvers.set(name, resolve)
      },
      createKb: createKbCreator({ sql, settings, bus }),
      async close() {
        await membership.close()
        roles.close()
        config.close()
        await bus.close()
      },
    }
    return service
  },
  close: async (service) => {
    await (service as Running | null)?.close()
  },
})
