import { Type } from '@sinclair/typebox'
import { Timestamp } from '../../kernel/schemas.ts'
import { STATUSES } from './states.ts'
import { SORT_COLUMNS } from './repo.ts'

const literalUnion = (values: readonly string[], description: string) =>
  Type.Union(values.map((v) => Type.Literal(v)), { description })

const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()])

export const DedupRecordSchema = Type.Object({
  verdict: literalUnion(['identical', 'title_changed', 'similar', 'sibling', 'overlap'],
    'identical: a copy, not indexed; title_changed and similar: a revision that superseded the older document (or, on that older one, what superseded it); sibling and overlap: both stay indexed.'),
  stage: Type.Union([Type.Literal(1), Type.Literal(3)], { description: 'The dedup stage that decided (1: SimHash, 3: chunk comparison).' }),
  score: Type.Number({ description: 'The score the verdict rests on (stage 3 aggregate, or 1 for a stage-1 copy).' }),
  matched_doc_id: Type.String({ description: 'The other document of the pair.' }),
  reason: Type.String(),
}, { title: 'DedupVerdict' })

export const DocumentSchema = Type.Object({
  doc_id: Type.String(),
  kb_id: Type.String(),
  title: Type.String(),
  source_type: Type.String(),
  source: Type.String(),
  storage_key: Nullable(Type.String()),
  connector_id: Nullable(Type.String()),
  run_id: Nullable(Type.String({ description: 'The connector sync run that fetched the current content (last_sync.run_id of GET /api/connectors/{id}/sync/status); null for uploads.' })),
  status: literalUnion(STATUSES, 'Document status'),
  doc_type: Nullable(Type.String()),
  chunk_count: Type.Union([Type.Integer(), Type.Null()]),
  file_size: Type.Union([Type.Integer(), Type.Null()]),
  embedding_model: Nullable(Type.String()),
  last_error: Nullable(Type.String()),
  etag: Nullable(Type.String()),
  source_uri: Nullable(Type.String()),
  content_version: Nullable(Type.String({ description: 'The etag for uploads; the source version for connector documents.' })),
  duplicate_of: Nullable(Type.String()),
  dedup: Type.Union([DedupRecordSchema, Type.Null()], { description: 'The dedup verdict that concerns the document; null when it was judged unique or dedup is off.' }),
  chunk_strategy: Nullable(Type.String({ description: 'Chunking strategy of the last processing run.' })),
  doc_created_at: Type.Union([Timestamp, Type.Null()], { description: 'When the current content arrived (upload or re-upload).' }),
  process_started_at: Type.Union([Timestamp, Type.Null()], { description: 'Start of the last processing run.' }),
  process_finished_at: Type.Union([Timestamp, Type.Null()], { description: 'End of the last processing run; null while it runs.' }),
  deleted_at: Type.Union([Timestamp, Type.Null()], { description: 'When the document was soft-deleted; null unless deleted.' }),
  created_at: Timestamp,
  updated_at: Timestamp,
}, { title: 'Document' })

export const DocListQuery = Type.Object({
  page: Type.Integer({ minimum: 1, default: 1 }),
  page_size: Type.Integer({ minimum: 1, default: 20, description: 'At most 100; larger values are clamped.' }),
  status: Type.Optional(literalUnion(STATUSES, 'Only documents in this status (deleted ones appear only when asked for).')),
  source_type: Type.Optional(literalUnion(['s3', 'web', 'confluence', 'github'], 'Only documents from this source type.')),
  search: Type.Optional(Type.String({ maxLength: 500, description: 'Case-insensitive substring of the title, source or doc_id.' })),
  sort_by: literalUnion(SORT_COLUMNS, 'Sort column; nulls last in either direction.'),
  sort_order: literalUnion(['asc', 'desc'], 'Sort direction.'),
})
;(DocListQuery.properties.sort_by as { default?: string }).default = 'updated_at'
;(DocListQuery.properties.sort_order as { default?: string }).default = 'desc'

export const AllDocListQuery = Type.Omit(DocListQuery, ['source_type'])

export const DocList = Type.Object({ items: Type.Array(DocumentSchema), total: Type.Integer(), page: Type.Integer(), page_size: Type.Integer() })

const countKeys = Object.fromEntries([...STATUSES, 'total'].map((k) => [k, Type.Integer()]))
export const DocCountsSchema = Type.Object(countKeys, { title: 'DocCounts' })

export const UploadResponse = Type.Object({ doc_id: Type.String(), source: Type.String(), etag: Type.String(), status_url: Type.String() })
export const BatchResponse = Type.Object({
  results: Type.Array(Type.Union([UploadResponse, Type.Object({ title: Type.String(), error: Type.String(), status: Type.Literal('error') })])),
  detail: Type.Optional(Type.String()),
})
export const UploadForm = Type.Object({ file: Type.String({ format: 'binary', description: 'The document (pdf, docx, txt, md, hwp, hwpx, html, htm, rst)' }) })
export const BatchForm = Type.Object({ files: Type.Array(Type.String({ format: 'binary' }), { description: 'Documents, processed in order' }) })

export const ForceQuery = Type.Object({ force: Type.Boolean({ default: false }) })
export const FailQuery = Type.Object({ reason: Type.Optional(Type.String({ maxLength: 10000 })) })
export const DocParams = Type.Object({ kb_id: Type.String(), doc_id: Type.String() })
