// The search cache as the benchmark drives it: a real cache whose storing can be switched off, so that the
// miss path (key, lookup, search, serialise) runs on every request while repeated queries never hit.
import type { SearchCache } from '../../adapters/ports.ts'

export interface GatedCache extends SearchCache {
  storing: boolean
}

export function gateCache(cache: SearchCache): GatedCache {
  const gate: GatedCache = {
    name: cache.name,
    storing: false,
    lookup: (key, kbIds) => cache.lookup(key, kbIds),
    // as the service sees the cache: answered at once when the cache is in this process
    lookupNow: cache.lookupNow === undefined ? undefined : (key, kbIds) => cache.lookupNow!(key, kbIds),
    store: async (key, kbIds, versions, value) => {
      if (gate.storing) await cache.store(key, kbIds, versions, value)
    },
    init: (kbIds) => cache.init(kbIds),
    bump: (kbId) => cache.bump(kbId),
    clear: (kbId) => cache.clear(kbId),
    close: () => cache.close(),
  }
  return gate
}
