// Search over one or many KBs (spec 4.10): the query is embedded and sparse-encoded once for all KBs, KBs
// are searched concurrently, fused in each KB, then pooled across KBs; optional auto-merge and reranking.
// No metadata round trip per result: results are built from the vector payloads.
import type { Adapters, VectorFilter, VectorHit, VectorStore } from '../../adapters/ports.ts'
import { tieKeyOf } from '../../adapters/vectors/payloads.ts'
import { rescoredRows } from '../../adapters/vectors/rescore.ts'
import { encodeQuery } from '../../compute/text/sparse.ts'
import type { Settings } from '../../kernel/config/schema.ts'
import { AppError, ValidationError } from '../../kernel/errors.ts'
import type { Caller } from '../../kernel/plugin.ts'
import type { Logger } from '../../kernel/log.ts'
import { planFilter, resolveFilter } from './filter.ts'
import { fuseInKb, inKbFusionK, poolByRank, poolByScore, storeLimit, type Pooled, type Ranked } from './fusion.ts'
import { autoMerge, sqlParentLoader } from './merge.ts'
import { rerank } from './rerank.ts'
import { telemetry } from '../../kernel/telemetry.ts'

export interface SearchInput {
  query: string
  kb_ids?: string[]
  options?: Record<string, any>
}

export interface ResolvedOptions {
  mode: 'hybrid' | 'similarity'
  top_k: number
  alpha: number
  min_score: number
  rerank: boolean
  rerank_top_n: number
}

export interface SearchResultItem {
  chunk_id: string
  kb_id: string
  doc_id: string
  title: string
  source_type: string
  source: string
  doc_type: string
  chunk_index: number | null
  page_num: number
  page_label: string
  text: string
  score: number
  /** The reranker's relevance; null when the results were not reranked (notes.md, wire details). */
  rerank_score: number | null
  updated_at: string
  merged: boolean
  parent_chunk_id: string | null
}

export interface SearchOutput {
  query: string
  results: SearchResultItem[]
  meta: {
    total_candidates: number
    returned: number
    search_mode: string
    score_threshold: number
    reranked: boolean
    rerank_provider: string
    rerank_fallback: boolean
    /** Last but one, before latency_ms: a cached answer differs from a fresh one in these two only (cache.ts). */
    cache_status: 'hit' | 'miss'
    latency_ms: number
  }
}

/** A validated request, with everything its answer depends on besides the KBs' data. */
export interface SearchPlan {
  query: string
  kbIds: string[]
  opts: ResolvedOptions
  merges: Map<string, { enabled: boolean; threshold: number }>
  /** The chunk conditions of options.filter, applied by every KB's store; kbIds are already narrowed by its tags. */
  filter: VectorFilter | undefined
}

export interface SearchRun {
  output: SearchOutput
  /** The KBs that contributed candidates: they exist and hold vectors. */
  kbsWithHits: string[]
}

/**
 * Where a search's time went, in milliseconds (the Server-Timing header of POST /api/search): the query's
 * embedding, each KB's search (concurrent, so they overlap), the fusion across KBs and the reranker. A stage
 * that did not run is absent; a cached answer has none of them.
 */
export interface SearchTiming {
  cache?: 'hit' | 'miss'
  embed?: number
  kb: [kbId: string, ms: number][]
  fusion?: number
  rerank?: number
}

/** An entry of a KB's list as pooling takes it: a fused or scored hit, or a merged parent (MergeItem). */
type KbEntry = Ranked & { merged?: boolean }

export const KB_IDS_REQUIRED = 'kb_ids must contain at least one entry.'

/** Request options over global settings; nested ({hybrid: {alpha}}) and dot-key ("hybrid.alpha") forms both count. */
export function resolveOptions(o: Record<string, any> = {}, r: Settings['retrieval']): ResolvedOptions {
  return {
    mode: o.mode ?? r.mode,
    top_k: o.top_k ?? r.top_k,
    alpha: o['hybrid.alpha'] ?? o.hybrid?.alpha ?? r.hybrid.alpha,
    min_score: o['similarity.min_score'] ?? o.similarity?.min_score ?? r.similarity.min_score,
    // The request can switch reranking off, never on: both must agree (notes.md).
    rerank: (o['rerank.enabled'] ?? o.rerank?.enabled ?? true) && r.rerank.enabled,
    rerank_top_n: o['rerank.top_n'] ?? o.rerank?.top_n ?? r.rerank.top_n,
  }
}

const MERGE_TTL_MS = 2000
/** KB sizes (for the dense effort of a search over several KBs) are counted at most this often per KB. */
const SIZE_TTL_MS = 5000
/** The per-KB caches are emptied when they hold more KBs than this (ids from requests are not trusted to be few). */
const CACHE_MAX_KBS = 10_000

/**
 * The ids of a per-KB cache to load again: missing or older than ttlMs. A cache the load would grow past
 * CACHE_MAX_KBS is emptied first, and then every id is to load.
 */
function staleIds(cache: Map<string, { at: number }>, ids: readonly string[], now: number, ttlMs: number): readonly string[] {
  const stale = ids.filter((id) => (cache.get(id)?.at ?? -Infinity) < now - ttlMs)
  if (stale.length === 0 || cache.size + stale.length <= CACHE_MAX_KBS) return stale
  cache.clear()
  return ids
}

export function createSearchService(adapters: Adapters, settings: Readonly<Settings>, log: Logger) {
  const { vectors, embedder, sql } = adapters
  const r = settings.retrieval
  const loadParents = sqlParentLoader(sql)
  // Per-KB auto-merge settings (overridable), read at most every MERGE_TTL_MS per KB: not per request.
  const mergeCache = new Map<string, { at: number; enabled: boolean; threshold: number }>()

  const sizeCache = new Map<string, { at: number; n: number }>()

  /**
   * The dense effort of each KB in a search over several: its share of the chunks searched (VectorQuery.effort),
   * so that ten KBs of 10k chunks cost about what one of 100k does rather than ten times as much. One KB, or
   * KBs holding nothing: full effort.
   */
  async function denseEfforts(kbIds: readonly string[]): Promise<Map<string, number> | undefined> {
    if (kbIds.length < 2) return undefined
    const now = Date.now()
    const missing = staleIds(sizeCache, kbIds, now, SIZE_TTL_MS)
    if (missing.length > 0) {
      await Promise.all(missing.map(async (id) => {
        let n = 0
        try {
          n = await vectors.count(id)
        } catch (err) {
          if (!(err instanceof AppError && err.status === 404)) throw err
        }
        sizeCache.set(id, { at: now, n })
      }))
    }
    const sizes = kbIds.map((id) => sizeCache.get(id)?.n ?? 0)
    const total = sizes.reduce((a, b) => a + b, 0)
    if (total === 0) return undefined
    // An empty (or unknown) KB gets no effort of its own: its store answers from nothing, or with full effort if
    // it filled since it was counted.
    return new Map(kbIds.flatMap((id, i) => (sizes[i] > 0 ? [[id, sizes[i] / total] as const] : [])))
  }

  async function mergeSettings(kbIds: readonly string[]): Promise<Map<string, { enabled: boolean; threshold: number }>> {
    const now = Date.now()
    const missing = staleIds(mergeCache, kbIds, now, MERGE_TTL_MS)
    if (missing.length > 0) {
      const rows = await sql.query<{ kb_id: string; overrides: Record<string, unknown> | null }>(
        'SELECT kb_id, overrides FROM kb_settings_overrides WHERE kb_id = ANY($1::text[])', [missing])
      const byKb = new Map(rows.map((row) => [row.kb_id, row.overrides ?? {}]))
      for (const id of missing) {
        const o = byKb.get(id) ?? {}
        mergeCache.set(id, {
          at: now,
          enabled: (o['retrieval.auto_merge.enabled'] as boolean | undefined) ?? r.auto_merge.enabled,
          threshold: (o['retrieval.auto_merge.merge_threshold'] as number | undefined) ?? r.auto_merge.merge_threshold,
        })
      }
    }
    return new Map(kbIds.map((id) => [id, mergeCache.get(id)!]))
  }

  async function searchKb(kbId: string, opts: ResolvedOptions, dense: Float32Array | undefined, sparse: ReturnType<typeof encodeQuery> | undefined, merge: { enabled: boolean; threshold: number }, effort: number | undefined, filter: VectorFilter | undefined, twoSteps: boolean) {
    // Two steps: a KB's candidates as far as the margin of all KBs' reaches (rescoreAcrossKbs).
    const limit = twoSteps ? rescoredRows(opts.top_k) : storeLimit(opts.mode, opts.top_k, inKbFusionK(r.hybrid), effort)
    const rankOnly = opts.mode === 'hybrid' || twoSteps
    let hits
    try {
      // Hybrid fusion reads the dense list's ranks only (fuseInKb): its scores need not be exact; nor do those of a
      // similarity search in two steps (rescoreAcrossKbs).
      hits = await vectors.search(kbId, { dense, sparse, limit, effort, filter, rankOnly })
    } catch (err) {
      // A KB deleted while being searched contributes nothing; a store that is down is still an error.
      if (err instanceof AppError && err.status === 404) return { ranked: [] as KbEntry[], candidates: 0 }
      throw err
    }
    let ranked: Ranked[]
    let candidates: number
    if (opts.mode === 'hybrid') {
      const counts = { candidates: 0 }
      ranked = fuseInKb(hits.dense, hits.sparse, opts.alpha, inKbFusionK(r.hybrid), opts.top_k, counts)
      candidates = counts.candidates
    } else {
      // The store returns at most `limit` hits in this mode: top_k, or the candidates of two steps (of which a KB's
      // own top_k count, as in one step).
      ranked = hits.dense.map((hit) => ({ hit, score: hit.score }))
      candidates = Math.min(ranked.length, opts.top_k)
    }
    // Payloads are read here only when auto-merge is on; otherwise only for the pooled results. A list that was not
    // merged goes to pooling as it is (pooling reads a missing `merged` as false).
    const merged: KbEntry[] = merge.enabled && ranked.some((x) => x.hit.payload.parent_chunk_id !== null)
      ? await autoMerge(ranked, merge.threshold, loadParents)
      : ranked
    return { ranked: merged, candidates }
  }

  /** The KBs asked for (each once) and the query, or the request's refusal: the checks plan() and planNow() share. */
  function checked(input: SearchInput): { kbIds: string[]; query: string } {
    const kbIds = [...new Set(input.kb_ids ?? [])]
    if (kbIds.length === 0) throw new AppError('KB_IDS_REQUIRED', 422, KB_IDS_REQUIRED)
    const query = input.query
    if (query.trim().length === 0) throw new ValidationError([{ loc: ['body', 'query'], msg: 'query must not be blank', type: 'string_too_short' }])
    return { kbIds, query }
  }

  /**
   * plan() without waiting, where it needs nothing it must wait for: no tags in the filter (tags choose KBs through
   * the metadata store) and every KB's merge settings read within MERGE_TTL_MS. Null otherwise: then plan(). The
   * same plan as plan() gives; a cache hit then reaches its lookup without the three promise turns plan() takes.
   */
  function planNow(input: SearchInput): SearchPlan | null {
    const filterInput = input.options?.filter
    if (filterInput?.tags !== undefined) return null
    const { kbIds, query } = checked(input)
    if (staleIds(mergeCache, kbIds, Date.now(), MERGE_TTL_MS).length > 0) return null
    const merges = new Map(kbIds.map((id) => [id, mergeCache.get(id)!]))
    return { query, kbIds, opts: resolveOptions(input.options, r), merges, filter: resolveFilter(filterInput).vector }
  }

  /** Validation, options and per-KB settings: what the answer depends on besides the KBs' data. */
  async function plan(input: SearchInput): Promise<SearchPlan> {
    const { kbIds, query } = checked(input)
    const opts = resolveOptions(input.options, r)
    // The tags of a filter choose the KBs, so everything after this point sees only the KBs that take part.
    const f = await planFilter(sql, kbIds, input.options?.filter)
    return { query, kbIds: f.kbIds, opts, merges: await mergeSettings(f.kbIds), filter: f.filter }
  }

  async function run(p: SearchPlan, started: number, timing?: SearchTiming): Promise<SearchRun> {
    const { query, kbIds, opts, merges, filter } = p
    const needDense = opts.mode === 'similarity' || opts.alpha > 0
    const needSparse = opts.mode === 'hybrid' && opts.alpha < 1
    let t = performance.now()
    const [dense] = needDense ? await telemetry.span('search.embed', () => embedder.embed([query])) : [undefined]
    if (timing && needDense) timing.embed = performance.now() - t
    const sparse = needSparse ? encodeQuery(query) : undefined
    const efforts = dense === undefined ? undefined : await denseEfforts(kbIds)
    // Similarity over several KBs in two steps where the store's rank-only scores are approximate (rescoreAcrossKbs);
    // not with auto-merge, which weighs each KB's exact scores.
    // Not with a filter either: a filtered search scores its rows exactly.
    const twoSteps = opts.mode === 'similarity' && dense !== undefined && kbIds.length > 1 && vectors.rescore !== undefined
      && filter === undefined && kbIds.every((id) => !merges.get(id)!.enabled)
    const perKb = await Promise.all(kbIds.map((id) =>
      telemetry.span('search.kb', async () => {
        const kbStarted = performance.now()
        const out = await searchKb(id, opts, dense, sparse, merges.get(id)!, efforts?.get(id), filter, twoSteps)
        timing?.kb.push([id, performance.now() - kbStarted])
        return out
      }, { 'quarry.kb_id': id })))

    let lists = perKb.map((k) => k.ranked)
    let candidates: number | undefined
    if (twoSteps) ({ lists, candidates } = await rescoreAcrossKbs(vectors, kbIds, lists as { hit: VectorHit; score: number }[][], dense!, opts.top_k, opts.min_score))
    const counts = { pooled: 0 }
    t = performance.now()
    const pooled: Pooled[] = telemetry.span('search.fusion', () => opts.mode === 'hybrid'
      ? poolByRank(lists, r.hybrid.rrf_k, opts.top_k, counts)
      : poolByScore(lists, opts.min_score, opts.top_k, counts))
    if (candidates !== undefined) counts.pooled = candidates
    if (timing) timing.fusion = performance.now() - t

    let results: SearchResultItem[] = pooled.map((x) => toResult(x))
    let reranked = false
    let fallback = false
    if (opts.rerank && results.length > 0) {
      const topN = Math.min(opts.rerank_top_n, results.length)
      t = performance.now()
      try {
        const order = await telemetry.span('search.rerank', () => rerank(
          { url: r.rerank.url, apiKey: r.rerank.api_key, model: r.rerank.model, timeoutMs: r.rerank.timeout_sec * 1000 },
          query, results.map((x) => x.text), topN,
        ))
        results = order.map((o) => ({ ...results[o.index], rerank_score: o.relevance_score }))
        reranked = true
      } catch (err) {
        if (!r.rerank.fallback_on_error) throw err
        log.warn({ err: (err as Error).message }, 'reranker failed; fused order returned')
        // The answer keeps the size a reranked one would have had (notes.md, wire details).
        results = results.slice(0, topN)
        fallback = true
      }
      if (timing) timing.rerank = performance.now() - t
    }
    return {
      output: {
        query,
        results,
        meta: {
          // The merged list before reranking (notes.md, wire details): every KB's list pooled, before the top_k cut.
          total_candidates: counts.pooled,
          returned: results.length,
          search_mode: opts.mode,
          score_threshold: opts.mode === 'similarity' ? opts.min_score : 0.0,
          reranked,
          // The provider that reranked, or failed to and fell back (notes.md); "none" when nothing was reranked,
          // an empty result included.
          rerank_provider: reranked || fallback ? r.rerank.provider : 'none',
          rerank_fallback: fallback,
          cache_status: 'miss',
          latency_ms: Math.round(performance.now() - started),
        },
      },
      kbsWithHits: kbIds.filter((_, i) => perKb[i].candidates > 0),
    }
  }

  return {
    resolveOptions: (o?: Record<string, any>) => resolveOptions(o, r),
    plan,
    planNow,
    run,

    /** A search without the cache (MCP tools; the HTTP route goes through cache.ts). */
    async search(input: SearchInput, _caller: Caller | null = null): Promise<SearchOutput> {
      const started = performance.now()
      const p = await plan(input)
      const { output } = await run(p, started)
      telemetry.searched(p.opts.mode, p.kbIds.length, 'none', output.meta.latency_ms)
      return output
    },
  }
}

/**
 * The second step of a similarity search over several KBs whose lists came from rank-only searches (scores the
 * graph's own, approximate), each as long as the margin of all (rescoredRows(topK)): the best rescoredRows(topK)
 * entries of all lists, by those scores, are scored exactly by their KBs' stores, as one KB holding all of them would
 * rescore its own candidates; the others cannot reach the top_k. Each KB's search had rescored its own top_k and
 * margin: 110 rows over ten KBs, each a 4 KB read of the store's spill file, against 20 here. Returns each KB's
 * rescored entries, best first (equal scores in the store's tie order: adapters/vectors/payloads.ts tieKeyOf, then
 * row), an entry whose chunk was deleted meanwhile dropped; and total_candidates as one step counts it: each KB's
 * top_k entries that pass minScore (by their exact scores where rescored, else by the graph's).
 */
export async function rescoreAcrossKbs(store: Pick<VectorStore, 'rescore'>, kbIds: readonly string[], lists: readonly { hit: VectorHit; score: number }[][], dense: Float32Array, topK: number, minScore: number): Promise<{ lists: Ranked[][]; candidates: number }> {
  // A graph's score for a zero query may be NaN: last.
  const rank = (x: number) => (Number.isNaN(x) ? -Infinity : x)
  const all: { kb: number; i: number; score: number }[] = []
  for (let kb = 0; kb < lists.length; kb++) for (let i = 0; i < lists[kb].length; i++) all.push({ kb, i, score: rank(lists[kb][i].score) })
  all.sort((a, b) => b.score - a.score || a.kb - b.kb || a.i - b.i)
  // Those that tie with the last one taken are taken too: their order among equal approximate scores is arbitrary.
  let n = Math.min(all.length, rescoredRows(topK))
  while (n > 0 && n < all.length && all[n].score === all[n - 1].score) n++
  const chosen: number[][] = lists.map(() => [])
  for (let j = 0; j < n; j++) chosen[all[j].kb].push(all[j].i)
  const exact = await Promise.all(kbIds.map((id, kb) => (chosen[kb].length === 0 ? null : store.rescore!(id, dense, chosen[kb].map((i) => lists[kb][i].hit)))))
  const passes = (score: number) => minScore <= 0 || score >= minScore
  let candidates = 0
  const out: Ranked[][] = lists.map((list, kb) => {
    const scores = new Map(chosen[kb].map((i, j) => [i, exact[kb]![j]]))
    const rescored: Ranked[] = []
    for (const [i, x] of list.entries()) {
      const score = scores.get(i)
      if (score === undefined) {
        if (i < topK && passes(x.score)) candidates++
        continue
      }
      if (Number.isNaN(score)) continue
      if (i < topK && passes(score)) candidates++
      rescored.push({ hit: x.hit, score })
    }
    return rescored.sort(byExactScore)
  })
  return { lists: out, candidates }
}

/** Best first; equal scores as the embedded store orders them (PayloadTable.tieOrder): the payload read for ties only. */
function byExactScore(a: Ranked, b: Ranked): number {
  if (a.score !== b.score) return b.score - a.score
  const ka = tieKeyOf(a.hit.payload)
  const kb = tieKeyOf(b.hit.payload)
  return ka < kb ? -1 : ka > kb ? 1 : ((a.hit as VectorHit).key ?? 0) - ((b.hit as VectorHit).key ?? 0)
}

function toResult(p: Pooled): SearchResultItem {
  const x = p.hit.payload
  return {
    chunk_id: x.chunk_id,
    kb_id: x.kb_id,
    doc_id: x.doc_id,
    title: x.title,
    source_type: x.source_type,
    source: x.source,
    doc_type: x.doc_type,
    chunk_index: p.merged ? null : x.chunk_index,
    page_num: x.page_num,
    page_label: x.page_label,
    text: x.text,
    score: p.final,
    rerank_score: null,
    updated_at: x.updated_at,
    merged: p.merged,
    parent_chunk_id: x.parent_chunk_id,
  }
}

export type SearchService = ReturnType<typeof createSearchService>
