// Metadata filters of a search (`options.filter`, issue 16 part 5): what a request may say, as the REST schema
// (TypeBox; the MCP tool's zod copy is plugins/mcp/filter-arg.ts), and how it becomes the vector stores' VectorFilter. Every field
// but `tags` is a condition on the chunks, applied inside each KB's index before its top-k cut
// (adapters/ports.ts VectorFilter), so a filtered search still returns top_k hits when that many match. `tags`
// are the KBs' own tags: they choose which of the named KBs take part, so they are resolved here, per request,
// against the metadata store (a KB whose tags change is never served from an answer cached under its old tags:
// the narrowed KB list is part of the plan the cache key is made of).
import { Type, type Static } from '@sinclair/typebox'
import type { SqlRunner, VectorFilter } from '../../adapters/ports.ts'
import { clip, ValidationError } from '../../kernel/errors.ts'
import { DOC_ID_PATTERN } from '../../kernel/schemas.ts'

export const FILTER_LIST_MAX = 100
export const FILTER_DOC_IDS_MAX = 1000
export const VALUE_MAX = 256
export const PREFIX_MAX = 2048

/** RFC 3339: a date, or a date and time with its zone (a time without a zone would be read in the server's). */
export const TIME_PATTERN = '^\\d{4}-\\d{2}-\\d{2}(T\\d{2}:\\d{2}(:\\d{2}(\\.\\d+)?)?(Z|[+-]\\d{2}:\\d{2}))?$'

export const DESCRIPTIONS = {
  filter: 'Only chunks matching every given field are searched (inside the index: top_k is still filled when that many match).',
  doc_ids: `Only these documents (1 to ${FILTER_DOC_IDS_MAX} doc_ids).`,
  source_type: 'Only documents of this source type (file, web, confluence, github, ...), or of any in a list.',
  doc_type: 'Only documents of this type (pdf, docx, md, html, ...), or of any in a list.',
  source_prefix: 'Only documents whose source (file name or URL) starts with this, case-sensitive.',
  tags: 'Only the knowledge bases (of kb_ids) holding this tag, or any tag of a list.',
  updated_after: 'Only chunks indexed at or after this time (RFC 3339, e.g. 2024-05-01 or 2024-05-01T12:00:00Z).',
  updated_before: 'Only chunks indexed before this time (RFC 3339).',
} as const

const oneOrMany = (name: string) =>
  Type.Union([
    Type.String({ minLength: 1, maxLength: VALUE_MAX }),
    Type.Array(Type.String({ minLength: 1, maxLength: VALUE_MAX }), { minItems: 1, maxItems: FILTER_LIST_MAX }),
  ], { errorMessage: `${name} must be a non-empty string or a list of 1 to ${FILTER_LIST_MAX} of them`, description: DESCRIPTIONS[name as keyof typeof DESCRIPTIONS] })

const time = (name: 'updated_after' | 'updated_before') =>
  Type.String({ pattern: TIME_PATTERN, errorMessage: `${name} must be an RFC 3339 date or date-time with a zone, e.g. 2024-05-01T12:00:00Z`, description: DESCRIPTIONS[name] })

/** `options.filter` of POST /api/search. Unknown keys are refused (422), so a misspelt field never widens a search. */
export const SearchFilter = Type.Object({
  doc_ids: Type.Optional(Type.Array(Type.String({ pattern: DOC_ID_PATTERN, errorMessage: 'doc_ids entries must be 16 lowercase hex characters' }), {
    minItems: 1, maxItems: FILTER_DOC_IDS_MAX, errorMessage: `doc_ids must list 1 to ${FILTER_DOC_IDS_MAX} doc_ids`, description: DESCRIPTIONS.doc_ids,
  })),
  source_type: Type.Optional(oneOrMany('source_type')),
  doc_type: Type.Optional(oneOrMany('doc_type')),
  source_prefix: Type.Optional(Type.String({ minLength: 1, maxLength: PREFIX_MAX, errorMessage: `source_prefix must be 1 to ${PREFIX_MAX} characters`, description: DESCRIPTIONS.source_prefix })),
  tags: Type.Optional(oneOrMany('tags')),
  updated_after: Type.Optional(time('updated_after')),
  updated_before: Type.Optional(time('updated_before')),
}, { additionalProperties: false, title: 'SearchFilter', description: DESCRIPTIONS.filter })

export type SearchFilterInput = Static<typeof SearchFilter>

/** What a search does with a filter: the chunk conditions for every KB's store, and the tags that narrow the KBs. */
export interface ResolvedFilter {
  /** Undefined when the filter places no condition on chunks. */
  vector: VectorFilter | undefined
  /** Undefined when the filter names no tags. */
  tags: string[] | undefined
}

const list = (v: string | string[] | undefined): string[] | undefined => (v === undefined ? undefined : [...new Set(typeof v === 'string' ? [v] : v)].sort())

/**
 * A schema-valid filter in the stores' terms (lists deduplicated and sorted, times in epoch ms), so that two
 * requests meaning the same share a cache key. 422 for a date that matches the pattern but does not exist
 * (2024-02-30) and for an empty window (updated_after not before updated_before).
 */
export function resolveFilter(f: SearchFilterInput | undefined): ResolvedFilter {
  if (f === undefined) return { vector: undefined, tags: undefined }
  const loc = (field: string) => ['body', 'options', 'filter', field]
  const ms = (field: 'updated_after' | 'updated_before'): number | undefined => {
    const text = f[field]
    if (text === undefined) return undefined
    const t = Date.parse(text)
    // Date.parse rolls 2024-02-30 over to March 1, hence the calendar check.
    if (!Number.isFinite(t) || !validDay(text)) {
      throw new ValidationError([{ loc: loc(field), msg: `${field} is not a valid date: '${clip(text)}'`, type: 'value_error' }])
    }
    return t
  }
  const after = ms('updated_after')
  const before = ms('updated_before')
  if (after !== undefined && before !== undefined && after >= before) {
    throw new ValidationError([{ loc: loc('updated_after'), msg: 'updated_after must be earlier than updated_before', type: 'value_error' }])
  }
  const vector: VectorFilter = {}
  if (f.doc_ids !== undefined) vector.docIds = list(f.doc_ids)
  if (f.source_type !== undefined) vector.sourceTypes = list(f.source_type)
  if (f.doc_type !== undefined) vector.docTypes = list(f.doc_type)
  if (f.source_prefix !== undefined) vector.sourcePrefix = f.source_prefix
  if (after !== undefined) vector.updatedAfter = after
  if (before !== undefined) vector.updatedBefore = before
  return { vector: Object.keys(vector).length > 0 ? vector : undefined, tags: list(f.tags) }
}

/** Whether the YYYY-MM-DD at the start of an RFC 3339 text is a day of the calendar. */
function validDay(text: string): boolean {
  const [y, m, d] = text.slice(0, 10).split('-').map(Number)
  const day = new Date(Date.UTC(y, m - 1, d))
  return day.getUTCFullYear() === y && day.getUTCMonth() === m - 1 && day.getUTCDate() === d
}

/** The KBs of kbIds (in their order) holding at least one of the tags; KBs that do not exist are left out here too. */
export async function kbsWithTags(sql: SqlRunner, kbIds: readonly string[], tags: readonly string[]): Promise<string[]> {
  const rows = await sql.query<{ kb_id: string }>('SELECT kb_id FROM knowledge_bases WHERE kb_id = ANY($1::text[]) AND tags ?| $2::text[]', [kbIds, tags])
  const tagged = new Set(rows.map((r) => r.kb_id))
  return kbIds.filter((id) => tagged.has(id))
}

/**
 * The part of a search plan a filter decides: the KBs that take part (kbIds narrowed by the tags, order kept) and
 * the condition every KB's store applies. A request without a filter costs no query.
 */
export async function planFilter(sql: SqlRunner, kbIds: string[], filter: SearchFilterInput | undefined): Promise<{ kbIds: string[]; filter: VectorFilter | undefined }> {
  const resolved = resolveFilter(filter)
  return { kbIds: resolved.tags === undefined ? kbIds : await kbsWithTags(sql, kbIds, resolved.tags), filter: resolved.vector }
}
