// Ownership (spec 3.2, 4.5): succession when a KB loses its owner (member removal, self-removal, user
// deprovisioning) and transfer. Succession promotes the oldest admin (by granted_at); with no admin the KB is
// frozen: it keeps its members and data, refuses every write above viewer, and only a super-admin's transfer
// gives it an owner and makes it active again.
import type { SqlRunner } from '../../adapters/ports.ts'
import type { PluginContext } from '../../kernel/plugin.ts'
import { ErrorResponse, KbIdParam } from '../../kernel/schemas.ts'
import { callerOf, invalidate, lockForWrite, membershipWriter, type MembershipEnv } from './member-env.ts'
import { TransferOwnerBody, TransferOwnerResponse } from './member-schemas.ts'
import type { Caller } from './types.ts'

export type Succession = { owner: string } | { frozen: true }

/** Run in the transaction that removed the owner's membership (the KB row is locked by the caller). */
export async function succeed(db: SqlRunner, kbId: string): Promise<Succession> {
  const admins = await db.query<{ user_id: string }>(
    `SELECT user_id FROM kb_members WHERE kb_id = $1 AND role = 'admin' ORDER BY granted_at, user_id LIMIT 1`,
    [kbId],
  )
  if (admins.length > 0) {
    await db.query(`UPDATE kb_members SET role = 'owner' WHERE kb_id = $1 AND user_id = $2`, [kbId, admins[0].user_id])
    return { owner: admins[0].user_id }
  }
  await db.query(`UPDATE knowledge_bases SET status = 'frozen', updated_at = now() WHERE kb_id = $1`, [kbId])
  return { frozen: true }
}

/**
 * The new owner becomes (or stays) a member with role owner, the former one admin; a frozen KB becomes active.
 * Under the KB lock the caller must still be the owner (or a super-admin; `checked` false: role checks are off
 * and membershipWriter let only a super-admin through). Returns the former owner, if any.
 */
export async function transferOwnership(db: SqlRunner, kbId: string, newOwner: string, by: Caller, checked: boolean): Promise<string | null> {
  await lockForWrite(db, by, kbId, 'owner', { checked, allowFrozen: true })
  const current = await db.query<{ user_id: string }>(`SELECT user_id FROM kb_members WHERE kb_id = $1 AND role = 'owner'`, [kbId])
  const former = current[0]?.user_id ?? null
  if (former !== newOwner) {
    // Demoted first: a KB has at most one owner row (kb_members_one_owner).
    if (former !== null) await db.query(`UPDATE kb_members SET role = 'admin' WHERE kb_id = $1 AND user_id = $2`, [kbId, former])
    await db.query(
      `INSERT INTO kb_members (kb_id, user_id, role, granted_by) VALUES ($1, $2, 'owner', $3)
       ON CONFLICT (kb_id, user_id) DO UPDATE SET role = 'owner'`,
      [kbId, newOwner, by.user_id],
    )
  }
  await db.query(`UPDATE knowledge_bases SET status = 'active', updated_at = now() WHERE kb_id = $1 AND status = 'frozen'`, [kbId])
  return former
}

export function registerOwnershipRoutes(ctx: PluginContext, env: MembershipEnv): void {
  ctx.route({
    method: 'POST', path: '/api/kb/{kb_id}/transfer-owner', summary: 'Transfer ownership of a knowledge base', tags: ['members'],
    description: 'Owner or super-admin. The new owner becomes a member if needed; the former owner becomes admin. '
      + 'On a frozen KB only a super-admin may transfer, and the KB becomes active. While kb_authz_enabled is false: super-admin only.',
    params: KbIdParam, body: TransferOwnerBody,
    // Owner, but a frozen KB passes for a super-admin: checked in the handler (allowFrozen).
    access: { level: 'authenticated', kb: { from: 'params', name: 'kb_id' } },
    responses: { 200: { description: 'Transferred', schema: TransferOwnerResponse }, 403: { description: 'Not the owner', schema: ErrorResponse }, 404: { description: 'KB not found', schema: ErrorResponse } },
    handler: async (req) => {
      const caller = callerOf(req)
      const { kb_id } = req.params
      const owner = req.body.new_owner_user_id
      const checked = await membershipWriter(env, caller)
      await env.access.require(caller, kb_id, 'owner', { allowFrozen: caller.is_super_admin })
      const former = await env.sql.transaction((tx) => transferOwnership(tx, kb_id, owner, caller, checked))
      await invalidate(env, { users: former ? [former, owner] : [owner], kbs: [kb_id] })
      env.log.info({ kb_id, owner, former, by: caller.user_id }, 'KB ownership transferred')
      return { kb_id, owner }
    },
  })
}
