// The settings file (spec 2.9) as one TypeBox tree. It is the single source of the defaults, the validation,
// the per-KB schema endpoint (GET /api/kb/{kb_id}/settings/schema) and settings.example.yaml.
// Custom schema keywords: `overridable: false` marks keys of the per-KB sections that cannot be overridden;
// `env` names the environment variable that supplies a secret; `secret` keeps a value out of logs.
import { Type, type Static, type TSchema } from '@sinclair/typebox'

const str = (def: string, description: string, extra: Record<string, unknown> = {}) =>
  Type.String({ default: def, description, ...extra })
const int = (def: number, min: number, max: number, description: string, extra: Record<string, unknown> = {}) =>
  Type.Integer({ default: def, minimum: min, maximum: max, description, ...extra })
const num = (def: number, min: number, max: number, description: string, extra: Record<string, unknown> = {}) =>
  Type.Number({ default: def, minimum: min, maximum: max, description, ...extra })
const bool = (def: boolean, description: string, extra: Record<string, unknown> = {}) =>
  Type.Boolean({ default: def, description, ...extra })
const oneOf = <const V extends string[]>(values: V, def: V[number], description: string, extra: Record<string, unknown> = {}) =>
  Type.Union(values.map((v) => Type.Literal(v)) as never as ReturnType<typeof Type.Literal<V[number]>>[], {
    default: def, description, enum: values, ...extra,
  })
const section = <P extends Record<string, TSchema>>(properties: P, description: string) =>
  Type.Object(properties, { default: {}, description })

const ChunkSize = Type.Integer({ minimum: 64, maximum: 8192 })

export const SettingsSchema = Type.Object({
  data_dir: str('./data', 'Where the embedded engines (PGlite, vector index, local files, queue journal) keep their data. Env DATA_DIR overrides.'),
  server: section({
    host: str('0.0.0.0', 'Address the HTTP server binds to.'),
    port: int(8000, 0, 65535, 'HTTP port. Env PORT overrides.'),
    json_body_limit_kb: int(1024, 1, 1048576, 'Largest JSON request body accepted, in KiB; larger bodies get 413.'),
    shutdown_grace_sec: int(10, 0, 600, 'On SIGTERM/SIGINT, how long in-flight requests may take to finish.'),
  }, 'HTTP server (Quarry addition).'),
  compute: section({
    max_threads: int(0, 0, 256, 'Worker threads for parsing, chunking, dedup and sparse encoding; 0 = one per core but one (the main thread\'s), at least one.'),
    task_timeout_sec: int(120, 1, 3600, 'A compute task running longer than this fails its document.'),
    worker_memory_mb: int(4096, 64, 65536, 'Heap cap of one worker thread (V8 old generation). Below about 2048 V8 collects garbage more often: parsing slows by 10-25 %.'),
  }, 'Worker-thread pool (Quarry addition).'),
  dagster: section({
    endpoint: str('', 'Orchestrator web URL (unused while queue_worker.enabled is true).'),
  }, 'Orchestrator connection.'),
  s3: section({
    endpoint: str('', 'S3-compatible endpoint (host:port or URL); empty = local files under data_dir.'),
    access_key: str('', 'Access key id.'),
    secret_key: str('', 'Secret key. Env S3_SECRET_KEY.', { env: 'S3_SECRET_KEY', secret: true }),
    rag_bucket: str('rag-documents', 'Bucket for original documents; must exist beforehand.'),
    dagster_bucket: str('dagster', 'Bucket for orchestrator artifacts.'),
    region: str('us-east-1', 'Region (no practical effect).'),
    insecure: bool(true, 'true = HTTP, false = HTTPS with certificate verification.'),
  }, 'Object storage.'),
  postgres: section({
    host: str('', 'PostgreSQL host; empty = embedded PGlite under data_dir.'),
    port: int(5432, 1, 65535, 'PostgreSQL port.'),
    dbname: str('quarry', 'Database name.'),
    user: str('postgres', 'User name.'),
    password: str('', 'Password. Env POSTGRES_PASSWORD.', { env: 'POSTGRES_PASSWORD', secret: true }),
    pool_size: int(5, 1, 1000, 'Connections in the pool; keep a little above queue_worker.max_workers.'),
    connect_timeout: int(30, 1, 600, 'Connect timeout in seconds.'),
  }, 'Relational database.'),
  qdrant: section({
    host: str('', 'Qdrant host (REST); empty = the embedded vector index under data_dir.'),
    port: int(6333, 1, 65535, 'Qdrant REST port.'),
    insecure: bool(true, 'true = HTTP.'),
    api_key: str('', 'API key. Env QDRANT_API_KEY.', { env: 'QDRANT_API_KEY', secret: true }),
  }, 'Vector store.'),
  vector_store: oneOf(['auto', 'embedded', 'qdrant', 'pgvector'], 'auto', "Where vectors live (Quarry addition): 'embedded' (files under data_dir), 'qdrant' (qdrant.host), 'pgvector' (the postgres database, with the pgvector 0.8+ extension; needs postgres.host); 'auto' = qdrant when qdrant.host is set, embedded otherwise."),
  redis: section({
    host: str('', 'Redis host; empty = the in-process queue (journal under data_dir).'),
    port: int(6379, 1, 65535, 'Redis port.'),
    password: str('', 'Password; empty = none. Env REDIS_PASSWORD.', { env: 'REDIS_PASSWORD', secret: true }),
    db: int(0, 0, 15, 'Database number; changing it while running loses queued events.'),
    key_prefix: str('quarry', 'Prefix of every Redis key Quarry writes (Quarry addition), so deployments can share one Redis.'),
  }, 'Queue and cache store.'),
  queue_worker: section({
    enabled: bool(true, 'true: the built-in worker runs in the API process; false: only `npm run worker` processes consume the queue.'),
    max_workers: int(5, 1, 256, 'Documents processed concurrently by one worker.'),
  }, 'Built-in worker.'),
  queue_poll: section({
    poll_interval_sec: num(5, 0.01, 3600, 'How often the worker polls the queue (it is also woken on enqueue).'),
    max_per_poll: int(5, 1, 1000, 'Documents taken per poll; keep at or below max_workers.'),
    retry_interval_sec: num(10, 0.01, 86400, 'Wait before retrying a document that is already being processed (delay queue).'),
  }, 'Queue polling.'),
  provider: section({
    name: str('builtin', "Embedding provider: 'builtin' (offline, default), 'local' (Ollama-compatible; alias 'ollama'), 'hosted' (OpenAI-compatible; alias 'openai'), or any other name for a generic OpenAI-compatible endpoint at a full URL."),
    url: str('', 'Provider URL; empty = the provider default (local: http://localhost:11434).'),
    api_key: str('', 'API key. Env HOSTED_API_KEY.', { env: 'HOSTED_API_KEY', secret: true }),
  }, 'Embedding (and [ENT] captioning) provider.'),
  ingestion: section({
    max_file_size_mb: int(10, 1, 10240, 'Upload size limit; larger files get HTTP 422.'),
    min_content_chars: int(200, 0, 10000, 'Web connector only: extracted text shorter than this is not stored.'),
    html_extraction_policy: oneOf(['strict', 'balanced', 'lenient'], 'lenient', 'strict excludes uncertain content, lenient includes it.'),
    parser_plugins: Type.Array(Type.String({ pattern: '^[^:]+:[A-Za-z_$][\\w$]*$' }), {
      default: [], overridable: false,
      description: "Ordered 'module.path:register_func' entries loaded at the first parse; later entries override earlier ones and the defaults.",
    }),
    image_captioning: section({
      enabled: bool(false, '[ENT] Caption images found in documents.'),
      model: str('', '[ENT] Vision model matching provider.name.', { overridable: false }),
      temperature: num(0.1, 0, 2, '[ENT] Sampling temperature.'),
      max_images_per_doc: int(20, 0, 1000, '[ENT] Images captioned per document.'),
      max_concurrent_tasks: int(5, 1, 100, '[ENT] Concurrent captioning calls.'),
      default_language: str('ko', '[ENT] Caption language when it cannot be detected.'),
    }, '[ENT] Image captioning.'),
    pdf_ocr_fallback: section({
      enabled: bool(false, '[ENT] OCR scanned PDFs.'),
      engine: oneOf(['rapidocr'], 'rapidocr', '[ENT] OCR engine.'),
      language: str('korean', '[ENT] OCR language.'),
      min_chars_per_page: int(50, 0, 100000, '[ENT] Average characters per page below which a PDF counts as scanned.'),
    }, '[ENT] PDF OCR fallback.'),
    table_layout: section({
      enabled: bool(false, '[ENT] Table layout analysis.'),
      scan_region_min_score: num(0.5, 0, 1, '[ENT] Minimum region score.'),
      scan_region_fragment_merge_gap_pt: num(20, 0, 1000, '[ENT] Fragment merge gap in points.'),
    }, '[ENT] Table layout.'),
  }, 'Ingestion.'),
  dedup: section({
    enabled: bool(true, 'false skips the whole dedup stage.'),
    simhash: section({
      ngram: int(3, 1, 16, 'Character n-gram size.', { overridable: false }),
      num_bands: int(4, 1, 64, 'LSH bands of the SimHash used for candidate look-up.', { overridable: false }),
      simhash_bits: int(64, 64, 64, 'SimHash width in bits (64).', { overridable: false }),
      hamming_identical_threshold: int(2, 0, 64, 'Hamming distance at or below which documents are identical.'),
      hamming_similar_threshold: int(5, 0, 64, 'Hamming distance at or below which the candidate goes to stage 3; at least the identical threshold.'),
    }, 'Stage 1: SimHash.'),
    minhash: section({
      jaccard_threshold: num(0.65, 0, 1, 'MinHash Jaccard at or above which the candidate goes to stage 3.'),
      title_fuzzy_threshold: num(0.85, 0, 1, 'Trigram title similarity for the title rule.'),
      title_only_min_jaccard_floor: num(0.25, 0, 1, 'Minimum Jaccard for the title rule.'),
      user_words_path: str('', 'User dictionary for the Korean word tokeniser (one word per line); empty = unused.', { overridable: false }),
    }, 'Stage 2: MinHash and title.'),
    chunk_compare: section({
      chunk_match_threshold: num(0.5, 0, 1, 'Minimum top-1 chunk pair score.'),
      body_identical_threshold: num(0.95, 0, 1, 'Aggregate score at or above which documents are identical.'),
      body_similar_threshold: num(0.75, 0, 1, 'Aggregate score at or above which the older document becomes outdated.'),
      compare_all_candidates: bool(false, 'false = compare the best match only.'),
    }, 'Stage 3: embedding chunk comparison.'),
  }, 'Near-duplicate detection.'),
  chunking: section({
    strategy: oneOf(['recursive', 'semantic', 'hierarchical'], 'recursive', 'Chunking strategy.'),
    chunk_size: Type.Union([ChunkSize, Type.Array(ChunkSize, { minItems: 2 })], {
      default: 1024,
      description: 'recursive/semantic: max characters (64-8192); hierarchical: a descending list of at least 2 sizes, the last is the leaf size searched.',
    }),
    chunk_overlap: int(128, 0, 8192, 'Overlap of adjacent leaf chunks; above 15 % of the smallest chunk_size is rejected.'),
    min_chunk_chars: int(30, 0, 8192, 'Shorter chunks are discarded (hierarchical: such leaves do not count as children).'),
    semantic_threshold: num(0.8, 0, 1, 'Breakpoint percentile of adjacent-group distances in the semantic strategy.'),
    code_max_chars: int(1500, 64, 65536, 'Maximum characters per chunk for source-code files (git connector).'),
  }, 'Chunking.'),
  embedding: section({
    model: str('', 'Embedding model matching provider.name; empty = the provider default (builtin: quarry-hash-v1, local/ollama: bge-m3, hosted/openai and others: text-embedding-3-small).'),
    vector_size: int(1024, 8, 8192, 'Vector dimensions; must match the model (bge-m3 1024, nomic-embed-text 768, text-embedding-3-small 1536). Unset: the size of a known model, else 1024.'),
    batch_size: int(32, 1, 2048, 'Texts per embedding request (Quarry addition).'),
    timeout_sec: num(60, 1, 3600, 'Timeout of one embedding request (Quarry addition).'),
    max_retries: int(3, 0, 20, 'Retries on 429/5xx/network errors, with backoff (Quarry addition).'),
  }, 'Embeddings.'),
  retrieval: section({
    mode: oneOf(['hybrid', 'similarity'], 'hybrid', 'Search mode.', { overridable: false }),
    top_k: int(5, 1, 100, 'Maximum chunks returned.', { overridable: false }),
    hybrid: section({
      alpha: num(0.5, 0, 1, "1.0 = dense only, 0.0 = sparse only. Unset with provider.name 'builtin': 0.02 (the built-in embedder's profile: the sparse ranking leads).", { overridable: false }),
      rrf_k: int(60, 1, 10000, 'k in 1/(k + rank) of the fusion across KBs (and inside a KB when kb_rrf_k is 0).', { overridable: false }),
      kb_rrf_k: int(0, 0, 10000, "k of the fusion of the dense and sparse lists inside one KB; 0 = rrf_k. Unset with provider.name 'builtin': 3 (Quarry addition).", { overridable: false }),
    }, 'Hybrid mode.'),
    similarity: section({
      min_score: num(0, 0, 1, 'Minimum cosine similarity; 0.0 = no filter.', { overridable: false }),
    }, 'Similarity mode.'),
    rerank: section({
      enabled: bool(false, 'Rerank the fused results.', { overridable: false }),
      provider: oneOf(['rerankvendor'], 'rerankvendor', 'Rerank provider (Cohere/Jina-compatible API).', { overridable: false }),
      url: str('', 'Rerank server base URL; empty = the vendor endpoint.', { overridable: false }),
      api_key: str('', 'API key. Env RERANKER_API_KEY.', { env: 'RERANKER_API_KEY', secret: true, overridable: false }),
      model: str('rerank-v3.5', 'Reranking model.', { overridable: false }),
      top_n: int(3, 1, 100, 'Results kept after reranking.', { overridable: false }),
      timeout_sec: num(5, 0.1, 120, 'Rerank timeout.', { overridable: false }),
      fallback_on_error: bool(true, 'On reranker failure return the fused order.', { overridable: false }),
    }, 'Reranking.'),
    auto_merge: section({
      enabled: bool(false, 'Return the parent text when enough of its children matched (hierarchical chunking).'),
      merge_threshold: num(0.5, 0, 1, 'Share of matched children under one parent at or above which the parent text is returned.'),
    }, 'Parent-child auto-merge.'),
  }, 'Retrieval.'),
  search_cache: section({
    ttl_sec: num(300, 1, 86400, 'How long a cached search answer lives. Every write to a KB invalidates its answers at once, whatever this says.'),
    max_entries: int(5000, 1, 1_000_000, 'Answers kept at most; the oldest are dropped first.'),
    max_memory_mb: int(64, 1, 65536, 'Memory of the in-process cache at most (embedded engines; with Redis, max_entries bounds it).'),
  }, 'Search answer cache, keyed by query, options and each KB index version; in Redis with the services, in process otherwise (Quarry addition).'),
  connectors: section({
    secret_env_names: Type.Array(Type.String({ pattern: '^[A-Za-z0-9_*?]+$', errorMessage: "Input should be an environment variable name glob ('*' any run, '?' one character)" }), {
      default: ['CONNECTOR_*', 'GITHUB_TOKEN', 'CONFLUENCE_*'],
      description: "Environment variables a connector config may name (auth_token_secret, 'env:NAME'): globs, '*' any run, '?' one character. The service's own variables are refused whatever this admits. Every admitted variable can be sent to a host a KB admin chooses.",
    }),
    egress: section({
      allow: Type.Array(Type.String({ minLength: 1, maxLength: 300 }), {
        default: [],
        description: "Destinations connectors may reach beyond public addresses: CIDRs (10.20.0.0/16), addresses (10.1.2.3, [fd00::1]:8443 with a port), host names (wiki.corp.example, *.corp.example for its subdomains, optionally :port). A host name admits private addresses only; loopback, link-local, cloud metadata, unspecified, multicast and reserved addresses need their address or a CIDR, the service's own port an address with that port (127.0.0.1:8000).",
      }),
      private_networks: oneOf(['auto', 'allow', 'refuse'], 'auto', "Private ranges (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) without listing them: 'auto' allows them in the base edition (no oidc.issuer_url) and refuses them in the access-controlled one."),
    }, 'Where connector requests may go (web pages, robots.txt, Confluence, GitHub), checked on the address each connection is made to, after name resolution and at every redirect.'),
  }, 'Connectors (Quarry addition).'),
  knowledge_bases: Type.Array(Type.Object({
    id: Type.String({ pattern: '^[a-z0-9][a-z0-9_-]{0,62}$' }),
    name: Type.String({ default: '' }),
    description: Type.Optional(Type.String({ description: 'Absent: the KB has no description (null).' })),
    tags: Type.Array(Type.String(), { default: [] }),
  }), { default: [], description: 'Knowledge bases created at start when absent (never modified).' }),
  mcp: section({
    enabled: bool(true, 'false disables /mcp.'),
    transport: oneOf(['streamable-http', 'stdio', 'sse'], 'streamable-http', 'MCP transport.'),
  }, 'Model Context Protocol endpoint.'),
  console: section({
    enabled: bool(true, 'false: no operator console at /console.'),
    oidc_client_id: str('quarry-console', "[ENT] Public client (authorization code with PKCE, no secret) the console signs in with. At the issuer: redirect URI and post-logout redirect URI '<service origin>/console', web origin '<service origin>' (CORS on the token endpoint)."),
    oidc_scope: str('openid profile email', '[ENT] Scopes the console asks for.'),
  }, 'Operator console in the browser (Quarry addition).'),
  tracing: section({
    enabled: bool(false, 'false = tracing client not initialised.'),
    langfuse_baseurl: str('', 'Tracing backend address.'),
    langfuse_public_key: str('', 'Tracing public key.'),
    langfuse_secret_key: str('', 'Env TRACING_SECRET_KEY.', { env: 'TRACING_SECRET_KEY', secret: true }),
    service_name: str('quarry', 'Service name in traces.'),
  }, 'Tracing.'),
  logging: section({
    level: oneOf(['DEBUG', 'INFO', 'WARNING', 'ERROR'], 'INFO', 'Log level; takes effect after restart.'),
  }, 'Logging.'),
  oidc: section({
    issuer_url: str('', '[ENT] Issuer for key look-up and the iss check.'),
    audience: str('', '[ENT] Empty = aud not verified.'),
    jwks_cache_ttl_seconds: int(3600, 0, 604800, '[ENT] Signing-key cache lifetime.'),
    admin_url: str('', '[ENT] Identity provider admin API base.'),
    admin_client_id: str('', '[ENT] Env OIDC_ADMIN_CLIENT_ID.', { env: 'OIDC_ADMIN_CLIENT_ID' }),
    admin_client_secret: str('', '[ENT] Env OIDC_ADMIN_CLIENT_SECRET.', { env: 'OIDC_ADMIN_CLIENT_SECRET', secret: true }),
  }, '[ENT] OpenID Connect.'),
  authz: section({
    super_admin_role: str('rag-super-admin', '[ENT] Group of super-admins.'),
    kb_creator_roles: Type.Union([Type.String(), Type.Array(Type.String())], {
      default: [], type_name: 'list[str]', description: "[ENT] Groups allowed to create KBs; ['*'] = every authenticated user; a string is a one-item list.",
    }),
    max_kb_count: int(3, 0, 1000000, '[ENT] KBs a user may create; 0 = unlimited.'),
    max_docs_count: int(5, 0, 100000000, '[ENT] Non-deleted documents per KB; 0 = unlimited.'),
    role_cache_ttl_seconds: int(60, 0, 86400, '[ENT] Role cache lifetime.'),
    invite_expiry_days: int(7, 1, 365, '[ENT] Invite validity in days.'),
  }, '[ENT] Authorisation.'),
  smtp: section({
    host: str('localhost', '[ENT] SMTP host.'),
    port: int(1025, 1, 65535, '[ENT] SMTP port.'),
    username: str('', '[ENT] Env SMTP_USERNAME.', { env: 'SMTP_USERNAME' }),
    password: str('', '[ENT] Env SMTP_PASSWORD.', { env: 'SMTP_PASSWORD', secret: true }),
    from_address: str('no-reply@quarry.local', '[ENT] Sender address.'),
  }, '[ENT] Invite e-mail.'),
  rate_limit: section({
    enabled: bool(false, '[ENT] When false requests are not counted.'),
    rules: Type.Array(Type.Object({
      name: Type.String(),
      paths: Type.Array(Type.String()),
      limit: Type.String({ pattern: '^\\d+/(second|minute|hour)$' }),
      weights: Type.Optional(Type.Record(Type.String(), Type.Integer({ minimum: 1 }))),
    }), { default: [], description: '[ENT] Rules; the first matching rule wins.' }),
    default: Type.String({ default: '120/minute', pattern: '^\\d+/(second|minute|hour)$', description: '[ENT] Limit for paths matching no rule.' }),
    exempt_paths: Type.Array(Type.String(), {
      default: ['/health', '/ready', '/docs', '/redoc', '/openapi.json'], description: '[ENT] Paths never counted.',
    }),
  }, '[ENT] Per-user rate limiting.'),
})

export type Settings = Static<typeof SettingsSchema>

/** The sections a KB may override (spec 2.7); infrastructure sections are never exposed per KB. */
export const KB_SECTIONS = ['ingestion', 'chunking', 'dedup', 'retrieval'] as const
export type KbSection = (typeof KB_SECTIONS)[number]
export type KbSettings = Pick<Settings, KbSection>

/** Keys removed from the older service, with the message that names their replacement. */
export const REMOVED_KEYS: Record<string, string> = {
  'provider.ollama_url': "'provider.ollama_url' is no longer recognised: use 'provider.url' (with provider.name: local)",
  'provider.openai_api_key': "'provider.openai_api_key' is no longer recognised: use 'provider.api_key' or the HOSTED_API_KEY environment variable",
  'ollama_url': "'ollama_url' is no longer recognised: use 'provider.url' (with provider.name: local)",
  'openai_api_key': "'openai_api_key' is no longer recognised: use 'provider.api_key' or the HOSTED_API_KEY environment variable",
  'embedding.ollama_url': "'embedding.ollama_url' is no longer recognised: use 'provider.url' (with provider.name: local)",
  'embedding.openai_api_key': "'embedding.openai_api_key' is no longer recognised: use 'provider.api_key' or the HOSTED_API_KEY environment variable",
}
