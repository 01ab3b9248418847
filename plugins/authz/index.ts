// The access-controlled edition ([ENT]): on when `oidc.issuer_url` is set, absent otherwise (the base edition
// registers no hook, so its requests take the kernel's synchronous path exactly as before).
// Part 1, authentication: every route whose access level is not 'public' needs a valid bearer token, and
// the request's `caller` is set from it. /health, /ready, /docs, /redoc, /openapi.json and /metrics declare
// themselves public; /mcp is 'authenticated' like every route that declares nothing.
import { definePlugin } from '../../kernel/plugin.ts'
import { createAuthenticator, type Authenticator } from './authn.ts'

export interface AuthzService {
  /** For transports that do not go through the route hook: the Caller of an Authorization header value. */
  authenticate: Authenticator['authenticate']
}

export default definePlugin<AuthzService | null>({
  name: 'authz',
  register(ctx) {
    const { oidc, authz } = ctx.settings
    if (!oidc.issuer_url) return null
    const authenticator = createAuthenticator({
      issuerUrl: oidc.issuer_url,
      audience: oidc.audience,
      jwksCacheTtlSeconds: oidc.jwks_cache_ttl_seconds,
      superAdminGroup: authz.super_admin_role,
      log: ctx.log,
    })
    // Registered before any role check (those read req.caller, so they come from plugins that depend on this one).
    ctx.hooks.onRequest(async (req, route) => {
      if (route.access.level === 'public') return
      req.caller = await authenticator.authenticate(req.headers.authorization)
    })
    ctx.log.info({ issuer: oidc.issuer_url, audience: oidc.audience || null }, 'access-controlled edition: bearer tokens required')
    return { authenticate: authenticator.authenticate }
  },
})
