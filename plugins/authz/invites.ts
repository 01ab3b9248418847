// Invites (spec 2.3, 3.4, 4.4): an e-mail the directory does not know gets a pending invite that expires after
// authz.invite_expiry_days and becomes a membership at the invited user's first authenticated request whose
// token e-mail matches. That check runs on every request, so it is a Set look-up: each process keeps the
// e-mails with a pending invite, reloaded after an 'invites' event (any process created, revoked, accepted or
// expired one) or after the role cache lifetime; a request whose e-mail is not in it sends no query.
import type { Sql, SqlRunner } from '../../adapters/ports.ts'
import { clip, notFound } from '../../kernel/errors.ts'
import { UUID_PATTERN } from '../../kernel/schemas.ts'
import type { Logger } from '../../kernel/log.ts'
import type { AuthzBus, Caller, Role, RoleStore } from './types.ts'
import { invalidate } from './member-env.ts'
import { trustedEmail } from './profiles.ts'

export interface InviteRow {
  invite_id: string
  kb_id: string
  email: string
  role: Exclude<Role, 'owner'>
  granted_by: string
  expires_at: string
  status: 'pending'
}

export const inviteNotFound = (inviteId: string) => notFound(`Invite not found: ${clip(inviteId)}`, 'INVITE_NOT_FOUND')

const UUID_RE = new RegExp(UUID_PATTERN)

/**
 * Pending invites past their expiry become 'expired' (no longer listed, revocable or accepted). Done on the way
 * into every read or write of invites rather than by a timer, so no process has to be running at the moment
 * one lapses. Returns whether any changed.
 */
export async function expireDue(db: SqlRunner): Promise<boolean> {
  const rows = await db.query(`UPDATE kb_invites SET status = 'expired' WHERE status = 'pending' AND expires_at <= now() RETURNING invite_id`)
  return rows.length > 0
}

export async function pendingInvites(db: SqlRunner, kbId: string): Promise<InviteRow[]> {
  return db.query<InviteRow>(
    `SELECT invite_id::text AS invite_id, kb_id, email, role, granted_by, expires_at, status FROM kb_invites
     WHERE kb_id = $1 AND status = 'pending' AND expires_at > now() ORDER BY created_at, invite_id`,
    [kbId],
  )
}

export async function hasPendingInvite(db: SqlRunner, kbId: string, email: string): Promise<boolean> {
  const rows = await db.query(`SELECT 1 FROM kb_invites WHERE kb_id = $1 AND email = $2 AND status = 'pending' AND expires_at > now()`, [kbId, email])
  return rows.length > 0
}

/** Throws the unique violation of kb_invites_one_pending when a pending invite for the e-mail exists. */
export async function insertInvite(db: SqlRunner, i: { inviteId: string; kbId: string; email: string; role: Role; grantedBy: string; expiryDays: number }): Promise<string> {
  const rows = await db.query<{ expires_at: string }>(
    `INSERT INTO kb_invites (invite_id, kb_id, email, role, granted_by, expires_at)
     VALUES ($1, $2, $3, $4, $5, now() + make_interval(days => $6::int)) RETURNING expires_at`,
    [i.inviteId, i.kbId, i.email, i.role, i.grantedBy, i.expiryDays],
  )
  return rows[0].expires_at
}

/** Pending -> revoked; 404 when the id names no pending, unexpired invite of this KB. */
export async function revokeInvite(db: SqlRunner, kbId: string, inviteId: string): Promise<void> {
  // Not a UUID: names no invite (and the uuid column would refuse it).
  if (!UUID_RE.test(inviteId)) throw inviteNotFound(inviteId)
  const rows = await db.query(
    `UPDATE kb_invites SET status = 'revoked' WHERE invite_id = $1 AND kb_id = $2 AND status = 'pending' AND expires_at > now() RETURNING invite_id`,
    [inviteId, kbId],
  )
  if (rows.length === 0) throw inviteNotFound(inviteId)
}

export interface InviteActivation {
  /** Turns the caller's pending invites into memberships. Cheap when they have none (no query). Never throws. */
  activate(caller: Caller): Promise<void>
  close(): void
}

export interface InviteActivationOptions {
  sql: Sql
  bus: AuthzBus
  roles: RoleStore
  log: Logger
  /** The pending-e-mail set is reloaded at least this often (authz.role_cache_ttl_seconds). */
  ttlMs: number
}

export function createInviteActivation(opts: InviteActivationOptions): InviteActivation {
  let emails: Set<string> | null = null
  let loadedAt = 0
  // Bumped by every 'invites' event: a load that started before one is used once but not kept.
  let generation = 0
  let loading: Promise<Set<string>> | null = null

  const unsubscribe = opts.bus.subscribe((event) => {
    if (event.type === 'invites' || event.type === 'all') {
      generation++
      emails = null
    }
  })

  async function load(): Promise<Set<string>> {
    const started = generation
    const rows = await opts.sql.query<{ email: string }>(`SELECT DISTINCT email FROM kb_invites WHERE status = 'pending' AND expires_at > now()`)
    const set = new Set(rows.map((r) => r.email))
    if (started === generation) {
      emails = set
      loadedAt = Date.now()
    }
    return set
  }

  function pendingEmails(): Set<string> | Promise<Set<string>> {
    if (emails && Date.now() - loadedAt < opts.ttlMs) return emails
    loading ??= load().finally(() => { loading = null })
    return loading
  }

  async function accept(caller: Caller, email: string): Promise<void> {
    const checked = emails
    const accepted = await opts.sql.transaction(async (tx) => {
      const invites = await tx.query<{ kb_id: string; role: Role; granted_by: string }>(
        `UPDATE kb_invites SET status = 'accepted', accepted_by = $2, accepted_at = now()
         WHERE email = $1 AND status = 'pending' AND expires_at > now() RETURNING kb_id, role, granted_by`,
        [email, caller.user_id],
      )
      // An existing membership keeps its role: the invite never lowers (or takes away) an owner's or anyone's.
      for (const i of invites) {
        await tx.query(
          'INSERT INTO kb_members (kb_id, user_id, role, granted_by) VALUES ($1, $2, $3, $4) ON CONFLICT (kb_id, user_id) DO NOTHING',
          [i.kb_id, caller.user_id, i.role, i.granted_by],
        )
      }
      return invites
    })
    if (accepted.length === 0) {
      // Nothing left to accept (lapsed, or the KB was deleted): stop querying for this e-mail here, and mark
      // lapsed invites so that every process drops it.
      // (Only from the set that was consulted: a reload since then may hold an invite made meanwhile.)
      if (emails === checked) checked?.delete(email)
      if (await expireDue(opts.sql)) await opts.bus.publish({ type: 'invites' })
      return
    }
    await invalidate(opts, { users: [caller.user_id], kbs: accepted.map((i) => i.kb_id) })
    await opts.bus.publish({ type: 'invites' })
    opts.log.info({ user_id: caller.user_id, kb_ids: accepted.map((i) => i.kb_id) }, 'invites accepted')
  }

  return {
    async activate(caller) {
      // A provider that says the address is unverified does not get to claim an invite sent to it.
      const email = trustedEmail(caller)?.toLowerCase()
      if (!email) return
      try {
        const pending = pendingEmails()
        if (!(pending instanceof Set ? pending : await pending).has(email)) return
        await accept(caller, email)
      } catch (err) {
        opts.log.warn({ user_id: caller.user_id, err: (err as Error).message }, 'pending invites not activated')
      }
    },
    close: unsubscribe,
  }
}
