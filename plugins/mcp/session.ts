// MCP session ids that any instance can check without shared session state: `<id>.<issued>.<mac>`, where id is
// 16 random bytes, issued the issue time (seconds, base 36) and mac an HMAC-SHA256 of both under a secret every
// instance shares (adapters SharedSecrets: Redis with the services, data_dir with the embedded engines). The
// server keeps nothing per session (every request is answered by a fresh server, and authorised by its own
// token), so a session is exactly a well-signed id that has not expired.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import type { SharedSecrets } from '../../adapters/ports.ts'

export const SECRET_NAME = 'mcp-session'
/** A session older than this is unknown (404): the client starts a new one, as the MCP spec has it. */
export const SESSION_MAX_AGE_SEC = 7 * 24 * 3600
/** Issue times this far ahead of our clock are accepted (instances' clocks differ a little). */
const CLOCK_SKEW_SEC = 300
/** A signature that fails is checked once more against the store at most this often (the secret may be new there). */
const REFRESH_INTERVAL_MS = 10_000

const FORMAT = /^([A-Za-z0-9_-]{22})\.([0-9a-z]{1,10})\.([A-Za-z0-9_-]{43})$/

export interface SessionIds {
  issue(): Promise<string>
  /** true for an id this service issued that has not expired. */
  verify(sessionId: string): Promise<boolean>
}

export function createSessionIds(secrets: SharedSecrets, now: () => number = Date.now): SessionIds {
  let lastRefresh = 0
  const mac = (key: Buffer, id: string, issued: string) => createHmac('sha256', key).update(`${id}.${issued}`).digest()

  return {
    async issue() {
      const id = randomBytes(16).toString('base64url')
      const issued = Math.floor(now() / 1000).toString(36)
      return `${id}.${issued}.${mac(await secrets.get(SECRET_NAME), id, issued).toString('base64url')}`
    },
    async verify(sessionId) {
      const m = FORMAT.exec(sessionId)
      if (!m) return false
      const [, id, issued, sig] = m
      const age = now() / 1000 - parseInt(issued, 36)
      if (age > SESSION_MAX_AGE_SEC || age < -CLOCK_SKEW_SEC) return false
      const given = Buffer.from(sig, 'base64url')
      const matches = (key: Buffer) => timingSafeEqual(mac(key, id, issued), given)
      if (matches(await secrets.get(SECRET_NAME))) return true
      // The shared secret may have been made again (a Redis that lost it): ids signed with the new one are valid.
      if (now() - lastRefresh < REFRESH_INTERVAL_MS) return false
      lastRefresh = now()
      return matches(await secrets.get(SECRET_NAME, { fresh: true }))
    },
  }
}
