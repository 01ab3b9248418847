// KB import: an archive's entries (archive.ts) written into a KB, one document at a time. Each document is made
// whole before its row exists: the file goes to the object store and is read back against its checksum, the points
// go to the vector store and are read back against what was written, and then one transaction writes the row, its
// parent chunks, dedup signature and relations, and the import's progress (kb_transfers, kb_transfer_docs). A
// document whose row exists is therefore complete, and a re-run (the same archive into the same KB) skips it: an
// interrupted import resumes, a finished one is never written twice.
import { Readable } from 'node:stream'
import type { Adapters, SqlRunner, VectorPoint } from '../../adapters/ports.ts'
import { isUniqueViolation } from '../../adapters/metadata/common.ts'
import { validateOverrides } from '../../kernel/config/kb-settings.ts'
import type { Settings } from '../../kernel/config/schema.ts'
import { AppError, clip, conflict, invalid, unprocessable, ValidationError } from '../../kernel/errors.ts'
import type { Logger } from '../../kernel/log.ts'
import { KB_ID_PATTERN } from '../../kernel/schemas.ts'
import { compile } from '../../kernel/validate.ts'
import { CONFIG_SCHEMAS, SOURCE_TYPES, type SourceType } from '../connectors/schemas.ts'
import { createCredentialPolicy } from '../connectors/secrets.ts'
import { checkCron } from '../connectors/schedule.ts'
import { sourceKey } from '../connectors/service.ts'
import { documentKey, documentKeyName } from '../docs/storage-key.ts'
import { DOC_ID_PATTERN, UUID_PATTERN } from '../../kernel/schemas.ts'
import { STATUSES } from '../docs/states.ts'
import { INGEST_TOPIC, type DocEvent } from '../docs/service.ts'
import { truncateError } from '../docs/states.ts'
import { inDedupTurn, lockDedupCommits, noteSignatureWrite } from '../docs/dedup.ts'
import {
  ARCHIVE_FORMAT, ARCHIVE_VERSION, derivedDocId, derivedUuid, docChecksum, END_NAME, hashing, MANIFEST_NAME, parseDocEntry, sha256,
  type ArchiveDocument, type ArchiveEnd, type ArchiveRecord, type DocSums, type EntrySum, type Manifest,
} from './archive.ts'
import { splitSecrets } from './export.ts'
import { HoldLost, holdLostConflict, ImportHold } from './hold.ts'
import { decodePoints, PointsFormatError, samePoints } from './points.ts'
import { checkSamples, type SampleCheck } from './samples.ts'
import { TarError, type TarEntry } from './tar.ts'

const MANIFEST_LIMIT = 64 << 20
const RECORD_LIMIT = 1 << 30
const POINTS_LIMIT = 2 ** 31 - 1
const SUMS_LIMIT = 1 << 20
const UPSERT_BATCH = 256

export interface ImportDeps {
  adapters: Adapters
  settings: Readonly<Settings>
  log: Logger
  /**
   * Creates the KB: `write` inserts its row and everything that belongs to it in the transaction it is given. The
   * access-controlled edition checks that the caller may create KBs and makes them the owner in that transaction.
   */
  createKb(write: (db: SqlRunner) => Promise<string>): Promise<void>
  /** Throws unless the caller may go on with an import into this existing KB ([ENT] its admin). */
  mayResume(kbId: string): Promise<void>
}

export interface ImportOptions {
  /** The KB to import into; default the archive's own kb_id. */
  kbId?: string
  /**
   * 'migrate' (quarry migrate, a deployment moving): members, pending invites, the KB's state and creator are
   * copied too. 'import' (HTTP): the importer owns the new KB, which starts active.
   */
  mode: 'import' | 'migrate'
  /** [ENT] The importer, recorded as the new KB's creator (mode import). */
  createdBy?: string | null
  signal?: AbortSignal
  /** Told after each document written or skipped, with its original file's size. */
  onDocument?: (e: { docId: string; written: boolean; bytes: number }) => void
}

export interface Verification {
  ok: boolean
  counts: { ok: boolean; documents: { expected: number; actual: number }; points: { expected: number; actual: number } | null; note?: string }
  checksums: { ok: boolean; documents: number; files: number; points: number }
  searches: { ok: boolean; checked: number; matched: number; skipped?: string; mismatches: SampleCheck[] }
}

export interface ImportReport {
  kb_id: string
  source_kb_id: string
  archive_id: string
  /** imported: created by this call; resumed: an interrupted import of the same archive went on; already_imported: nothing to do. */
  status: 'imported' | 'resumed' | 'already_imported'
  documents: { total: number; written: number; skipped: number }
  /** reused: the points were copied (same embedding model); reembed: the documents were queued to be indexed again. */
  vectors: 'reused' | 'reembed'
  embedding: { archive: string; here: string }
  queued: number
  connectors: { connector_id: string; name: string; paused: boolean; secrets_to_enter: string[] }[]
  warnings: string[]
  verification: Verification
}

const badArchive = (why: string) => unprocessable(`Not a usable Quarry KB archive: ${why}`, 'ARCHIVE_INVALID')
const damaged = (why: string) => unprocessable(`The archive is damaged: ${why}`, 'ARCHIVE_DAMAGED')

/** The TarError that err is or wraps (an object store wraps what failed its body as the error's cause). */
function tarErrorIn(err: unknown): TarError | null {
  for (let e: unknown = err, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) if (e instanceof TarError) return e
  return null
}

const isObject = (v: unknown): v is Record<string, any> => typeof v === 'object' && v !== null && !Array.isArray(v)

export function parseManifest(bytes: Buffer): Manifest {
  let m: any
  try {
    m = JSON.parse(bytes.toString('utf8'))
  } catch {
    throw badArchive(`${MANIFEST_NAME} is not JSON`)
  }
  if (!isObject(m) || m.format !== ARCHIVE_FORMAT) throw badArchive(`${MANIFEST_NAME} does not describe a ${ARCHIVE_FORMAT}`)
  if (m.version !== ARCHIVE_VERSION) throw badArchive(`archive version ${String(m.version)}; this service reads version ${ARCHIVE_VERSION}`)
  const problems: string[] = []
  if (typeof m.archive_id !== 'string' || !m.archive_id) problems.push('archive_id')
  if (!isObject(m.kb) || typeof m.kb.kb_id !== 'string') problems.push('kb.kb_id')
  if (!isObject(m.embedding) || typeof m.embedding.model !== 'string' || !Number.isInteger(m.embedding.dimensions)) problems.push('embedding')
  if (!isObject(m.counts) || !Number.isInteger(m.counts.documents) || !Number.isInteger(m.counts.points)) problems.push('counts')
  if (!isObject(m.overrides)) problems.push('overrides')
  if (!Array.isArray(m.connectors)) problems.push('connectors')
  if (!Array.isArray(m.members)) problems.push('members')
  if (!Array.isArray(m.samples)) problems.push('samples')
  if (problems.length > 0) throw badArchive(`${MANIFEST_NAME} lacks or misstates ${problems.join(', ')}`)
  m.invites ??= []
  return m as Manifest
}

/** Where the import of an archive stands in a KB (null: no import into it). */
export async function transferState(sql: SqlRunner, kbId: string): Promise<{
  archive_id: string; source_kb_id: string; state: 'running' | 'done'; documents: number; last_doc_id: string | null; report: ImportReport | null
  started_at: string; updated_at: string
} | null> {
  const rows = await sql.query<any>(
    'SELECT archive_id, source_kb_id, state, documents, last_doc_id, report, started_at, updated_at FROM kb_transfers WHERE kb_id = $1', [kbId])
  return rows[0] ?? null
}

/** How a document's state carries over: what is in flight in the source is finished or queued here. */
function arrival(doc: ArchiveDocument, reuse: boolean): { status: string; pending_op: string | null; queue: boolean; last_error?: string; deleted?: boolean } {
  switch (doc.status) {
    case 'indexed':
      return reuse ? { status: 'indexed', pending_op: null, queue: false } : { status: 'pending', pending_op: 'ingest', queue: true }
    case 'running':
      return { status: 'pending', pending_op: 'ingest', queue: true }
    case 'pending':
    case 'deleting':
      // A soft delete in progress ends as one; a forced one was left out of the archive.
      if (doc.pending_op === 'delete') return { status: 'deleted', pending_op: null, queue: false, deleted: true }
      return { status: 'pending', pending_op: 'ingest', queue: true }
    case 'uploading':
    case 'fetching':
      return { status: 'failed', pending_op: null, queue: false, last_error: 'Interrupted: the file was still arriving when the knowledge base was exported' }
    default:
      return { status: doc.status, pending_op: null, queue: false }
  }
}

class Mapper {
  readonly same: boolean
  constructor(readonly kbId: string, readonly sourceKb: string) {
    this.same = kbId === sourceKb
  }

  doc = (id: string) => (this.same ? id : derivedDocId(this.kbId, id))
  connector = (id: string) => (this.same ? id : derivedUuid(this.kbId, id))
  /** A chunk or parent chunk id: `<doc_id>-<n>` or `<doc_id>-p<level>-<n>`. */
  chunk = (id: string) => {
    if (this.same) return id
    const dash = id.indexOf('-')
    return dash > 0 ? `${this.doc(id.slice(0, dash))}${id.slice(dash)}` : id
  }

  storageKey(doc: ArchiveDocument, docId: string): string {
    const old = doc.storage_key ?? ''
    if (this.same && old.startsWith(`${this.kbId}/`)) return old
    return documentKey(this.kbId, docId, documentKeyName(old, this.sourceKb, doc.doc_id) || 'file')
  }
}

/** Reads entries one at a time, with one of look-ahead. */
class Entries {
  private held: TarEntry | null = null
  private it: AsyncIterator<TarEntry>
  constructor(source: AsyncIterable<TarEntry>) {
    this.it = source[Symbol.asyncIterator]()
  }

  async next(): Promise<TarEntry | null> {
    if (this.held) {
      const e = this.held
      this.held = null
      return e
    }
    try {
      const r = await this.it.next()
      return r.done ? null : r.value
    } catch (err) {
      if (err instanceof TarError) throw damaged(err.message)
      throw err
    }
  }

  async peek(): Promise<TarEntry | null> {
    this.held ??= await this.next()
    return this.held
  }

  async close(): Promise<void> {
    await this.it.return?.(undefined)
  }
}

async function bufferOf(e: TarEntry, limit: number): Promise<Buffer> {
  try {
    return await e.buffer(limit)
  } catch (err) {
    if (err instanceof TarError) throw damaged(err.message)
    throw err
  }
}

const DOC_INSERT = `INSERT INTO documents (doc_id, kb_id, title, source_type, source, storage_key, connector_id, run_id, status, pending_op, doc_type,
  content_type, chunk_count, file_size, embedding_model, last_error, etag, source_uri, content_version, duplicate_of, dedup, chunk_strategy,
  doc_created_at, process_started_at, process_finished_at, deleted_at, created_at, updated_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7::uuid, $8::uuid, $9, $10, $11, $12, $13::int, $14::bigint, $15, $16, $17, $18, $19, $20, $21::jsonb, $22,
    $23::timestamptz, $24::timestamptz, $25::timestamptz, $26::timestamptz, $27::timestamptz, $28::timestamptz)`

/** Imports an archive. Throws an AppError (422 damaged or not an archive, 409 a KB in the way) and leaves what was complete. */
export async function importArchive(deps: ImportDeps, source: AsyncIterable<TarEntry>, opts: ImportOptions): Promise<ImportReport> {
  const { sql, embedder } = deps.adapters
  const entries = new Entries(source)
  try {
    const first = await entries.next()
    if (first === null) throw badArchive('it is empty')
    if (first.name !== MANIFEST_NAME) throw badArchive(`its first entry is '${clip(first.name, 100)}', not ${MANIFEST_NAME}`)
    const manifest = parseManifest(await bufferOf(first, MANIFEST_LIMIT))
    const kbId = opts.kbId ?? manifest.kb.kb_id
    if (!new RegExp(KB_ID_PATTERN).test(kbId)) {
      throw invalid(['query', 'kb_id'], 'kb_id must be 1-63 characters of a-z, 0-9, - and _, starting with a letter or digit', 'string_pattern_mismatch')
    }
    const map = new Mapper(kbId, manifest.kb.kb_id)
    const reuse = manifest.embedding.model === embedder.model && manifest.embedding.dimensions === embedder.dimensions
    const report: ImportReport = {
      kb_id: kbId, source_kb_id: manifest.kb.kb_id, archive_id: manifest.archive_id, status: 'imported',
      documents: { total: 0, written: 0, skipped: 0 }, vectors: reuse ? 'reused' : 'reembed',
      embedding: { archive: `${manifest.embedding.model} (${manifest.embedding.dimensions})`, here: `${embedder.model} (${embedder.dimensions})` },
      queued: 0, connectors: [], warnings: [], verification: undefined as unknown as Verification,
    }

    // One import at a time into a KB: a second one (the same archive sent twice at once, or a resume while the first
    // attempt still runs) waits for the first's hold and then, as a rule, finds the import done.
    const hold = new ImportHold(sql, kbId, deps.log)
    let state = await transferState(sql, kbId)
    if (!state) {
      if (await createTarget(deps, manifest, kbId, map, opts, report, hold)) hold.start()
      else if (!(state = await transferState(sql, kbId))) throw conflict(`KB already exists: ${kbId}; import into another KB id (?kb_id=)`, 'KB_EXISTS')
    }
    try {
      if (state) {
        if (state.archive_id !== manifest.archive_id) {
          throw conflict(`KB '${kbId}' holds an import of another archive (${state.archive_id}); import into another KB id (?kb_id=) or delete it first`, 'IMPORT_OTHER_ARCHIVE')
        }
        await deps.mayResume(kbId)
        if (state.state !== 'done') {
          if (!(await hold.take(opts.signal))) throw conflict(`KB '${kbId}' was deleted while this import waited for another import into it`, 'KB_DELETED')
          state = await transferState(sql, kbId)
        }
        if (state?.state === 'done' && state.report) return alreadyImported(state.report)
        report.status = 'resumed'
      }
      return await fill(deps, entries, manifest, { kbId, map, reuse, opts, report, hold })
    } catch (err) {
      if (err instanceof HoldLost) throw holdLostConflict(err)
      throw err
    } finally {
      await hold.release().catch((err) => deps.log.warn({ err, kb_id: kbId }, 'import: releasing the hold on the KB failed'))
    }
  } finally {
    await entries.close().catch(() => {})
  }
}

const alreadyImported = (r: ImportReport): ImportReport => ({ ...r, status: 'already_imported', documents: { ...r.documents, written: 0, skipped: r.documents.total } })

/** Creates the KB with the import's rows, holding it; false if a KB with this id exists (made meanwhile, perhaps). */
async function createTarget(deps: ImportDeps, manifest: Manifest, kbId: string, map: Mapper, opts: ImportOptions, report: ImportReport, hold: ImportHold): Promise<boolean> {
  if ((await deps.adapters.sql.query('SELECT 1 FROM knowledge_bases WHERE kb_id = $1', [kbId])).length > 0) return false
  const overrides = checkedOverrides(manifest.overrides, deps.settings)
  const connectors = prepareConnectors(manifest, deps.settings, opts.mode)
  try {
    await deps.createKb(async (db) => {
      await createKbRows(db, manifest, kbId, map, overrides, connectors, opts, report, hold)
      return kbId
    })
    return true
  } catch (err) {
    if (isUniqueViolation(err)) return false
    throw err
  }
}

/** The documents, the verification, and the import marked done: the part done under the hold. */
async function fill(deps: ImportDeps, entries: Entries, manifest: Manifest, c: { kbId: string; map: Mapper; reuse: boolean; opts: ImportOptions; report: ImportReport; hold: ImportHold }): Promise<ImportReport> {
  const { settings } = deps
  const { sql, vectors, embedder } = deps.adapters
  const { kbId, map, reuse, opts, report, hold } = c
  if (report.connectors.length === 0) report.connectors = connectorReport(prepareConnectors(manifest, settings, opts.mode), map)
  if (reuse) await vectors.ensureCollection(kbId, embedder.dimensions)
  else report.warnings.push(`The archive's vectors come from ${report.embedding.archive}, this service embeds with ${report.embedding.here}: its indexed documents were queued to be indexed again`)

  const tally = { documents: 0, files: 0, points: 0 }
  let ended: ArchiveEnd | null = null
  for (;;) {
    opts.signal?.throwIfAborted()
    hold.check()
    const e = await entries.next()
    if (e === null) throw damaged(`it ends without ${END_NAME} (cut short)`)
    if (e.name === END_NAME) {
      ended = JSON.parse((await bufferOf(e, SUMS_LIMIT)).toString('utf8')) as ArchiveEnd
      break
    }
    const at = parseDocEntry(e.name)
    if (!at || at.part !== 'record.json') throw damaged(`unexpected entry '${clip(e.name, 100)}' where a document's record.json should be`)
    const out = await importDocument(deps, entries, e, at.docId, { kbId, map, reuse, mode: opts.mode, signal: opts.signal, tally, warnings: report.warnings, hold })
    report.documents[out.written ? 'written' : 'skipped']++
    if (out.queued) report.queued++
    opts.onDocument?.({ docId: at.docId, written: out.written, bytes: out.bytes })
  }
  if (!ended) throw damaged(`it ends without ${END_NAME}`)

  report.documents.total = (await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM documents WHERE kb_id = $1', [kbId]))[0].n
  report.verification = await verify(deps, manifest, kbId, map, reuse, tally, report)
  await hold.update(sql, `state = 'done', report = $2::jsonb, updated_at = now()`, [report])
  return report
}

function checkedOverrides(overrides: Record<string, unknown>, settings: Readonly<Settings>): Record<string, unknown> {
  try {
    return validateOverrides(overrides as never, settings as Settings, {})
  } catch (err) {
    if (err instanceof ValidationError) {
      const why = err.issues.map((i) => `${String(i.loc[i.loc.length - 1])}: ${i.msg}`).join('; ')
      throw badArchive(`its settings overrides are not valid on this service (${clip(why, 400)})`)
    }
    throw err
  }
}

/** A connector as it will be stored here: its config checked as the connectors plugin checks one. */
interface PreparedConnector {
  from: Manifest['connectors'][number]
  config: Record<string, unknown>
  source_key: string
  /** Secrets to enter before it may sync: literals left out of the archive, variables this service does not allow. */
  missing: string[]
}

/**
 * The archive's connectors made safe to store: literal secret values dropped whatever the archive claims (an archive
 * never holds one; quarry migrate keeps the sealed ones), each `env:` variable checked against this service's
 * connectors.secret_env_names (a refused one is a secret to enter), the config checked against its source's schema
 * and its duplicate key computed here.
 */
function prepareConnectors(m: Manifest, settings: Readonly<Settings>, mode: 'import' | 'migrate'): PreparedConnector[] {
  const policy = createCredentialPolicy(settings.connectors.secret_env_names)
  return m.connectors.map((c, i) => {
    const what = `connector ${i} ('${clip(String(c?.name ?? ''), 60)}')`
    if (!isObject(c) || !(SOURCE_TYPES as readonly string[]).includes(c.source_type) || !isObject(c.config) || typeof c.name !== 'string'
      || typeof c.connector_id !== 'string' || !new RegExp(UUID_PATTERN).test(c.connector_id)) {
      throw badArchive(`${what} is not a connector of a known source type with a connector_id`)
    }
    if (c.sync_schedule != null) {
      try {
        checkCron(String(c.sync_schedule))
      } catch (err) {
        throw badArchive(`${what}: sync_schedule '${clip(String(c.sync_schedule), 60)}': ${(err as Error).message}`)
      }
    }
    const type = c.source_type as SourceType
    // Left out by the export (named in its list), or present in a config that should hold none: dropped here.
    const { config, secrets } = splitSecrets(type, c.config, mode === 'migrate')
    const named = Array.isArray(c.secrets) ? c.secrets.filter((x) => isObject(x) && x.kind === 'literal' && !x.sealed).map((x) => String(x.field)) : []
    const missing = [...new Set([...named, ...secrets.filter((x) => x.kind === 'literal' && !x.sealed).map((x) => x.field)])].sort()
    for (const x of secrets) if (x.kind === 'env' && x.env !== undefined && policy.problem(x.env) !== null) missing.push(`${x.field} (${x.env} is not allowed here)`)
    let parsed: Record<string, unknown>
    try {
      parsed = compile(CONFIG_SCHEMAS[type]).parse(structuredClone(config), 'body') as Record<string, unknown>
    } catch (err) {
      if (err instanceof ValidationError) throw badArchive(`${what}: ${err.issues.map((x) => `${x.loc.slice(1).join('.')}: ${x.msg}`).join('; ')}`)
      throw err
    }
    return { from: c, config: parsed, source_key: sourceKey(type, parsed), missing }
  })
}

function connectorReport(prepared: PreparedConnector[], map: Mapper): ImportReport['connectors'] {
  return prepared.map((c) => ({ connector_id: map.connector(c.from.connector_id), name: c.from.name, paused: c.missing.length > 0, secrets_to_enter: c.missing }))
}

/** The KB row, overrides, connectors (and with migrate its members and invites) and the import's progress row. */
async function createKbRows(db: SqlRunner, m: Manifest, kbId: string, map: Mapper, overrides: Record<string, unknown>, connectors: PreparedConnector[], opts: ImportOptions, report: ImportReport, hold: ImportHold): Promise<void> {
  const kb = m.kb
  const migrate = opts.mode === 'migrate'
  await db.query(
    `INSERT INTO knowledge_bases (kb_id, kb_name, description, tags, status, visibility, created_by, created_at, updated_at)
     VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, ${migrate ? '$8::timestamptz, $9::timestamptz' : 'now(), now()'})`,
    [kbId, kb.kb_name ?? '', kb.description ?? null, kb.tags ?? [], migrate ? kb.status : 'active', kb.visibility ?? 'private', ...(migrate
      ? [kb.created_by ?? null, kb.created_at, kb.updated_at] : [opts.createdBy ?? null])],
  )
  if (Object.keys(overrides).length > 0) {
    await db.query('INSERT INTO kb_settings_overrides (kb_id, overrides) VALUES ($1, $2::jsonb)', [kbId, overrides])
  }
  report.connectors = connectorReport(connectors, map)
  for (const { from: c, config, source_key, missing } of connectors) {
    await db.query(
      `INSERT INTO connectors (connector_id, kb_id, name, source_type, config, source_key, sync_schedule, schedule_enabled, sync_status, status,
         last_error, last_synced_at, last_sync, created_at, updated_at)
       VALUES ($1::uuid, $2, $3, $4, $5::jsonb, $6, $7, $8, 'idle', $9, $10, $11::timestamptz, $12::jsonb, $13::timestamptz, $14::timestamptz)`,
      [map.connector(c.connector_id), kbId, c.name, c.source_type, config, source_key, c.sync_schedule ?? null, c.schedule_enabled === true,
        missing.length > 0 ? 'paused' : c.status,
        missing.length > 0 ? `Imported without ${missing.join(', ')}: enter ${missing.length > 1 ? 'them' : 'it'} with PATCH (secrets are never exported), then resume the connector` : c.last_error,
        c.last_synced_at ?? null, c.last_sync ?? null, c.created_at ?? new Date().toISOString(), c.updated_at ?? new Date().toISOString()],
    )
  }
  if (migrate) {
    for (const x of m.members) {
      await db.query('INSERT INTO kb_members (kb_id, user_id, role, granted_by, granted_at) VALUES ($1, $2, $3, $4, $5::timestamptz) ON CONFLICT DO NOTHING',
        [kbId, x.user_id, x.role, x.granted_by, x.granted_at])
    }
    for (const i of m.invites) {
      await db.query(
        `INSERT INTO kb_invites (invite_id, kb_id, email, role, granted_by, status, created_at, expires_at)
         VALUES ($1::uuid, $2, $3, $4, $5, $6, $7::timestamptz, $8::timestamptz) ON CONFLICT DO NOTHING`,
        [i.invite_id, kbId, i.email, i.role, i.granted_by, i.status, i.created_at, i.expires_at])
    }
  }
  await db.query(
    `INSERT INTO kb_transfers (kb_id, archive_id, source_kb_id, state, holder, held_until) VALUES ($1, $2, $3, 'running', $4, now() + $5 * interval '1 millisecond')`,
    [kbId, m.archive_id, m.kb.kb_id, ...hold.created])
}

interface DocContext {
  kbId: string
  map: Mapper
  reuse: boolean
  mode: 'import' | 'migrate'
  signal?: AbortSignal
  tally: { documents: number; files: number; points: number }
  warnings: string[]
  hold: ImportHold
}

/** Drains a body, hashing it. */
async function hashEntry(e: TarEntry): Promise<EntrySum> {
  const h = hashing(e.chunks())
  try {
    for await (const _ of h.chunks) { /* read */ }
  } catch (err) {
    if (err instanceof TarError) throw damaged(err.message)
    throw err
  }
  return h.digest()
}

function checkSum(what: string, got: EntrySum | null, want: EntrySum | null): void {
  if (want === null && got === null) return
  if (want === null || got === null) throw damaged(`${what}: the entry is ${got === null ? 'missing' : 'not listed in the document\'s sums'}`)
  if (got.size !== want.size || got.sha256 !== want.sha256) throw damaged(`${what}: sha256 ${got.sha256} (${got.size} bytes), the archive's sums say ${want.sha256} (${want.size} bytes)`)
}

async function readBack(objects: Adapters['objects'], key: string): Promise<EntrySum> {
  const h = hashing((async function* () {
    for await (const c of await objects.get(key)) yield c as Buffer
  })())
  for await (const _ of h.chunks) { /* read */ }
  return h.digest()
}

async function importDocument(deps: ImportDeps, entries: Entries, recordEntry: TarEntry, sourceId: string, ctx: DocContext): Promise<{ written: boolean; queued: boolean; bytes: number }> {
  const { sql, objects, vectors, queue } = deps.adapters
  const { kbId, map } = ctx
  const name = (part: string) => `docs/${sourceId}/${part}`
  const recordBytes = await bufferOf(recordEntry, RECORD_LIMIT)
  const recordSum = { size: recordBytes.length, sha256: sha256(recordBytes) }
  let record: ArchiveRecord
  try {
    record = JSON.parse(recordBytes.toString('utf8')) as ArchiveRecord
  } catch {
    throw damaged(`${name('record.json')} is not JSON`)
  }
  const doc = record.document
  if (!isObject(doc) || doc.doc_id !== sourceId) throw damaged(`${name('record.json')} does not describe document ${sourceId}`)
  if (!new RegExp(DOC_ID_PATTERN).test(sourceId) || !(STATUSES as readonly string[]).includes(doc.status) || typeof doc.source !== 'string' || doc.source === ''
    || !Array.isArray(record.parent_chunks ?? []) || !Array.isArray(record.distinct ?? [])) {
    throw badArchive(`${name('record.json')} is not a document record of this service (doc_id, status, source)`)
  }
  const docId = map.doc(sourceId)

  // Written before? Its row exists only if everything else had been written (the row is the last write).
  const [owner] = await sql.query<{ kb_id: string; sha256: string | null }>(
    'SELECT d.kb_id, t.sha256 FROM documents d LEFT JOIN kb_transfer_docs t ON t.doc_id = d.doc_id WHERE d.doc_id = $1', [docId])
  if (owner && owner.kb_id !== kbId) {
    throw conflict(`Document id ${docId} belongs to KB '${owner.kb_id}' on this service: import into another KB id (?kb_id=), which gives the documents new ids`, 'DOC_ID_TAKEN')
  }
  const present = owner !== undefined

  const target = arrival(doc, ctx.reuse)
  const key = map.storageKey(doc, docId)
  let fileSum: EntrySum | null = null
  let pointsSum: (EntrySum & { count: number }) | null = null
  let points: VectorPoint[] = []
  let wroteFile = false
  /** The original file's size (progress is told in file bytes, as the manifest counts them). */
  let bytes = 0

  let e = await entries.next()
  if (e && parseDocEntry(e.name)?.docId === sourceId && parseDocEntry(e.name)?.part === 'file') {
    bytes += e.size
    if (present) {
      fileSum = await hashEntry(e)
    } else {
      const h = hashing(e.chunks())
      try {
        await objects.put(key, Readable.from(h.chunks), { size: e.size, contentType: doc.content_type ?? undefined })
      } catch (err) {
        // The archive ended inside this file: the object store reports its body's failure as its own (502), with the
        // tar error as the cause.
        const tar = tarErrorIn(err)
        if (tar) throw damaged(tar.message)
        throw err
      }
      fileSum = h.digest()
      wroteFile = true
    }
    e = await entries.next()
  }
  if (e && parseDocEntry(e.name)?.docId === sourceId && parseDocEntry(e.name)?.part === 'points.bin') {
    const bin = await bufferOf(e, POINTS_LIMIT)
    pointsSum = { size: bin.length, sha256: sha256(bin), count: 0 }
    if (!present) {
      try {
        points = decodePoints(bin)
      } catch (err) {
        if (err instanceof PointsFormatError) throw damaged(`${name('points.bin')}: ${err.message}`)
        throw err
      }
    }
    e = await entries.next()
  }
  if (!e || parseDocEntry(e.name)?.docId !== sourceId || parseDocEntry(e.name)?.part !== 'sums.json') {
    throw damaged(`${e ? `unexpected entry '${clip(e.name, 100)}'` : 'the archive ends'} where ${name('sums.json')} should be`)
  }
  let sums: DocSums
  try {
    sums = JSON.parse((await bufferOf(e, SUMS_LIMIT)).toString('utf8')) as DocSums
  } catch (err) {
    if (err instanceof AppError) throw err
    throw damaged(`${name('sums.json')} is not JSON`)
  }
  const discard = async () => {
    if (wroteFile) await objects.delete([key]).catch(() => 0)
  }
  try {
    checkSum(name('record.json'), recordSum, sums.record)
    checkSum(name('file'), fileSum, sums.file)
    checkSum(name('points.bin'), pointsSum && { size: pointsSum.size, sha256: pointsSum.sha256 }, sums.points && { size: sums.points.size, sha256: sums.points.sha256 })
    if (sums.points && !present && points.length !== sums.points.count) throw damaged(`${name('points.bin')} holds ${points.length} points, its sums say ${sums.points.count}`)
  } catch (err) {
    await discard()
    throw err
  }
  const checksum = docChecksum(sums)
  if (present) {
    if (owner.sha256 !== null && owner.sha256 !== checksum) {
      throw conflict(`Document ${docId} was imported from different content (checksum ${owner.sha256}, the archive's ${checksum}): the archive changed since the import began`, 'IMPORT_CONTENT_CHANGED')
    }
    return { written: false, queued: false, bytes }
  }

  // The stored copy, read back.
  if (wroteFile) {
    const back = await readBack(objects, key)
    if (back.sha256 !== fileSum!.sha256 || back.size !== fileSum!.size) {
      await discard()
      throw new AppError('IMPORT_VERIFY_FAILED', 502, `The object store did not keep ${key} as written: sha256 ${back.sha256} read back, ${fileSum!.sha256} written`)
    }
    ctx.tally.files++
  }
  const keepPoints = ctx.reuse && !target.queue && target.status === 'indexed'
  if (ctx.reuse && points.length > 0 && !keepPoints && target.status === 'indexed') ctx.warnings.push(`document ${docId}: points not imported`)
  if (keepPoints) {
    const mapped = points.map((p) => ({
      dense: p.dense, sparse: p.sparse,
      payload: { ...p.payload, chunk_id: map.chunk(p.payload.chunk_id), kb_id: kbId, doc_id: docId, parent_chunk_id: p.payload.parent_chunk_id === null ? null : map.chunk(p.payload.parent_chunk_id) },
    }))
    // An attempt interrupted before its row was written may have left some.
    await vectors.deleteByDoc(kbId, docId)
    for (let i = 0; i < mapped.length; i += UPSERT_BATCH) await vectors.upsert(kbId, mapped.slice(i, i + UPSERT_BATCH))
    const problem = samePoints(mapped, await vectors.docPoints(kbId, docId))
    if (problem !== null) {
      await vectors.deleteByDoc(kbId, docId).catch(() => 0)
      await discard()
      throw new AppError('IMPORT_VERIFY_FAILED', 502, `The vector store did not keep document ${docId} as written: ${problem}`)
    }
    ctx.tally.points += mapped.length
  }

  const fields = {
    status: target.status, pending_op: target.pending_op,
    last_error: target.last_error ? truncateError(target.last_error) : doc.last_error,
    deleted_at: target.deleted ? new Date().toISOString() : doc.deleted_at,
  }
  const etag = wroteFile ? ((await objects.head(key))?.etag ?? doc.etag) : doc.etag
  const dedup = doc.dedup && typeof doc.dedup.matched_doc_id === 'string' ? { ...doc.dedup, matched_doc_id: map.doc(doc.dedup.matched_doc_id) } : doc.dedup
  try {
    // A signature row is written in the KB's dedup turn and under its commit lock, as the pipeline writes its own: a
    // document indexed meanwhile then sees it at its rescreen (plugins/docs/dedup.ts commitUnlessLate). The write is
    // counted in the turn whatever the transaction's outcome (noteSignatureWrite), so that rescreen reads it.
    const writesSignature = Boolean(record.signature) && !target.queue
    await inDedupTurn(kbId, () => sql.transaction(async (tx) => {
      if (writesSignature) await lockDedupCommits(tx, kbId)
      await tx.query(DOC_INSERT, [
        docId, kbId, doc.title ?? '', doc.source_type, doc.source, wroteFile ? key : null, doc.connector_id ? map.connector(doc.connector_id) : null, doc.run_id,
        fields.status, fields.pending_op, doc.doc_type, doc.content_type, doc.chunk_count, doc.file_size, doc.embedding_model, fields.last_error,
        etag, doc.source_uri, doc.content_version,
        doc.duplicate_of ? map.doc(doc.duplicate_of) : null, dedup ?? null, doc.chunk_strategy,
        doc.doc_created_at, doc.process_started_at, doc.process_finished_at, fields.deleted_at, doc.created_at, doc.updated_at,
      ])
      // What the pipeline writes again for a document it indexes again is left to it.
      if (!target.queue) {
        const parents = record.parent_chunks ?? []
        if (parents.length > 0) {
          await tx.query(
            `INSERT INTO parent_chunks (chunk_id, kb_id, doc_id, level, parent_chunk_id, child_count, text, page_num, page_label, start_offset, end_offset)
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::text[], $6::int[], $7::text[], $8::int[], $9::text[], $10::int[], $11::int[])`,
            [parents.map((p) => map.chunk(p.chunk_id)), parents.map(() => kbId), parents.map(() => docId), parents.map((p) => p.level),
              parents.map((p) => (p.parent_chunk_id === null ? null : map.chunk(p.parent_chunk_id))), parents.map((p) => p.child_count),
              parents.map((p) => p.text), parents.map((p) => p.page_num), parents.map((p) => p.page_label), parents.map((p) => p.start_offset),
              parents.map((p) => p.end_offset)],
          )
        }
        const s = record.signature
        if (s) {
          await tx.query(
            'INSERT INTO dedup_signatures (doc_id, kb_id, simhash, minhash, title, chunk_count, identity) VALUES ($1, $2, $3, $4, $5, $6, $7)',
            [docId, kbId, s.simhash, Buffer.from(s.minhash, 'base64'), s.title ?? '', s.chunk_count, s.identity === null ? null : Buffer.from(s.identity, 'base64')])
        }
      }
      for (const other of record.distinct ?? []) {
        const o = map.doc(other)
        await tx.query(
          `INSERT INTO dedup_distinct (kb_id, doc_a, doc_b) SELECT $1, least($2, $3), greatest($2, $3)
           WHERE EXISTS (SELECT 1 FROM documents WHERE doc_id = $2) ON CONFLICT DO NOTHING`, [kbId, o, docId])
      }
      await tx.query('INSERT INTO kb_transfer_docs (doc_id, kb_id, source_doc_id, sha256) VALUES ($1, $2, $3, $4)', [docId, kbId, sourceId, checksum])
      await ctx.hold.update(tx, 'documents = documents + 1, last_doc_id = $2, updated_at = now()', [sourceId])
    }).finally(() => {
      if (writesSignature) noteSignatureWrite(sql, kbId)
    }))
  } catch (err) {
    // Another import holds the KB now and writes this document to the same places: what is there is left to it.
    if (err instanceof HoldLost) throw err
    if (isUniqueViolation(err)) {
      // Another import of this archive into this KB (a resume sent twice at once) committed the document first: what is
      // stored is that one's, the same content, and stays.
      const [row] = await sql.query<{ sha256: string | null }>(
        'SELECT t.sha256 FROM documents d LEFT JOIN kb_transfer_docs t ON t.doc_id = d.doc_id WHERE d.doc_id = $1 AND d.kb_id = $2', [docId, kbId])
      if (row?.sha256 === checksum) return { written: false, queued: false, bytes }
      if (!row) {
        if (keepPoints) await vectors.deleteByDoc(kbId, docId).catch(() => 0)
        await discard()
      }
      throw conflict(`Document '${clip(doc.source)}' exists twice in the archive, or in this KB already`, 'DOC_EXISTS')
    }
    if (keepPoints) await vectors.deleteByDoc(kbId, docId).catch(() => 0)
    await discard()
    throw err
  }
  ctx.tally.documents++
  if (target.queue) {
    const event: DocEvent = { op: 'ingest', kb_id: kbId, doc_id: docId, force: true }
    try {
      await queue.enqueue(INGEST_TOPIC, docId, event)
    } catch (err) {
      // The row is pending with its op: the worker's recovery finds it and queues it again.
      deps.log.warn({ err, doc_id: docId }, 'import: queueing a document failed; recovery will queue it')
    }
  }
  return { written: true, queued: target.queue, bytes }
}

async function verify(deps: ImportDeps, manifest: Manifest, kbId: string, map: Mapper, reuse: boolean, tally: DocContext['tally'], report: ImportReport): Promise<Verification> {
  const { sql, vectors } = deps.adapters
  const documents = { expected: manifest.counts.documents, actual: report.documents.total }
  const queued = (await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM documents WHERE kb_id = $1 AND status IN ('pending', 'running')`, [kbId]))[0].n
  let points: Verification['counts']['points'] = null
  let note: string | undefined
  if (!reuse) note = 'points are counted once the documents queued for indexing are indexed'
  else if (queued > 0) note = `${queued} document(s) were queued for indexing (in flight in the source): their points come with it`
  else points = { expected: manifest.counts.points, actual: await vectors.count(kbId) }
  const counts = { ok: documents.expected === documents.actual && (points === null || points.expected === points.actual), documents, points, ...(note ? { note } : {}) }

  const searches: Verification['searches'] = { ok: true, checked: 0, matched: 0, mismatches: [] }
  if (!reuse) searches.skipped = 'the documents are embedded again with another model: answers cannot be compared'
  else if (queued > 0) searches.skipped = 'documents are being indexed again: answers are compared once nothing is in flight'
  else if (manifest.samples.length === 0) searches.skipped = 'the source KB had no indexed document to sample'
  else {
    Object.assign(searches, await checkSamples(deps.adapters, kbId, manifest.samples, map.chunk))
    searches.ok = searches.matched === searches.checked
  }
  const checksums = { ok: true, documents: tally.documents, files: tally.files, points: tally.points }
  return { ok: counts.ok && searches.ok && checksums.ok, counts, checksums, searches }
}
