// The MCP tools (notes.md "MCP tools (base edition)"), defined once for every transport: Streamable HTTP
// at /mcp and stdio (`npm run mcp`) both build their server with createMcpServer.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import * as z from 'zod'
import { AppError } from '../../kernel/errors.ts'
import type { Logger } from '../../kernel/log.ts'
import type { Caller } from '../../kernel/plugin.ts'
import { couldExist } from '../../kernel/schemas.ts'
import { publicRecord, type DocsService } from '../docs/service.ts'
import type { AuthzService } from '../authz/types.ts'
import type { KbService } from '../kb/service.ts'
import { SearchFilterArg } from './filter-arg.ts'
import { MAX_QUERY_CHARS, TOP_K_MAX } from '../search/schemas.ts'
import type { SearchResultItem, SearchService } from '../search/service.ts'

export interface ToolDeps {
  search: SearchService
  kbs: KbService
  docs: DocsService
  log: Logger
  /** [ENT] The same access rules as the REST API (spec 4.11); null in the base edition. */
  authz?: AuthzService | null
}

export interface ServerInfo {
  name: string
  version: string
}

export const TOOL_NAMES = ['search', 'list_knowledge_bases', 'get_document', 'get_document_status'] as const

const SearchInput = {
  query: z.string().min(1).max(MAX_QUERY_CHARS).describe(`What to look for, in natural language (1 to ${MAX_QUERY_CHARS} characters).`),
  kb_ids: z.array(z.string().min(1)).max(100).optional()
    .describe('Knowledge bases to search (see list_knowledge_bases). Omit to search every knowledge base the caller may read.'),
  top_k: z.number().int().min(1).max(TOP_K_MAX).optional()
    .describe(`Maximum number of passages returned (1 to ${TOP_K_MAX}; default: the service setting).`),
  mode: z.enum(['hybrid', 'similarity']).optional()
    .describe("'hybrid' combines keyword and semantic ranking; 'similarity' ranks by cosine similarity only. Default: the service setting."),
  min_score: z.number().min(0).max(1).optional()
    .describe('Minimum cosine similarity, 0.0 to 1.0; applies in similarity mode only (hybrid scores are ranks, not similarities).'),
  filter: SearchFilterArg.optional(),
}

const SearchHit = z.object({
  text: z.string().describe('The passage.'),
  score: z.number().describe('Fused rank score in hybrid mode, cosine similarity in similarity mode.'),
  rerank_score: z.number().nullable().describe('Reranker relevance, or null when the results were not reranked.'),
  kb_id: z.string(),
  doc_id: z.string().describe('Pass it with kb_id to get_document for the whole record.'),
  title: z.string(),
  source: z.string().describe('File name or URL of the document.'),
  page_num: z.number().int(),
  page_label: z.string(),
  chunk_idx: z.number().int().nullable().describe('Position of the passage in its document; null for a merged parent passage.'),
})

const SearchOutput = z.object({
  results: z.array(SearchHit),
  latency_ms: z.number().int(),
})

const KnowledgeBases = z.object({
  knowledge_bases: z.array(z.object({
    id: z.string(),
    name: z.string(),
    description: z.string().nullable().describe('null when the knowledge base was created without one.'),
    tags: z.array(z.string()),
  })),
})

const DocInput = {
  kb_id: z.string().min(1).describe('Knowledge base of the document.'),
  doc_id: z.string().min(1).describe('Document id (as returned by search).'),
}

const str = z.string().nullable().optional()
const int = z.number().int().nullable().optional()

/** The document record (as GET /api/kb/{kb_id}/docs/{doc_id}/status answers), or `status: "not_found"` (NOT_FOUND). Loose: a field added to the record later must not fail clients that validate against this schema. */
const DocumentOutput = z.looseObject({
  status: z.string().describe('The lifecycle status, or "not_found".'),
  doc_id: z.string().optional(),
  kb_id: z.string().optional(),
  title: z.string().optional(),
  source_type: z.string().optional(),
  source: z.string().optional(),
  storage_key: str,
  connector_id: str,
  run_id: str,
  doc_type: str,
  chunk_count: int,
  file_size: int,
  embedding_model: str,
  last_error: str,
  etag: str,
  source_uri: str,
  content_version: str,
  duplicate_of: str,
  dedup: z.object({
    verdict: z.string(), stage: z.number().int(), score: z.number(), matched_doc_id: z.string(), reason: z.string(),
  }).nullable().optional().describe('The dedup verdict that concerns the document (why it is outdated, or which document it was told apart from); null when unique.'),
  created_at: z.string().optional(),
  updated_at: str,
})

/**
 * What an unknown document answers: get_document `{status: "not_found"}` (notes.md); get_document_status the
 * older service's exact shape, the status fields it reads set to null.
 */
const NOT_FOUND = {
  get_document: { status: 'not_found' },
  get_document_status: { status: 'not_found', updated_at: null, file_size: null, content_version: null },
} as const

const READ_ONLY = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false } as const

/** Structured content for current clients, the same JSON as text for clients older than structured results. */
function ok(value: Record<string, unknown>): CallToolResult {
  return { structuredContent: value, content: [{ type: 'text', text: JSON.stringify(value) }] }
}

/** Failures are tool results (isError), so the model sees the reason; the protocol exchange stays intact. */
function toolError(err: unknown, log: Logger, tool: string): CallToolResult {
  let text: string
  if (err instanceof AppError) {
    // A refusal says so the way the REST API would (the model may tell the user to ask for access).
    text = err.status === 403 ? `403 Forbidden: ${err.message}` : err.message
    if (err.status >= 500) log.warn({ err, tool }, 'MCP tool failed')
  } else {
    text = 'Internal error'
    log.error({ err, tool }, 'MCP tool failed')
  }
  return { isError: true, content: [{ type: 'text', text }] }
}

function hit(r: SearchResultItem): z.infer<typeof SearchHit> {
  return {
    text: r.text,
    score: r.score,
    rerank_score: r.rerank_score ?? null,
    kb_id: r.kb_id,
    doc_id: r.doc_id,
    title: r.title,
    source: r.source,
    page_num: r.page_num,
    page_label: r.page_label,
    chunk_idx: r.chunk_index,
  }
}

/**
 * A server with the four tools. `caller` is who the request came from (null in the base edition and on
 * stdio): the tools pass it to the services, which is where an access-controlled edition checks it.
 */
export function createMcpServer(deps: ToolDeps, info: ServerInfo, caller: Caller | null = null): McpServer {
  const { log, authz } = deps
  /** [ENT] The KBs the caller may read, of `ids` or of all; every KB (or `ids` as given) in the base edition. */
  const readable = async (ids?: string[]): Promise<string[]> => {
    if (authz) return authz.access.readable(caller, ids)
    return ids ?? (await deps.kbs.list()).map((kb) => kb.kb_id)
  }
  const server = new McpServer(info, {
    capabilities: { tools: {} },
    instructions: 'Quarry searches knowledge bases of documents. Call list_knowledge_bases to see what exists, search to find passages, get_document for a document\'s record.',
  })

  const guarded = <A>(tool: string, run: (args: A) => Promise<Record<string, unknown>>) => async (args: A): Promise<CallToolResult> => {
    try {
      return ok(await run(args))
    } catch (err) {
      return toolError(err, log, tool)
    }
  }

  server.registerTool('search', {
    title: 'Search knowledge bases',
    description: 'Finds the passages of the indexed documents that best answer a query, across one, several or all knowledge bases. Returns passages with their score, document and page.',
    inputSchema: SearchInput,
    outputSchema: SearchOutput,
    annotations: READ_ONLY,
  }, guarded('search', async ({ query, kb_ids, top_k, mode, min_score, filter }) => {
    let ids = kb_ids
    if (ids === undefined || authz) {
      ids = await readable(ids)
      // "Every knowledge base" of an empty service is an empty answer, not the 422 of an explicit empty list;
      // [ENT] so is a list of which the caller may read none (the REST search answers the same).
      if (ids.length === 0 && (kb_ids === undefined || kb_ids.length > 0)) return { results: [], latency_ms: 0 }
    }
    const options: Record<string, unknown> = {}
    if (top_k !== undefined) options.top_k = top_k
    if (mode !== undefined) options.mode = mode
    if (min_score !== undefined) options['similarity.min_score'] = min_score
    if (filter !== undefined) options.filter = filter
    const out = await deps.search.search({ query, kb_ids: ids, options }, caller)
    return { results: out.results.map(hit), latency_ms: out.meta.latency_ms }
  }))

  server.registerTool('list_knowledge_bases', {
    title: 'List knowledge bases',
    description: 'Lists the knowledge bases that can be searched, with their id, name, description and tags.',
    outputSchema: KnowledgeBases,
    annotations: READ_ONLY,
  }, guarded('list_knowledge_bases', async () => {
    let kbs = await deps.kbs.list()
    if (authz) {
      const ok = new Set(await readable())
      kbs = kbs.filter((kb) => ok.has(kb.kb_id))
    }
    return { knowledge_bases: kbs.map((kb) => ({ id: kb.kb_id, name: kb.kb_name, description: kb.description, tags: kb.tags })) }
  }))

  const documentTool = (tool: keyof typeof NOT_FOUND) => guarded<{ kb_id: string; doc_id: string }>(tool, async ({ kb_id, doc_id }) => {
    // An id no document can have (a NUL, a wrong length) is not looked up: the database would refuse some of them.
    if (!couldExist('kb_id', kb_id) || !couldExist('doc_id', doc_id)) return { ...NOT_FOUND[tool] }
    try {
      // [ENT] viewer on the KB: an absent KB is not_found below (404), no access a tool error (403).
      await authz?.access.require(caller, kb_id, 'viewer')
      return publicRecord(await deps.docs.get(kb_id, doc_id)) as unknown as Record<string, unknown>
    } catch (err) {
      if (err instanceof AppError && err.status === 404) return { ...NOT_FOUND[tool] }
      throw err
    }
  })
  const docTool = (description: string) => ({ description, inputSchema: DocInput, outputSchema: DocumentOutput, annotations: READ_ONLY })
  server.registerTool('get_document', {
    title: 'Get a document',
    ...docTool('The record of one document: title, source, status (indexed, pending, failed, ...), chunk count, size, dates. Answers {"status": "not_found"} when there is no such document.'),
  }, documentTool('get_document'))
  server.registerTool('get_document_status', {
    title: 'Get a document (older name)',
    ...docTool('Same as get_document, under the older service\'s name; an unknown document answers the older service\'s {"status": "not_found", "updated_at": null, "file_size": null, "content_version": null}.'),
  }, documentTool('get_document_status'))

  return server
}
