// POST /api/admin/check: `quarry check` against a running service (the reconciliation of plugins/docs/reconcile.ts,
// run by the process that owns the stores). Super-admin only: a repair deletes vectors and re-queues documents.
import { Type } from '@sinclair/typebox'
import type { PluginContext } from '../../kernel/plugin.ts'
import { ErrorResponse } from '../../kernel/schemas.ts'
import { reconcile, type CheckReport } from './reconcile.ts'

export const CheckQuery = Type.Object({
  repair: Type.Boolean({ default: false, description: 'Mend what disagrees (delete stale vectors, queue incomplete documents again) instead of only reporting it.' }),
})

const DisagreementSchema = Type.Object({
  kb_id: Type.String(),
  doc_id: Type.String(),
  kind: Type.Union([Type.Literal('stale_vectors'), Type.Literal('partial_vectors')], {
    description: 'stale_vectors: a document that is outdated, deleted, failed or gone still has vectors (search finds it); partial_vectors: an indexed document whose vectors are not its chunk_count.',
  }),
  status: Type.Union([Type.String(), Type.Null()], { description: "The document's status; null when it has no row." }),
  chunk_count: Type.Union([Type.Integer(), Type.Null()]),
  points: Type.Integer({ description: 'Its points in the vector store when listed.' }),
  repair: Type.Optional(Type.Union([Type.Literal('deleted'), Type.Literal('requeued'), Type.Literal('resolved')], {
    description: 'What the repair did; resolved: it agreed by then (another process moved or finished it).',
  })),
}, { title: 'Disagreement' })

export const CheckReportSchema = Type.Object({
  repair: Type.Boolean(),
  kbs: Type.Integer(),
  documents: Type.Integer(),
  points: Type.Integer(),
  disagreements: Type.Array(DisagreementSchema),
  ms: Type.Integer(),
}, { title: 'CheckReport' })

export function registerCheckRoute(ctx: PluginContext): void {
  ctx.route({
    method: 'POST', path: '/api/admin/check', summary: 'Check (and repair) that search agrees with every document status', tags: ['admin'],
    description: 'Compares the vector store with the metadata in every KB: vectors of documents that are not indexed, and indexed documents whose vectors are incomplete. With repair=true the first are deleted and the second queued again. The service runs the same pass at start.',
    query: CheckQuery, access: { level: 'super_admin' },
    responses: { 200: { description: 'The report', schema: CheckReportSchema }, 403: { description: 'Not a super-admin', schema: ErrorResponse } },
    handler: (req): Promise<CheckReport> => reconcile({ adapters: ctx.adapters, log: req.log }, { repair: req.query.repair }),
  })
}
