// The search cache of one process (embedded engines): versions and answers in maps. The process that owns
// data_dir is the only writer, so its own counters are the whole truth, and everything starts empty again with it.
import type { SearchCache } from '../ports.ts'

export interface MemorySearchCacheOptions {
  /** Entry lifetime. */
  ttlMs: number
  /** At most this many answers; the least recently used go first. */
  maxEntries: number
  /** At most about this many bytes of answers (string length x 2, as V8 may hold them). */
  maxBytes: number
  now?: () => number
}

interface Entry {
  value: string
  kbIds: readonly string[]
  expires: number
}

export function createMemorySearchCache(options: MemorySearchCacheOptions): SearchCache {
  const { ttlMs, maxEntries, maxBytes } = options
  if (!(ttlMs > 0)) throw new Error('createMemorySearchCache: ttlMs must be > 0')
  if (!(maxEntries >= 1)) throw new Error('createMemorySearchCache: maxEntries must be >= 1')
  if (!(maxBytes >= 1)) throw new Error('createMemorySearchCache: maxBytes must be >= 1')
  const now = options.now ?? Date.now
  // Only KBs that were written to, or searched with results, have a version: ids sent in requests are not kept.
  const versions = new Map<string, number>()
  // Insertion order is recency order: a hit moves its entry to the end.
  const entries = new Map<string, Entry>()
  let bytes = 0

  const entryKey = (key: string, v: readonly string[]) => `${key}|${v.join('.')}`
  // The entry key last made for a key, with the KB versions it was made at: a repeated lookup (a cache hit's common
  // case) reuses it while those versions hold, instead of building and hashing a new string (about 7k instructions
  // of a 62k-instruction cached search under callgrind). Emptied when it reaches twice maxEntries.
  const madeKeys = new Map<string, { nums: number[]; v: string[]; k: string }>()
  const sameVersions = (nums: readonly number[], kbIds: readonly string[]) => {
    if (nums.length !== kbIds.length) return false
    for (let i = 0; i < nums.length; i++) if (versions.get(kbIds[i]) !== nums[i]) return false
    return true
  }
  const size = (e: Entry) => e.value.length * 2
  const drop = (k: string, e: Entry) => {
    entries.delete(k)
    bytes -= size(e)
  }

  const lookupNow = (key: string, kbIds: readonly string[]): { versions: string[] | null; value: string | null } => {
    const made = madeKeys.get(key)
    let v: string[]
    let k: string
    if (made !== undefined && sameVersions(made.nums, kbIds)) {
      v = made.v.slice()
      k = made.k
    } else {
      v = []
      const nums: number[] = []
      for (const id of kbIds) {
        const n = versions.get(id)
        if (n === undefined) return { versions: null, value: null }
        v.push(String(n))
        nums.push(n)
      }
      k = entryKey(key, v)
      if (madeKeys.size >= 2 * maxEntries) madeKeys.clear()
      madeKeys.set(key, { nums, v: v.slice(), k })
    }
    const e = entries.get(k)
    if (!e) return { versions: v, value: null }
    if (e.expires <= now()) {
      drop(k, e)
      return { versions: v, value: null }
    }
    entries.delete(k)
    entries.set(k, e)
    return { versions: v, value: e.value }
  }

  return {
    name: 'memory',
    lookupNow,
    async lookup(key, kbIds) {
      return lookupNow(key, kbIds)
    },
    async store(key, kbIds, v, value) {
      const e: Entry = { value, kbIds: [...kbIds], expires: now() + ttlMs }
      if (size(e) > maxBytes) return
      const k = entryKey(key, v)
      const old = entries.get(k)
      if (old) drop(k, old)
      entries.set(k, e)
      bytes += size(e)
      for (const [oldest, o] of entries) {
        if (entries.size <= maxEntries && bytes <= maxBytes) break
        drop(oldest, o)
      }
    },
    async init(kbIds) {
      for (const id of kbIds) if (!versions.has(id)) versions.set(id, 1)
    },
    async bump(kbId) {
      versions.set(kbId, (versions.get(kbId) ?? 0) + 1)
    },
    async clear(kbId) {
      let n = 0
      for (const [k, e] of entries) {
        if (kbId !== undefined && !e.kbIds.includes(kbId)) continue
        drop(k, e)
        if (e.expires > now()) n++
      }
      return n
    },
    async close() {
      entries.clear()
      madeKeys.clear()
      bytes = 0
    },
  }
}
