// Connector secrets (notes.md "Connectors (decisions)"): a web auth_headers value or auth_basic.password is
// either `env:NAME` (read at sync time) or a literal, stored AES-256-GCM-encrypted under the key in env
// CONNECTOR_SECRET_KEY. Responses show every such value as MASK; a PATCH that sends MASK back keeps the
// stored value. Decrypted values live only in the sync's memory: never in a response, a log line or an error.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto'
import { invalid } from '../../kernel/errors.ts'

export const MASK = '********'
const ENC_PREFIX = 'enc:v1:'
const ENV_PREFIX = 'env:'
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/**
 * The one place this plugin reads the environment (house style keeps process.env in kernel/config; the
 * lead is asked to move CONNECTOR_SECRET_KEY there and to pass an env reader in: see the report).
 */
export function readEnv(name: string): string | undefined {
  const value = process.env[name]
  return value === undefined || value === '' ? undefined : value
}

/** Any string works as the key: it is stretched to 32 bytes, so operators need not produce raw key bytes. */
const keyBytes = (secret: string) => createHash('sha256').update(secret, 'utf8').digest()

export interface SecretBox {
  /** Whether CONNECTOR_SECRET_KEY is set (literals can be stored). */
  readonly available: boolean
  seal(plain: string): string
  open(sealed: string): string
}

export function createSecretBox(secretKey: string | undefined): SecretBox {
  const key = secretKey ? keyBytes(secretKey) : null
  return {
    available: key !== null,
    seal(plain) {
      if (!key) throw new Error('CONNECTOR_SECRET_KEY is not set')
      const iv = randomBytes(12)
      const cipher = createCipheriv('aes-256-gcm', key, iv)
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()])
      return ENC_PREFIX + Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')
    },
    open(sealed) {
      if (!key) throw new Error('a stored connector secret cannot be read: CONNECTOR_SECRET_KEY is not set')
      const raw = Buffer.from(sealed.slice(ENC_PREFIX.length), 'base64')
      const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12))
      decipher.setAuthTag(raw.subarray(12, 28))
      try {
        return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8')
      } catch {
        throw new Error('a stored connector secret cannot be decrypted: CONNECTOR_SECRET_KEY changed since it was saved')
      }
    },
  }
}

export const isSealed = (value: string) => value.startsWith(ENC_PREFIX)

/**
 * The value to store for a secret the client sent: `env:NAME` as it is, a literal sealed, MASK replaced by
 * the stored value under the same name. `loc` names the field in the 422.
 */
export function storeSecret(box: SecretBox, sent: string, stored: string | undefined, loc: (string | number)[]): string {
  if (sent === MASK) {
    if (stored === undefined) throw invalid(loc, `'${MASK}' keeps a stored secret, but none is stored under this name`, 'secret_missing')
    return stored
  }
  if (sent.startsWith(ENV_PREFIX)) {
    if (!ENV_NAME.test(sent.slice(ENV_PREFIX.length))) throw invalid(loc, "'env:' must be followed by an environment variable name", 'value_error')
    return sent
  }
  if (!box.available) {
    throw invalid(loc, 'A literal secret needs CONNECTOR_SECRET_KEY set on the server to be stored encrypted; use env:NAME instead', 'secret_key_missing')
  }
  return box.seal(sent)
}

/** The value a request sends, for a stored secret; throws when it cannot be resolved (the sync fails with that). */
export function resolveSecret(box: SecretBox, stored: string, what: string): string {
  if (stored.startsWith(ENV_PREFIX)) {
    const value = readEnv(stored.slice(ENV_PREFIX.length))
    if (value === undefined) throw new Error(`${what}: environment variable ${stored.slice(ENV_PREFIX.length)} is not set`)
    return value
  }
  if (isSealed(stored)) return box.open(stored)
  return stored
}

export const isEnvName = (name: string) => ENV_NAME.test(name)
