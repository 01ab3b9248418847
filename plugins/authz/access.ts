// The access check of spec 5.6 (AccessControl, types.ts) and the onValidated hook that applies every route's
// declared `access` with it. Check order for a KB: absent 404, no role 403, role too low 403, frozen write 403.
// kb_authz_enabled false skips every KB check (spec 5.5); the super-admin-only routes are checked regardless.
import type { Sql } from '../../adapters/ports.ts'
import { AppError, clip, forbidden } from '../../kernel/errors.ts'
import type { Request, RequestHook, RouteAccess } from '../../kernel/plugin.ts'
import { kbFrozen, kbNotFound } from '../kb/errors.ts'
import type { CachedConfigStore } from './config.ts'
import type { CachedRoleStore } from './roles.ts'
import { atLeast, effectiveRole, type AccessControl, type Caller, type KbResolver, type Role } from './types.ts'

export const noAccess = (kbId: string) => forbidden(`No access to KB: ${clip(kbId)}`, 'AUTHZ_NO_ACCESS')
export const roleTooLow = (min: Role, kbId: string) => forbidden(`Requires role ${min} on KB: ${clip(kbId)}`, 'AUTHZ_ROLE_TOO_LOW')
export const superAdminOnly = () => forbidden('Requires super-admin', 'AUTHZ_SUPER_ADMIN_REQUIRED')

export function createAccessControl(opts: { sql: Sql; roles: CachedRoleStore; config: CachedConfigStore }): AccessControl {
  const { sql, roles, config } = opts

  const roleOn = async (caller: Caller, kbId: string, isPublic: boolean): Promise<Role | null> =>
    effectiveRole(caller, caller.is_super_admin ? null : (await roles.rolesOfCached(caller.user_id)).get(kbId), isPublic)

  const allKbIds = async () => (await sql.query<{ kb_id: string }>('SELECT kb_id FROM knowledge_bases ORDER BY kb_id')).map((r) => r.kb_id)

  return {
    async require(caller, kbId, min, o = {}) {
      if (!caller || !(await config.getCached()).kb_authz_enabled) return null
      const state = await roles.kbStateCached(kbId)
      if (!state.exists) throw kbNotFound(kbId)
      const role = await roleOn(caller, kbId, state.public)
      if (role === null) throw noAccess(kbId)
      if (!atLeast(role, min)) throw roleTooLow(min, kbId)
      if (state.frozen && min !== 'viewer' && !(o.allowFrozen && caller.is_super_admin)) throw kbFrozen(kbId)
      return role
    },
    async myRole(caller, kbId) {
      if (!caller || !(await config.getCached()).kb_authz_enabled) return null
      const state = await roles.kbStateCached(kbId)
      return state.exists ? roleOn(caller, kbId, state.public) : null
    },
    async readable(caller, kbIds) {
      if (!caller || caller.is_super_admin || !(await config.getCached()).kb_authz_enabled) return kbIds ? [...kbIds] : allKbIds()
      const [mine, publics] = await Promise.all([roles.rolesOfCached(caller.user_id), roles.publicKbIds()])
      if (kbIds) return kbIds.filter((id) => mine.has(id) || publics.has(id))
      return [...new Set([...mine.keys(), ...publics])].sort()
    },
  }
}

const SOURCES = { params: 'params', body: 'body', query: 'query' } as const

/** Requests whose `filter` list named KBs of which the caller may read none (they now hold an empty list). */
const filteredToNone = new WeakSet<object>()
/**
 * The route's `filter` list was emptied by the access check: the client named KBs, none readable. Tells that
 * apart from a list the client sent empty (or left out), which the handler refuses as it always has.
 */
export const allFilteredOut = (req: Pick<Request, 'id'>): boolean => filteredToNone.has(req)

/**
 * Applies a route's `access` after validation (the KB may be named in the body or the query). 'public' and
 * 'authenticated' need nothing more than the authentication hook did; 'super_admin' needs the super-admin
 * group in this request's token; a role needs it on the KB the route names, directly or through a resolver
 * (`via`); `filter` narrows a list of KB ids to the readable ones instead of refusing.
 */
export function createAccessHook(opts: {
  sql: Sql
  access: AccessControl
  resolvers: ReadonlyMap<string, KbResolver>
}): RequestHook {
  const { sql, access, resolvers } = opts
  return async (req, route) => {
    const a: RouteAccess = route.access
    if (a.level === 'public' || a.level === 'authenticated') return
    const caller = req.caller
    // The authentication hook ran for every non-public route: no caller here would be a kernel bug. Fail closed.
    if (!caller) throw new AppError('AUTHZ_NO_CALLER', 500, 'Request reached the access check without a caller')
    if (a.level === 'super_admin') {
      if (!caller.is_super_admin) throw superAdminOnly()
      return
    }
    if (!a.kb) throw new AppError('AUTHZ_ROUTE_WITHOUT_KB', 500, `Route ${route.method} ${route.path} requires a role but names no KB`)
    const source = (req as unknown as Record<string, Record<string, unknown> | undefined>)[SOURCES[a.kb.from]]
    const value = source?.[a.kb.name]
    if (a.kb.filter) {
      // Absent or empty: the handler answers as it would for any caller (nothing to filter).
      if (Array.isArray(value) && value.length > 0) {
        const readable = await access.readable(caller, value.filter((v): v is string => typeof v === 'string'))
        source![a.kb.name] = readable
        if (readable.length === 0) filteredToNone.add(req)
      }
      return
    }
    // A role route must name its KB in a required string field: anything else is a misdeclared route, and
    // passing it unchecked would open it to every caller. Fail closed.
    if (typeof value !== 'string') {
      throw new AppError('AUTHZ_ROUTE_KB_MISSING', 500, `Route ${route.method} ${route.path} names no KB in ${a.kb.from}.${a.kb.name}`)
    }
    let kbId: string | null = value
    if (a.kb.via) {
      const resolve = resolvers.get(a.kb.via)
      if (!resolve) throw new AppError('AUTHZ_NO_RESOLVER', 500, `No KB resolver '${a.kb.via}' for ${route.method} ${route.path}`)
      kbId = await resolve(value, sql)
      // An unknown connector (or other object) is the handler's own 404.
      if (kbId === null) return
      try {
        await access.require(caller, kbId, a.level)
      } catch (err) {
        // The caller named the object, not its KB: a refusal must not tell someone without a role which KB it is.
        if (err instanceof AppError && err.code === 'AUTHZ_NO_ACCESS') throw forbidden(`No access to ${a.kb.via}: ${clip(value)}`, 'AUTHZ_NO_ACCESS')
        throw err
      }
      return
    }
    await access.require(caller, kbId, a.level)
  }
}
