// An OpenAPI-driven fuzzer: reads the operations a running service describes, generates requests that break
// each operation's schema (mixed with valid ones), sends them, and reports every answer of 5xx.
//
// Generation is pure and seeded (mulberry32): the same seed and the same API description give the same list,
// so a failing run is replayed with QUARRY_FUZZ_SEED. Values that only exist at run time (the id of a fixture
// KB or document) appear in the list as `Fixture` placeholders and are resolved when a request is sent.
// Each request also names an identity by index; the base edition has one (no credentials), the
// access-controlled edition passes one per role (headers with a token) and may add its own checks.
import { request as httpRequest } from 'node:http'
import { mulberry32 } from '../../bench/lib/rng.ts'

type Schema = Record<string, any>

export interface FuzzParam {
  name: string
  required: boolean
  schema: Schema
}

export interface FuzzOperation {
  /** 'POST /api/kb/{kb_id}/docs/upload' */
  id: string
  method: string
  path: string
  pathParams: FuzzParam[]
  queryParams: FuzzParam[]
  body: { kind: 'json' | 'multipart'; schema: Schema } | null
}

/** A value known only at run time: the fixture of that name (kb_id, doc_id, ...). */
export class Fixture {
  constructor(readonly name: string) {}
}

export interface MultipartPart {
  /** The whole Content-Disposition value, written as bytes in `headerEncoding`. */
  disposition: string
  contentType?: string
  data: string
  /** The data is sent this many times over (a large file without a large string in the request list). */
  repeat?: number
  /** latin1 writes each code unit below 256 as one byte: the way to send bytes that are not UTF-8. */
  headerEncoding: 'utf8' | 'latin1'
  dataEncoding: 'utf8' | 'latin1'
}

export interface MultipartBody {
  kind: 'multipart'
  boundary: string
  parts: MultipartPart[]
  /** Without the closing boundary. */
  truncated: boolean
}

export type FuzzBody =
  | { kind: 'none' }
  | { kind: 'json'; value: unknown }
  | { kind: 'text'; text: string; encoding: 'utf8' | 'latin1' }
  | MultipartBody

export interface FuzzRequest {
  seq: number
  operation: string
  method: string
  /** Path values by parameter name, percent-encoded already (or deliberately malformed). */
  path: Record<string, string | Fixture>
  /** [key, value] pairs, both percent-encoded already; a Fixture value is encoded when resolved. */
  query: [string, string | Fixture][]
  headers: Record<string, string>
  body: FuzzBody
  /** Index into the identities the run is given. */
  identity: number
  /** What was broken, for the failure list. */
  mutation: string
}

export interface FuzzAnswer {
  request: FuzzRequest
  /** The request as sent, for the failure list. */
  line: string
  bodyExcerpt: string
  status: number
  responseExcerpt: string
  contentType: string
  /** Wall time to the answer: diagnostics only (which operations make a run slow). */
  ms: number
}

// ---------------------------------------------------------------------------------------------------------
// The API description

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const

export function operationsFrom(openapi: Schema): FuzzOperation[] {
  const out: FuzzOperation[] = []
  for (const [path, item] of Object.entries<Schema>(openapi.paths ?? {})) {
    for (const m of METHODS) {
      const op = item[m] as Schema | undefined
      if (!op) continue
      const params: Schema[] = [...(item.parameters ?? []), ...(op.parameters ?? [])]
      const toParam = (p: Schema): FuzzParam => ({ name: p.name, required: p.in === 'path' || p.required === true, schema: p.schema ?? {} })
      const content = (op.requestBody?.content ?? {}) as Record<string, { schema?: Schema }>
      const body = content['application/json']
        ? { kind: 'json' as const, schema: content['application/json'].schema ?? {} }
        : content['multipart/form-data']
          ? { kind: 'multipart' as const, schema: content['multipart/form-data'].schema ?? {} }
          : null
      out.push({
        id: `${m.toUpperCase()} ${path}`,
        method: m.toUpperCase(),
        path,
        pathParams: params.filter((p) => p.in === 'path').map(toParam),
        queryParams: params.filter((p) => p.in === 'query').map(toParam),
        body,
      })
    }
  }
  return out
}

// ---------------------------------------------------------------------------------------------------------
// Random values

class Rand {
  private readonly next: () => number
  constructor(seed: number) {
    this.next = mulberry32(seed)
  }
  float(): number {
    return this.next()
  }
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1))
  }
  chance(p: number): boolean {
    return this.next() < p
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]
  }
}

const LONG = 10_000

/**
 * Most bytes a request's path, query and headers may take together. The transport (uWebSockets.js 20.30) parses a
 * request head that arrives in one read, or one that arrives in pieces of at most 4 KB in all; any other it answers by
 * closing the connection, before the service sees the request (docs/api.md, Bad input; test/kernel/transport.test.ts).
 * Over loopback a head written at once arrives in one read while it fits a segment of 64 KB: a longer one can arrive
 * in two, so whether it is parsed is up to timing, not the service.
 */
export const HEAD_BUDGET = 48_000

/** Cuts the longest of a draft's path values, query keys and values and header values until they fit HEAD_BUDGET. */
function fitHead(d: Draft): void {
  type Part = { get(): string; set(v: string): void }
  const parts: Part[] = []
  for (const k of Object.keys(d.path)) {
    if (typeof d.path[k] === 'string') parts.push({ get: () => d.path[k] as string, set: (v) => (d.path[k] = v) })
  }
  for (const entry of d.query) {
    parts.push({ get: () => entry[0], set: (v) => (entry[0] = v) })
    if (typeof entry[1] === 'string') parts.push({ get: () => entry[1] as string, set: (v) => (entry[1] = v) })
  }
  for (const k of Object.keys(d.headers)) parts.push({ get: () => d.headers[k], set: (v) => (d.headers[k] = v) })
  const total = () => parts.reduce((n, p) => n + Buffer.byteLength(p.get()), 0) + Object.keys(d.headers).reduce((n, k) => n + k.length, 0)
  let over = total() - HEAD_BUDGET
  if (over <= 0) return
  while (over > 0) {
    const longest = parts.reduce((a, b) => (Buffer.byteLength(b.get()) > Buffer.byteLength(a.get()) ? b : a), parts[0])
    const chars = Array.from(longest?.get() ?? '')
    // Nothing left to cut (header names alone over the budget, which no mutation makes): leave it as it is.
    if (chars.length === 0) break
    // Whole characters, and no percent escape cut in two.
    let cut = chars.slice(0, Math.max(0, chars.length - over)).join('')
    const escape = cut.lastIndexOf('%')
    if (escape >= 0 && escape >= cut.length - 2) cut = cut.slice(0, escape)
    longest.set(cut)
    over = total() - HEAD_BUDGET
  }
  d.mutation.push('cut to the head limit')
}

const WORDS = 'leave policy annual manager request river engine protein galaxy harbor violin theorem crystal meadow budget report'.split(' ')

/** Strings that have broken services before: storage refusals, encodings, injections, sizes. */
const NASTY: readonly string[] = [
  '', ' ', '\u0000', 'a\u0000b', '\ud800', 'x\udfffy', '\ud83d', 'end\udbff', '\u0001\u001f\u007f', '\r\n', '\t', '\u0085',
  '😀', '한국어 문서', 'é', 'ﬃ', '\u202e', '\ufeff', '\uffff', '\u2028', 'x'.repeat(LONG), '../../etc/passwd', '..', '.',
  "'; DROP TABLE knowledge_bases; --", '%00', '%s%n%x', '${jndi:ldap://x}', '__proto__', 'constructor', 'null', 'true', '-1',
  '1e309', 'NaN', '<script>alert(1)</script>', '\\', '"', '{}', '[]', ' leading', 'UPPER', 'a'.repeat(64), '0'.repeat(16),
]

/** Raw path segments: encoded NUL and controls, bad UTF-8, malformed escapes, traversal, lengths, near-valid ids. */
const NASTY_SEGMENTS: readonly string[] = [
  '%00', 'kb%00', '%00%00', 'a%00b', '%ED%A0%80', '%ED%BF%BF', '%FF', '%C3%28', '%F0%9F%98', '%ZZ', '%', 'a%2', '%2F', '%2e%2e', '..',
  '.', 'UPPER', 'a%20b', '%20', '%01%1F%7F', '%0D%0A', '%EC%96%B4', '%F0%9F%98%80', '-', '_x', 'a'.repeat(64), 'a'.repeat(LONG),
  '0123456789abcdef', '0123456789ABCDEF', '0123456789abcdeg', '0123456789abcde', '00000000-0000-0000-0000-000000000000',
  'not-a-uuid', '%E2%80%AE', "'", '%22', '%3Cscript%3E', 'caf\u00e9', '\u00ff', '%5C', 'x'.repeat(300) + '%00',
]

/** A random string from every class of character: ASCII, controls, NUL, Latin-1, CJK, emoji, lone surrogates. */
function randomString(r: Rand): string {
  const len = r.chance(0.05) ? r.int(1000, 20_000) : r.chance(0.1) ? 0 : r.int(1, 40)
  let s = ''
  for (let i = 0; i < len; i++) {
    const k = r.int(0, 9)
    if (k <= 4) s += String.fromCharCode(r.int(0x20, 0x7e))
    else if (k === 5) s += String.fromCharCode(r.int(0, 0x1f))
    else if (k === 6) s += String.fromCharCode(r.int(0x80, 0xff))
    else if (k === 7) s += String.fromCharCode(r.int(0x4e00, 0x9fff))
    else if (k === 8) s += '😀🚀'.slice(0, 2)
    else s += String.fromCharCode(r.int(0xd800, 0xdfff))
  }
  return s
}

const nastyString = (r: Rand): string => (r.chance(0.6) ? r.pick(NASTY) : randomString(r))

/** Percent-encodes any string, lone surrogates included (as the bytes of their WTF-8 form, which is not UTF-8). */
export function pct(s: string): string {
  let out = ''
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (/[A-Za-z0-9\-._~]/.test(s[i])) out += s[i]
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && s.charCodeAt(i + 1) >= 0xdc00 && s.charCodeAt(i + 1) <= 0xdfff) {
      out += encodeURIComponent(s.slice(i, i + 2))
      i++
    } else if (c >= 0xd800 && c <= 0xdfff) {
      out += `%${(0xe0 | (c >> 12)).toString(16)}%${(0x80 | ((c >> 6) & 0x3f)).toString(16)}%${(0x80 | (c & 0x3f)).toString(16)}`.toUpperCase()
    } else out += encodeURIComponent(s[i])
  }
  return out
}

const randomHex = (r: Rand, n: number) => Array.from({ length: n }, () => '0123456789abcdef'[r.int(0, 15)]).join('')
const randomUuid = (r: Rand) => `${randomHex(r, 8)}-${randomHex(r, 4)}-4${randomHex(r, 3)}-a${randomHex(r, 3)}-${randomHex(r, 12)}`
const randomKbId = (r: Rand) => `fz${randomHex(r, r.int(2, 10))}`
const words = (r: Rand, n: number) => Array.from({ length: n }, () => r.pick(WORDS)).join(' ')

/** Valid values the schemas cannot express (which settings keys a KB may override). */
const OVERRIDE_SAMPLES: readonly Record<string, unknown>[] = [
  { 'chunking.chunk_size': 512 }, { 'chunking.chunk_size': 512, 'chunking.chunk_overlap': 64 }, { 'dedup.enabled': false }, {},
]

/**
 * Bodies for operations whose protocol the API description does not spell out (MCP's JSON-RPC), so that the
 * fuzzer reaches the tools behind them; mutations then break their arguments like any other body.
 */
const PROTOCOL_BODIES: Readonly<Record<string, { headers: Record<string, string>; body: (r: Rand) => unknown }>> = {
  'POST /mcp': {
    headers: { accept: 'application/json, text/event-stream' },
    body: (r) => {
      const id = r.int(1, 1_000_000)
      const call = (name: string, args: Record<string, unknown>) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } })
      return r.pick<() => unknown>([
        () => ({ jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'fuzz', version: '1' } } }),
        () => ({ jsonrpc: '2.0', id, method: 'tools/list' }),
        () => ({ jsonrpc: '2.0', method: 'notifications/initialized' }),
        () => call('search', { query: words(r, 3), kb_ids: [new Fixture('kb_id')], top_k: r.int(1, 20) }),
        () => call('list_knowledge_bases', {}),
        () => call(r.pick(['get_document', 'get_document_status']), { kb_id: new Fixture('kb_id'), doc_id: new Fixture('doc_id') }),
      ])()
    },
  },
}

/** The fixture or a plausible value for a well-known id; undefined for any other name. */
function knownId(r: Rand, name: string): string | Fixture | undefined {
  if (name === 'kb_id') return r.chance(0.85) ? new Fixture('kb_id') : randomKbId(r)
  if (name === 'doc_id') return r.chance(0.85) ? new Fixture('doc_id') : randomHex(r, 16)
  if (name === 'connector_id') return r.chance(0.85) ? new Fixture('connector_id') : randomUuid(r)
  return undefined
}

/** A value that satisfies `schema` (as far as a generator can tell); `name` picks fixtures and samples. */
function valid(r: Rand, schema: Schema, name: string, depth = 0): unknown {
  if (schema.const !== undefined) return schema.const
  if (Array.isArray(schema.enum)) return r.pick(schema.enum)
  const branches = schema.anyOf ?? schema.oneOf
  if (Array.isArray(branches)) return valid(r, r.pick(branches), name, depth)
  if (name === 'overrides') return structuredClone(r.pick(OVERRIDE_SAMPLES))
  const type = Array.isArray(schema.type) ? r.pick(schema.type) : schema.type
  switch (type) {
    case 'string': {
      if (name === 'kb_id' && schema.pattern) return randomKbId(r)
      const id = knownId(r, name)
      if (id !== undefined) return id
      if (schema.format === 'date-time') return new Date(Date.UTC(2026, 0, r.int(1, 28))).toISOString()
      if (schema.format === 'uuid') return randomUuid(r)
      const max = Math.min(schema.maxLength ?? 60, 60)
      const min = schema.minLength ?? 0
      const s = words(r, r.int(1, 6)).slice(0, max)
      return s.length >= min ? s : s.padEnd(min, 'x')
    }
    case 'integer':
    case 'number': {
      const lo = schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : 0)
      const hi = schema.maximum ?? Math.max(lo + 100, schema.default ?? 0)
      return type === 'integer' ? r.int(Math.ceil(lo), Math.floor(hi)) : lo + (hi - lo) * r.float()
    }
    case 'boolean': return r.chance(0.5)
    case 'null': return null
    case 'array': {
      if (name === 'kb_ids') return [new Fixture('kb_id')]
      const n = r.int(schema.minItems ?? 0, Math.min(schema.maxItems ?? 3, 3))
      return Array.from({ length: n }, () => valid(r, schema.items ?? {}, name.replace(/s$/, ''), depth + 1))
    }
    case 'object': {
      const out: Record<string, unknown> = {}
      const required = new Set<string>(schema.required ?? [])
      for (const [key, prop] of Object.entries<Schema>(schema.properties ?? {})) {
        if (required.has(key) || (depth < 3 && r.chance(0.5))) out[key] = valid(r, prop, key, depth + 1)
      }
      return out
    }
    default: return words(r, 2)
  }
}

/** A value of another JSON type (or a nasty one of the same): what a schema must refuse, or survive. */
function wrong(r: Rand): unknown {
  return r.pick<() => unknown>([
    () => null, () => 0, () => -1, () => 1.5, () => 1e308, () => -0, () => 2 ** 53 + 1, () => -(2 ** 63), () => true, () => false,
    () => [], () => ({}), () => [1, 'a', null], () => ({ a: 1 }), () => nastyString(r), () => nastyString(r), () => [nastyString(r)],
    () => ({ [nastyString(r)]: nastyString(r) }),
  ])()
}

/** Nesting far past any limit; written out as text when sent (a value this deep would overflow recursive code here too). */
export class Nested {
  constructor(readonly depth: number, readonly shape: 'array' | 'object' | 'mixed') {}
  toJson(): string {
    // A mutation may have replaced the depth itself (1e308, NaN): bounded, or writing it out fills the heap.
    const depth = Number.isFinite(this.depth) ? Math.max(0, Math.min(Math.trunc(this.depth), 100_000)) : 100_000
    let open = ''
    let close = ''
    for (let i = 0; i < depth; i++) {
      const array = this.shape === 'array' || (this.shape === 'mixed' && i % 2 === 0)
      open += array ? '[' : '{"a":'
      close += array ? ']' : '}'
    }
    return `${open}"bottom"${[...close].reverse().join('')}`
  }
}

const deep = (r: Rand) => new Nested(r.pick([20, 65, 200, 5_000]), r.pick(['array', 'object', 'mixed'] as const))

/** The JSON text of a value nested `depth` levels, for depths JSON.stringify cannot reach. */
const deepText = (depth: number) => '['.repeat(depth) + ']'.repeat(depth)

const BAD_JSON: readonly string[] = [
  '{', '}', '{"a":}', '{"kb_id": "x",}', "{'a': 1}", 'NaN', 'undefined', '\u0000', '{"a": 1e999}', '{"a": -}', '[1, 2',
  '{"kb_id":"a","kb_id":"b"}', '\ufeff{}', '{"query": "\\ud800"}', '{"query": "\\u0000"}', '{"a": "\\x41"}', '{"a"\u0000: 1}',
  '{"__proto__": {"polluted": true}}', '{"constructor": {"prototype": {"polluted": true}}}', 'null', '0', '"string"', 'true',
  '[]', ' ', '\n\n', '{"a": 01}', '{"a": .5}', '{"a": +1}', '{"a": 0x10}', '{"a": Infinity}', '{"a": "\t"}',
]

const CONTENT_TYPES: readonly string[] = [
  'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data', 'multipart/form-data; boundary=', 'application/xml',
  'application/json; charset=latin1', 'application/json; charset=utf-16', 'application/octet-stream', '*/*', 'application/jsonx',
  'APPLICATION/JSON', ';;;', 'multipart/form-data; boundary=zzz', 'text/event-stream', 'application/json\u00ff',
]

// ---------------------------------------------------------------------------------------------------------
// Requests

interface Draft {
  path: Record<string, string | Fixture>
  query: [string, string | Fixture][]
  headers: Record<string, string>
  body: FuzzBody
  mutation: string[]
}

const encodeValue = (v: unknown): string | Fixture => (v instanceof Fixture ? v : pct(String(v)))

function validDraft(r: Rand, op: FuzzOperation): Draft {
  const path: Record<string, string | Fixture> = {}
  for (const p of op.pathParams) {
    const v = knownId(r, p.name) ?? valid(r, p.schema, p.name)
    path[p.name] = encodeValue(v)
  }
  const query: [string, string | Fixture][] = []
  for (const p of op.queryParams) {
    if (p.required || r.chance(0.4)) {
      const v = valid(r, p.schema, p.name)
      for (const item of Array.isArray(v) ? v : [v]) query.push([pct(p.name), encodeValue(item)])
    }
  }
  let body: FuzzBody = { kind: 'none' }
  const headers: Record<string, string> = {}
  const protocol = PROTOCOL_BODIES[op.id]
  if (op.body?.kind === 'json') body = { kind: 'json', value: valid(r, op.body.schema, 'body') }
  else if (op.body?.kind === 'multipart') body = multipart(r, op.body.schema)
  else if (protocol) {
    body = { kind: 'json', value: protocol.body(r) }
    Object.assign(headers, protocol.headers)
  }
  return { path, query, headers, body, mutation: [] }
}

const BOUNDARY = 'fuzzboundary7MA4YWxkTrZu0gW'
const disposition = (field: string, filename?: string) =>
  `form-data; name="${field}"${filename === undefined ? '' : `; filename="${filename.replace(/["\\\r\n]/g, '_')}"`}`

function multipart(r: Rand, schema: Schema): MultipartBody {
  const parts: MultipartPart[] = []
  for (const [field, prop] of Object.entries<Schema>(schema.properties ?? {})) {
    const n = prop.type === 'array' ? r.int(1, 3) : 1
    for (let i = 0; i < n; i++) {
      const ext = r.pick(['txt', 'md', 'txt', 'html', 'rst'])
      const name = `fz-${randomHex(r, 6)}.${ext}`
      parts.push({
        disposition: disposition(field, name), contentType: r.pick(['text/plain', 'application/octet-stream', 'text/markdown']),
        data: `# ${words(r, 3)}\n\n${words(r, r.int(5, 60))}\n`, headerEncoding: 'utf8', dataEncoding: 'utf8',
      })
    }
  }
  return { kind: 'multipart', boundary: BOUNDARY, parts, truncated: false }
}

/** Sets an own property even for '__proto__', as JSON.parse on the server will. */
const setKey = (target: Record<string, unknown>, key: string, value: unknown) =>
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })

/** Pointers to the object members of a JSON value: [holder, key]. */
function members(v: unknown, out: [Record<string, unknown> | unknown[], string | number][] = [], depth = 0): typeof out {
  if (depth > 4 || typeof v !== 'object' || v === null) return out
  if (Array.isArray(v)) v.forEach((item, i) => { out.push([v, i]); members(item, out, depth + 1) })
  else for (const k of Object.keys(v)) { out.push([v as Record<string, unknown>, k]); members((v as Record<string, unknown>)[k], out, depth + 1) }
  return out
}

function mutatePath(r: Rand, op: FuzzOperation, d: Draft): void {
  const p = r.pick(op.pathParams)
  const v = r.chance(0.7) ? r.pick(NASTY_SEGMENTS) : pct(randomString(r))
  d.path[p.name] = v
  d.mutation.push(`path ${p.name}`)
}

function mutateQuery(r: Rand, op: FuzzOperation, d: Draft): void {
  const names = op.queryParams.map((p) => p.name)
  const kind = r.int(0, 5)
  if (kind <= 2 && names.length > 0) {
    const name = r.pick(names)
    d.query = d.query.filter(([k]) => k !== name)
    const bad = r.pick(['abc', '1.5', '-1', '0', '99999999999999999999', '1e309', '', 'true', 'null', '%00', '%ED%A0%80', '%FF', '%', '%ZZ',
      pct('x'.repeat(LONG)), pct(nastyString(r)), '[]', '{}', 'NaN', '-0', '0x10', '1,2'])
    d.query.push([name, bad])
    if (r.chance(0.3)) d.query.push([name, pct(nastyString(r))])
    d.mutation.push(`query ${name}`)
  } else if (kind === 3) {
    d.query.push([pct(nastyString(r)), pct(nastyString(r))])
    d.mutation.push('query unknown key')
  } else if (kind === 4) {
    d.query.push([r.pick(['%00', '%', '%ZZ', '&&', '=', '==', 'a=b=c', '%ED%A0%80']), r.pick(['', '%00', 'x'])])
    d.mutation.push('query malformed')
  } else {
    const required = op.queryParams.filter((p) => p.required)
    if (required.length > 0) {
      const name = r.pick(required).name
      d.query = d.query.filter(([k]) => k !== name)
      d.mutation.push(`query missing ${name}`)
    } else {
      d.query.push(['page', '%00'])
      d.mutation.push('query NUL')
    }
  }
}

function mutateJson(r: Rand, d: Draft, op: FuzzOperation): void {
  const body = d.body.kind === 'json' ? d.body.value : {}
  const kind = r.int(0, 11)
  if (kind <= 4) {
    const slots = members(body)
    if (slots.length === 0) {
      d.body = { kind: 'json', value: wrong(r) }
      d.mutation.push('body replaced')
      return
    }
    const [holder, key] = r.pick(slots)
    if (kind === 0 && !Array.isArray(holder)) {
      delete holder[key as string]
      d.mutation.push(`body missing ${String(key)}`)
    } else {
      ;(holder as Record<string | number, unknown>)[key] = kind <= 2 ? nastyString(r) : wrong(r)
      d.mutation.push(`body field ${String(key)}`)
    }
    d.body = { kind: 'json', value: body }
  } else if (kind === 5) {
    const target = typeof body === 'object' && body !== null && !Array.isArray(body) ? body as Record<string, unknown> : {}
    for (let i = r.int(1, 4); i > 0; i--) setKey(target, r.chance(0.5) ? nastyString(r) : r.pick(['__proto__', 'constructor', 'extra', 'kb_id', 'options']), wrong(r))
    d.body = { kind: 'json', value: target }
    d.mutation.push('body extra fields')
  } else if (kind === 6) {
    const target = typeof body === 'object' && body !== null && !Array.isArray(body) ? body as Record<string, unknown> : {}
    const slots = members(target).filter(([h]) => !Array.isArray(h))
    const key = slots.length > 0 ? r.pick(slots)[1] : 'nested'
    setKey(target, String(key), deep(r))
    d.body = { kind: 'json', value: target }
    d.mutation.push('body deep nesting')
  } else if (kind === 7) {
    d.body = { kind: 'text', text: r.chance(0.5) ? deepText(r.pick([100, 10_000, 200_000])) : `{"a": ${deepText(r.pick([100, 10_000]))}}`, encoding: 'utf8' }
    d.mutation.push('body deep nesting (text)')
  } else if (kind === 8) {
    d.body = { kind: 'text', text: r.pick(BAD_JSON), encoding: 'utf8' }
    d.mutation.push('body bad JSON')
  } else if (kind === 9) {
    // Bytes that are not UTF-8 inside JSON strings.
    const text = toJson(body, {}).replace(/"([^"]*)"/, (_m, s: string) => `"${s}\u00ff\u00fe\u00c3("`)
    d.body = { kind: 'text', text, encoding: 'latin1' }
    d.mutation.push('body invalid UTF-8')
  } else if (kind === 10) {
    const big = r.chance(0.5) ? { kb_id: 'x'.repeat(900_000) } : { items: Array.from({ length: 50_000 }, (_, i) => i) }
    d.body = { kind: 'json', value: op.body?.kind === 'json' ? { ...(body as object), ...big } : big }
    d.mutation.push('body huge')
  } else {
    d.body = { kind: 'json', value: r.pick([null, [], 1, 'text', true, [body]]) }
    d.mutation.push('body of another type')
  }
}

/** A filename parameter: quoted (bytes as given), RFC 5987 (percent-encoded bytes), or missing. */
function badFilename(r: Rand): { param: string; encoding: 'utf8' | 'latin1'; what: string } {
  const kind = r.int(0, 6)
  if (kind === 0) return { param: `filename*=UTF-8''${r.pick(['a%00.txt', '%00', 'a%ED%A0%80.txt', '%FF%FE.txt', 'a%0D%0Ab.txt', 'a%01.txt', '%2e%2e%2F%2e%2e%2Fetc.txt', pct('x'.repeat(LONG)) + '.txt', pct('한국어.txt')])}`, encoding: 'utf8', what: 'filename* encoded' }
  if (kind === 1) return { param: `filename="${r.pick(['a\u00ff\u00fe.txt', 'caf\u00e9.txt', '\u00c3(.md'])}"`, encoding: 'latin1', what: 'filename bytes not UTF-8' }
  if (kind === 2) return { param: `filename="${'x'.repeat(r.pick([256, 300, LONG]))}.txt"`, encoding: 'utf8', what: 'filename long' }
  if (kind === 3) return { param: `filename="${r.pick(['', ' ', '.txt', '..', '../../etc/passwd', 'a.exe', 'noext', 'a.TXT', 'a.txt.', '\\\\server\\share.txt', 'a\tb.txt'])}"`, encoding: 'utf8', what: 'filename odd' }
  if (kind === 4) return { param: '', encoding: 'utf8', what: 'filename missing' }
  if (kind === 5) return { param: `filename="${randomString(r).replace(/["\\\r\n]/g, '_')}.txt"`, encoding: 'utf8', what: 'filename random' }
  return { param: `filename="a.txt"; filename*=UTF-8''${pct(nastyString(r))}.md`, encoding: 'utf8', what: 'filename* nasty' }
}

function mutateMultipart(r: Rand, d: Draft, op: FuzzOperation): void {
  const body = d.body.kind === 'multipart' ? d.body : multipart(r, op.body?.schema ?? {})
  const kind = r.int(0, 9)
  const field = Object.keys(op.body?.schema.properties ?? { file: 1 })[0]
  if (kind <= 2) {
    const f = badFilename(r)
    const part = body.parts[0] ?? { disposition: '', data: 'text', headerEncoding: 'utf8', dataEncoding: 'utf8' }
    part.disposition = `form-data; name="${field}"${f.param ? `; ${f.param}` : ''}`
    part.headerEncoding = f.encoding
    body.parts[0] = part
    d.mutation.push(f.what)
  } else if (kind === 3) {
    for (const p of body.parts) p.data = r.pick(['', '\u0000\u0000', 'caf\u00e9 \u00ff\u00fe text', randomString(r), '%PDF-1.7 not really', 'PK\u0003\u0004 not a zip'])
    for (const p of body.parts) p.dataEncoding = 'latin1'
    d.mutation.push('file content')
    if (r.chance(0.3) && body.parts.length > 0) {
      // Megabytes behind a part the service may refuse at once: the answer comes before the body has arrived.
      body.parts[0].data = 'Leave policy text. '
      body.parts[0].repeat = r.pick([20_000, 150_000])
      if (r.chance(0.5)) body.parts[0].disposition = `form-data; name="${field}"; filename="${r.pick(['big.exe', 'big.txt', 'a\u0001.txt'])}"`
      d.mutation.push('large file')
    }
  } else if (kind === 4) {
    body.parts.push({ disposition: `form-data; name="${pct(nastyString(r)).slice(0, 200)}"`, data: nastyString(r), headerEncoding: 'utf8', dataEncoding: 'utf8' })
    body.parts.push({ disposition: 'form-data; name="note"', data: r.pick(['a\u0000b', '\ud800', 'x'.repeat(LONG)]), headerEncoding: 'utf8', dataEncoding: 'utf8' })
    d.mutation.push('extra fields')
  } else if (kind === 5) {
    body.parts = body.parts.map((p) => ({ ...p, disposition: p.disposition.replace(/name="[^"]*"/, `name="${r.pick(['', 'files', 'file', 'FILE', 'x'])}"`) }))
    if (r.chance(0.3)) body.parts = []
    d.mutation.push('field names')
  } else if (kind === 6) {
    body.truncated = true
    d.mutation.push('truncated multipart')
  } else if (kind === 7) {
    d.headers['content-type'] = r.pick(['multipart/form-data', 'multipart/form-data; boundary=other', 'multipart/form-data; boundary="', 'multipart/mixed; boundary=' + BOUNDARY, 'application/json', 'text/plain'])
    d.mutation.push('multipart content type')
  } else if (kind === 8) {
    const n = r.int(5, 30)
    for (let i = 0; i < n; i++) body.parts.push({ ...body.parts[0] ?? { data: 'x', headerEncoding: 'utf8', dataEncoding: 'utf8' }, disposition: disposition(field, `fz-many-${i}.txt`) })
    d.mutation.push('many files')
  } else {
    for (const p of body.parts) p.contentType = r.pick(['', 'text/plain; charset=\u00ff', '../../x', 'a'.repeat(LONG), 'text/html\u0001'])
    for (const p of body.parts) p.headerEncoding = 'latin1'
    d.mutation.push('part content type')
  }
  d.body = body
}

function mutateHeaders(r: Rand, d: Draft, op: FuzzOperation): void {
  const kind = r.int(0, 3)
  if (kind === 0 && op.body) {
    d.headers['content-type'] = r.pick(CONTENT_TYPES)
    d.mutation.push('content type')
  } else if (kind === 1) {
    d.headers[r.pick(['x-request-id', 'accept', 'mcp-session-id', 'authorization', 'x-forwarded-for', 'accept-encoding', 'x-fuzz'])] =
      r.pick(['\u00ff\u00fe', 'a'.repeat(LONG), 'Bearer x.y.z', '../../', '%00', ' ', 'text/event-stream', 'application/json, text/event-stream', '*/*;q=0'])
    d.mutation.push('header')
  } else if (kind === 2 && !op.body) {
    d.body = r.chance(0.5) ? { kind: 'json', value: wrong(r) } : { kind: 'text', text: r.pick(BAD_JSON), encoding: 'utf8' }
    d.headers['content-type'] = 'application/json'
    d.mutation.push('unexpected body')
  } else {
    d.body = { kind: 'none' }
    d.mutation.push('no body')
  }
}

export interface GenerateOptions {
  seed: number
  count: number
  /** How many identities requests are spread over (index into the run's identities). Default 1. */
  identities?: number
  /** Share of requests left valid. Default 0.2. */
  validShare?: number
}

/** The request list for a seed: a pure function of the operations and the options. */
export function generateRequests(ops: readonly FuzzOperation[], opts: GenerateOptions): FuzzRequest[] {
  const r = new Rand(opts.seed)
  const validShare = opts.validShare ?? 0.2
  const out: FuzzRequest[] = []
  for (let seq = 0; seq < opts.count; seq++) {
    // Round-robin: every operation gets its share of the run.
    const op = ops[seq % ops.length]
    const d = validDraft(r, op)
    if (!r.chance(validShare)) {
      const moves: ((r: Rand, op: FuzzOperation, d: Draft) => void)[] = []
      if (op.pathParams.length > 0) moves.push(mutatePath)
      moves.push(mutateQuery, (r2, o, dd) => mutateHeaders(r2, dd, o))
      if (op.body?.kind === 'multipart') moves.push((r2, o, dd) => mutateMultipart(r2, dd, o), (r2, o, dd) => mutateMultipart(r2, dd, o))
      else moves.push((r2, o, dd) => mutateJson(r2, dd, o), (r2, o, dd) => mutateJson(r2, dd, o))
      for (let n = r.chance(0.2) ? 2 : 1; n > 0; n--) r.pick(moves)(r, op, d)
    }
    fitHead(d)
    out.push({
      seq, operation: op.id, method: op.method, path: d.path, query: d.query, headers: d.headers, body: d.body,
      identity: r.int(0, (opts.identities ?? 1) - 1), mutation: d.mutation.join(', ') || 'valid',
    })
  }
  return out
}

// ---------------------------------------------------------------------------------------------------------
// Sending

export type Fixtures = Readonly<Record<string, string>>

const fixture = (f: Fixture, fixtures: Fixtures) => fixtures[f.name] ?? `no-fixture-${f.name}`

/** JSON text of a generated value, fixtures resolved and Nested values written out. */
function toJson(v: unknown, fixtures: Fixtures): string {
  if (v instanceof Fixture) return JSON.stringify(fixture(v, fixtures))
  if (v instanceof Nested) return v.toJson()
  if (Array.isArray(v)) return `[${v.map((x) => toJson(x, fixtures)).join(',')}]`
  if (typeof v === 'object' && v !== null) return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}:${toJson(x, fixtures)}`).join(',')}}`
  return JSON.stringify(v) ?? 'null'
}

const resolveSegment = (v: string | Fixture, fixtures: Fixtures) => (v instanceof Fixture ? pct(fixture(v, fixtures)) : v)

/** Bytes and headers of a request as it goes on the wire. */
export function render(req: FuzzRequest, op: FuzzOperation, fixtures: Fixtures): { path: string; headers: Record<string, string>; body: Buffer | null } {
  let path = op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => resolveSegment(req.path[name] ?? 'x', fixtures))
  if (req.query.length > 0) path += `?${req.query.map(([k, v]) => `${k}=${resolveSegment(v, fixtures)}`).join('&')}`
  const headers: Record<string, string> = {}
  let body: Buffer | null = null
  const b = req.body
  if (b.kind === 'json') {
    headers['content-type'] = 'application/json'
    body = Buffer.from(toJson(b.value, fixtures))
  } else if (b.kind === 'text') {
    headers['content-type'] = 'application/json'
    body = Buffer.from(b.text, b.encoding)
  } else if (b.kind === 'multipart') {
    headers['content-type'] = `multipart/form-data; boundary=${b.boundary}`
    const chunks: Buffer[] = []
    for (const p of b.parts) {
      chunks.push(Buffer.from(`--${b.boundary}\r\n`))
      chunks.push(Buffer.from(`Content-Disposition: ${p.disposition}\r\n${p.contentType !== undefined ? `Content-Type: ${p.contentType}\r\n` : ''}\r\n`, p.headerEncoding))
      const data = Buffer.from(p.data, p.dataEncoding)
      for (let i = p.repeat ?? 1; i > 0; i--) chunks.push(data)
      chunks.push(Buffer.from('\r\n'))
    }
    if (!b.truncated) chunks.push(Buffer.from(`--${b.boundary}--\r\n`))
    body = Buffer.concat(chunks)
  }
  // Framed explicitly: Node's client sends a GET or DELETE body with no length at all otherwise.
  if (body) headers['content-length'] = String(body.length)
  Object.assign(headers, req.headers)
  return { path, headers, body }
}

export interface SendOptions {
  baseUrl: string
  operations: readonly FuzzOperation[]
  fixtures: () => Fixtures
  /** Headers per identity index (the base edition: one identity, no headers). */
  identities?: readonly Record<string, string>[]
  concurrency?: number
  /** A request that gets no response head in this long is reported (status 0) instead of hanging the run. */
  requestTimeoutMs?: number
  /** Called between batches with nothing in flight: put back fixtures the fuzzer deleted. */
  between?: () => Promise<void>
  /** Requests per batch between two `between` calls. */
  batch?: number
  /** Told of each request as it goes out (QUARRY_FUZZ_TRACE): the last lines name a request that hangs. */
  trace?: (line: string) => void
}

const excerpt = (b: Buffer | null, n = 300) => {
  if (!b || b.length === 0) return ''
  const s = b.subarray(0, n).toString('latin1')
  return JSON.stringify(s) + (b.length > n ? ` …(${b.length} bytes)` : '')
}

export async function send(requests: readonly FuzzRequest[], opts: SendOptions): Promise<FuzzAnswer[]> {
  const url = new URL(opts.baseUrl)
  const byId = new Map(opts.operations.map((o) => [o.id, o]))
  const answers: FuzzAnswer[] = []
  const one = (req: FuzzRequest): Promise<FuzzAnswer> => {
    const op = byId.get(req.operation)!
    const { path, headers, body } = render(req, op, opts.fixtures())
    Object.assign(headers, opts.identities?.[req.identity] ?? {})
    const line = `#${req.seq} ${req.method} ${path.length > 300 ? `${path.slice(0, 300)}…(${path.length} chars)` : path} [${req.mutation}]`
    opts.trace?.(`${line} ${excerpt(body, 200)}`)
    const started = performance.now()
    return new Promise((done) => {
      const finish = (status: number, responseExcerpt: string, contentType = '') => {
        out.destroy()
        done({ request: req, line, bodyExcerpt: excerpt(body), status, responseExcerpt, contentType, ms: performance.now() - started })
      }
      // A connection of its own per request, so that one that breaks its connection cannot take an innocent one
      // down with it; but asked as keep-alive: with `Connection: close` a server that answers before reading a
      // body it does not need (correct) closes with the body unread, and the client sees a reset, not the answer.
      const out = httpRequest({ host: url.hostname, port: url.port, method: req.method, path, headers: { connection: 'keep-alive', ...headers }, agent: false }, (res) => {
        const type = String(res.headers['content-type'] ?? '')
        // An event stream stays open by design: its status is the answer.
        if (type.startsWith('text/event-stream')) {
          res.destroy()
          finish(res.statusCode ?? 0, '(event stream)', type)
          return
        }
        const parts: Buffer[] = []
        res.on('data', (c: Buffer) => parts.push(c))
        res.on('end', () => finish(res.statusCode ?? 0, excerpt(Buffer.concat(parts)), type))
        res.on('error', (err) => finish(res.statusCode ?? 0, `(response error: ${err.message})`, type))
      })
      out.setTimeout(opts.requestTimeoutMs ?? 30_000, () => out.destroy(new Error('no response in time')))
      out.on('error', (err) => finish(0, `(request error: ${err.message})`))
      out.end(body ?? undefined)
    })
  }
  const batch = opts.batch ?? 250
  const workers = opts.concurrency ?? 4
  for (let from = 0; from < requests.length; from += batch) {
    const slice = requests.slice(from, from + batch)
    let next = 0
    await Promise.all(Array.from({ length: workers }, async () => {
      while (next < slice.length) answers.push(await one(slice[next++]))
    }))
    await opts.between?.()
  }
  return answers.sort((a, b) => a.request.seq - b.request.seq)
}

/** Total time by operation, slowest first: where a run spends its time. */
export function timeByOperation(answers: readonly FuzzAnswer[], top = 6): string {
  const total = new Map<string, { ms: number; n: number }>()
  for (const a of answers) {
    const t = total.get(a.request.operation) ?? { ms: 0, n: 0 }
    t.ms += a.ms
    t.n++
    total.set(a.request.operation, t)
  }
  return [...total].sort(([, a], [, b]) => b.ms - a.ms).slice(0, top)
    .map(([op, t]) => `${op} ${(t.ms / 1000).toFixed(1)} s / ${t.n}`).join('; ')
}

/** The failure list: one line per request, with what was sent and what came back. */
export function describeFailures(answers: readonly FuzzAnswer[], isFailure: (a: FuzzAnswer) => boolean, max = 40): string {
  const failed = answers.filter(isFailure)
  const lines = failed.slice(0, max).map((a) => `  ${a.status} after ${Math.round(a.ms)} ms ${a.line}\n      body: ${a.bodyExcerpt || '(none)'}\n      answer: ${a.responseExcerpt}`)
  if (failed.length > max) lines.push(`  … and ${failed.length - max} more`)
  return lines.join('\n')
}
