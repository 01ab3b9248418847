// Connector request and response shapes (spec 2.5, 4.8) and the per-source config shapes with the bounds of
// spec 4.9 and notes.md. The config is checked against its source's schema after the body's own check,
// so that a bad field is reported where it is: ['body', 'config', 'depth'].
import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { DocCountsSchema, DocListQuery } from '../docs/schemas.ts'
import { KbId, Timestamp } from '../../kernel/schemas.ts'

export const SOURCE_TYPES = ['web', 'confluence', 'github'] as const
export type SourceType = (typeof SOURCE_TYPES)[number]
export const CONNECTOR_STATUSES = ['active', 'paused', 'error'] as const
export type ConnectorStatus = (typeof CONNECTOR_STATUSES)[number]
export const SORT_COLUMNS = ['name', 'kb_id', 'source_type', 'status', 'last_synced_at', 'created_at', 'updated_at'] as const

const literals = <T extends string>(values: readonly T[], description: string) =>
  Type.Union(values.map((v) => Type.Literal(v)), { description })

const int = (def: number, minimum: number, maximum: number, description: string) =>
  Type.Integer({ default: def, minimum, maximum, description })
const HttpUrl = (description: string) =>
  Type.String({ pattern: '^[Hh][Tt][Tt][Pp][Ss]?://[^\\s/?#]+', maxLength: 2048, description, errorMessage: 'Input should be an absolute http(s) URL' })
const Patterns = (description: string) => Type.Array(Type.String({ maxLength: 2048 }), { default: [], maxItems: 200, description })
const EnvName = Type.Union([Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$', maxLength: 255, errorMessage: 'Input should be the NAME of an environment variable' }), Type.Null()], {
  default: null, description: 'NAME of an environment variable holding the credential (never the value); null for public sources.',
})
const Timeout = () => int(30, 1, 300, 'Seconds before a source request is abandoned.')
const Delay = () => int(100, 0, 5000, 'Wait between source requests, in milliseconds.')

export const WebConfig = Type.Object({
  seed_urls: Type.Array(HttpUrl('Start URL; only paths under a seed are collected.'), { minItems: 1, maxItems: 100 }),
  depth: int(2, 0, 10, 'Breadth-first depth; 0 = seed URLs only.'),
  include_patterns: Patterns('fnmatch patterns on the full URL; an additional filter inside the seed scope.'),
  exclude_patterns: Patterns('fnmatch patterns on the full URL; highest priority.'),
  max_pages: int(50, 1, 500, 'Pages processed per sync; the crawl queue is capped at max_pages x 20.'),
  request_timeout_sec: Timeout(),
  request_delay_ms: Delay(),
  auth_headers: Type.Record(Type.String({ minLength: 1, maxLength: 256, pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$" }), Type.String({ maxLength: 8192 }), {
    default: {}, description: "Headers added to every request; values are 'env:NAME' or a literal (stored encrypted). Wins over auth_basic.",
  }),
  auth_basic: Type.Optional(Type.Object({
    username: Type.String({ maxLength: 1024 }),
    password: Type.String({ maxLength: 8192, description: "'env:NAME' or a literal (stored encrypted)." }),
  }, { additionalProperties: false, description: 'Basic auth; ignored when auth_headers is set.' })),
  skip_seed_pages: Type.Boolean({ default: true, description: 'Seed pages (depth 0) are used for links only.' }),
  min_content_chars: Type.Optional(Type.Integer({ minimum: 0, maximum: 10000, description: 'Pages whose extracted text is shorter are not stored; default ingestion.min_content_chars.' })),
  respect_robots_txt: Type.Boolean({ default: true, description: 'Honour the site\'s robots.txt.' }),
}, { additionalProperties: false, title: 'WebConfig' })

export const ConfluenceConfig = Type.Object({
  base_url: HttpUrl("Cloud or server URL; one containing '.atlassian.net' uses the cloud API path."),
  space_key: Type.String({ minLength: 1, maxLength: 255, description: 'Case-sensitive space key.' }),
  auth_token_secret: EnvName,
  exclude_labels: Type.Array(Type.String({ maxLength: 255 }), { default: [], maxItems: 200, description: 'Pages with a listed label, and their attachments, are skipped.' }),
  max_pages: int(50, 1, 100000, 'Pages per sync; the sync stops when exceeded.'),
  max_attachment_mb: int(10, 1, 1024, 'Larger attachments are skipped.'),
  request_delay_ms: Delay(),
  request_timeout_sec: Timeout(),
}, { additionalProperties: false, title: 'ConfluenceConfig' })

export const GithubConfig = Type.Object({
  owner: Type.String({ pattern: '^[A-Za-z0-9_.-]{1,100}$', errorMessage: 'Input should be a GitHub owner name' }),
  repo: Type.String({ pattern: '^[A-Za-z0-9_.-]{1,100}$', errorMessage: 'Input should be a GitHub repository name' }),
  branch: Type.String({ default: 'main', minLength: 1, maxLength: 255 }),
  path_prefix: Type.String({ default: '', maxLength: 1024, description: 'Only files below this path.' }),
  auth_token_secret: EnvName,
  max_files: int(200, 1, 100000, 'Files per sync; the sync stops when exceeded.'),
  max_file_size_mb: int(5, 1, 100, 'Larger files are skipped.'),
  request_delay_ms: Delay(),
  request_timeout_sec: Timeout(),
  api_url: Type.String({ default: 'https://api.github.com', pattern: '^[Hh][Tt][Tt][Pp][Ss]?://', maxLength: 2048, description: 'GitHub Enterprise: https://host/api/v3.' }),
}, { additionalProperties: false, title: 'GithubConfig' })

export type WebConfigT = Static<typeof WebConfig>
export type ConfluenceConfigT = Static<typeof ConfluenceConfig>
export type GithubConfigT = Static<typeof GithubConfig>
export type AnyConfig = WebConfigT | ConfluenceConfigT | GithubConfigT

export const CONFIG_SCHEMAS: Record<SourceType, TSchema> = { web: WebConfig, confluence: ConfluenceConfig, github: GithubConfig }

const Cron = Type.Union([Type.String({ maxLength: 200, description: '5-field cron expression, UTC.' }), Type.Null()])

export const CreateConnectorBody = Type.Object({
  kb_id: KbId,
  name: Type.String({ minLength: 1, maxLength: 200 }),
  source_type: literals(SOURCE_TYPES, 'Source type; immutable.'),
  config: Type.Record(Type.String(), Type.Unknown(), { description: 'Per-source shape: WebConfig, ConfluenceConfig or GithubConfig.' }),
  sync_schedule: Type.Optional(Cron),
  schedule_enabled: Type.Optional(Type.Boolean()),
})

export const PatchConnectorBody = Type.Object({
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  config: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'Replaces the whole config.' })),
  sync_schedule: Type.Optional(Cron),
  schedule_enabled: Type.Optional(Type.Boolean()),
  status: Type.Optional(literals(['active', 'paused'], "Only 'active' or 'paused'; clears last_error.")),
})

const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()])

export const ConnectorSchema = Type.Object({
  connector_id: Type.String({ format: 'uuid' }),
  kb_id: Type.String(),
  name: Type.String(),
  source_type: literals(SOURCE_TYPES, 'Source type'),
  config: Type.Record(Type.String(), Type.Unknown(), { description: 'Secrets are shown as ********.' }),
  sync_schedule: Nullable(Type.String()),
  schedule_enabled: Type.Boolean(),
  sync_status: literals(['idle', 'running'], 'Sync state'),
  sync_started_at: Nullable(Timestamp),
  last_synced_at: Nullable(Timestamp),
  status: literals(CONNECTOR_STATUSES, 'Connector status'),
  last_error: Nullable(Type.String()),
  created_at: Timestamp,
  updated_at: Timestamp,
}, { title: 'Connector' })

export const ConnectorList = Type.Object({ items: Type.Array(ConnectorSchema) })

export const ConnectorListQuery = Type.Object({
  kb_id: Type.Optional(Type.String()),
  source_type: Type.Optional(literals(SOURCE_TYPES, 'Only connectors of this source type.')),
  status: Type.Optional(literals(CONNECTOR_STATUSES, 'Only connectors in this status.')),
  search: Type.Optional(Type.String({ maxLength: 500, description: 'Case-insensitive substring of the name.' })),
  sort_by: literals(SORT_COLUMNS, 'Sort column.'),
  sort_order: literals(['asc', 'desc'], 'Sort direction.'),
})
;(ConnectorListQuery.properties.sort_by as { default?: string }).default = 'created_at'
;(ConnectorListQuery.properties.sort_order as { default?: string }).default = 'desc'

export const ConnectorParams = Type.Object({ connector_id: Type.String() })

export const LastSync = Type.Object({
  run_id: Type.String({ description: 'The run: the run_id of the documents it fetched.' }),
  trigger: Type.String(), outcome: Type.String(), started_at: Timestamp, finished_at: Timestamp,
  fetched: Type.Integer(), stored: Type.Integer(), unchanged: Type.Integer(), skipped: Type.Integer(), failed: Type.Integer(),
  pruned: Type.Integer(), truncated: Type.Boolean(), fetch_ms: Type.Integer({ description: 'Time of the source requests, before waiting for indexing.' }),
}, { title: 'LastSync', description: 'What the last finished sync did (Quarry addition).' })

export const SyncStatusResponse = Type.Object({
  connector_id: Type.String(),
  status: literals(CONNECTOR_STATUSES, 'Connector status'),
  sync_status: literals(['idle', 'running'], 'Sync state'),
  sync_started_at: Nullable(Timestamp),
  last_synced_at: Nullable(Timestamp),
  last_error: Nullable(Type.String()),
  doc_counts: DocCountsSchema,
  last_sync: Nullable(LastSync),
})

export const SyncStarted = Type.Object({ connector_id: Type.String(), sync_status: Type.Literal('running') })
export const SyncReset = Type.Object({ connector_id: Type.String(), sync_status: Type.Literal('idle') })
export const AbortRequested = Type.Object({ connector_id: Type.String(), status: Type.Literal('abort_requested') })
export const ConnectorDeleting = Type.Object({ connector_id: Type.String(), status: Type.Literal('deleting') })

/** The document list's parameters; page_size defaults to 10 here, as the older service's connector docs do. */
export const ConnectorDocsQuery = Type.Object({
  ...DocListQuery.properties,
  page_size: Type.Integer({ minimum: 1, default: 10, description: 'Default 10; at most 100, larger values are clamped.' }),
})
