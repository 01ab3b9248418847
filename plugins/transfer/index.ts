// KB export and import over HTTP (issue 39): GET /api/kb/{kb}/export streams the KB as a tar archive (archive.ts),
// POST /api/kb/import reads one from the request body as it arrives and writes it into a new KB (or resumes an
// interrupted import of the same archive), GET /api/kb/{kb}/import says how far an import got. Neither holds more
// than one document in memory. `quarry migrate` (migrate.ts) runs the same export into the same import in one
// process, between two sets of stores.
import { Type } from '@sinclair/typebox'
import type { SqlRunner } from '../../adapters/ports.ts'
import { AppError, clip } from '../../kernel/errors.ts'
import { definePlugin, reply, streamReply } from '../../kernel/plugin.ts'
import { ErrorResponse, KbIdParam, ValidationErrorResponse } from '../../kernel/schemas.ts'
import type { AuthzService } from '../authz/types.ts'
import { kbNotFound } from '../kb/errors.ts'
import type { KbService } from '../kb/service.ts'
import { ARCHIVE_CONTENT_TYPE } from './archive.ts'
import { exportKb, type ExportDeps } from './export.ts'
import { importArchive, transferState, type ImportDeps } from './import.ts'
import { readTar, tarStream, type TarSource } from './tar.ts'

const err = (description: string) => ({ description, schema: ErrorResponse })
const kbAdmin = { level: 'admin' as const, kb: { from: 'params' as const, name: 'kb_id' } }

const ExportQuery = Type.Object({
  after: Type.Optional(Type.String({ pattern: '^[0-9a-f]{16}$', description: 'Resume: only the documents after this doc_id (as the archive orders them).' })),
  manifest: Type.Boolean({ default: true, description: 'false: leave out the manifest (the rest of an interrupted export, to append to what was saved).' }),
})

const ImportQuery = Type.Object({
  kb_id: Type.Optional(Type.String({ description: "The new KB's id; default the archive's own. A KB imported under another id gets new document and connector ids." })),
})

const AnyObject = Type.Record(Type.String(), Type.Unknown())
const ImportReportSchema = Type.Object({
  kb_id: Type.String(), source_kb_id: Type.String(), archive_id: Type.String(),
  status: Type.Union([Type.Literal('imported'), Type.Literal('resumed'), Type.Literal('already_imported')]),
  documents: Type.Object({ total: Type.Integer(), written: Type.Integer(), skipped: Type.Integer() }),
  vectors: Type.Union([Type.Literal('reused'), Type.Literal('reembed')]),
  embedding: Type.Object({ archive: Type.String(), here: Type.String() }),
  queued: Type.Integer(),
  connectors: Type.Array(Type.Object({ connector_id: Type.String(), name: Type.String(), paused: Type.Boolean(), secrets_to_enter: Type.Array(Type.String()) })),
  warnings: Type.Array(Type.String()),
  verification: Type.Object({ ok: Type.Boolean(), counts: AnyObject, checksums: AnyObject, searches: AnyObject }),
})

const ImportStateSchema = Type.Object({
  kb_id: Type.String(),
  state: Type.Union([Type.Literal('none'), Type.Literal('running'), Type.Literal('done')]),
  archive_id: Type.Union([Type.String(), Type.Null()]),
  documents: Type.Integer(),
  last_doc_id: Type.Union([Type.String(), Type.Null()]),
  report: Type.Union([ImportReportSchema, Type.Null()]),
})

/** An async generator with its first value already produced: errors before any byte (404) become the answer. */
async function primed<T>(gen: AsyncGenerator<T>): Promise<AsyncIterable<T>> {
  const first = await gen.next()
  return (async function* () {
    if (first.done) return
    yield first.value
    yield* gen
  })()
}

export default definePlugin({
  name: 'transfer',
  dependsOn: ['kb', 'docs', 'authz'],
  register(ctx) {
    const { adapters, settings } = ctx
    const kbs = ctx.use<KbService>('kb')
    const authz = ctx.use<AuthzService | null>('authz')
    const tags = ['knowledge-bases']
    const exportDeps: ExportDeps = { adapters }

    ctx.route({
      method: 'GET', path: '/api/kb/{kb_id}/export', summary: 'Export a knowledge base as a tar archive (files, documents, connectors without secrets, vectors)', tags,
      description: 'Streams in constant memory. An interrupted download resumes with ?after=<the last doc_id saved whole>&manifest=false, appended to '
        + 'what was saved up to the end of that document. quarry export does all of this.',
      params: KbIdParam, query: ExportQuery, access: kbAdmin,
      responses: { 200: { description: 'The archive', contentType: ARCHIVE_CONTENT_TYPE }, 404: err('Knowledge base not found') },
      handler: async (req) => {
        const kbId = req.params.kb_id
        const entries = await primed<TarSource>(exportKb(exportDeps, { kbId, after: req.query.after, manifest: req.query.manifest, signal: req.signal }))
        return streamReply(tarStream(entries), ARCHIVE_CONTENT_TYPE, {
          'content-disposition': `attachment; filename="${kbId}${req.query.after ? `.after-${req.query.after}` : ''}.quarry.tar"`,
        })
      },
    })

    ctx.route({
      method: 'POST', path: '/api/kb/import', summary: 'Import a knowledge base from an archive (the request body, application/x-tar)', tags,
      description: 'Creates the KB (201), or goes on with an interrupted import of the same archive into it (200; documents already there are skipped). '
        + 'Vectors are reused when the archive was embedded with this service\'s model, otherwise the documents are queued to be indexed again. '
        + 'Counts, checksums and sample searches are verified (verification). One import at a time into a KB: the same archive sent again meanwhile waits, then answers already_imported. [ENT] Needs one of authz.kb_creator_roles, or the KB\'s admin to resume.',
      query: ImportQuery, bodyKind: 'stream', access: { level: 'authenticated' },
      responses: {
        201: { description: 'Imported', schema: ImportReportSchema }, 200: { description: 'Resumed, or imported before', schema: ImportReportSchema },
        403: err('[ENT] Not a KB creator'), 409: err('A KB with this id exists, or holds an import of another archive, or another import took this one\'s hold over'),
        422: { description: 'Not an archive, a damaged one, or a bad kb_id', schema: ValidationErrorResponse },
      },
      handler: async (req) => {
        const type = (req.headers['content-type'] ?? '').toLowerCase()
        if (type.startsWith('multipart/') || type.startsWith('application/json') || type.startsWith('application/x-www-form-urlencoded')) {
          throw new AppError('ARCHIVE_INVALID', 422, `Send the archive itself as the request body (Content-Type: ${ARCHIVE_CONTENT_TYPE}), not ${clip(type, 60)}`)
        }
        const caller = req.caller
        const deps: ImportDeps = {
          adapters, settings, log: req.log,
          async createKb(write) {
            if (authz && caller) {
              await authz.createKb(caller, async (db: SqlRunner) => ({ kb_id: await write(db) }))
            } else {
              await adapters.sql.transaction(write)
            }
          },
          async mayResume(kbId) {
            if (authz && caller) await authz.access.require(caller, kbId, 'admin')
          },
        }
        const report = await importArchive(deps, readTar(req.stream()), { kbId: req.query.kb_id, mode: 'import', signal: req.signal, createdBy: caller?.user_id ?? null })
        if (authz) await authz.roles.invalidateKb(report.kb_id)
        return reply(report.status === 'imported' ? 201 : 200, report)
      },
    })

    ctx.route({
      method: 'GET', path: '/api/kb/{kb_id}/import', summary: 'How far an import into a knowledge base got', tags,
      description: 'state none (the KB was not made by an import), running (interrupted: send the same archive again to go on) or done (with its report).',
      params: KbIdParam, access: kbAdmin,
      responses: { 200: { description: 'The import\'s state', schema: ImportStateSchema }, 404: err('Knowledge base not found') },
      handler: async (req) => {
        const kbId = req.params.kb_id
        if (!(await kbs.exists(kbId))) throw kbNotFound(kbId)
        const s = await transferState(adapters.sql, kbId)
        return {
          kb_id: kbId, state: s?.state ?? 'none', archive_id: s?.archive_id ?? null, documents: s?.documents ?? 0,
          last_doc_id: s?.last_doc_id ?? null, report: s?.report ?? null,
        }
      },
    })
  },
})
