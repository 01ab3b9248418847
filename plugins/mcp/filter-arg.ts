// The `filter` argument of the MCP `search` tool: the same fields and limits as `options.filter` of POST /api/search
// (plugins/search/filter.ts), in zod, which the MCP SDK validates with. Apart from filter.ts so that zod (about a
// hundred modules) loads with the MCP SDK, on the first MCP session, not with the search plugin at every start.
import * as z from 'zod'
import { DOC_ID_PATTERN } from '../../kernel/schemas.ts'
import { DESCRIPTIONS, FILTER_DOC_IDS_MAX, FILTER_LIST_MAX, PREFIX_MAX, TIME_PATTERN, VALUE_MAX } from '../search/filter.ts'

const zOneOrMany = (name: keyof typeof DESCRIPTIONS) =>
  z.union([z.string().min(1).max(VALUE_MAX), z.array(z.string().min(1).max(VALUE_MAX)).min(1).max(FILTER_LIST_MAX)]).describe(DESCRIPTIONS[name])
const zTime = (name: 'updated_after' | 'updated_before') => z.string().regex(new RegExp(TIME_PATTERN)).describe(DESCRIPTIONS[name])
export const SearchFilterArg = z.strictObject({
  doc_ids: z.array(z.string().regex(new RegExp(DOC_ID_PATTERN))).min(1).max(FILTER_DOC_IDS_MAX).optional().describe(DESCRIPTIONS.doc_ids),
  source_type: zOneOrMany('source_type').optional(),
  doc_type: zOneOrMany('doc_type').optional(),
  source_prefix: z.string().min(1).max(PREFIX_MAX).optional().describe(DESCRIPTIONS.source_prefix),
  tags: zOneOrMany('tags').optional(),
  updated_after: zTime('updated_after').optional(),
  updated_before: zTime('updated_before').optional(),
}).describe(DESCRIPTIONS.filter)
