// The search cache of the older service (notes.md, wire details): answers are kept under a key made of the
// query, the resolved options, the filter (and the KBs its tags chose), the KBs' per-KB settings and the
// service's retrieval settings, at the KBs' index versions (adapters/ports.ts SearchCache). A write to a KB
// bumps its version, so the next search misses at once.
// A hit is the stored answer byte for byte, except meta.cache_status and meta.latency_ms, which close it.
import * as crypto from 'node:crypto'
import type { Embedder, SearchCache } from '../../adapters/ports.ts'
import type { Settings } from '../../kernel/config/schema.ts'
import type { Logger } from '../../kernel/log.ts'
import type { SearchInput, SearchOutput, SearchPlan, SearchService, SearchTiming } from './service.ts'
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

/** The whole plan is the key, so that a field added to it later (a filter) cannot be left out of the key. */
export function cacheKey(fingerprint: string, p: SearchPlan): string {
  // The settings only: the per-KB cache entries also carry when they were read.
  const merges = p.kbIds.map((id) => {
    const m = p.merges.get(id)!
    return [m.enabled, m.threshold]
  })
  return sha256(JSON.stringify([fingerprint, { ...p, merges }]))
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

export interface CachedSearch {
  /** The answer's JSON text, from the cache or searched (and then kept); `timing` is filled when given. */
  searchJson(input: SearchInput, timing?: SearchTiming): Promise<string>
  /** DELETE /api/search/cache: removes the answers that include kb_id (every answer when omitted). */
  clear(kbId?: string): Promise<number>
}

export function createCachedSearch(service: SearchService, cache: SearchCache, fingerprint: string, log: Logger): CachedSearch {
  /** A cache that cannot answer costs a miss, never a failed search; it is said once per outage, not per request. */
  let failing = false
  const warn = (op: string, err: unknown) => {
    if (!failing) log.warn({ err: (err as Error)?.message, op }, 'search cache unavailable; searching without it')
    failing = true
  }

  return {
    async searchJson(input, timing) {
      const started = performance.now()
      const plan = await service.plan(input)
      const key = cacheKey(fingerprint, plan)
      let versions: string[] | null = null
      // No KB left (tags matched none): nothing to look up, and Redis refuses a lookup of no keys.
      if (plan.kbIds.length > 0) try {
        const found = await cache.lookup(key, plan.kbIds)
        failing = false
        if (found.value !== null) {
          const ms = Math.round(performance.now() - started)
          telemetry.searched(plan.opts.mode, plan.kbIds.length, 'hit', ms)
          if (timing) timing.cache = 'hit'
          return finish(found.value, 'hit', ms)
        }
        versions = found.versions
      } catch (err) {
        warn('lookup', err)
      }
      if (timing) timing.cache = 'miss'
      const { output, kbsWithHits } = await service.run(plan, started, timing)
      const { head, latency } = serialise(output)
      // A fallback is a passing failure of the reranker: it is not what the next caller should get.
      if (!output.meta.rerank_fallback) {
        if (versions !== null) cache.store(key, plan.kbIds, versions, head).catch((err) => warn('store', err))
        else if (kbsWithHits.length > 0 && !failing) cache.init(kbsWithHits).catch((err) => warn('init', err))
      }
      telemetry.searched(plan.opts.mode, plan.kbIds.length, 'miss', latency)
      return finish(head, 'miss', latency)
    },
    clear: (kbId) => cache.clear(kbId),
  }
}
