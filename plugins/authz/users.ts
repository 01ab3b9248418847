// Users (spec 4.6, minus /api/me): e-mail look-up in the directory, deprovisioning by id or e-mail, and the
// per-user KB cap. Deprovisioning removes every membership of the user, runs succession (3.2) on the KBs they
// owned and deletes their profile; it revokes nothing else (tokens stay valid at the provider, and
// super-admin status comes from the token).
import type { SqlRunner } from '../../adapters/ports.ts'
import { clip, forbidden, notFound } from '../../kernel/errors.ts'
import type { PluginContext } from '../../kernel/plugin.ts'
import { ErrorResponse } from '../../kernel/schemas.ts'
import { callerOf, invalidate, lockMemberKbs, type MembershipEnv } from './member-env.ts'
import { DeleteUsersQuery, LookupQuery, LookupResponse, QuotaBody, QuotaResponse, UserIdParams, UserRemovedResponse } from './member-schemas.ts'
import { succeed } from './ownership.ts'
import type { ProfileObserver } from './profiles.ts'
import type { Caller } from './types.ts'

const userNotFound = (who: string) => notFound(`User not found: ${clip(who)}`, 'USER_NOT_FOUND')
const profileNotFound = (userId: string) => notFound(`User profile not found: ${clip(userId)}`, 'USER_PROFILE_NOT_FOUND')
const notYourself = () => forbidden('Cannot delete yourself', 'CANNOT_DELETE_SELF')

interface Removal {
  kbIds: string[]
  /** Admins promoted to owner by succession. */
  promoted: string[]
}

/**
 * Memberships gone, succession on owned KBs, profile gone. Run after lockMemberKbs in the same transaction, so
 * the roles read here are the ones a concurrent transfer or succession left. Null when nothing knew the user.
 */
async function deprovision(db: SqlRunner, userId: string): Promise<Removal | null> {
  const memberships = await db.query<{ kb_id: string; role: string }>('DELETE FROM kb_members WHERE user_id = $1 RETURNING kb_id, role', [userId])
  const promoted: string[] = []
  for (const m of memberships) {
    if (m.role !== 'owner') continue
    const next = await succeed(db, m.kb_id)
    if ('owner' in next) promoted.push(next.owner)
  }
  const profiles = await db.query('DELETE FROM user_profiles WHERE user_id = $1 RETURNING user_id', [userId])
  if (memberships.length === 0 && profiles.length === 0) return null
  return { kbIds: memberships.map((m) => m.kb_id), promoted }
}

export function registerUserRoutes(ctx: PluginContext, env: MembershipEnv, profiles: ProfileObserver): void {
  const tags = ['users']

  async function remove(caller: Caller, userIds: string[], missing: string) {
    if (userIds.includes(caller.user_id)) throw notYourself()
    const removed = await env.sql.transaction(async (tx) => {
      // Every KB of every target at once, before any membership is read: one lock order for all (no deadlock).
      await lockMemberKbs(tx, userIds)
      const out: Removal[] = []
      for (const id of userIds) {
        const r = await deprovision(tx, id)
        if (r) out.push(r)
      }
      return out
    })
    if (removed.length === 0) throw userNotFound(missing)
    const kbIds = [...new Set(removed.flatMap((r) => r.kbIds))].sort()
    await invalidate(env, { users: [...userIds, ...removed.flatMap((r) => r.promoted)], kbs: kbIds })
    for (const id of userIds) profiles.forget(id)
    env.log.info({ user_ids: userIds, kb_ids: kbIds, by: caller.user_id }, 'user deprovisioned')
    return { user_id: userIds[0], status: 'removed' as const, kb_ids: kbIds }
  }

  ctx.route({
    method: 'GET', path: '/api/users/lookup', summary: 'Look up a user by e-mail in the identity provider', tags,
    description: 'Never an error: an unknown e-mail, an unreachable or unconfigured directory all answer found false.',
    query: LookupQuery, access: { level: 'authenticated' },
    responses: { 200: { description: 'Look-up result', schema: LookupResponse } },
    handler: async (req) => {
      const user = req.query.email ? await env.directory.lookupByEmail(req.query.email) : null
      return user ? { found: true, user_id: user.user_id, display_name: user.display_name } : { found: false, user_id: null, display_name: null }
    },
  })

  ctx.route({
    method: 'DELETE', path: '/api/users/{user_id}', summary: 'Deprovision a user', tags,
    description: 'Super-admin. Removes every membership of the user (succession on the KBs they owned) and their profile.',
    params: UserIdParams, access: { level: 'super_admin' },
    responses: { 200: { description: 'Removed', schema: UserRemovedResponse }, 403: { description: 'Not a super-admin, or yourself', schema: ErrorResponse }, 404: { description: 'Unknown user', schema: ErrorResponse } },
    handler: (req) => remove(callerOf(req), [req.params.user_id], req.params.user_id),
  })

  ctx.route({
    method: 'DELETE', path: '/api/users', summary: 'Deprovision the user with an e-mail address', tags,
    description: 'Super-admin. Finds the user by the e-mail of their profile; every profile with that e-mail is deprovisioned.',
    query: DeleteUsersQuery, access: { level: 'super_admin' },
    responses: { 200: { description: 'Removed', schema: UserRemovedResponse }, 403: { description: 'Not a super-admin, or yourself', schema: ErrorResponse }, 404: { description: 'No profile has this e-mail', schema: ErrorResponse } },
    handler: async (req) => {
      const email = req.query.email.trim().toLowerCase()
      const rows = await env.sql.query<{ user_id: string }>(
        'SELECT user_id FROM user_profiles WHERE lower(email) = $1 ORDER BY updated_at DESC, user_id', [email])
      if (rows.length === 0) throw userNotFound(req.query.email)
      return remove(callerOf(req), rows.map((r) => r.user_id), req.query.email)
    },
  })

  ctx.route({
    method: 'PATCH', path: '/api/users/{user_id}/quota', summary: "Set or clear a user's KB cap", tags,
    description: 'Super-admin. max_kb_count: 0 = unlimited for this user; null = the global authz.max_kb_count applies.',
    params: UserIdParams, body: QuotaBody, access: { level: 'super_admin' },
    responses: { 200: { description: 'The cap', schema: QuotaResponse }, 404: { description: 'No profile yet', schema: ErrorResponse } },
    handler: async (req) => {
      const rows = await env.sql.query<{ max_kb_count: number | null }>(
        'UPDATE user_profiles SET max_kb_count = $2, updated_at = now() WHERE user_id = $1 RETURNING max_kb_count',
        [req.params.user_id, req.body.max_kb_count])
      if (rows.length === 0) throw profileNotFound(req.params.user_id)
      await invalidate(env, { users: [req.params.user_id] })
      return { user_id: req.params.user_id, max_kb_count: rows[0].max_kb_count }
    },
  })
}
