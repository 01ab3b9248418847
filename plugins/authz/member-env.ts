// What the membership parts (members, invites, ownership, users) share: their dependencies, the caller of a
// request, the errors several of them answer, the checks a membership write repeats under the KB lock, and
// invalidation after a change.
import type { Sql, SqlRunner } from '../../adapters/ports.ts'
import type { Settings } from '../../kernel/config/schema.ts'
import { AppError, clip, forbidden, notFound } from '../../kernel/errors.ts'
import type { Logger } from '../../kernel/log.ts'
import type { Request } from '../../kernel/plugin.ts'
import { kbFrozen, kbNotFound } from '../kb/errors.ts'
import { noAccess, roleTooLow } from './access.ts'
import type { UserDirectory } from './directory.ts'
import type { Mailer } from './mail.ts'
import { trustedEmail } from './profiles.ts'
import { atLeast, type AccessControl, type AuthzBus, type Caller, type Role, type RoleStore, type SystemConfigStore } from './types.ts'

export interface MembershipEnv {
  sql: Sql
  settings: Readonly<Settings>
  log: Logger
  roles: RoleStore
  access: AccessControl
  /** kb_authz_enabled decides who may write memberships (membershipWriter). */
  config: SystemConfigStore
  /** 'invites' events keep every process's pending-invite e-mails current; 'user' events its observed profiles. */
  bus: AuthzBus
  directory: UserDirectory
  mailer: Mailer
}

/** Every route here needs a token, so the authentication hook has set the caller. */
export function callerOf(req: Pick<Request, 'caller'>): Caller {
  if (!req.caller) throw new AppError('AUTHN_MISSING_TOKEN', 401, 'Not authenticated')
  return req.caller
}

export const memberNotFound = (userId: string) => notFound(`Member not found: ${clip(userId)}`, 'MEMBER_NOT_FOUND')

/** How a person is named in e-mails: their username, else (verified) e-mail, else id. */
export const nameOf = (caller: Caller) => caller.preferred_username ?? trustedEmail(caller) ?? caller.user_id

/** The KB's name for e-mails; null when the KB is absent. */
export async function kbName(db: SqlRunner, kbId: string): Promise<string | null> {
  const rows = await db.query<{ kb_name: string }>('SELECT kb_name FROM knowledge_bases WHERE kb_id = $1', [kbId])
  return rows.length > 0 ? rows[0].kb_name : null
}

export async function memberRole(db: SqlRunner, kbId: string, userId: string): Promise<Role | null> {
  const rows = await db.query<{ role: Role }>('SELECT role FROM kb_members WHERE kb_id = $1 AND user_id = $2', [kbId, userId])
  return rows[0]?.role ?? null
}

/**
 * With kb_authz_enabled false nobody's role is checked, so a membership or ownership written then would stand
 * unreviewed once checks are switched on: such writes need a super-admin meanwhile (leaving a KB excepted).
 * Returns whether role checks are on.
 */
export async function membershipWriter(env: Pick<MembershipEnv, 'config'>, caller: Caller): Promise<boolean> {
  const enabled = (await env.config.get()).kb_authz_enabled
  if (!enabled && !caller.is_super_admin) {
    throw forbidden('Requires super-admin while kb_authz_enabled is false', 'AUTHZ_SUPER_ADMIN_REQUIRED')
  }
  return enabled
}

/** Locks the KB row for the membership change that follows in the same transaction; 404 when it is gone. */
export async function lockKb(db: SqlRunner, kbId: string): Promise<{ status: string }> {
  const rows = await db.query<{ status: string }>('SELECT status FROM knowledge_bases WHERE kb_id = $1 FOR UPDATE', [kbId])
  if (rows.length === 0) throw kbNotFound(kbId)
  return rows[0]
}

/**
 * lockKb, then the route's check once more against what the lock now holds still: the cached check before the
 * transaction may have raced a concurrent demotion, removal, transfer or freeze. `checked` false (role checks
 * off, the caller is a super-admin by membershipWriter) only locks.
 */
export async function lockForWrite(
  db: SqlRunner, caller: Caller, kbId: string, min: Role, opts: { checked: boolean; allowFrozen?: boolean },
): Promise<void> {
  const { status } = await lockKb(db, kbId)
  if (!opts.checked) return
  if (!caller.is_super_admin) {
    const role = await memberRole(db, kbId, caller.user_id)
    // Visibility never grants more than viewer, below every membership write.
    if (role === null) throw noAccess(kbId)
    if (!atLeast(role, min)) throw roleTooLow(min, kbId)
  }
  if (status === 'frozen' && !(opts.allowFrozen && caller.is_super_admin)) throw kbFrozen(kbId)
}

/** Locks the KBs every one of these users is a member of, in one statement and kb_id order (no deadlock). */
export async function lockMemberKbs(db: SqlRunner, userIds: readonly string[]): Promise<void> {
  await db.query(
    `SELECT kb_id FROM knowledge_bases WHERE kb_id IN (SELECT kb_id FROM kb_members WHERE user_id = ANY($1::text[]))
     ORDER BY kb_id FOR UPDATE`, [userIds as string[]])
}

/** After a committed change and before the response: every process drops what it cached about these. */
export async function invalidate(env: Pick<MembershipEnv, 'roles'>, change: { users?: Iterable<string>; kbs?: Iterable<string> }): Promise<void> {
  await Promise.all([
    ...[...new Set(change.users ?? [])].map((u) => env.roles.invalidateUser(u)),
    ...[...new Set(change.kbs ?? [])].map((k) => env.roles.invalidateKb(k)),
  ])
}
