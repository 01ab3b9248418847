// The two engines of the peer comparison behind one shape: build from the prepared chunks, then keyword,
// vector and hybrid search returning chunk numbers, best first. Both run in this thread: no worker threads,
// usearch is asked for one thread, Orama is plain JavaScript.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { VectorPoint } from '../../adapters/ports.ts'
import { createEmbeddedVectorStore, type EmbeddedVectorStore, type EmbeddedVectorStoreOptions } from '../../adapters/vectors/embedded.ts'
import { defaultQuantization } from '../../adapters/vectors/dense-index.ts'
import { encodeQuery, STOP_WORDS } from '../../compute/text/sparse.ts'
import { fuseInKb, inKbFusionK } from '../../plugins/search/fusion.ts'
import { resolveSettings } from '../../kernel/config/load.ts'
import { DIMS, type PreparedChunk, type PreparedQuery } from './data.ts'

export type SearchMode = 'keyword' | 'vector' | 'hybrid'
export const SEARCH_MODES: readonly SearchMode[] = ['keyword', 'vector', 'hybrid']

export interface Engine {
  readonly name: string
  /** What the engine was configured with, for the report. */
  readonly config: Record<string, unknown>
  /** Indexes every chunk; resolves when all are searchable at full speed. */
  build(chunks: readonly PreparedChunk[]): Promise<void>
  /** The best `k` chunks (numbers into the chunks given to build). */
  search(mode: SearchMode, q: PreparedQuery, k: number): Promise<number[]>
  close(): Promise<void>
}

export interface QuarryEngineOptions {
  /** alpha of the in-KB fusion (default: the service's, with the built-in embedder). */
  alpha?: number
  /** k of the in-KB reciprocal rank fusion (default: the service's, with the built-in embedder). */
  rrfK?: number
  /** Store options over the defaults (bench/eval/tune.ts tries other HNSW settings). */
  store?: Partial<Omit<EmbeddedVectorStoreOptions, 'dir' | 'dimensions'>>
  /** Name in reports (default 'quarry'). */
  name?: string
}

const KB = 'peer'

/** Our embedded vector store, searched as the search service does for one KB. */
export function createQuarryEngine(opts: QuarryEngineOptions = {}): Engine {
  const hybrid = resolveSettings({}).settings.retrieval.hybrid
  const alpha = opts.alpha ?? hybrid.alpha
  const rrfK = opts.rrfK ?? inKbFusionK(hybrid)
  let dir = ''
  let store: EmbeddedVectorStore | undefined
  // chunk_id -> chunk number: the store answers with payloads.
  const numberOf = new Map<string, number>()
  const toNumbers = (hits: readonly { id: string }[]) => hits.map((h) => numberOf.get(h.id)!)
  return {
    name: opts.name ?? 'quarry',
    config: { store: `embedded (usearch HNSW ${opts.store?.quantization ?? defaultQuantization()} M16 ef${opts.store?.expansionSearch ?? 256}, exact f32 rescoring; inverted sparse index)`, hybrid: `fuseInKb alpha ${alpha}, rrf_k ${rrfK}, per-list depth max(4k, 40)` },
    async build(chunks) {
      dir = mkdtempSync(join(tmpdir(), 'quarry-peer-'))
      store = await createEmbeddedVectorStore({ dir, dimensions: DIMS, snapshotIdleMs: 0, snapshotOnClose: false, ...opts.store })
      await store.ensureCollection(KB, DIMS)
      const BATCH = 256
      for (let i = 0; i < chunks.length; i += BATCH) {
        const points: VectorPoint[] = chunks.slice(i, i + BATCH).map((c, j) => {
          const n = i + j
          const chunk_id = `c${n}`
          numberOf.set(chunk_id, n)
          return {
            dense: c.dense,
            sparse: c.sparse,
            payload: {
              chunk_id, kb_id: KB, doc_id: c.doc, chunk_index: c.index, title: '', source_type: 's3', source: c.doc, doc_type: 'txt',
              page_num: 1, page_label: '1', text: c.text, start: 0, end: c.text.length, parent_chunk_id: null, updated_at: '',
            },
          }
        })
        await store.upsert(KB, points)
      }
      await store.whenIndexed(KB)
    },
    async search(mode, q, k) {
      const s = store!
      if (mode === 'keyword') return toNumbers((await s.search(KB, { sparse: encodeQuery(q.text), limit: k })).sparse)
      if (mode === 'vector') return toNumbers((await s.search(KB, { dense: q.dense, limit: k })).dense)
      const hits = await s.search(KB, { dense: q.dense, sparse: encodeQuery(q.text), limit: Math.max(4 * k, 40) })
      return toNumbers(fuseInKb(hits.dense, hits.sparse, alpha, rrfK, k).map((r) => r.hit))
    },
    async close() {
      await store?.close()
      if (dir) rmSync(dir, { recursive: true, force: true })
    },
  }
}

export interface OramaEngineOptions {
  /**
   * false: Orama as shipped (no stemming, no stop words, and each query word also matches every indexed word
   * it is a prefix of: search-as-you-type). true: English stemming, the stop words our sparse encoder drops
   * (Lucene's list), and whole-word matching (the radix lookup made exact through Orama's `index` component
   * hook; `exact: true` in the search parameters would instead require every query word in the text).
   */
  tuned?: boolean
  /** Hybrid weights (Orama's default: 0.5 / 0.5). */
  textWeight?: number
}

type OramaModule = typeof import('@orama/orama')

/** Orama 3 with a text property (BM25) and a vector[1024] property (brute-force cosine). */
export function createOramaEngine(opts: OramaEngineOptions = {}): Engine {
  const tuned = opts.tuned ?? false
  const textWeight = opts.textWeight ?? 0.5
  let orama: OramaModule
  let db: any
  const hitNumbers = (res: { hits: { id: string }[] }) => res.hits.map((h) => Number(h.id))
  return {
    name: tuned ? 'orama (tuned)' : 'orama',
    config: {
      tokenizer: tuned ? 'english, stemming, Lucene stop words, whole words' : 'english as shipped: no stemming, no stop words, prefix matching',
      keyword: 'BM25 (k1 1.2, b 0.75, d 0.5), threshold 1 (any term)',
      vector: 'flat cosine scan, similarity >= 0',
      hybrid: `min-max normalised scores, weights text ${textWeight} / vector ${(1 - textWeight).toFixed(2)}`,
    },
    async build(chunks) {
      orama = await import('@orama/orama')
      const components: Record<string, unknown> = { tokenizer: { language: 'english' } }
      if (tuned) {
        components.tokenizer = { language: 'english', stemming: true, stopWords: [...STOP_WORDS] }
        const index = orama.components.index.createIndex()
        const search = index.search
        // Argument 6 of the index's search is `exact` (whole-word radix lookup); everything else is Orama's own.
        index.search = ((...args: Parameters<typeof search>) => {
          args[5] = true
          return search(...args)
        }) as typeof search
        components.index = index
      }
      db = orama.create({ schema: { text: 'string', embedding: `vector[${DIMS}]` } as const, components: components as never })
      // Orama's schema check wants plain arrays for vectors (Array.isArray), as an embedding API returns them.
      const BATCH = 1000
      for (let i = 0; i < chunks.length; i += BATCH) {
        const docs = chunks.slice(i, i + BATCH).map((c, j) => ({ id: String(i + j), text: c.text, embedding: Array.from(c.dense) }))
        await orama.insertMultiple(db, docs, BATCH)
      }
    },
    async search(mode, q, k) {
      if (mode === 'keyword') return hitNumbers(await orama.search(db, { term: q.text, properties: ['text'], limit: k }))
      // A Float32Array query is used as is (a plain array would be converted on every search).
      const vector = { value: q.dense as unknown as number[], property: 'embedding' }
      if (mode === 'vector') return hitNumbers(await orama.search(db, { mode: 'vector', vector, similarity: 0, limit: k }))
      return hitNumbers(await orama.search(db, {
        mode: 'hybrid', term: q.text, properties: ['text'], vector, similarity: 0, limit: k,
        hybridWeights: { text: textWeight, vector: 1 - textWeight },
      }))
    },
    async close() {
      db = undefined
    },
  }
}
