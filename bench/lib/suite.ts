// The benchmarks `npm run bench` knows, and the options each gets in each mode. Sizes a benchmark does
// not let us choose stay at its own quick sizes in the smoke mode (see `smokeGap`).
import type { SuiteMode } from '../report/types.ts'

export interface SuiteEntry {
  name: string
  /** Module under bench/, exporting `run(options)`. */
  file: string
  what: string
  options(mode: SuiteMode): Record<string, unknown>
  /** What the smoke mode cannot shrink, because the benchmark takes no option for it. */
  smokeGap?: string
}

const quickUnlessFull = (mode: SuiteMode) => ({ quick: mode !== 'full' })

export const SUITE: readonly SuiteEntry[] = [
  {
    name: 'kernel', file: 'kernel.bench.ts', what: 'HTTP kernel req/s vs bare uWebSockets.js with the same handlers (wrk; node:http and Fastify 5 shown)',
    options: (mode) => (mode === 'smoke' ? { quick: true, rounds: 1, seconds: 1, warmup: 1 } : quickUnlessFull(mode)),
  },
  {
    name: 'chunk', file: 'chunk.bench.ts', what: 'recursive chunking MB/s vs LangChain',
    options: (mode) => (mode === 'smoke' ? { quick: true, bytes: 200_000, rounds: 1 } : quickUnlessFull(mode)),
  },
  {
    name: 'dedup', file: 'dedup.bench.ts', what: 'SimHash + MinHash MB/s vs a string-based reference',
    options: (mode) => (mode === 'smoke' ? { quick: true, chars: 100_000, rounds: 1 } : quickUnlessFull(mode)),
  },
  {
    name: 'dedup-quality', file: 'dedup-quality.bench.ts',
    what: 'near-duplicate verdicts on SciFact documents (false positives, recall), template siblings, overlaps, revisions and copies (issue 36), the event-loop stall while a near-copy is screened, and screening cost vs the screen before issue 12',
    options: (mode) => (mode === 'smoke' ? { quick: true, docs: 6, kbSizes: [2000], queries: 50, rounds: 1, members: 6, overlaps: 6, stallMb: 1 } : quickUnlessFull(mode)),
  },
  {
    name: 'parse', file: 'parse.bench.ts', what: 'PDF pages/s through the compute pool vs pdf.js in the main thread',
    options: (mode) => (mode === 'smoke' ? { quick: true, pdfs: 2, pagesPerPdf: 4, rounds: 1 } : quickUnlessFull(mode)),
  },
  {
    name: 'embed', file: 'embed.bench.ts', what: 'builtin embedder docs/s vs a naive implementation, and nDCG@10',
    options: (mode) => (mode === 'smoke' ? { quick: true, quality: false, docs: 80, rounds: 1 } : quickUnlessFull(mode)),
  },
  {
    name: 'vectors', file: 'vectors.bench.ts', what: 'embedded vector store: HNSW and inverted index vs exact search',
    options: (mode) => (mode === 'smoke' ? { quick: true, n: 2000, dims: 64, queries: 30 } : quickUnlessFull(mode)),
  },
  {
    name: 'ingest', file: 'ingest.bench.ts', what: 'documents/s end to end vs the same steps in a sequential script',
    options: (mode) => (mode === 'smoke' ? { quick: true, documents: 16, concurrency: 4 } : mode === 'quick' ? { quick: true, documents: 200 } : { quick: false, documents: 1000 }),
  },
  {
    name: 'search', file: 'search.bench.ts', what: 'search QPS and latency over HTTP vs the vector store called directly',
    options: (mode) => (mode === 'smoke' ? { quick: true, chunks: 2000, seconds: 2 } : quickUnlessFull(mode)),
  },
  {
    name: 'orama', file: 'orama.bench.ts', what: 'in-process keyword, vector and hybrid search vs Orama 3 on SciFact: q/s, nDCG@10, build, memory',
    // Quick: 100 of the 300 queries, 3-s passes, no memory probes (the full run measures memory), so that the
    // whole quick suite stays within 5 minutes; Orama answers only a few queries a second.
    options: (mode) => (mode === 'smoke' ? { quick: true, limitDocs: 300, limitQueries: 30, rounds: 1 } : mode === 'quick' ? { quick: true, limitQueries: 100, budgetSeconds: 3, memory: false } : quickUnlessFull(mode)),
  },
  {
    name: 'cli', file: 'cli.bench.ts', what: 'files/s uploaded by the quarry CLI vs a curl loop (one curl process per file)',
    // The curl loop runs at a few dozen files/s: quick keeps it near 20 s, full is the 2,000 files of issue 16.
    options: (mode) => (mode === 'smoke' ? { quick: true, files: 50 } : mode === 'quick' ? { quick: true, files: 500 } : { quick: false, files: 2000 }),
  },
  {
    name: 'filter', file: 'filter.bench.ts', what: 'embedded store search with a filter keeping 1%, 10%, 50% of a 100k-chunk KB vs the same search unfiltered',
    // Quick keeps the 100k chunks of the target at 256 dimensions (about 2 minutes to build); full uses 1024.
    options: (mode) => (mode === 'smoke' ? { quick: true, n: 5000, dims: 64, queries: 30 } : quickUnlessFull(mode)),
  },
  {
    name: 'connectors', file: 'connectors.bench.ts', what: 'first sync of a 1,000-page web site and a 1,000-file repository (pages/s, files/s); second sync of the unchanged source vs the first',
    options: (mode) => (mode === 'smoke' ? { quick: true, articlesPerSite: 40, files: 60 } : quickUnlessFull(mode)),
  },
  {
    name: 'mixed-load', file: 'mixed-load.bench.ts', what: 'search p99 at a fixed rate while documents are ingested and deleted and a connector syncs, vs the same search with no writes (services driver set; skipped without TEST_POSTGRES_URL / TEST_REDIS_URL)',
    // Full: two 60-s phases (baseline, mixed); quick: 15 s each.
    options: (mode) => (mode === 'smoke' ? { quick: true, seconds: 4, seedDocs: 12, articles: 20 } : quickUnlessFull(mode)),
  },
]

export const suiteNames = (): string[] => SUITE.map((e) => e.name)
