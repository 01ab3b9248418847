// KB creation rules of spec 4.2 [ENT]: a creator group (authz.kb_creator_roles, '*' = everyone), the KB cap
// (the user's own max_kb_count, else authz.max_kb_count; 0 = unlimited; counted = KBs the user owns), and the
// creator as owner. Checked regardless of kb_authz_enabled; a super-admin bypasses both checks.
import type { Sql, SqlRunner } from '../../adapters/ports.ts'
import type { Settings } from '../../kernel/config/schema.ts'
import { forbidden } from '../../kernel/errors.ts'
import { groupName } from './authn.ts'
import type { AuthzBus, AuthzService, Caller } from './types.ts'

/** A single string is a one-item list (spec 5). */
export const creatorGroups = (s: Readonly<Settings>): readonly string[] =>
  typeof s.authz.kb_creator_roles === 'string' ? [s.authz.kb_creator_roles] : s.authz.kb_creator_roles

export function canCreateKb(caller: Caller, s: Readonly<Settings>): boolean {
  if (caller.is_super_admin) return true
  const groups = creatorGroups(s)
  return groups.includes('*') || groups.some((g) => caller.groups.includes(groupName(g)))
}

export interface KbQuota {
  /** The cap that applies to the user; 0 = unlimited. */
  max_kb_count: number
  /** KBs the user owns. */
  kb_count: number
}

export async function kbQuota(db: SqlRunner, userId: string, s: Readonly<Settings>): Promise<KbQuota> {
  const rows = await db.query<{ own: number | null; n: number }>(
    `SELECT (SELECT max_kb_count FROM user_profiles WHERE user_id = $1) AS own,
            (SELECT count(*)::int FROM kb_members WHERE user_id = $1 AND role = 'owner') AS n`, [userId])
  return { max_kb_count: rows[0].own ?? s.authz.max_kb_count, kb_count: rows[0].n }
}

export function createKbCreator(opts: { sql: Sql; settings: Readonly<Settings>; bus: AuthzBus }): AuthzService['createKb'] {
  const { sql, settings, bus } = opts
  return async (caller, create) => {
    if (!canCreateKb(caller, settings)) throw forbidden('Not allowed to create knowledge bases', 'AUTHZ_CREATE_NOT_ALLOWED')
    const kb = await sql.transaction(async (tx) => {
      if (!caller.is_super_admin) {
        // One creation at a time per user, held to commit: two concurrent requests at cap-1 cannot both pass.
        await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`quarry:kb-create:${caller.user_id}`])
        const q = await kbQuota(tx, caller.user_id, settings)
        if (q.max_kb_count > 0 && q.kb_count >= q.max_kb_count) {
          throw forbidden(`KB limit reached: ${q.kb_count}/${q.max_kb_count}`, 'AUTHZ_KB_LIMIT')
        }
      }
      const created = await create(tx)
      await tx.query(
        `INSERT INTO kb_members (kb_id, user_id, role, granted_by) VALUES ($1, $2, 'owner', $2)
         ON CONFLICT (kb_id, user_id) DO UPDATE SET role = 'owner'`, [created.kb_id, caller.user_id])
      return created
    })
    // A KB id may have been cached as absent (or, deleted and re-created, with old members).
    await bus.publish({ type: 'kb', kb_id: kb.kb_id })
    await bus.publish({ type: 'user', user_id: caller.user_id })
    return kb
  }
}
