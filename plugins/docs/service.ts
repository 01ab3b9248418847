// Document lifecycle (spec 3.1, 4.7): upload, list, counts, download, delete, reindex, recover, fail.
// The API side only moves rows between states and queues events; the worker does the heavy work.
import type { Readable } from 'node:stream'
import { Transform } from 'node:stream'
import type { Adapters } from '../../adapters/ports.ts'
import type { Settings } from '../../kernel/config/schema.ts'
import { AppError, clip, conflict, notFound, serviceUnavailable, storageFailure, unprocessable } from '../../kernel/errors.ts'
import { formatBytes, readMultipart, type MultipartFile } from '../../kernel/http/multipart.ts'
import type { Caller, Request } from '../../kernel/plugin.ts'
import { kbNotFound, type KbService } from '../kb/service.ts'
import { baseName, CONTENT_TYPES, contentDisposition, docTypeOf, extensionOf, titleFromFilename } from './formats.ts'
import { addWithinDocCap, createDocRepo, docCapPrecheck, emptyCounts, newDocId, type DocCapBlock, type DocCounts, type DocRepo, type DocumentRecord, type ListFilter } from './repo.ts'
import { markDistinct } from './dedup.ts'
import { documentKey } from './storage-key.ts'
import { FAIL_REASON, FAILABLE, isActive, RECOVER_REASON, STABLE, truncateError, UNDELETABLE, type DocStatus } from './states.ts'

export const INGEST_TOPIC = 'ingest'

export type DocEvent =
  /** retry: how many times a run of this document met a store that was down (pipeline.ts, transient.ts). */
  | { op: 'ingest'; kb_id: string; doc_id: string; force: boolean; retry?: number }
  | { op: 'delete'; kb_id: string; doc_id: string; hard: boolean }

export interface UploadResult {
  doc_id: string
  source: string
  etag: string
  status_url: string
}

/** Runs before every new ingest (upload, batch, connector sync); throws an AppError (403) to block it. */
export type IngestHook = (input: { kbId: string; caller: Caller | null; kind: 'upload' | 'batch' | 'connector' }) => void | Promise<void>

/**
 * [ENT] The document cap in force for a new document of this KB added by this caller: the runtime max_docs_count,
 * 0 for none (unlimited), Infinity for a caller it does not apply to while it is in force (a super-admin: never
 * refused, but added under the same lock as the others). Installed by the limits plugin; the base edition has none.
 */
export type DocCap = (kbId: string, caller: Caller | null) => Promise<number>

export const docLimitReached = (kbId: string, block: DocCapBlock) =>
  new AppError('DOC_LIMIT', 403, `Document limit reached for KB '${clip(kbId)}': ${block.count}/${block.max}`)

export const activeConflict = (doc: { doc_id: string; status: string }) =>
  conflict(`Document is active, try again later: doc_id=${doc.doc_id} status=${doc.status}`, 'DOC_ACTIVE')

// The older service's texts (notes.md), which its clients match on.
const docNotFound = (kbId: string, docId: string) => notFound(`Document not found: kb=${clip(kbId)} doc_id=${clip(docId)}`, 'DOC_NOT_FOUND')
const notRestorable = (status: string) => conflict(`Document is not outdated, nothing to restore: status=${status}`, 'DOC_NOT_OUTDATED')
const notFailable = (status: string) => conflict(`Cannot force-fail document in current state: status=${status}`, 'DOC_NOT_FAILABLE')
const notRecoverable = (status: string) => conflict(`Document is not in a recoverable state: status=${status}`, 'DOC_NOT_RUNNING')

/** Public view of a row (content_type is internal). */
export function publicRecord(d: DocumentRecord): Omit<DocumentRecord, 'content_type'> {
  const { content_type: _unused, ...rest } = d
  return rest
}

export function createDocsService(adapters: Adapters, settings: Readonly<Settings>, kbs: KbService) {
  const repoOpts = { chunkStrategy: settings.chunking.strategy }
  const repo = createDocRepo(adapters.sql, repoOpts)
  const hooks: IngestHook[] = []
  /** Told of a document moved out of `running` through the API (the built-in worker stops its run). */
  const leftRunning: ((docId: string) => void)[] = []
  const tellLeftRunning = (docId: string) => {
    for (const fn of leftRunning) fn(docId)
  }
  let docCap: DocCap | null = null
  const maxBytes = settings.ingestion.max_file_size_mb * 1024 * 1024

  const enqueue = async (event: DocEvent) => {
    try {
      await adapters.queue.enqueue(INGEST_TOPIC, event.doc_id, event)
    } catch (err) {
      throw err instanceof AppError ? err : serviceUnavailable(`Queue unavailable: ${(err as Error).message}`, err)
    }
  }

  const runHooks = async (kbId: string, caller: Caller | null, kind: 'upload' | 'batch' | 'connector') => {
    for (const hook of hooks) await hook({ kbId, caller, kind })
  }

  /**
   * Before any work on a document of `source` (upload, batch entry, connector item): the ingest hooks, then the
   * document cap's cheap check (no lock), so that a blocked upload is refused before its file is stored. Returns
   * the cap for addDocument (0: none).
   */
  const beforeDocument = async (kbId: string, source: string, caller: Caller | null, kind: 'upload' | 'batch' | 'connector'): Promise<number> => {
    await runHooks(kbId, caller, kind)
    const max = docCap ? await docCap(kbId, caller) : 0
    if (max > 0 && Number.isFinite(max)) {
      const block = await docCapPrecheck(adapters.sql, kbId, source, max)
      if (block) throw docLimitReached(kbId, block)
    }
    return max
  }

  /**
   * Adds or replaces the document of `source`: `add` inserts it (or moves the existing row) through the repo it is
   * given. Under a cap (max > 0) that runs atomically with the count (repo.ts addWithinDocCap): a new document
   * over the cap is refused with 403 even when a concurrent one got in between the precheck and here.
   */
  const addDocument = async <R>(kbId: string, source: string, max: number, add: (r: DocRepo) => Promise<R>): Promise<R> => {
    if (max <= 0) return add(repo)
    const out = await addWithinDocCap(adapters.sql, repoOpts, kbId, source, max, add)
    if (!out.ok) throw docLimitReached(kbId, out)
    return out.value
  }

  const requireDoc = async (kbId: string, docId: string) => {
    const doc = await repo.get(kbId, docId)
    if (!doc) {
      if (!(await kbs.exists(kbId))) throw kbNotFound(kbId)
      throw docNotFound(kbId, docId)
    }
    return doc
  }

  /** The status a document moved to while a compare-and-set of ours lost the race (404 if it is gone). */
  const statusNow = async (kbId: string, docId: string): Promise<string> => {
    const doc = await repo.getById(docId)
    if (!doc) throw docNotFound(kbId, docId)
    return doc.status
  }

  /** Counts bytes and enforces the size cap while the file streams into object storage. */
  const sizeGuard = (filename: string) => {
    let size = 0
    const stream = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        size += chunk.length
        if (size > maxBytes) cb(tooLarge(filename))
        else cb(null, chunk)
      },
    })
    return { stream, size: () => size }
  }
  const tooLarge = (filename: string) =>
    new AppError('FILE_TOO_LARGE', 422, `File '${filename}' is larger than the ${formatBytes(maxBytes)} limit (ingestion.max_file_size_mb)`)

  /**
   * Stores one uploaded file and queues it. The file goes to object storage first (422 over the cap, 502 when
   * storage fails: no row was written), then one statement inserts the row as `pending`; a name that exists
   * already moves its row from a stable state to `pending` instead (409 while active; the loser of a race
   * deletes its file). The queue comes last (503 if it is down: the document is marked failed with the
   * reason, so a reindex can retry it). A crash between storing and inserting leaves an unreferenced file,
   * never a stuck row; one between inserting and queueing leaves a pending row that the worker's recovery
   * queues (worker.ts).
   */
  async function ingestFile(kbId: string, file: MultipartFile, caller: Caller | null, kind: 'upload' | 'batch'): Promise<UploadResult> {
    const source = baseName(file.filename)
    if (!source) throw unprocessable('The uploaded file has no file name', 'NO_FILENAME')
    const docType = docTypeOf(source)
    if (!docType) {
      const ext = extensionOf(source)
      throw unprocessable(`Unsupported file format: ${ext ? `.${clip(ext, 32)}` : `no extension in '${clip(source)}'`}`, 'UNSUPPORTED_FORMAT')
    }
    const max = await beforeDocument(kbId, source, caller, kind)

    const docId = newDocId()
    const key = documentKey(kbId, docId, source)
    const guard = sizeGuard(source)
    let info
    try {
      const body = (file.stream as Readable).pipe(guard.stream)
      file.stream.on('error', (err) => guard.stream.destroy(err))
      info = await adapters.objects.put(key, body, { contentType: file.mimeType })
    } catch (err) {
      if (err instanceof AppError && (err.code === 'FILE_TOO_LARGE' || err.status === 422)) throw err
      if (guard.size() > maxBytes) throw tooLarge(source)
      throw err instanceof AppError && err.status === 502 ? err : storageFailure(`Object storage failed while storing '${source}': ${(err as Error).message}`, err)
    }
    const discard = () => adapters.objects.delete([key]).catch(() => 0)
    if (info.size === 0) {
      await discard()
      throw unprocessable(`File '${source}' is empty`, 'EMPTY_FILE')
    }
    const fields = {
      storage_key: key, file_size: info.size, etag: info.etag, content_version: info.etag, doc_type: docType, content_type: file.mimeType,
      pending_op: 'ingest' as const, title: titleFromFilename(source), run_id: null,
    }
    let doc: DocumentRecord
    const replaced = { key: null as string | null }
    try {
      doc = await addDocument(kbId, source, max, async (r) => {
        const inserted = await r.insert({ doc_id: docId, kb_id: kbId, source, status: 'pending', source_type: 's3', ...fields })
        if (inserted) return inserted
        // The name exists: re-upload of a stable document (same doc_id, new content), or 409 while active.
        const existing = await r.findBySource(kbId, source)
        if (!existing || isActive(existing.status)) throw activeConflict(existing ?? { doc_id: 'unknown', status: 'pending' })
        const moved = await r.transition(existing.doc_id, [existing.status], 'pending', { ...fields, last_error: null, duplicate_of: null, received: true })
        if (!moved) throw activeConflict((await r.getById(existing.doc_id)) ?? existing)
        replaced.key = existing.storage_key
        return moved
      })
    } catch (err) {
      await discard()
      throw err
    }
    if (replaced.key && replaced.key !== key) await adapters.objects.delete([replaced.key]).catch(() => 0)
    try {
      await enqueue({ op: 'ingest', kb_id: kbId, doc_id: doc.doc_id, force: true })
    } catch (err) {
      await repo.transition(doc.doc_id, ['pending'], 'failed', { last_error: truncateError(`Could not queue the document: ${(err as Error).message}`) })
      throw err
    }
    return { doc_id: doc.doc_id, source, etag: info.etag, status_url: `/api/kb/${kbId}/docs/${doc.doc_id}/status` }
  }

  const requireKb = async (kbId: string) => {
    if (!(await kbs.exists(kbId))) throw kbNotFound(kbId)
  }

  /**
   * Documents kept out of the index as duplicates of docId are queued for indexing again when docId is
   * deleted or failed, so their content stays searchable.
   */
  async function promoteDuplicates(docId: string): Promise<number> {
    let n = 0
    for (const dup of await repo.duplicatesOf(docId)) {
      if (await queueReindex(dup, true)) n++
    }
    return n
  }

  return {
    repo,
    promoteDuplicates,
    addIngestHook(hook: IngestHook) {
      hooks.push(hook)
    },
    /** Calls fn with the id of a document this process moves out of `running` (fail, recover). */
    onLeftRunning(fn: (docId: string) => void) {
      leftRunning.push(fn)
    },
    /** [ENT] Installs the document cap (the limits plugin). */
    setDocumentCap(cap: DocCap) {
      docCap = cap
    },
    beforeDocument,
    addDocument,

    async upload(kbId: string, req: Request<any, any, any>): Promise<UploadResult> {
      let result: UploadResult | null = null
      await readMultipart(req, {
        maxFileBytes: maxBytes,
        onFile: async (file) => {
          if (file.field !== 'file' || result) {
            file.stream.resume()
            return
          }
          result = await ingestFile(kbId, file, req.caller, 'upload')
        },
      })
      if (!result) throw new AppError('VALIDATION', 422, 'No file in form field \'file\'')
      return result
    },

    /** Batch rules 1-4 of spec 4.7: every file processed in order; after a hook block the rest are skipped. */
    async uploadBatch(kbId: string, req: Request<any, any, any>): Promise<{ status: number; body: Record<string, unknown> }> {
      await requireKb(kbId)
      const results: Record<string, unknown>[] = []
      let firstFailure: string | null = null
      let blockedBy: { filename: string } | null = null
      await readMultipart(req, {
        maxFileBytes: maxBytes,
        onFile: async (file) => {
          if (file.field !== 'files' && file.field !== 'file') {
            file.stream.resume()
            return
          }
          const title = baseName(file.filename)
          if (blockedBy) {
            file.stream.resume()
            results.push({ title, error: `Skipped: batch stopped at ${blockedBy.filename}`, status: 'error' })
            return
          }
          try {
            results.push({ ...(await ingestFile(kbId, file, req.caller, 'batch')) })
          } catch (err) {
            const e = err instanceof AppError ? err : new AppError('UPLOAD_FAILED', 500, 'Upload failed')
            if (e.status >= 500 && e.status !== 502 && e.status !== 503) req.log.error({ err }, 'batch entry failed')
            file.stream.resume()
            results.push({ title, error: e.message, status: 'error' })
            firstFailure ??= e.message
            if (e.status === 403) blockedBy = { filename: title }
          }
        },
        // A name that cannot be stored fails its own entry (shown without its control characters); the batch goes on.
        onRefusedFile: ({ field, filename, error }) => {
          if (field !== 'files' && field !== 'file') return
          const message = error.issues[0]?.msg ?? 'Invalid file name'
          results.push({ title: clip(baseName(filename).replace(/[\u0000-\u001f\u007f]/g, '?')), error: message, status: 'error' })
          firstFailure ??= message
        },
      })
      if (results.length === 0) throw new AppError('VALIDATION', 422, "No file in form field 'files'")
      if (!firstFailure) return { status: 202, body: { results } }
      return { status: blockedBy ? 403 : 422, body: { results, detail: firstFailure } }
    },

    list: (f: ListFilter) => repo.list(f),

    async kbCounts(kbId: string): Promise<DocCounts> {
      await requireKb(kbId)
      return (await repo.counts(kbId)).get(kbId) ?? emptyCounts()
    },

    async allCounts(): Promise<Record<string, { doc_counts: DocCounts }>> {
      const [all, counts] = await Promise.all([kbs.list(), repo.counts()])
      const out: Record<string, { doc_counts: DocCounts }> = {}
      for (const kb of all) out[kb.kb_id] = { doc_counts: counts.get(kb.kb_id) ?? emptyCounts() }
      return out
    },

    get: requireDoc,

    async download(kbId: string, docId: string): Promise<{ stream: Readable; contentType: string; disposition: string; size: number | null }> {
      const doc = await requireDoc(kbId, docId)
      if (!doc.storage_key) throw notFound(`Document has no stored file: kb=${kbId} doc_id=${docId}`, 'DOC_NO_FILE')
      const stream = await adapters.objects.get(doc.storage_key)
      return { stream, contentType: doc.content_type && doc.content_type !== 'application/octet-stream' ? doc.content_type : contentTypeFor(doc), disposition: contentDisposition(doc.source), size: doc.file_size }
    },

    async delete(kbId: string, docId: string, force: boolean): Promise<{ kb_id: string; doc_id: string; status: 'pending' }> {
      const doc = await requireDoc(kbId, docId)
      // A soft-deleted document stays as it is, unless force asks for it to go for good (its file and row).
      if (doc.status === 'deleted' && !force) return { kb_id: kbId, doc_id: docId, status: 'pending' }
      if ((UNDELETABLE as readonly string[]).includes(doc.status) || doc.status === 'uploading' || doc.status === 'fetching') throw activeConflict(doc)
      // Spec 3.1: an indexed document is soft-deleted unless force; any other state is removed entirely.
      const hard = force || doc.status !== 'indexed'
      await adapters.queue.removeByKey(INGEST_TOPIC, docId).catch(() => 0)
      const moved = await repo.transition(docId, [doc.status], 'pending', { last_error: null, pending_op: hard ? 'delete_hard' : 'delete' })
      if (!moved) throw activeConflict((await repo.getById(docId)) ?? doc)
      await enqueue({ op: 'delete', kb_id: kbId, doc_id: docId, hard })
      return { kb_id: kbId, doc_id: docId, status: 'pending' }
    },

    async reindexKb(kbId: string, force: boolean): Promise<{ kb_id: string; queued: number; skipped: number }> {
      await requireKb(kbId)
      let queued = 0
      let skipped = 0
      // A KB-wide reindex skips outdated documents (notes.md) and never resurrects deleted ones.
      for (const doc of await repo.byStatus(kbId, ['indexed', 'failed', 'pending', 'running', 'uploading', 'fetching', 'deleting'])) {
        if (isActive(doc.status) || !(await changedOrForced(doc, force))) {
          skipped++
          continue
        }
        if (await queueReindex(doc, force)) queued++
        else skipped++
      }
      return { kb_id: kbId, queued, skipped }
    },

    async reindexDoc(kbId: string, docId: string, force: boolean): Promise<{ kb_id: string; doc_id: string; queued: number; skipped: number }> {
      const doc = await requireDoc(kbId, docId)
      if (isActive(doc.status)) throw activeConflict(doc)
      if (doc.status === 'deleted') throw conflict(`Document is deleted: doc_id=${docId}; upload it again to index it`, 'DOC_DELETED')
      if (!(await changedOrForced(doc, force))) return { kb_id: kbId, doc_id: docId, queued: 0, skipped: 1 }
      if (!(await queueReindex(doc, force))) throw activeConflict((await repo.getById(docId)) ?? doc)
      return { kb_id: kbId, doc_id: docId, queued: 1, skipped: 0 }
    },

    async recover(kbId: string, docId: string): Promise<{ kb_id: string; doc_id: string; queued: true }> {
      const doc = await requireDoc(kbId, docId)
      if (doc.status !== 'running') throw notRecoverable(doc.status)
      const failed = await repo.transition(docId, ['running'], 'failed', { last_error: RECOVER_REASON })
      if (!failed) throw notRecoverable(await statusNow(kbId, docId))
      tellLeftRunning(docId)
      await adapters.queue.removeByKey(INGEST_TOPIC, docId).catch(() => 0)
      if (!(await repo.transition(docId, ['failed'], 'pending', { pending_op: 'ingest' }))) throw activeConflict((await repo.getById(docId)) ?? doc)
      await enqueue({ op: 'ingest', kb_id: kbId, doc_id: docId, force: true })
      return { kb_id: kbId, doc_id: docId, queued: true }
    },

    /**
     * Issue 36: an outdated document is indexed again, and the pair (it and the document named in duplicate_of) is
     * recorded as distinct, so neither is judged against the other again, on re-upload or reindex. The other
     * document keeps its state. 409 for a document that is not outdated.
     */
    async restore(kbId: string, docId: string): Promise<{ kb_id: string; doc_id: string; status: 'pending'; distinct_from: string | null }> {
      const doc = await requireDoc(kbId, docId)
      if (doc.status !== 'outdated') throw notRestorable(doc.status)
      const other = doc.duplicate_of ?? doc.dedup?.matched_doc_id ?? null
      // the pair first: a worker that picks the document up at once must already see it
      if (other !== null && (await repo.getById(other))) await markDistinct(adapters.sql, kbId, docId, other)
      const moved = await repo.transition(docId, ['outdated'], 'pending', { last_error: null, pending_op: 'ingest', duplicate_of: null })
      if (!moved) throw notRestorable(await statusNow(kbId, docId))
      try {
        await enqueue({ op: 'ingest', kb_id: kbId, doc_id: docId, force: true })
      } catch (err) {
        await repo.transition(docId, ['pending'], 'failed', { last_error: truncateError(`Could not queue the document: ${(err as Error).message}`) })
        throw err
      }
      return { kb_id: kbId, doc_id: docId, status: 'pending', distinct_from: other }
    },

    async fail(kbId: string, docId: string, reason: string | undefined): Promise<Record<string, unknown>> {
      const doc = await requireDoc(kbId, docId)
      if (!(FAILABLE as readonly string[]).includes(doc.status)) throw notFailable(doc.status)
      const message = truncateError(reason?.trim() ? reason.trim() : FAIL_REASON)
      const failed = await repo.transition(docId, FAILABLE, 'failed', { last_error: message })
      if (!failed) throw notFailable(await statusNow(kbId, docId))
      // Read as pending, it may have been claimed since: the worker is told either way (a no-op if it is not running it).
      tellLeftRunning(docId)
      await adapters.queue.removeByKey(INGEST_TOPIC, docId).catch(() => 0)
      await adapters.vectors.deleteByDoc(kbId, docId).catch(() => 0)
      await adapters.sql.query('DELETE FROM parent_chunks WHERE doc_id = $1', [docId])
      await promoteDuplicates(docId)
      const out: Record<string, unknown> = { kb_id: kbId, doc_id: docId, status: 'failed' }
      if (settings.queue_worker.enabled && doc.status === 'running') {
        out.warning = 'The built-in worker stops the running task at its next check point, within about a second, and removes what it wrote; this status is not overwritten.'
      } else if (settings.queue_worker.enabled && doc.status === 'deleting') {
        out.warning = 'The built-in worker finishes the delete already under way (its chunks, and its file for a permanent delete, are removed); this status is not overwritten.'
      }
      return out
    },
  }

  async function changedOrForced(doc: DocumentRecord, force: boolean): Promise<boolean> {
    if (force) return true
    if (!doc.storage_key) return false
    const head = await adapters.objects.head(doc.storage_key).catch(() => null)
    return head !== null && head.etag !== doc.etag
  }

  async function queueReindex(doc: DocumentRecord, force: boolean): Promise<boolean> {
    const moved = await repo.transition(doc.doc_id, STABLE.filter((s) => s !== 'deleted'), 'pending', { last_error: null, pending_op: 'ingest', duplicate_of: null })
    if (!moved) return false
    try {
      await enqueue({ op: 'ingest', kb_id: doc.kb_id, doc_id: doc.doc_id, force })
    } catch (err) {
      await repo.transition(doc.doc_id, ['pending'], 'failed', { last_error: truncateError(`Could not queue the document: ${(err as Error).message}`) })
      throw err
    }
    return true
  }
}

function contentTypeFor(doc: DocumentRecord): string {
  const t = docTypeOf(doc.source)
  return t ? CONTENT_TYPES[t] : 'application/octet-stream'
}

export type DocsService = ReturnType<typeof createDocsService>
