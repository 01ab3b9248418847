// Membership of the access-controlled edition (spec 2.3, 4.4): members and pending invites of a KB, granting a
// role to an e-mail the user directory knows or inviting one it does not, role changes, removal and
// self-removal (with succession when the owner goes), invite revocation. createMembership also wires the other
// membership parts: invite activation and profile observation at each authenticated request, ownership
// transfer, and the user routes.
import { randomUUID } from 'node:crypto'
import type { SqlRunner } from '../../adapters/ports.ts'
import { isUniqueViolation } from '../../adapters/metadata/common.ts'
import { clip, conflict, forbidden } from '../../kernel/errors.ts'
import type { PluginContext } from '../../kernel/plugin.ts'
import { ErrorResponse, KbIdParam, ValidationErrorResponse } from '../../kernel/schemas.ts'
import { createUserDirectory } from './directory.ts'
import { expireDue, hasPendingInvite, insertInvite, pendingInvites, revokeInvite, createInviteActivation } from './invites.ts'
import { createMailer, grantMessage, inviteMessage } from './mail.ts'
import {
  callerOf, invalidate, kbName, lockForWrite, lockKb, memberNotFound, memberRole, membershipWriter, nameOf, type MembershipEnv,
} from './member-env.ts'
import {
  AddMemberBody, AddMemberResponse, InviteParams, InviteRevokedResponse, MemberParams, MemberRemovedResponse, MembersResponse,
  MemberUpdatedResponse, PatchMemberBody,
} from './member-schemas.ts'
import { registerOwnershipRoutes, succeed } from './ownership.ts'
import { createProfileObserver, upsertProfile } from './profiles.ts'
import type { Caller, Role } from './types.ts'
import { registerUserRoutes } from './users.ts'

/** What createMembership is given; it adds the user directory and the mailer itself. */
export type MembershipDeps = Omit<MembershipEnv, 'directory' | 'mailer'>

export interface Membership {
  /** Runs for every authenticated request before its access check: profile observation, invite activation. Cheap. */
  onAuthenticated(caller: Caller): Promise<void>
  /** Members, invites, transfer-owner, users (lookup, deprovision, quota). */
  registerRoutes(ctx: PluginContext): void
  close(): Promise<void>
}

const alreadyMember = (kbId: string) => conflict(`User is already a member of KB: ${clip(kbId)}`, 'ALREADY_MEMBER')
const alreadyInvited = (email: string, kbId: string) => conflict(`An invite is already pending for ${clip(email)} on KB: ${clip(kbId)}`, 'INVITE_PENDING')
const ownerRoleFixed = () => forbidden("Cannot change the owner's role", 'OWNER_ROLE_FIXED')
/** Appended to the description of every membership write. */
const WHILE_OFF = ' While kb_authz_enabled is false: super-admin only.'
const ownerRemovalNeedsSuperAdmin = (kbId: string) => forbidden(`Only a super-admin can remove the owner of KB: ${clip(kbId)}`, 'OWNER_REMOVAL_FORBIDDEN')

interface MemberRow {
  user_id: string
  role: Role
  granted_by: string | null
  granted_at: string
  email: string | null
  display_name: string | null
}

async function listMembers(db: SqlRunner, kbId: string): Promise<MemberRow[]> {
  return db.query<MemberRow>(
    `SELECT m.user_id, m.role, m.granted_by, m.granted_at, p.email, p.display_name
     FROM kb_members m LEFT JOIN user_profiles p ON p.user_id = m.user_id
     WHERE m.kb_id = $1 ORDER BY m.granted_at, m.user_id`,
    [kbId],
  )
}

/** A member whose cached profile has this e-mail: known even when the directory is unreachable. */
async function memberWithEmail(db: SqlRunner, kbId: string, email: string): Promise<boolean> {
  const rows = await db.query(
    'SELECT 1 FROM kb_members m JOIN user_profiles p ON p.user_id = m.user_id WHERE m.kb_id = $1 AND lower(p.email) = $2', [kbId, email])
  return rows.length > 0
}

export function createMembership(deps: MembershipDeps): Membership {
  const { sql, settings, log, bus } = deps
  const env: MembershipEnv = {
    ...deps,
    directory: createUserDirectory({
      issuerUrl: settings.oidc.issuer_url, adminUrl: settings.oidc.admin_url,
      clientId: settings.oidc.admin_client_id, clientSecret: settings.oidc.admin_client_secret, log,
    }),
    mailer: createMailer(settings.smtp, log),
  }
  const profiles = createProfileObserver(sql, log)
  const activation = createInviteActivation({ sql, bus, roles: deps.roles, log, ttlMs: settings.authz.role_cache_ttl_seconds * 1000 })
  // A user whose roles changed may have been deprovisioned (profile deleted): observe them again.
  const unsubscribe = bus.subscribe((event) => {
    if (event.type === 'user') profiles.forget(event.user_id)
    else if (event.type === 'all') profiles.clear()
  })

  /** Lapsed invites marked expired, and every process told (they drop the e-mails). */
  async function expireInvites(): Promise<void> {
    if (await expireDue(sql)) await bus.publish({ type: 'invites' })
  }

  function registerMemberRoutes(ctx: PluginContext): void {
    const tags = ['members']
    const admin = { level: 'admin' as const, kb: { from: 'params' as const, name: 'kb_id' } }
    const errors = {
      403: { description: 'No access, role too low, or KB frozen', schema: ErrorResponse },
      404: { description: 'KB, member or invite not found', schema: ErrorResponse },
    }

    ctx.route({
      method: 'GET', path: '/api/kb/{kb_id}/members', summary: 'Members and pending invites of a knowledge base', tags,
      params: KbIdParam, access: admin,
      responses: { 200: { description: 'Members and pending invites', schema: MembersResponse }, ...errors },
      handler: async (req) => {
        const { kb_id } = req.params
        await expireInvites()
        const [members, pending_invites] = await Promise.all([listMembers(sql, kb_id), pendingInvites(sql, kb_id)])
        return { members, pending_invites }
      },
    })

    ctx.route({
      method: 'POST', path: '/api/kb/{kb_id}/members', summary: 'Grant a role to an e-mail, or invite it', tags, status: 201,
      description: 'When the identity provider knows the e-mail the user becomes a member at once (status granted); otherwise a '
        + 'pending invite is created (status invited), accepted at their first request. Both send an e-mail.' + WHILE_OFF,
      params: KbIdParam, body: AddMemberBody, access: admin,
      responses: {
        201: { description: 'Granted or invited', schema: AddMemberResponse }, ...errors,
        409: { description: 'Already a member, or an invite is pending', schema: ErrorResponse },
        422: { description: 'Validation error', schema: ValidationErrorResponse },
      },
      handler: async (req) => {
        const caller = callerOf(req)
        const { kb_id } = req.params
        const { role } = req.body
        const email = req.body.email.trim().toLowerCase()
        const checked = await membershipWriter(env, caller)
        await expireInvites()
        // Checked before asking the directory, and again under the KB lock below (a concurrent POST).
        if (await hasPendingInvite(sql, kb_id, email)) throw alreadyInvited(email, kb_id)
        if (await memberWithEmail(sql, kb_id, email)) throw alreadyMember(kb_id)
        // Outside the transaction: a slow directory must not hold the KB row (or, embedded, the whole store).
        const user = await env.directory.lookupByEmail(email)
        const done = await sql.transaction(async (tx) => {
          await lockForWrite(tx, caller, kb_id, 'admin', { checked })
          if (await hasPendingInvite(tx, kb_id, email)) throw alreadyInvited(email, kb_id)
          const name = (await kbName(tx, kb_id)) ?? kb_id
          if (user) {
            if (await memberRole(tx, kb_id, user.user_id)) throw alreadyMember(kb_id)
            await tx.query('INSERT INTO kb_members (kb_id, user_id, role, granted_by) VALUES ($1, $2, $3, $4)', [kb_id, user.user_id, role, caller.user_id])
            await upsertProfile(tx, user)
            return { kind: 'granted' as const, name }
          }
          const inviteId = randomUUID()
          try {
            const expiresAt = await insertInvite(tx, { inviteId, kbId: kb_id, email, role, grantedBy: caller.user_id, expiryDays: settings.authz.invite_expiry_days })
            return { kind: 'invited' as const, name, inviteId, expiresAt }
          } catch (err) {
            throw isUniqueViolation(err) ? alreadyInvited(email, kb_id) : err
          }
        })
        if (done.kind === 'granted') {
          await invalidate(env, { users: [user!.user_id], kbs: [kb_id] })
          env.mailer.send(grantMessage({ to: email, kbId: kb_id, kbName: done.name, role, grantedBy: nameOf(caller) }))
          log.info({ kb_id, user_id: user!.user_id, role, by: caller.user_id }, 'role granted')
          return { status: 'granted' as const, user_id: user!.user_id, role }
        }
        await bus.publish({ type: 'invites' })
        env.mailer.send(inviteMessage({ to: email, kbId: kb_id, kbName: done.name, role, invitedBy: nameOf(caller), expiresAt: done.expiresAt }))
        log.info({ kb_id, invite_id: done.inviteId, role, by: caller.user_id }, 'invite created')
        return { status: 'invited' as const, invite_id: done.inviteId }
      },
    })

    ctx.route({
      method: 'PATCH', path: '/api/kb/{kb_id}/members/{user_id}', summary: "Change a member's role", tags,
      description: "The owner's role cannot be changed here (403): ownership moves by transfer-owner." + WHILE_OFF,
      params: MemberParams, body: PatchMemberBody, access: admin,
      responses: { 200: { description: 'Updated', schema: MemberUpdatedResponse }, ...errors, 422: { description: 'Validation error', schema: ValidationErrorResponse } },
      handler: async (req) => {
        const caller = callerOf(req)
        const { kb_id, user_id } = req.params
        const { role } = req.body
        const checked = await membershipWriter(env, caller)
        const changed = await sql.transaction(async (tx) => {
          await lockForWrite(tx, caller, kb_id, 'admin', { checked })
          const current = await memberRole(tx, kb_id, user_id)
          if (!current) throw memberNotFound(user_id)
          if (current === 'owner') throw ownerRoleFixed()
          if (current === role) return null
          await tx.query('UPDATE kb_members SET role = $3 WHERE kb_id = $1 AND user_id = $2', [kb_id, user_id, role])
          const rows = await tx.query<{ email: string | null }>('SELECT email FROM user_profiles WHERE user_id = $1', [user_id])
          return { email: rows[0]?.email ?? null, name: (await kbName(tx, kb_id)) ?? kb_id }
        })
        if (changed) {
          await invalidate(env, { users: [user_id], kbs: [kb_id] })
          if (changed.email) env.mailer.send(grantMessage({ to: changed.email, kbId: kb_id, kbName: changed.name, role, grantedBy: nameOf(caller) }))
          log.info({ kb_id, user_id, role, by: caller.user_id }, 'member role changed')
        }
        return { kb_id, user_id, role, status: 'updated' as const }
      },
    })

    ctx.route({
      method: 'DELETE', path: '/api/kb/{kb_id}/members/{user_id}', summary: 'Remove a member (or yourself)', tags,
      description: 'Removing yourself is always allowed; removing someone else needs admin; removing the owner needs a '
        + 'super-admin. When the owner goes, the oldest admin becomes owner, or with no admin the KB is frozen. While kb_authz_enabled is false, removing someone else needs a super-admin.',
      params: MemberParams,
      // Self-removal needs no role, so the rules are applied in the handler.
      access: { level: 'authenticated', kb: { from: 'params', name: 'kb_id' } },
      responses: { 200: { description: 'Removed', schema: MemberRemovedResponse }, ...errors },
      handler: async (req) => {
        const caller = callerOf(req)
        const { kb_id, user_id } = req.params
        const self = user_id === caller.user_id
        // Leaving passes on a frozen KB (a viewer-level act), and needs no super-admin while checks are off.
        const checked = self || (await membershipWriter(env, caller))
        await deps.access.require(caller, kb_id, self ? 'viewer' : 'admin')
        const result = await sql.transaction(async (tx) => {
          if (self) await lockKb(tx, kb_id)
          else await lockForWrite(tx, caller, kb_id, 'admin', { checked })
          const role = await memberRole(tx, kb_id, user_id)
          if (!role) throw memberNotFound(user_id)
          if (role === 'owner' && !self && !caller.is_super_admin) throw ownerRemovalNeedsSuperAdmin(kb_id)
          await tx.query('DELETE FROM kb_members WHERE kb_id = $1 AND user_id = $2', [kb_id, user_id])
          return role === 'owner' ? succeed(tx, kb_id) : null
        })
        const promoted = result && 'owner' in result ? [result.owner] : []
        await invalidate(env, { users: [user_id, ...promoted], kbs: [kb_id] })
        log.info({ kb_id, user_id, by: caller.user_id, succession: result }, 'member removed')
        return { kb_id, user_id, status: 'removed' as const }
      },
    })

    ctx.route({
      method: 'DELETE', path: '/api/kb/{kb_id}/invites/{invite_id}', summary: 'Revoke a pending invite', tags, description: WHILE_OFF.trim(),
      params: InviteParams, access: admin,
      responses: { 200: { description: 'Revoked', schema: InviteRevokedResponse }, ...errors },
      handler: async (req) => {
        const caller = callerOf(req)
        const { kb_id, invite_id } = req.params
        const checked = await membershipWriter(env, caller)
        await expireInvites()
        await sql.transaction(async (tx) => {
          await lockForWrite(tx, caller, kb_id, 'admin', { checked })
          await revokeInvite(tx, kb_id, invite_id)
        })
        await bus.publish({ type: 'invites' })
        return { invite_id, status: 'revoked' as const }
      },
    })
  }

  return {
    async onAuthenticated(caller) {
      await profiles.observe(caller)
      await activation.activate(caller)
    },
    registerRoutes(ctx) {
      registerMemberRoutes(ctx)
      registerOwnershipRoutes(ctx, env)
      registerUserRoutes(ctx, env, profiles)
    },
    async close() {
      unsubscribe()
      activation.close()
      await env.mailer.close()
    },
  }
}
