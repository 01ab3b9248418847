// Spec 4.7: document endpoints.
import { Type } from '@sinclair/typebox'
import { reply, streamReply, type PluginContext } from '../../kernel/plugin.ts'
import { ErrorResponse, KbIdParam } from '../../kernel/schemas.ts'
import {
  AllDocListQuery, BatchForm, BatchResponse, DocCountsSchema, DocList, DocListQuery, DocParams, DocumentSchema, FailQuery,
  ForceQuery, UploadForm, UploadResponse,
} from './schemas.ts'
import { publicRecord, type DocsService } from './service.ts'

const err = (description: string) => ({ description, schema: ErrorResponse })
const kbRole = (level: 'viewer' | 'editor') => ({ level, kb: { from: 'params' as const, name: 'kb_id' } })
const MAX_PAGE_SIZE = 100

export function registerDocRoutes(ctx: PluginContext, docs: DocsService): void {
  const tags = ['documents']

  ctx.route({
    method: 'POST', path: '/api/kb/{kb_id}/docs/upload', summary: 'Upload one document (multipart field `file`)', tags,
    params: KbIdParam, bodyKind: 'multipart', body: UploadForm, status: 202, access: kbRole('editor'),
    responses: {
      202: { description: 'Stored and queued', schema: UploadResponse }, 403: err('Blocked by an ingest hook (document cap)'),
      404: err('Knowledge base not found'), 409: err('The document is active'), 422: err('Unsupported format, empty file or over the size limit'),
      502: err('Object storage failed'), 503: err('Queue or database unavailable'),
    },
    handler: async (req) => reply(202, await docs.upload(req.params.kb_id, req)),
  })

  ctx.route({
    method: 'POST', path: '/api/kb/{kb_id}/docs/upload/batch', summary: 'Upload several documents (repeated multipart field `files`)', tags,
    params: KbIdParam, bodyKind: 'multipart', body: BatchForm, status: 202, access: kbRole('editor'),
    responses: {
      202: { description: 'All stored and queued', schema: BatchResponse }, 403: { description: 'An ingest hook blocked; later files skipped', schema: BatchResponse },
      404: err('Knowledge base not found'), 422: { description: 'At least one file failed', schema: BatchResponse },
    },
    handler: async (req) => {
      const { status, body } = await docs.uploadBatch(req.params.kb_id, req)
      return reply(status, body)
    },
  })

  const listHandler = async (kbId: string | undefined, q: { page: number; page_size: number; status?: string; source_type?: string; search?: string; sort_by: string; sort_order: string }) => {
    const pageSize = Math.min(q.page_size, MAX_PAGE_SIZE)
    const { items, total } = await docs.list({
      kbId, status: q.status as never, sourceType: q.source_type, search: q.search, sortBy: q.sort_by as never,
      sortOrder: q.sort_order as 'asc' | 'desc', page: q.page, pageSize,
    })
    return { items: items.map(publicRecord), total, page: q.page, page_size: pageSize }
  }

  ctx.route({
    method: 'GET', path: '/api/kb/{kb_id}/docs', summary: 'List documents of a knowledge base', tags,
    params: KbIdParam, query: DocListQuery, access: kbRole('viewer'),
    responses: { 200: { description: 'A page of documents', schema: DocList }, 404: err('Knowledge base not found') },
    handler: async (req) => {
      await docs.kbCounts(req.params.kb_id)
      return listHandler(req.params.kb_id, req.query)
    },
  })

  ctx.route({
    method: 'GET', path: '/api/docs', summary: 'List documents across all knowledge bases', tags,
    query: AllDocListQuery, access: { level: 'super_admin' },
    responses: { 200: { description: 'A page of documents', schema: DocList } },
    handler: (req) => listHandler(undefined, req.query),
  })

  ctx.route({
    method: 'GET', path: '/api/kb/{kb_id}/docs/status', summary: 'Document counts of a knowledge base', tags,
    params: KbIdParam, access: kbRole('viewer'),
    responses: { 200: { description: 'Counts by status', schema: Type.Object({ kb_id: Type.String(), doc_counts: DocCountsSchema }) }, 404: err('Knowledge base not found') },
    handler: async (req) => ({ kb_id: req.params.kb_id, doc_counts: await docs.kbCounts(req.params.kb_id) }),
  })

  ctx.route({
    method: 'GET', path: '/api/docs/status', summary: 'Document counts of every knowledge base', tags, access: { level: 'super_admin' },
    responses: { 200: { description: 'Counts by KB', schema: Type.Object({ knowledge_bases: Type.Record(Type.String(), Type.Object({ doc_counts: DocCountsSchema })) }) } },
    handler: async () => ({ knowledge_bases: await docs.allCounts() }),
  })

  ctx.route({
    method: 'GET', path: '/api/kb/{kb_id}/docs/{doc_id}/status', summary: 'The whole record of one document', tags,
    params: DocParams, access: kbRole('viewer'),
    responses: { 200: { description: 'The document', schema: DocumentSchema }, 404: err('Document or knowledge base not found') },
    handler: async (req) => publicRecord(await docs.get(req.params.kb_id, req.params.doc_id)),
  })

  ctx.route({
    method: 'GET', path: '/api/kb/{kb_id}/docs/{doc_id}/download', summary: 'Download the original file', tags,
    params: DocParams, access: kbRole('viewer'),
    responses: { 200: { description: 'The file', contentType: 'application/octet-stream' }, 404: err('Document or file not found') },
    handler: async (req) => {
      const file = await docs.download(req.params.kb_id, req.params.doc_id)
      return streamReply(file.stream, file.contentType, {
        'content-disposition': file.disposition,
        ...(file.size !== null ? { 'x-file-size': String(file.size) } : {}),
      })
    },
  })

  ctx.route({
    method: 'DELETE', path: '/api/kb/{kb_id}/docs/{doc_id}', summary: 'Delete a document (soft; force=true removes it entirely, a soft-deleted one included)', tags,
    params: DocParams, query: ForceQuery, status: 202, access: kbRole('editor'),
    responses: {
      202: { description: 'Queued for deletion', schema: Type.Object({ kb_id: Type.String(), doc_id: Type.String(), status: Type.Literal('pending') }) },
      404: err('Not found'), 409: err('The document is running or deleting'),
    },
    handler: async (req) => reply(202, await docs.delete(req.params.kb_id, req.params.doc_id, req.query.force)),
  })

  ctx.route({
    method: 'POST', path: '/api/kb/{kb_id}/reindex', summary: 'Re-index the documents of a knowledge base (changed etag, or all with force)', tags,
    params: KbIdParam, query: ForceQuery, status: 202, access: kbRole('editor'),
    responses: { 202: { description: 'Queued', schema: Type.Object({ kb_id: Type.String(), queued: Type.Integer(), skipped: Type.Integer() }) }, 404: err('Knowledge base not found') },
    handler: async (req) => reply(202, await docs.reindexKb(req.params.kb_id, req.query.force)),
  })

  ctx.route({
    method: 'POST', path: '/api/kb/{kb_id}/docs/{doc_id}/reindex', summary: 'Re-index one document', tags,
    params: DocParams, query: ForceQuery, status: 202, access: kbRole('editor'),
    responses: {
      202: { description: 'Queued or skipped', schema: Type.Object({ kb_id: Type.String(), doc_id: Type.String(), queued: Type.Integer(), skipped: Type.Integer() }) },
      404: err('Not found'), 409: err('The document is active'),
    },
    handler: async (req) => reply(202, await docs.reindexDoc(req.params.kb_id, req.params.doc_id, req.query.force)),
  })

  ctx.route({
    method: 'POST', path: '/api/kb/{kb_id}/docs/{doc_id}/recover', summary: 'Recover a document stuck in running (failed, then queued again)', tags,
    params: DocParams, status: 202, access: kbRole('editor'),
    responses: { 202: { description: 'Queued', schema: Type.Object({ kb_id: Type.String(), doc_id: Type.String(), queued: Type.Boolean() }) }, 404: err('Not found'), 409: err('Not running') },
    handler: async (req) => reply(202, await docs.recover(req.params.kb_id, req.params.doc_id)),
  })

  ctx.route({
    method: 'POST', path: '/api/kb/{kb_id}/docs/{doc_id}/restore', summary: 'Restore an outdated document: index it again and record the pair as distinct', tags,
    params: DocParams, status: 202, access: kbRole('editor'),
    responses: {
      202: {
        description: 'Queued; the pair is never judged again',
        schema: Type.Object({ kb_id: Type.String(), doc_id: Type.String(), status: Type.Literal('pending'), distinct_from: Type.Union([Type.String(), Type.Null()]) }),
      },
      404: err('Not found'), 409: err('The document is not outdated'),
    },
    handler: async (req) => reply(202, await docs.restore(req.params.kb_id, req.params.doc_id)),
  })

  ctx.route({
    method: 'POST', path: '/api/kb/{kb_id}/docs/{doc_id}/fail', summary: 'Mark a document failed', tags,
    params: DocParams, query: FailQuery, access: kbRole('editor'),
    responses: {
      200: { description: 'Failed', schema: Type.Object({ kb_id: Type.String(), doc_id: Type.String(), status: Type.Literal('failed'), warning: Type.Optional(Type.String()) }) },
      404: err('Not found'), 409: err('Not in uploading, pending, running or deleting'),
    },
    handler: (req) => docs.fail(req.params.kb_id, req.params.doc_id, req.query.reason),
  })
}
