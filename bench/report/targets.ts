// The targets of issue 40, each against a ceiling measured in the same run. One place: the benchmarks write them
// into their results and print them; the report's readers (normalise.ts) judge every run's figures by them, so a
// result re-rendered with --render is judged by the targets of today.
export const TARGETS = {
  kernel: {
    /** GET and POST req/s of our kernel over bare uWebSockets.js with the same handlers: at least this. */
    rps_vs_bare_uws_min: 0.95,
    /**
     * The server's CPU per request over bare uWebSockets.js's with the same handlers: at most this. The text:
     * what the kernel does per request that bare uWS does not, brought under 5 %.
     */
    cpu_per_request_vs_bare_uws_max: 1.05,
  },
  ingest: {
    /** Documents/s over the sequential script's (whose physical limit on 2 cores is 2x): at least this... */
    documents_per_s_vs_script_min: 1.2,
    /** ...at this many documents. */
    documents_per_s_at_documents: 1000,
    /** CPU ms per document, all threads of the service, over the script's: at most this. */
    cpu_per_document_vs_script_max: 1.3,
    /** Peak RSS at `peak_rss_at_documents` documents, MB: at most this. */
    peak_rss_mb_max: 450,
    peak_rss_at_documents: 5000,
    /** Peak RSS growth from `rss_growth_from_documents` to `peak_rss_at_documents` documents, percent: at most this. */
    rss_growth_max_pct: 25,
    rss_growth_from_documents: 1000,
  },
  search: {
    /** p50 under load of a search over 10 KBs over the same chunks in 1 KB (similarity and hybrid): at most this. */
    ten_over_one_max: 1.5,
    /** Share of the p50 at 1 connection spent outside the index (all four cases): at most this... */
    outside_index_max_share: 0.1,
    /** ...at this many chunks (the full run's size). */
    outside_index_at_chunks: 100_000,
    /** A cached search's round trip over GET /health's through the same client, p50 at 1 connection: at most this. */
    cached_over_health_max: 1.3,
  },
} as const
