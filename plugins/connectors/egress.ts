// Where connectors may connect (issue 37, OWASP API7 server-side request forgery). Every source request (web
// pages, robots.txt, Confluence pages and attachments, GitHub API calls) goes through the HTTP client here. It
// resolves a host name once, checks every address it got against the egress policy, and connects to exactly a
// checked address (the `lookup` hook of node:net), so a name that answers differently between the check and the
// connection (DNS rebinding) cannot swap it. Redirects are followed by hand, each hop checked like the first.
// A refused destination fails before any packet is sent: the refusal reads the same whether the host would
// have refused the connection, timed out or not existed, so `last_error` maps no network.
//
// Policy (settings `connectors.egress`, docs/connectors.md): public addresses pass; private ranges pass when
// `private_networks` allows them (by default in the base edition only) or `allow` names them (a CIDR, an
// address, or a host name); loopback, link-local, cloud metadata, unspecified, multicast, reserved addresses and
// the service's own listeners pass only when `allow` lists them by address (a host name never unlocks them).
import { lookup as dnsLookup } from 'node:dns/promises'
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage, type RequestOptions } from 'node:http'
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https'
import { isIP, type LookupFunction } from 'node:net'
import { networkInterfaces } from 'node:os'
import { pipeline, type Readable } from 'node:stream'
import { constants as zlib, createBrotliDecompress, createGunzip, createInflate } from 'node:zlib'
import { ConfigError } from '../../kernel/config/load.ts'
import { SyncFailure } from './engine.ts'

export type AddressClass =
  | 'public' | 'private' | 'loopback' | 'link-local' | 'cloud metadata' | 'unspecified' | 'multicast' | 'reserved' | 'own listener'

export interface ResolvedAddress {
  address: string
  family: number
}

/** Host name resolution: every address of a name (the system's getaddrinfo by default; tests inject their own). */
export type Resolve = (host: string) => Promise<ResolvedAddress[]>

/** A request to a destination the policy refuses: fails the page (or the sync) with this text, sent nowhere. */
export class DestinationRefused extends SyncFailure {
  constructor(readonly host: string, readonly addressClass: AddressClass) {
    super(`Destination not allowed: ${host} (${addressClass})`)
    this.name = 'DestinationRefused'
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Addresses: 16 bytes each, IPv4 as IPv4-mapped IPv6 (::ffff:a.b.c.d), so that both spellings are one address.

type Bytes = Uint8Array

/**
 * The 16 bytes of an IP address, or null when `text` is not one. Takes what net.isIP takes, with or without
 * brackets and a zone id (fe80::1%eth0). Other IPv4 spellings (2130706433, 0x7f.1, 0177.0.0.1) are not addresses
 * here: URLs reach this through the WHATWG URL parser, which has turned them into dotted decimal already.
 */
export function addressBytes(text: string): Bytes | null {
  let s = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text
  const zone = s.indexOf('%')
  if (zone !== -1) s = s.slice(0, zone)
  const version = isIP(s)
  const out = new Uint8Array(16)
  if (version === 4) {
    out[10] = 0xff
    out[11] = 0xff
    s.split('.').forEach((part, i) => void (out[12 + i] = Number(part)))
    return out
  }
  if (version !== 6) return null
  // The URL parser writes any IPv6 address in its canonical compressed form, embedded IPv4 as two hex groups.
  const canonical = new URL(`http://[${s}]/`).hostname.slice(1, -1)
  const [left, right] = canonical.split('::') as [string, string | undefined]
  const groups = (part: string | undefined) => (part ? part.split(':').map((g) => parseInt(g, 16)) : [])
  const head = groups(left)
  const tail = groups(right)
  const all = right === undefined ? head : [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail]
  all.forEach((g, i) => {
    out[i * 2] = g >> 8
    out[i * 2 + 1] = g & 0xff
  })
  return out
}

const isMapped = (b: Bytes) => b.subarray(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff

/** An address as it is written: dotted decimal for IPv4 (and IPv4-mapped IPv6), else canonical IPv6. */
export function formatAddress(b: Bytes): string {
  if (isMapped(b)) return [...b.subarray(12)].join('.')
  const groups: string[] = []
  for (let i = 0; i < 16; i += 2) groups.push(((b[i] << 8) | b[i + 1]).toString(16))
  return new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1)
}

interface Net {
  bytes: Bytes
  bits: number
}

function inNet(b: Bytes, net: Net): boolean {
  const whole = net.bits >> 3
  for (let i = 0; i < whole; i++) if (b[i] !== net.bytes[i]) return false
  const rest = net.bits & 7
  if (rest === 0) return true
  const mask = (0xff << (8 - rest)) & 0xff
  return (b[whole] & mask) === (net.bytes[whole] & mask)
}

/** `10.0.0.0/8`, `fc00::/7`, or one address; an IPv4 prefix counts from bit 96 of its mapped form. */
function parseNet(text: string): Net | string {
  const slash = text.indexOf('/')
  const addr = slash === -1 ? text : text.slice(0, slash)
  const bytes = addressBytes(addr)
  if (!bytes || addr.includes('%')) return `'${text}' is not an IP address or CIDR`
  const v4 = isIP(addr.replace(/^\[|\]$/g, '')) === 4
  const max = v4 ? 32 : 128
  let bits = max
  if (slash !== -1) {
    const p = text.slice(slash + 1)
    if (!/^\d{1,3}$/.test(p) || Number(p) > max) return `'${text}': the prefix length must be 0..${max}`
    bits = Number(p)
  }
  const net = { bytes, bits: v4 ? bits + 96 : bits }
  const base = new Uint8Array(16)
  base.set(bytes)
  for (let i = net.bits; i < 128; i++) base[i >> 3] &= ~(0x80 >> (i & 7))
  if (!base.every((x, i) => x === bytes[i])) return `'${text}' has bits set after its prefix: write ${formatAddress(base)}/${bits}`
  return net
}

const net = (text: string): Net => parseNet(text) as Net

/** The special ranges, most specific first (RFC 6890 and the cloud providers' metadata addresses). */
const RANGES: [Net, AddressClass][] = ([
  ['0.0.0.0/32', 'unspecified'],
  ['0.0.0.0/8', 'reserved'],
  ['127.0.0.0/8', 'loopback'],
  ['169.254.169.254/32', 'cloud metadata'], // AWS, GCP, Azure, OCI, DigitalOcean, OpenStack
  ['169.254.170.2/32', 'cloud metadata'], // AWS ECS task metadata
  ['169.254.0.0/16', 'link-local'],
  ['100.100.100.200/32', 'cloud metadata'], // Alibaba Cloud
  ['10.0.0.0/8', 'private'],
  ['172.16.0.0/12', 'private'],
  ['192.168.0.0/16', 'private'],
  ['100.64.0.0/10', 'private'], // carrier-grade NAT, used inside clouds and tailnets
  ['192.0.0.0/24', 'reserved'],
  ['192.0.2.0/24', 'reserved'],
  ['198.18.0.0/15', 'reserved'],
  ['198.51.100.0/24', 'reserved'],
  ['203.0.113.0/24', 'reserved'],
  ['192.88.99.0/24', 'reserved'],
  ['224.0.0.0/4', 'multicast'],
  ['240.0.0.0/4', 'reserved'], // and 255.255.255.255
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['fd00:ec2::254/128', 'cloud metadata'], // AWS over IPv6
  ['fe80::/10', 'link-local'],
  ['fec0::/10', 'private'], // site-local, deprecated
  ['fc00::/7', 'private'],
  ['ff00::/8', 'multicast'],
  ['64:ff9b:1::/48', 'private'], // local-use NAT64
  ['100::/64', 'reserved'],
  ['2001::/32', 'reserved'], // Teredo
  ['2001:db8::/32', 'reserved'],
] as const).map(([cidr, cls]) => [net(cidr), cls])

/**
 * IPv6 forms that carry an IPv4 address reach (or are translated to) that address: IPv4-compatible (::a.b.c.d),
 * NAT64 (64:ff9b::a.b.c.d) and 6to4 (2002:aabb:ccdd::). They are classed as the IPv4 address they carry.
 */
function embeddedV4(b: Bytes): Bytes | null {
  const mapped = (v4: Bytes) => {
    const out = new Uint8Array(16)
    out[10] = 0xff
    out[11] = 0xff
    out.set(v4, 12)
    return out
  }
  if (b.subarray(0, 12).every((x) => x === 0)) return mapped(b.subarray(12))
  if (inNet(b, NAT64)) return mapped(b.subarray(12))
  if (b[0] === 0x20 && b[1] === 0x02) return mapped(b.subarray(2, 6))
  return null
}
const NAT64 = net('64:ff9b::/96')

export function classify(b: Bytes): AddressClass {
  for (const [range, cls] of RANGES) if (inNet(b, range)) return cls
  if (!isMapped(b)) {
    const v4 = embeddedV4(b)
    if (v4) return classify(v4)
  }
  return 'public'
}

// ---------------------------------------------------------------------------------------------------------------
// The allow-list: `10.0.0.0/8`, `10.1.2.3`, `[fd00::1]:8443`, `wiki.corp.example`, `*.corp.example:443`.

export type AllowEntry =
  | { kind: 'net'; net: Net; port: number | null; text: string }
  | { kind: 'name'; name: string; wildcard: boolean; port: number | null; text: string }

const LABEL = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/

function parsePort(p: string, text: string): number | string {
  if (!/^\d{1,5}$/.test(p) || Number(p) < 1 || Number(p) > 65535) return `'${text}': the port must be 1..65535`
  return Number(p)
}

/** One `connectors.egress.allow` entry, or why it is not one. */
export function parseAllowEntry(raw: string): AllowEntry | string {
  const text = raw.trim()
  if (text === '') return 'an entry is empty'
  const bracketed = /^\[([^\]]+)\](?::(.*))?$/.exec(text)
  if (bracketed) {
    const n = parseNet(bracketed[1])
    if (typeof n === 'string' || bracketed[1].includes('/')) return `'${text}': brackets hold one IPv6 address`
    if (isIP(bracketed[1]) !== 6) return `'${text}': brackets hold one IPv6 address`
    const port = bracketed[2] === undefined ? null : parsePort(bracketed[2], text)
    return typeof port === 'string' ? port : { kind: 'net', net: n, port, text }
  }
  if (text.includes('/') || isIP(text) !== 0) {
    const n = parseNet(text)
    return typeof n === 'string' ? n : { kind: 'net', net: n, port: null, text }
  }
  const colon = text.lastIndexOf(':')
  if (text.indexOf(':') !== colon) return `'${text}' is not an IP address, CIDR or host name (an IPv6 address with a port is written [::1]:8080)`
  const host = colon === -1 ? text : text.slice(0, colon)
  const port = colon === -1 ? null : parsePort(text.slice(colon + 1), text)
  if (typeof port === 'string') return port
  if (isIP(host) === 4) return { kind: 'net', net: net(host), port, text }
  const wildcard = host.startsWith('*.')
  const name = (wildcard ? host.slice(2) : host).toLowerCase().replace(/\.$/, '')
  let parsed: string
  try {
    parsed = new URL(`http://${name}/`).hostname
  } catch {
    return `'${text}' is not an IP address, CIDR or host name`
  }
  // 127.1, 2130706433, 0x7f.1: spellings of an address, which the URL parser would read as that address.
  if (isIP(parsed) !== 0) return `'${text}' spells the address ${parsed}: write it as ${parsed}`
  if (name.length > 253 || !name.split('.').every((l) => LABEL.test(l))) return `'${text}' is not a valid host name`
  return { kind: 'name', name, wildcard, port, text }
}

export interface EgressPolicyOptions {
  allow: readonly string[]
  /** Private ranges (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) pass without being listed. */
  privateNetworks: boolean
  /** The ports this service listens on; such a port on a local address is its own listener. */
  ownPorts(): Iterable<number>
}

export interface EgressPolicy {
  /** Null when `host` (as in the URL, a name or an address) may be reached at `address`:`port`, else what refuses it. */
  refusal(host: string, address: string, port: number): AddressClass | null
}

/** Addresses of this machine's interfaces (a local address with the service's port is its own listener). */
function localAddresses(): Set<string> {
  const out = new Set<string>()
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) {
      const b = addressBytes(a.address)
      if (b) out.add(Buffer.from(b).toString('hex'))
    }
  }
  return out
}

export function createEgressPolicy(o: EgressPolicyOptions): EgressPolicy {
  const entries: AllowEntry[] = []
  const problems: string[] = []
  for (const text of o.allow) {
    const e = parseAllowEntry(text)
    if (typeof e === 'string') problems.push(`connectors.egress.allow: ${e}`)
    else entries.push(e)
  }
  // Checked when the connectors plugin starts: a list the policy cannot read stops the service, every problem named.
  if (problems.length > 0) throw new ConfigError('settings', problems)
  const nameMatches = (e: AllowEntry & { kind: 'name' }, host: string) => (e.wildcard ? host.endsWith(`.${e.name}`) : host === e.name)
  return {
    refusal(host, address, port) {
      const b = addressBytes(address)
      if (!b) return 'reserved'
      let cls = classify(b)
      const name = isIP(host.replace(/^\[|\]$/g, '')) === 0 ? host.toLowerCase().replace(/\.$/, '') : null
      if ([...o.ownPorts()].includes(port) && (cls === 'loopback' || cls === 'unspecified' || localAddresses().has(Buffer.from(b).toString('hex')))) {
        cls = 'own listener'
      }
      if (cls === 'public') return null
      const listed = (e: AllowEntry, explicitPort: boolean) =>
        (explicitPort ? e.port === port : e.port === null || e.port === port)
        && (e.kind === 'net' ? inNet(b, e.net) : name !== null && nameMatches(e, name))
      // The service's own listener: only an address entry that names its port (127.0.0.1:8000).
      if (cls === 'own listener') return entries.some((e) => e.kind === 'net' && listed(e, true)) ? null : cls
      if (cls === 'private') return o.privateNetworks || entries.some((e) => listed(e, false)) ? null : cls
      // Loopback, link-local, metadata, ...: only an address or CIDR entry, never a host name.
      return entries.some((e) => e.kind === 'net' && listed(e, false)) ? null : cls
    },
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Resolution and the HTTP client.

const notFound = (host: string) => Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND', hostname: host })

/**
 * The system's resolver, except for the names RFC 6761 reserves: `localhost` and `*.localhost` are loopback
 * (whatever a resolver says), `*.invalid` never resolves (no query is sent).
 */
export function withReservedNames(resolve: Resolve): Resolve {
  return async (host) => {
    const h = host.toLowerCase().replace(/\.$/, '')
    if (h === 'localhost' || h.endsWith('.localhost')) return [{ address: '127.0.0.1', family: 4 }, { address: '::1', family: 6 }]
    if (h === 'invalid' || h.endsWith('.invalid')) throw notFound(host)
    return resolve(host)
  }
}

export const systemResolve: Resolve = (host) => dnsLookup(host, { all: true, verbatim: true })

export interface EgressResponse {
  status: number
  ok: boolean
  headers: Headers
  /** The decoded body (gzip, deflate, br), read once. */
  body: Readable
  /** Drops an unread body: a small one is drained so the connection can be used again, a larger one closes it. */
  discard(): void
}

export interface EgressRequest {
  headers?: Record<string, string>
  /** 'follow' (the default) follows up to 20 redirects, each hop checked; 'manual' returns the 3xx. */
  redirect?: 'follow' | 'manual'
  signal?: AbortSignal
}

export interface Egress {
  readonly policy: EgressPolicy
  /** Why a configured URL is refused now (its literal address, or the addresses its name resolves to), else null. */
  check(url: string): Promise<DestinationRefused | null>
  /** A GET through the policy. Network failures reject as fetch does (TypeError 'fetch failed', cause attached). */
  get(url: string, init?: EgressRequest): Promise<EgressResponse>
  close(): void
}

export interface EgressOptions extends EgressPolicyOptions {
  resolve?: Resolve
  /** How long the check at create and PATCH waits for a name to resolve before letting the sync decide. */
  checkTimeoutMs?: number
}

const REDIRECTS = new Set([301, 302, 303, 307, 308])
const MAX_REDIRECTS = 20
/** Headers a redirect to another origin drops (as fetch does). */
const ORIGIN_BOUND = ['authorization', 'cookie', 'proxy-authorization']
/** A body this small is read to its end when discarded, so its kept-alive connection serves the next request. */
const DRAIN_LIMIT = 64 * 1024

const fetchFailed = (cause: unknown) => new TypeError('fetch failed', { cause })

const portOf = (u: URL) => (u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80)

function decoded(res: IncomingMessage, status: number): Readable {
  if (status === 204 || status === 304) return res
  const codings = String(res.headers['content-encoding'] ?? '').toLowerCase().split(',').map((c) => c.trim()).filter((c) => c && c !== 'identity')
  if (codings.length === 0) return res
  const decoders: NodeJS.ReadWriteStream[] = []
  // Applied in the reverse order of their listing; an unknown coding leaves the body as sent (fetch does the same).
  for (const coding of codings.reverse()) {
    if (coding === 'gzip' || coding === 'x-gzip') decoders.push(createGunzip({ flush: zlib.Z_SYNC_FLUSH, finishFlush: zlib.Z_SYNC_FLUSH }))
    else if (coding === 'deflate') decoders.push(createInflate({ flush: zlib.Z_SYNC_FLUSH, finishFlush: zlib.Z_SYNC_FLUSH }))
    else if (coding === 'br') decoders.push(createBrotliDecompress({ flush: zlib.BROTLI_OPERATION_FLUSH, finishFlush: zlib.BROTLI_OPERATION_FLUSH }))
    else return res
  }
  return pipeline([res, ...decoders] as unknown as [Readable, ...NodeJS.ReadWriteStream[]], () => {}) as unknown as Readable
}

function headersOf(res: IncomingMessage): Headers {
  const h = new Headers()
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
    try {
      h.append(res.rawHeaders[i], res.rawHeaders[i + 1])
    } catch { /* a header fetch would refuse too */ }
  }
  return h
}

export function createEgress(o: EgressOptions): Egress {
  const policy = createEgressPolicy(o)
  const resolve = withReservedNames(o.resolve ?? systemResolve)
  const checkTimeoutMs = o.checkTimeoutMs ?? 5000
  // Kept-alive connections: each was checked when it was made, and is reused only for the same host and port. An
  // idle one is closed after 4 s (undici's default, which fetch used before); the timeout ends no request.
  const agents = { http: new HttpAgent({ keepAlive: true, timeout: 4000 }), https: new HttpsAgent({ keepAlive: true, timeout: 4000 }) }

  /** The addresses of `host` that may be reached on `port`; DestinationRefused when none may. */
  async function allowedAddresses(host: string, port: number): Promise<ResolvedAddress[]> {
    const all = await resolve(host)
    if (all.length === 0) throw notFound(host)
    const allowed: ResolvedAddress[] = []
    let refused: AddressClass | null = null
    for (const a of all) {
      const cls = policy.refusal(host, a.address, port)
      if (cls === null) allowed.push(a)
      else refused ??= cls
    }
    if (allowed.length === 0) throw new DestinationRefused(host, refused!)
    return allowed
  }

  /** net's lookup hook for one request: the connection goes to an address checked here, and only there. */
  const pinnedLookup = (port: number): LookupFunction => (hostname, options, callback) => {
    allowedAddresses(hostname, port).then((list) => {
      const family = options.family === 4 || options.family === 'IPv4' ? 4 : options.family === 6 || options.family === 'IPv6' ? 6 : 0
      const fitting = family ? list.filter((a) => a.family === family) : list
      if (fitting.length === 0) return callback(notFound(hostname), '', 0)
      if (options.all) (callback as unknown as (err: null, all: ResolvedAddress[]) => void)(null, fitting)
      else callback(null, fitting[0].address, fitting[0].family)
    }, (err: NodeJS.ErrnoException) => callback(err, '', 0))
  }

  function once(url: URL, headers: Record<string, string>, signal: AbortSignal | undefined): Promise<EgressResponse> {
    const https = url.protocol === 'https:'
    const host = url.hostname.replace(/^\[|\]$/g, '')
    const port = portOf(url)
    const literal = isIP(host) !== 0
    if (literal) {
      // A literal address is connected to as written (no lookup runs): checked here.
      const cls = policy.refusal(host, host, port)
      if (cls !== null) return Promise.reject(new DestinationRefused(host, cls))
    }
    const options: RequestOptions & { servername?: string } = {
      host, port, method: 'GET', path: `${url.pathname}${url.search}`, agent: https ? agents.https : agents.http, signal,
      headers: { accept: '*/*', 'accept-encoding': 'gzip, deflate, br', ...headers, host: url.host },
      ...(literal ? {} : { lookup: pinnedLookup(port), ...(https ? { servername: host } : {}) }),
    }
    return new Promise((resolvePromise, reject) => {
      const req = (https ? httpsRequest : httpRequest)(options, (res) => {
        const status = res.statusCode ?? 0
        const body = decoded(res, status)
        const declared = Number(res.headers['content-length'])
        resolvePromise({
          status, ok: status >= 200 && status < 300, headers: headersOf(res), body,
          discard() {
            if (status === 204 || status === 304 || (Number.isFinite(declared) && declared <= DRAIN_LIMIT)) body.resume()
            else {
              res.destroy()
              if (body !== res) body.destroy()
            }
          },
        })
      })
      // `on`, not `once`: the socket can fail again while the body is read (the body's reader sees that error).
      req.on('error', (err) => reject(err instanceof DestinationRefused || signal?.aborted ? err : fetchFailed(err)))
      req.end()
    })
  }

  return {
    policy,

    async check(raw) {
      let url: URL
      try {
        url = new URL(raw)
      } catch {
        return null
      }
      const host = url.hostname.replace(/^\[|\]$/g, '')
      const port = portOf(url)
      if (isIP(host) !== 0) {
        const cls = policy.refusal(host, host, port)
        return cls === null ? null : new DestinationRefused(host, cls)
      }
      let timer: NodeJS.Timeout | undefined
      try {
        await Promise.race([
          allowedAddresses(host, port),
          new Promise((resolveTimeout) => void (timer = setTimeout(resolveTimeout, checkTimeoutMs))),
        ])
        return null
      } catch (err) {
        // A name that does not resolve now is left to the sync (it fails there, as any unreachable source does).
        return err instanceof DestinationRefused ? err : null
      } finally {
        clearTimeout(timer)
      }
    },

    async get(raw, init = {}) {
      let url: URL
      try {
        url = new URL(raw)
      } catch (err) {
        throw fetchFailed(err)
      }
      const headers = { ...init.headers }
      for (let hop = 0; ; hop++) {
        if (url.protocol !== 'http:' && url.protocol !== 'https:') throw fetchFailed(new Error(`unsupported scheme ${url.protocol}`))
        const res = await once(url, headers, init.signal)
        const location = REDIRECTS.has(res.status) ? res.headers.get('location') : null
        if (init.redirect === 'manual' || location === null) return res
        res.discard()
        if (hop >= MAX_REDIRECTS) throw fetchFailed(new Error('redirect count exceeded'))
        let next: URL
        try {
          next = new URL(location, url)
        } catch (err) {
          throw fetchFailed(err)
        }
        if (next.origin !== url.origin) {
          for (const name of Object.keys(headers)) if (ORIGIN_BOUND.includes(name.toLowerCase())) delete headers[name]
        }
        url = next
      }
    },

    close() {
      agents.http.destroy()
      agents.https.destroy()
    },
  }
}
