// Connector secrets (notes.md "Connectors (decisions)"): a web auth_headers value or auth_basic.password is
// either `env:NAME` (read at sync time) or a literal, stored AES-256-GCM-encrypted under the key in env
// CONNECTOR_SECRET_KEY. Responses show every such value as MASK; a PATCH that sends MASK back keeps the
// stored value. Decrypted values live only in the sync's memory: never in a response, a log line or an error.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto'
import { SettingsSchema } from '../../kernel/config/schema.ts'
import { clip, invalid } from '../../kernel/errors.ts'

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

/**
 * Default of `connectors.secret_env_names`: the variables a connector may send to its source. CONNECTOR_* is
 * this project's convention; GITHUB_TOKEN and CONFLUENCE_* are the names the older service's docs and setup
 * scripts use, so those run unchanged. The list is a trade-off (docs/connectors.md, "Secrets"): a config names the
 * variable and chooses the host it is sent to, so every admitted name is readable by a KB admin's server.
 */
export const DEFAULT_SECRET_ENV_NAMES: readonly string[] = Object.freeze([
  ...(SettingsSchema.properties.connectors.properties.secret_env_names.default as string[]),
])

/**
 * Variables read by the service or by the clients it embeds: refused whatever the globs admit. The settings
 * schema's env mapping (S3_SECRET_KEY, POSTGRES_PASSWORD, REDIS_PASSWORD, HOSTED_API_KEY, RERANKER_API_KEY,
 * TRACING_SECRET_KEY, ...), the conventions of notes.md, and the prefixes the database (PG*), S3 (AWS_*) and
 * tracing (OTEL_*) clients read by themselves.
 */
const SERVICE_ENV_NAMES = ['CONNECTOR_SECRET_KEY', 'PORT', 'DATA_DIR', 'SETTINGS_PATH', 'MALLOC_ARENA_MAX', 'GLIBC_TUNABLES', 'NODE_OPTIONS']
const SERVICE_ENV_PREFIXES = ['PG', 'AWS_', 'OTEL_']

let serviceNames: Set<string> | null = null
function serviceEnvNames(): Set<string> {
  if (serviceNames) return serviceNames
  const names = new Set(SERVICE_ENV_NAMES)
  const walk = (schema: unknown) => {
    if (!schema || typeof schema !== 'object') return
    const s = schema as { env?: unknown; properties?: Record<string, unknown>; anyOf?: unknown[]; items?: unknown }
    if (typeof s.env === 'string') names.add(s.env)
    for (const child of Object.values(s.properties ?? {})) walk(child)
    for (const child of s.anyOf ?? []) walk(child)
    walk(s.items)
  }
  walk(SettingsSchema)
  return (serviceNames = names)
}

/** Whether the service (or a client it embeds) reads this variable itself. */
export const isServiceEnvName = (name: string) => serviceEnvNames().has(name) || SERVICE_ENV_PREFIXES.some((p) => name.startsWith(p))

/** `*` any run of characters, `?` one; case-sensitive, as environment names are. */
const globRegExp = (glob: string) => new RegExp(`^${glob.replace(/[*?]/g, (c) => (c === '*' ? '.*' : '.'))}$`)

/** Which environment variables connector configs may name, from `connectors.secret_env_names`. */
export interface CredentialPolicy {
  readonly globs: readonly string[]
  /** Why a connector may not read this variable, or null when it may. */
  problem(name: string): string | null
  /** A credential from the environment, for a source request; throws when the name is not allowed or unset. */
  read(name: string, what: string): string
}

export function createCredentialPolicy(globs: readonly string[] = DEFAULT_SECRET_ENV_NAMES): CredentialPolicy {
  const patterns = globs.map(globRegExp)
  const listed = globs.length === 0 ? 'none (connectors.secret_env_names is empty)' : clip(globs.join(', '), 300)
  const policy: CredentialPolicy = {
    globs,
    problem(name) {
      if (!ENV_NAME.test(name)) return 'Input should be the NAME of an environment variable'
      if (isServiceEnvName(name)) return `Environment variable ${clip(name, 100)} is read by the service itself and cannot be sent to a source`
      if (!patterns.some((re) => re.test(name))) {
        return `Connector credentials are read only from environment variables matching connectors.secret_env_names (${listed}): ${clip(name, 100)} is not one`
      }
      return null
    },
    read(name, what) {
      const problem = policy.problem(name)
      if (problem) throw new Error(`${what}: ${problem}`)
      const value = readEnv(name)
      if (value === undefined) throw new Error(`${what}: environment variable ${name} is not set`)
      return value
    },
  }
  return policy
}

/** Any string works as the key: it is stretched to 32 bytes, so operators need not produce raw key bytes. */
const keyBytes = (secret: string) => createHash('sha256').update(secret, 'utf8').digest()

export interface SecretBox {
  /** Whether CONNECTOR_SECRET_KEY is set (literals can be stored). */
  readonly available: boolean
  /** The environment variables `env:NAME` and auth_token_secret may name. */
  readonly credentials: CredentialPolicy
  seal(plain: string): string
  open(sealed: string): string
}

export function createSecretBox(secretKey: string | undefined, credentials: CredentialPolicy = createCredentialPolicy()): SecretBox {
  const key = secretKey ? keyBytes(secretKey) : null
  return {
    available: key !== null,
    credentials,
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
export function storeSecret(box: SecretBox, sent: string, stored: string | undefined, loc: (string | number)[], targetChanged = false): string {
  if (sent === MASK) {
    // The stored secret was given for the old target: kept, it would go to whatever host the config names now.
    if (targetChanged) throw invalid(loc, `'${MASK}' cannot keep the stored secret: re-enter the secret when the source changes (a seed URL's origin is new)`, 'secret_reentry_required')
    if (stored === undefined) throw invalid(loc, `'${MASK}' keeps a stored secret, but none is stored under this name`, 'secret_missing')
    return stored
  }
  if (sent.startsWith(ENV_PREFIX)) {
    const name = sent.slice(ENV_PREFIX.length)
    if (!ENV_NAME.test(name)) throw invalid(loc, "'env:' must be followed by an environment variable name", 'value_error')
    const problem = box.credentials.problem(name)
    if (problem) throw invalid(loc, problem, 'env_name_not_allowed')
    return sent
  }
  if (!box.available) {
    throw invalid(loc, 'A literal secret needs CONNECTOR_SECRET_KEY set on the server to be stored encrypted; use env:NAME instead', 'secret_key_missing')
  }
  return box.seal(sent)
}

/** The value a request sends, for a stored secret; throws when it cannot be resolved (the sync fails with that). */
export function resolveSecret(box: SecretBox, stored: string, what: string): string {
  // Checked again here: a config saved before the rule existed must not send a service secret either.
  if (stored.startsWith(ENV_PREFIX)) return box.credentials.read(stored.slice(ENV_PREFIX.length), what)
  if (isSealed(stored)) return box.open(stored)
  return stored
}

export const isEnvName = (name: string) => ENV_NAME.test(name)
