// The operator console at /console: plain ES modules and one style sheet from plugins/console/assets, served by
// the service itself (no CDN, no build step), gzipped once at start. The console is a client of the public API
// only; what it needs besides (the edition, the sign-in endpoints, the connector config schemas) comes from
// /console/config.json and one generated asset. Every response carries a Content-Security-Policy that allows no
// inline script and no other origin, except, in the access-controlled edition, fetches to the issuer's token
// endpoint (the browser runs the authorization-code flow with PKCE itself).
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { extname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { gzipSync } from 'node:zlib'
import { serviceUnavailable } from '../../kernel/errors.ts'
import { definePlugin, rawReply, type Request } from '../../kernel/plugin.ts'
import { CONFIG_SCHEMAS, SOURCE_TYPES } from '../connectors/schemas.ts'

const ASSET_DIR = fileURLToPath(new URL('./assets/', import.meta.url))
const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.json': 'application/json',
  '.html': 'text/html; charset=utf-8',
}
/** The generated asset: each source type's config schema (plugins/connectors/schemas.ts), for the connector forms. */
export const CONNECTOR_SCHEMAS_ASSET = 'connector-schemas.json'
/** Discovery is read again after this long (the endpoints rarely move; the console reads them at each load). */
const DISCOVERY_TTL_MS = 3600_000
const DISCOVERY_TIMEOUT_MS = 5_000

interface Asset {
  type: string
  body: Buffer
  gzip: Buffer
  etag: string
}

const asset = (type: string, body: Buffer): Asset => ({
  type, body, gzip: gzipSync(body, { level: 9 }), etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
})

/** Every file of the assets folder (flat: the modules import each other as ./name.js) plus the generated one. */
export function loadAssets(): Map<string, Asset> {
  const out = new Map<string, Asset>()
  for (const name of readdirSync(ASSET_DIR)) {
    const type = TYPES[extname(name)]
    if (type) out.set(name, asset(type, readFileSync(join(ASSET_DIR, name))))
  }
  const schemas = Object.fromEntries(SOURCE_TYPES.map((t) => [t, JSON.parse(JSON.stringify(CONFIG_SCHEMAS[t]))]))
  out.set(CONNECTOR_SCHEMAS_ASSET, asset(TYPES['.json'], Buffer.from(JSON.stringify(schemas))))
  return out
}

export function contentSecurityPolicy(connectOrigins: readonly string[] = []): string {
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    `connect-src ${["'self'", ...connectOrigins].join(' ')}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "object-src 'none'",
  ].join('; ')
}

interface Discovery {
  authorization_endpoint: string
  token_endpoint: string
  end_session_endpoint: string | null
}

const httpUrl = (v: unknown): v is string => typeof v === 'string' && /^https?:\/\//i.test(v)
const originOf = (url: string) => new URL(url).origin

export default definePlugin({
  name: 'console',
  register(ctx) {
    const { settings } = ctx
    if (!settings.console.enabled) return
    const assets = loadAssets()
    const page = assets.get('index.html')
    if (!page) throw new Error(`console: ${ASSET_DIR}index.html is missing`)
    assets.delete('index.html')
    const issuer = settings.oidc.issuer_url.replace(/\/+$/, '')
    const tags = ['console']

    // [ENT] The issuer's endpoints, read by the service (the browser fetches only the token endpoint).
    let discovery: { at: number; value: Discovery } | null = null
    let inflight: Promise<Discovery> | null = null
    const discover = (): Promise<Discovery> => {
      if (discovery && Date.now() - discovery.at < DISCOVERY_TTL_MS) return Promise.resolve(discovery.value)
      inflight ??= (async () => {
        const url = `${issuer}/.well-known/openid-configuration`
        const res = await fetch(url, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(DISCOVERY_TIMEOUT_MS) })
        if (!res.ok) {
          await res.arrayBuffer().catch(() => undefined)
          throw new Error(`${url}: HTTP ${res.status}`)
        }
        const doc = (await res.json()) as Record<string, unknown>
        if (!httpUrl(doc.authorization_endpoint) || !httpUrl(doc.token_endpoint)) throw new Error(`${url} names no authorization or token endpoint`)
        const value = {
          authorization_endpoint: doc.authorization_endpoint,
          token_endpoint: doc.token_endpoint,
          end_session_endpoint: httpUrl(doc.end_session_endpoint) ? doc.end_session_endpoint : null,
        }
        discovery = { at: Date.now(), value }
        return value
      })().finally(() => (inflight = null))
      return inflight
    }

    /** connect-src: the issuer's origin, and its token endpoint's when discovery names another. */
    const policy = async (): Promise<string> => {
      if (!issuer) return contentSecurityPolicy()
      const origins = new Set([originOf(issuer)])
      try {
        origins.add(originOf((await discover()).token_endpoint))
      } catch {
        // config.json reports the issuer as unavailable; the page itself still loads.
      }
      return contentSecurityPolicy([...origins])
    }
    const baseHeaders = (csp: string): Record<string, string> => ({
      'content-security-policy': csp,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      'cross-origin-opener-policy': 'same-origin',
      'x-frame-options': 'DENY',
    })

    const send = async (req: Request, a: Asset, cache: string) => {
      const headers = { ...baseHeaders(await policy()), etag: a.etag, 'cache-control': cache, vary: 'accept-encoding' }
      if (req.headers['if-none-match'] === a.etag) return rawReply(304, '', a.type, headers)
      const gzip = /\bgzip\b/.test(req.headers['accept-encoding'] ?? '')
      return rawReply(200, gzip ? a.gzip : a.body, a.type, gzip ? { ...headers, 'content-encoding': 'gzip' } : headers)
    }

    ctx.route({
      method: 'GET', path: '/console', summary: 'Operator console', tags, access: { level: 'public' }, hidden: true,
      handler: (req) => send(req, page, 'no-cache'),
    })
    ctx.route({
      method: 'GET', path: '/console/assets/{file}', summary: 'Operator console assets', tags, access: { level: 'public' }, hidden: true,
      handler: async (req) => {
        const a = assets.get(req.params.file)
        if (!a) return rawReply(404, JSON.stringify({ detail: 'Not Found' }), 'application/json', baseHeaders(contentSecurityPolicy()))
        return send(req, a, 'no-cache')
      },
    })
    ctx.route({
      method: 'GET', path: '/console/config.json', summary: 'What the console needs to know about this service', tags, access: { level: 'public' }, hidden: true,
      handler: async () => {
        let oidc: Record<string, unknown> | null = null
        if (issuer) {
          let d: Discovery
          try {
            d = await discover()
          } catch (err) {
            ctx.log.warn({ err: (err as Error).message, issuer }, 'console: the identity provider could not be read')
            throw serviceUnavailable('Identity provider unavailable: its discovery document could not be read', err)
          }
          oidc = { issuer, client_id: settings.console.oidc_client_id, scope: settings.console.oidc_scope, ...d }
        }
        const body = JSON.stringify({ edition: issuer ? 'access-controlled' : 'base', oidc })
        return rawReply(200, body, 'application/json', { ...baseHeaders(await policy()), 'cache-control': 'no-store' })
      },
    })
  },
})
