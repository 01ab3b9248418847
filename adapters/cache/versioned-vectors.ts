// The vector store as every plugin sees it: each write bumps the KB's index version in the search cache once it
// has landed (or failed part way), so no write path can forget to invalidate cached search answers. Search
// itself reads vectors (never a document's status), and the parent texts of auto-merge, whose writer bumps the
// version itself (plugins/docs/pipeline.ts); per-KB settings are in the search key.
import type { SearchCache, VectorStore } from '../ports.ts'

export function withIndexVersions(store: VectorStore, cache: Pick<SearchCache, 'bump'>): VectorStore {
  // After the write, never before: a search that reads the old version while the write lands could otherwise
  // store an answer without the write under the new version.
  const bumped = async <R>(kbId: string, write: () => Promise<R>): Promise<R> => {
    let result: R
    try {
      result = await write()
    } catch (err) {
      // Part of a failed write may have landed; the write's own error is the one to report.
      await cache.bump(kbId).catch(() => {})
      throw err
    }
    // The write landed: a failed bump (the cache store blinking) must not turn it into a failed write, which
    // callers would undo. An answer cached meanwhile lives at most search_cache.ttl_sec.
    await cache.bump(kbId).catch(() => {})
    return result
  }
  // The driver's own extras (the embedded store's whenIndexed, used by benchmarks) stay reachable through the prototype.
  const wrapped: VectorStore = Object.create(store)
  return Object.assign(wrapped, {
    dropCollection: (kbId: string) => bumped(kbId, () => store.dropCollection(kbId)),
    upsert: (kbId: string, points: Parameters<VectorStore['upsert']>[1]) => bumped(kbId, () => store.upsert(kbId, points)),
    deleteByDoc: (kbId: string, docId: string) => bumped(kbId, () => store.deleteByDoc(kbId, docId)),
  })
}
