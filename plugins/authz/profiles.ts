// User profiles (spec 2.3): a display cache of e-mail and name, filled when a user is observed at invite,
// grant or login, plus the per-user KB cap. Not a source of truth: the identity provider is.
import type { SqlRunner } from '../../adapters/ports.ts'
import type { Logger } from '../../kernel/log.ts'
import type { Caller } from './types.ts'

export interface ProfileInput {
  user_id: string
  email: string | null
  display_name: string | null
  preferred_username?: string | null
}

/** Inserts or refreshes a profile; a field not known this time keeps its stored value, the cap is never touched. */
export async function upsertProfile(db: SqlRunner, p: ProfileInput): Promise<void> {
  await db.query(
    `INSERT INTO user_profiles (user_id, email, display_name, preferred_username) VALUES ($1, $2, $3, $4)
     ON CONFLICT (user_id) DO UPDATE SET
       email = COALESCE(EXCLUDED.email, user_profiles.email),
       display_name = COALESCE(EXCLUDED.display_name, user_profiles.display_name),
       preferred_username = COALESCE(EXCLUDED.preferred_username, user_profiles.preferred_username),
       updated_at = now()`,
    [p.user_id, p.email?.toLowerCase() ?? null, p.display_name, p.preferred_username ?? null],
  )
}

const claim = (caller: Caller, name: string): string | null => {
  const v = caller.claims[name]
  return typeof v === 'string' && v.trim() !== '' ? v.trim() : null
}

/**
 * The token's e-mail when it may name the user: not when the provider says it is unverified (anyone could
 * claim someone else's address, and members and users are matched by it). A token without the claim (e.g. a
 * Keycloak access token lacking it) is taken as before.
 */
export const trustedEmail = (caller: Caller): string | null => (caller.claims.email_verified === false ? null : caller.email)

/** The profile a token describes: display name from `name`, else the username. */
export const profileOfCaller = (caller: Caller): ProfileInput => ({
  user_id: caller.user_id,
  email: trustedEmail(caller),
  display_name: claim(caller, 'name') ?? caller.preferred_username,
  preferred_username: caller.preferred_username,
})

/** Bounded so a flood of distinct subjects cannot grow it without end; forgetting only costs one upsert. */
const MAX_OBSERVED = 100_000

export interface ProfileObserver {
  /** Upserts the caller's profile at their first request in this process; later requests do nothing. */
  observe(caller: Caller): Promise<void>
  /** The user's profile changed elsewhere (deleted at deprovisioning): observe them again at their next request. */
  forget(userId: string): void
  clear(): void
}

export function createProfileObserver(db: SqlRunner, log: Logger): ProfileObserver {
  const seen = new Set<string>()
  return {
    async observe(caller) {
      if (seen.has(caller.user_id)) return
      if (seen.size >= MAX_OBSERVED) seen.clear()
      seen.add(caller.user_id)
      try {
        await upsertProfile(db, profileOfCaller(caller))
      } catch (err) {
        // The display cache must not fail the request; the next request of this user tries again.
        seen.delete(caller.user_id)
        log.warn({ user_id: caller.user_id, err: (err as Error).message }, 'user profile not recorded')
      }
    },
    forget: (userId) => void seen.delete(userId),
    clear: () => seen.clear(),
  }
}
