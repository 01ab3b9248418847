// The search cache of the older service (notes.md, wire details): answers are kept under a key made of the
// query, the resolved options, the filter (and the KBs its tags chose), the KBs' per-KB settings and the
// service's retrieval settings, at the KBs' index versions (adapters/ports.ts SearchCache). A write to a KB
// bumps its version, so the next search misses at once.
// A hit is the stored answer byte for byte, except meta.cache_status and meta.latency_ms, which close it.
import * as crypto from 'node:crypto'
import type { Embedder, SearchCache } from '../../adapters/ports.ts'
import type { Settings } from '../../kernel/config/schema.ts'
import type { Logger } from '../../kernel/log.ts'
import type { ResolvedOptions, SearchInput, SearchOutput, SearchPlan, SearchService, SearchTiming } from './service.ts'
import { telemetry } from '../../kernel/telemetry.ts'

/** Raised when the stored format changes, so that instances of two releases never read each other's answers. */
const FORMAT = 1

// crypto.hash (Node 20.12+): one call instead of a Hash object per key; the same digest either way
const sha256: (text: string) => string = typeof crypto.hash === 'function'
  ? (text) => crypto.hash('sha256', text, 'base64url')
  : (text) => crypto.createHash('sha256').update(text).digest('base64url')

/**
 * What every answer of this service depends on besides the request: settings read at start, the embedder.
 * Hashed once here, so that the key of each request hashes a few short fields only.
 */
export function settingsFingerprint(retrieval: Settings['retrieval'], embedder: Pick<Embedder, 'name' | 'model' | 'dimensions'>): string {
  const { rerank, ...rest } = retrieval
  const { api_key: _secret, ...rerankShown } = rerank
  return sha256(JSON.stringify([FORMAT, rest, rerankShown, embedder.name, embedder.model, embedder.dimensions]))
}

/** Compiles only when K names every field of T: a field added to the plan must be added to its key. */
type Every<T, K extends keyof T> = Exclude<keyof T, K> extends never ? true : never
const PLAN_IN_KEY: Every<SearchPlan, 'query' | 'kbIds' | 'opts' | 'merges' | 'filter'> = true
const OPTIONS_IN_KEY: Every<ResolvedOptions, 'mode' | 'top_k' | 'alpha' | 'min_score' | 'rerank' | 'rerank_top_n'> = true
void [PLAN_IN_KEY, OPTIONS_IN_KEY]

/** Keys by their text, so that a repeated request hashes nothing; emptied past this many characters of text. */
const KEYS_MAX_CHARS = 4 * 1024 * 1024
const keys = new Map<string, string>()
let keyChars = 0

/** A string as its length and itself: texts joined this way split back one way only, with nothing escaped. */
const counted = (s: string) => `${s.length}:${s}`

/**
 * The whole plan is the key (the types above refuse a plan field left out), written as one text that two different
 * plans never share: strings with their lengths, numbers and flags in a fixed order, the filter (rare) last as
 * JSON. Built by joining, without JSON.stringify's per-call cost; the hash of a text already seen is looked up, not
 * computed.
 */
export function cacheKey(fingerprint: string, p: SearchPlan): string {
  const again = p.filter === undefined ? seenKey(fingerprint, p) : undefined
  if (again !== undefined) return again
  const o = p.opts
  let text = `${counted(fingerprint)}|${counted(p.query)}|${counted(o.mode)}${o.top_k},${o.alpha},${o.min_score},${o.rerank ? 1 : 0},${o.rerank_top_n}|${p.kbIds.length}`
  // The merge settings only: the per-KB cache entries also carry when they were read.
  for (const id of p.kbIds) {
    const m = p.merges.get(id)!
    text += `|${counted(id)}${m.enabled ? 1 : 0},${m.threshold}`
  }
  text += p.filter === undefined ? '|' : `|${JSON.stringify(p.filter)}`
  let key = keys.get(text)
  if (key === undefined) {
    key = sha256(text)
    if (keyChars + text.length > KEYS_MAX_CHARS) {
      keys.clear()
      keyChars = 0
    }
    keys.set(text, key)
    keyChars += text.length
  }
  if (p.filter === undefined) remember(fingerprint, p, key)
  return key
}

/**
 * Plans without a filter whose keys were made, by query, with their fields: a plan that repeats one field for field
 * gets its key without a text being built and hashed (the query's hash is kept in the string, which a repeated
 * request body shares: kernel/app.ts jsonBody). Equal fields make the same text, so the same key; anything else
 * goes the way above. A field added to the key's text must be compared in sameFields too.
 */
interface SeenPlan {
  fingerprint: string
  kbIds: readonly string[]
  opts: ResolvedOptions
  merges: { enabled: boolean; threshold: number }[]
  key: string
}
const PLANS_PER_QUERY = 8
const plansByQuery = new Map<string, SeenPlan[]>()
let planChars = 0

function sameFields(s: SeenPlan, fingerprint: string, p: SearchPlan): boolean {
  const a = s.opts
  const b = p.opts
  if (s.fingerprint !== fingerprint || s.kbIds.length !== p.kbIds.length || a.mode !== b.mode || a.top_k !== b.top_k || a.alpha !== b.alpha
    || a.min_score !== b.min_score || a.rerank !== b.rerank || a.rerank_top_n !== b.rerank_top_n) return false
  for (let i = 0; i < s.kbIds.length; i++) {
    const id = p.kbIds[i]
    if (s.kbIds[i] !== id) return false
    const m = p.merges.get(id)!
    if (s.merges[i].enabled !== m.enabled || s.merges[i].threshold !== m.threshold) return false
  }
  return true
}

function seenKey(fingerprint: string, p: SearchPlan): string | undefined {
  const plans = plansByQuery.get(p.query)
  if (plans !== undefined) for (const s of plans) if (sameFields(s, fingerprint, p)) return s.key
  return undefined
}

function remember(fingerprint: string, p: SearchPlan, key: string): void {
  if (planChars + p.query.length > KEYS_MAX_CHARS) {
    plansByQuery.clear()
    planChars = 0
  }
  let plans = plansByQuery.get(p.query)
  if (plans === undefined) {
    plansByQuery.set(p.query, (plans = []))
    planChars += p.query.length
  }
  if (plans.length >= PLANS_PER_QUERY) plans.shift()
  plans.push({ fingerprint, kbIds: [...p.kbIds], opts: { ...p.opts }, merges: p.kbIds.map((id) => ({ ...p.merges.get(id)! })), key })
}

/**
 * The answer as sent, split before its last two fields: `head` is what is cached and ends with the comma before
 * cache_status (the meta object's last but one field, SearchOutput).
 */
export function serialise(out: SearchOutput): { head: string; latency: number } {
  const latency = out.meta.latency_ms
  const json = JSON.stringify(out)
  // meta is the answer's last field and these two its last (SearchOutput), holding no user text: the head is
  // the text before them, cut rather than serialised from a copy of the answer without them.
  const tail = `"cache_status":${JSON.stringify(out.meta.cache_status)},"latency_ms":${latency}}}`
  if (json.endsWith(tail)) return { head: json.slice(0, -tail.length), latency }
  const { cache_status: _status, latency_ms: _latency, ...meta } = out.meta
  const rest = JSON.stringify({ ...out, meta })
  return { head: `${rest.slice(0, -2)},`, latency }
}

export const finish = (head: string, status: 'hit' | 'miss', latencyMs: number) =>
  `${head}"cache_status":"${status}","latency_ms":${latencyMs}}}`

/** Encoded hit answers kept at most (UTF-8 bytes, plus the cached text when the cache hands out copies of it). */
export const HIT_BYTES_MAX = 16 * 1024 * 1024

const utf8 = new TextEncoder()
/** What finish() puts after the head of a hit answered in under half a millisecond. */
const HIT_TAIL = utf8.encode(finish('', 'hit', 0))

/**
 * A hit answered in under half a millisecond (nearly every hit) is the same bytes each time: its cached text with
 * "hit" and latency 0. Those bytes are kept here by cache key, beside the text they were made from, and sent as
 * they are: no text joined and no UTF-8 conversion per hit. Kept only while the cache still hands out the same
 * text for the key (compared on each hit: the same string for the in-process cache, equal ones from Redis), so
 * they can never say anything the cache would not; the oldest go first past HIT_BYTES_MAX.
 * A miss whose answer the cache stores has them made once the answer is sent (stored(): in the next turn of the
 * event loop), so that the first hit of a key encodes nothing either, and the miss waits for nothing more.
 */
export function createHitBytes(maxBytes = HIT_BYTES_MAX) {
  const kept = new Map<string, { head: string; bytes: Uint8Array; size: number }>()
  let total = 0
  const keep = (key: string, head: string, bytes: Uint8Array): void => {
    const e = kept.get(key)
    if (e !== undefined) {
      kept.delete(key)
      total -= e.size
    }
    const size = bytes.byteLength + head.length
    if (size > maxBytes / 16) return
    kept.set(key, { head, bytes, size })
    total += size
    for (const [k, old] of kept) {
      if (total <= maxBytes) break
      kept.delete(k)
      total -= old.size
    }
  }
  // Keys whose answers were just stored, made into bytes together after the answers went out.
  const pending = new Map<string, string>()
  let scheduled: NodeJS.Immediate | null = null
  const makePending = (): void => {
    scheduled = null
    for (const [key, head] of pending) if (kept.get(key)?.head !== head) keep(key, head, hitBytesOf(head))
    pending.clear()
  }
  return {
    get(key: string, head: string): Uint8Array {
      const e = kept.get(key)
      if (e !== undefined && e.head === head) return e.bytes
      const bytes = hitBytesOf(head)
      keep(key, head, bytes)
      return bytes
    },
    /** The cache stored `head` under `key`: its hit bytes are made in the next turn of the event loop. */
    stored(key: string, head: string): void {
      pending.set(key, head)
      scheduled ??= setImmediate(makePending)
    },
    get size() {
      return kept.size
    },
  }
}

/**
 * finish(head, 'hit', 0) as UTF-8, in one array that owns its memory (a small Buffer.from would pin a shared 8 KB
 * pool slab): the head encoded into it in place, then the tail.
 */
function hitBytesOf(head: string): Uint8Array {
  const n = Buffer.byteLength(head, 'utf8')
  const out = new Uint8Array(n + HIT_TAIL.byteLength)
  utf8.encodeInto(head, out)
  out.set(HIT_TAIL, n)
  return out
}

export interface CachedSearch {
  /** The answer's JSON text, from the cache or searched (and then kept); `timing` is filled when given. */
  searchJson(input: SearchInput, timing?: SearchTiming): Promise<string>
  /**
   * The answer as sent: searchJson's text, or the same text already encoded (UTF-8 bytes, for most hits the same
   * object on every hit of a key: to be sent, never changed). A hit found in a cache held in this process
   * (SearchCache.lookupNow), with a plan that needs no look-up (service.planNow), is answered at once, without a
   * promise; a request refused there throws at once.
   */
  searchBody(input: SearchInput, timing?: SearchTiming): string | Uint8Array | Promise<string | Uint8Array>
  /** DELETE /api/search/cache: removes the answers that include kb_id (every answer when omitted). */
  clear(kbId?: string): Promise<number>
}

/** A lookup's answer (SearchCache.lookup). */
type Found = { versions: string[] | null; value: string | null }

export function createCachedSearch(service: SearchService, cache: SearchCache, fingerprint: string, log: Logger): CachedSearch {
  /** A cache that cannot answer costs a miss, never a failed search; it is said once per outage, not per request. */
  let failing = false
  const warn = (op: string, err: unknown) => {
    if (!failing) log.warn({ err: (err as Error)?.message, op }, 'search cache unavailable; searching without it')
    failing = true
  }

  const hitBytes = createHitBytes()
  const decoder = new TextDecoder()

  const hit = (plan: SearchPlan, key: string, value: string, started: number, timing: SearchTiming | undefined): string | Uint8Array => {
    const ms = Math.round(performance.now() - started)
    telemetry.searched(plan.opts.mode, plan.kbIds.length, 'hit', ms)
    if (timing) timing.cache = 'hit'
    return ms === 0 ? hitBytes.get(key, value) : finish(value, 'hit', ms)
  }

  const miss = async (plan: SearchPlan, key: string, versions: string[] | null, started: number, timing: SearchTiming | undefined): Promise<string | Uint8Array> => {
    if (timing) timing.cache = 'miss'
    const { output, kbsWithHits } = await service.run(plan, started, timing)
    const { head, latency } = serialise(output)
    telemetry.searched(plan.opts.mode, plan.kbIds.length, 'miss', latency)
    // A fallback is a passing failure of the reranker: it is not what the next caller should get.
    if (!output.meta.rerank_fallback) {
      if (versions !== null) {
        cache.store(key, plan.kbIds, versions, head).catch((err) => warn('store', err))
        hitBytes.stored(key, head)
      } else if (kbsWithHits.length > 0 && !failing) cache.init(kbsWithHits).catch((err) => warn('init', err))
    }
    return finish(head, 'miss', latency)
  }

  /** What the cache answered: the hit, or the search at the versions it gave. */
  const answered = (plan: SearchPlan, key: string, found: Found, started: number, timing: SearchTiming | undefined): string | Uint8Array | Promise<string | Uint8Array> => {
    failing = false
    return found.value !== null ? hit(plan, key, found.value, started, timing) : miss(plan, key, found.versions, started, timing)
  }

  /** The cache could not answer: the search, not stored. */
  const unanswered = (plan: SearchPlan, key: string, err: unknown, started: number, timing: SearchTiming | undefined): Promise<string | Uint8Array> => {
    warn('lookup', err)
    return miss(plan, key, null, started, timing)
  }

  /** The cache asked, then the hit or the search; `plan` when made already. */
  const searchLater = async (input: SearchInput, planned: SearchPlan | null, started: number, timing: SearchTiming | undefined): Promise<string | Uint8Array> => {
    const plan = planned ?? await service.plan(input)
    const key = cacheKey(fingerprint, plan)
    // No KB left (tags matched none): nothing to look up, and Redis refuses a lookup of no keys.
    if (plan.kbIds.length === 0) return miss(plan, key, null, started, timing)
    let found: Found
    try {
      found = await cache.lookup(key, plan.kbIds)
    } catch (err) {
      return unanswered(plan, key, err, started, timing)
    }
    return answered(plan, key, found, started, timing)
  }

  const searchBody = (input: SearchInput, timing?: SearchTiming): string | Uint8Array | Promise<string | Uint8Array> => {
    const started = performance.now()
    // Without a promise turn when the plan needs no look-up (service.planNow), as on most cache hits.
    const plan = service.planNow(input)
    if (plan === null || cache.lookupNow === undefined || plan.kbIds.length === 0) return searchLater(input, plan, started, timing)
    const key = cacheKey(fingerprint, plan)
    let found: Found
    try {
      found = cache.lookupNow(key, plan.kbIds)
    } catch (err) {
      return unanswered(plan, key, err, started, timing)
    }
    return answered(plan, key, found, started, timing)
  }

  return {
    searchBody,
    async searchJson(input, timing) {
      const body = await searchBody(input, timing)
      return typeof body === 'string' ? body : decoder.decode(body)
    },
    clear: (kbId) => cache.clear(kbId),
  }
}
