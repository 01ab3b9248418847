// Authentication of the access-controlled edition (spec 5, notes.md "Access-controlled edition"): a bearer JWT
// from the issuer of `oidc.issuer_url`, checked against the keys its discovery document publishes, becomes
// the request's Caller. Roles are not decided here: they read the Caller this returns.
import { createLocalJWKSet, errors, jwtVerify, type JSONWebKeySet, type JWTPayload, type JWTVerifyGetKey } from 'jose'
import { AppError, serviceUnavailable } from '../../kernel/errors.ts'
import type { Logger } from '../../kernel/log.ts'
import type { Caller } from '../../kernel/plugin.ts'
import { discover, getJson } from './issuer.ts'

/** Asymmetric only: `none` and HS* would let anyone holding the public key (or nothing) mint tokens. */
export const ACCEPTED_ALGORITHMS = ['RS256', 'PS256', 'ES256'] as const
const CLOCK_TOLERANCE_SEC = 30
/**
 * At most one refresh forced by an unknown `kid` per this interval: a flood of tokens with made-up kids costs
 * the issuer one request, not one per token. A key rotated in just after such a refresh is accepted once the
 * interval has passed (or the cache lifetime ends), as with jose's own remote key set.
 */
export const FORCED_REFRESH_INTERVAL_MS = 30_000
/** Verified tokens kept (the oldest leaves first): a bound on memory, far above the tokens one process sees live. */
export const TOKEN_CACHE_SIZE = 10_000

export interface AuthnOptions {
  issuerUrl: string
  /** Empty: aud is not checked (spec 5.3). */
  audience: string
  jwksCacheTtlSeconds: number
  superAdminGroup: string
  log: Logger
}

export interface Authenticator {
  /** The Caller of an `Authorization` header value; a 401 AppError for anything else. */
  authenticate(authorization: string | undefined): Promise<Caller>
}

/** RFC 6750 3: no error code when the request carried no bearer credentials at all. */
const CHALLENGE = 'Bearer realm="quarry"'

const unauthorized = (detail: string, code = 'AUTHN_INVALID_TOKEN') =>
  new AppError(code, 401, detail, {
    headers: { 'www-authenticate': code === 'AUTHN_MISSING_TOKEN' ? CHALLENGE : `${CHALLENGE}, error="invalid_token", error_description="${detail}"` },
  })

/** Fixed texts (no token content is echoed): each names what the client must fix. */
function describe(err: unknown): string {
  if (err instanceof errors.JWTExpired) return 'Token has expired'
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'nbf') return 'Token is not yet valid'
    if (err.claim === 'iss') return 'Token issuer is not accepted'
    if (err.claim === 'aud') return 'Token audience is not accepted'
    if (err.claim === 'sub') return 'Token has no subject'
    if (err.claim === 'exp') return 'Token has no expiry'
    return `Token claim '${err.claim}' is invalid`
  }
  if (err instanceof errors.JOSEAlgNotAllowed) return 'Token signing algorithm is not accepted'
  if (err instanceof errors.JWSSignatureVerificationFailed) return 'Token signature is invalid'
  if (err instanceof errors.JWKSNoMatchingKey) return 'Token signing key is unknown'
  if (err instanceof errors.JWKSMultipleMatchingKeys) return 'Token does not name its signing key'
  return 'Malformed token'
}

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string' && x !== '') : [])
const optionalString = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null)
/** A group as configured and compared: Keycloak's full path `/team` is the group `team`. */
export const groupName = (g: string): string => (g.startsWith('/') ? g.slice(1) : g)

/**
 * The caller of verified claims. Groups come from `groups` (Keycloak writes full paths, `/team`, when its
 * mapper says so) and from `realm_access.roles`, so a super-admin may be configured as either.
 */
export function callerOf(claims: JWTPayload, superAdminGroup: string): Caller {
  const groups = new Set<string>()
  for (const g of strings(claims.groups)) groups.add(groupName(g))
  for (const r of strings((claims.realm_access as { roles?: unknown } | undefined)?.roles)) groups.add(r)
  return {
    user_id: claims.sub as string,
    email: optionalString(claims.email),
    preferred_username: optionalString(claims.preferred_username),
    groups: [...groups],
    is_super_admin: superAdminGroup !== '' && groups.has(superAdminGroup),
    claims,
  }
}

/**
 * The issuer's signing keys: read from `jwks_uri` of its discovery document on first use, kept for the cache
 * lifetime, and kept past it while the issuer cannot be reached (a short outage of the identity provider
 * must not turn every valid token into a 401). Concurrent refreshes share one request.
 */
class KeyCache {
  private keySet: JWTVerifyGetKey | null = null
  private jwksUri: string | null = null
  private expiresAt = 0
  private lastForced = -Infinity
  private inflight: Promise<void> | null = null
  /** Changes with every key set read, so a token verified against an older set is verified again. */
  epoch = 0

  constructor(private readonly opts: AuthnOptions) {}

  /** The keys verified under `epoch` are still the ones in use. */
  stillCurrent(epoch: number): boolean {
    return epoch === this.epoch && this.keySet !== null && Date.now() < this.expiresAt
  }

  async current(): Promise<JWTVerifyGetKey> {
    if (!this.keySet || Date.now() >= this.expiresAt) await this.refresh()
    return this.keySet!
  }

  /** Refreshes for an unknown kid unless one was forced recently; says whether the keys were re-read. */
  async refreshForUnknownKey(): Promise<boolean> {
    if (this.inflight) return this.inflight.then(() => true, () => false)
    const now = Date.now()
    if (now - this.lastForced < FORCED_REFRESH_INTERVAL_MS) return false
    this.lastForced = now
    try {
      await this.refresh()
      return true
    } catch {
      return false
    }
  }

  private refresh(): Promise<void> {
    this.inflight ??= this.load().finally(() => (this.inflight = null))
    return this.inflight
  }

  private async load(): Promise<void> {
    try {
      this.jwksUri ??= await discover(this.opts.issuerUrl, 'jwks_uri')
      const jwks = await getJson<JSONWebKeySet>(this.jwksUri, 'signing keys')
      if (!Array.isArray(jwks.keys)) throw new Error(`${this.jwksUri} has no "keys" array`)
      this.keySet = createLocalJWKSet(jwks)
      this.epoch++
      this.expiresAt = Date.now() + this.opts.jwksCacheTtlSeconds * 1000
    } catch (err) {
      // The next attempt reads the discovery document again, in case the issuer moved its keys.
      this.jwksUri = null
      this.opts.log.warn({ err, issuer: this.opts.issuerUrl }, 'identity provider keys could not be read')
      if (!this.keySet) throw serviceUnavailable('Identity provider unavailable: its signing keys could not be read', err)
      // Stale keys stay in use; the issuer is asked again after the forced-refresh interval, not on every request.
      this.expiresAt = Date.now() + FORCED_REFRESH_INTERVAL_MS
    }
  }
}

export function createAuthenticator(opts: AuthnOptions): Authenticator {
  const keys = new KeyCache(opts)
  // Keycloak's issuer has no trailing slash, other providers' do: a settings value written either way matches.
  const bare = opts.issuerUrl.replace(/\/+$/, '')
  const verifyOptions = {
    algorithms: [...ACCEPTED_ALGORITHMS],
    issuer: [bare, `${bare}/`],
    ...(opts.audience ? { audience: opts.audience } : {}),
    clockTolerance: CLOCK_TOLERANCE_SEC,
    requiredClaims: ['sub', 'exp'],
  }

  const verify = async (token: string): Promise<JWTPayload> => {
    try {
      return (await jwtVerify(token, await keys.current(), verifyOptions)).payload
    } catch (err) {
      // A kid we do not know is either a rotated-in key or a forgery: re-reading the keys tells them apart.
      if (err instanceof errors.JWKSNoMatchingKey && (await keys.refreshForUnknownKey())) {
        return (await jwtVerify(token, await keys.current(), verifyOptions)).payload
      }
      throw err
    }
  }

  // A verified token's Caller, until the token expires or the key set it was verified with is re-read (a retired
  // key then refuses it): the hot path of every request is a Map hit instead of a signature check.
  const verified = new Map<string, { caller: Caller; until: number; epoch: number }>()
  const remember = (token: string, caller: Caller, exp: number, epoch: number) => {
    if (verified.size >= TOKEN_CACHE_SIZE) verified.delete(verified.keys().next().value as string)
    verified.set(token, { caller: Object.freeze(caller), until: exp * 1000, epoch })
  }

  return {
    async authenticate(authorization) {
      // Another scheme (Basic, …) is no bearer credential at all; a Bearer header without exactly one token is a bad one.
      const [scheme, ...tokens] = (authorization ?? '').trim().split(/ +/)
      if (scheme.toLowerCase() !== 'bearer') throw unauthorized('Not authenticated', 'AUTHN_MISSING_TOKEN')
      if (tokens.length !== 1) throw unauthorized('Malformed token')
      const token = tokens[0]
      const hit = verified.get(token)
      if (hit) {
        if (Date.now() < hit.until && keys.stillCurrent(hit.epoch)) return hit.caller
        verified.delete(token)
      }
      let claims: JWTPayload
      const epoch = keys.epoch
      try {
        claims = await verify(token)
      } catch (err) {
        if (err instanceof AppError) throw err
        throw unauthorized(describe(err))
      }
      if (typeof claims.sub !== 'string' || claims.sub === '') throw unauthorized('Token has no subject')
      const caller = callerOf(claims, opts.superAdminGroup)
      // Only when the keys it was checked against are still the current ones (a refresh during the check: next time).
      if (keys.stillCurrent(epoch)) remember(token, caller, claims.exp as number, epoch)
      return caller
    },
  }
}
