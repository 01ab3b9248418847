// KB export: the archive's entries (archive.ts), produced one document at a time. Documents are read page by page
// in doc_id order (keyset pagination), each file streams from the object store into the archive, and each
// document's points are read and encoded on their own: memory holds one document's points and one chunk of a file,
// whatever the KB's size.
import { randomUUID } from 'node:crypto'
import type { Adapters, SqlRunner, VectorPoint } from '../../adapters/ports.ts'
import { kbNotFound } from '../kb/errors.ts'
import {
  ARCHIVE_FORMAT, ARCHIVE_VERSION, docEntry, END_NAME, hashing, MANIFEST_NAME, type ArchiveConnector, type ArchiveDocument, type ArchiveEnd,
  type ArchiveParentChunk, type ArchiveRecord, type ArchiveSignature, type DocSums, type Manifest, sha256,
} from './archive.ts'
import { encodePoints } from './points.ts'
import { recordSamples } from './samples.ts'
import type { TarSource } from './tar.ts'

/** Documents read per metadata query. */
const PAGE = 100
export interface ExportDeps {
  adapters: Pick<Adapters, 'sql' | 'objects' | 'vectors' | 'embedder'>
  /** Record sample searches in the manifest (default true). */
  samples?: boolean
  /** Keep connectors' sealed literal secrets (quarry migrate only: never over HTTP, never in an archive file). */
  keepSealedSecrets?: boolean
}

export interface ExportOptions {
  kbId: string
  /** Fixed archive id (a migration's, stable across its runs); default a random one. */
  archiveId?: string
  /** Start the manifest-less stream after this doc_id (a resumed export). */
  after?: string
  /** Write the manifest first (false: the rest of an export that was interrupted). Default true. */
  manifest?: boolean
  /** Documents the reader already holds (a migration's re-run): not read at all. Asked once per page. */
  skip?: (docIds: string[]) => Promise<Set<string>>
  /** Told after each document's entries have all been read. */
  onDocument?: (docId: string, bytes: number) => void
  signal?: AbortSignal
}

const DOC_COLUMNS = `doc_id, kb_id, title, source_type, source, storage_key, connector_id::text AS connector_id, run_id::text AS run_id, status, pending_op,
  doc_type, content_type, chunk_count, file_size, embedding_model, last_error, etag, source_uri, content_version, duplicate_of, dedup, chunk_strategy,
  doc_created_at, process_started_at, process_finished_at, deleted_at, created_at, updated_at`

/** Documents being removed for good (a forced delete in progress): not exported. */
const GOING = `(status IN ('pending', 'deleting') AND pending_op = 'delete_hard')`
/** Statuses whose points are searchable (a pending re-index keeps its old points until the new ones land). */
const SEARCHABLE = new Set(['indexed', 'pending', 'running'])

const b64 = (v: unknown): string | null => (v == null ? null : Buffer.from(v as Uint8Array).toString('base64'))

/**
 * The secrets of a connector config, and the config without its literal ones (stored encrypted: never exported).
 * keepSealed (quarry migrate, one operator's stores to another's, never an archive) keeps them as they are stored.
 */
export function splitSecrets(type: string, config: Record<string, any>, keepSealed = false): { config: Record<string, unknown>; secrets: ArchiveConnector['secrets'] } {
  const out: Record<string, any> = structuredClone(config)
  const secrets: ArchiveConnector['secrets'] = []
  /** Whether the value stays in the config. */
  const classify = (field: string, value: unknown, extra: { username?: string } = {}): boolean => {
    if (typeof value === 'string' && value.startsWith('env:')) {
      secrets.push({ field, kind: 'env', env: value.slice(4) })
      return true
    }
    secrets.push({ field, kind: 'literal', ...extra, ...(keepSealed ? { sealed: true as const } : {}) })
    return keepSealed
  }
  if (typeof out.auth_token_secret === 'string') secrets.push({ field: 'auth_token_secret', kind: 'env', env: out.auth_token_secret })
  if (type === 'web') {
    if (out.auth_headers && typeof out.auth_headers === 'object') {
      for (const [name, value] of Object.entries(out.auth_headers as Record<string, unknown>)) {
        if (!classify(`auth_headers.${name}`, value)) delete out.auth_headers[name]
      }
      if (Object.keys(out.auth_headers).length === 0) delete out.auth_headers
    }
    // Without its password the pair is unusable: it goes whole, the user name kept in the secret's entry.
    if (out.auth_basic && typeof out.auth_basic === 'object' && !classify('auth_basic.password', out.auth_basic.password, { username: out.auth_basic.username })) {
      delete out.auth_basic
    }
  }
  // jsonb keeps its own key order: sorted, the list is the same whatever store the config came from.
  return { config: out, secrets: secrets.sort((a, b) => (a.field < b.field ? -1 : a.field > b.field ? 1 : 0)) }
}

async function readKb(sql: SqlRunner, kbId: string) {
  const rows = await sql.query<Manifest['kb']>(
    'SELECT kb_id, kb_name, description, tags, status, visibility, created_by, created_at, updated_at FROM knowledge_bases WHERE kb_id = $1', [kbId])
  if (rows.length === 0) throw kbNotFound(kbId)
  return rows[0]
}

/** The manifest: KB, overrides, connectors, members, counts and the sample searches, read before any document. */
export async function buildManifest(deps: ExportDeps, kbId: string, archiveId: string): Promise<Manifest> {
  const { sql, vectors, embedder } = deps.adapters
  const kb = await readKb(sql, kbId)
  const [overrides] = await sql.query<{ overrides: Record<string, unknown> }>('SELECT overrides FROM kb_settings_overrides WHERE kb_id = $1', [kbId])
  const connectors = await sql.query<ArchiveConnector & { config: Record<string, any> }>(
    `SELECT connector_id::text AS connector_id, name, source_type, config, source_key, sync_schedule, schedule_enabled, status, last_error,
       last_synced_at, last_sync, created_at, updated_at FROM connectors WHERE kb_id = $1 ORDER BY connector_id`, [kbId])
  const members = await sql.query<Manifest['members'][number]>(
    'SELECT user_id, role, granted_by, granted_at FROM kb_members WHERE kb_id = $1 ORDER BY user_id', [kbId])
  const invites = await sql.query<Manifest['invites'][number]>(
    `SELECT invite_id::text AS invite_id, email, role, granted_by, status, created_at, expires_at FROM kb_invites WHERE kb_id = $1 AND status = 'pending' ORDER BY invite_id`, [kbId])
  const statusRows = await sql.query<{ status: string; n: number; bytes: number }>(
    `SELECT status, count(*)::int AS n, coalesce(sum(file_size), 0)::float8 AS bytes FROM documents WHERE kb_id = $1 AND NOT ${GOING} GROUP BY status`, [kbId])
  const byStatus: Record<string, number> = {}
  let documents = 0
  let bytes = 0
  for (const r of statusRows) {
    byStatus[r.status] = r.n
    documents += r.n
    bytes += Number(r.bytes)
  }
  // The points the archive will hold: those of the documents exported with their points.
  const perDoc = await vectors.docChunkCounts(kbId)
  let points = 0
  if (perDoc.size > 0) {
    const searchable = await sql.query<{ doc_id: string }>(
      `SELECT doc_id FROM documents WHERE kb_id = $1 AND status = ANY($2::text[]) AND NOT ${GOING}`, [kbId, [...SEARCHABLE]])
    for (const r of searchable) points += perDoc.get(r.doc_id) ?? 0
  }
  return {
    format: ARCHIVE_FORMAT,
    version: ARCHIVE_VERSION,
    archive_id: archiveId,
    created_at: new Date().toISOString(),
    source: { kb_id: kbId, metadata: deps.adapters.sql.name, vectors: vectors.name, objects: deps.adapters.objects.name },
    kb,
    overrides: overrides?.overrides ?? {},
    embedding: { provider: embedder.name, model: embedder.model, dimensions: embedder.dimensions },
    counts: { documents, by_status: byStatus, points, bytes },
    connectors: connectors.map((c) => ({ ...c, ...splitSecrets(c.source_type, c.config, deps.keepSealedSecrets === true) })),
    members,
    invites,
    samples: deps.samples === false ? [] : await recordSamples(deps.adapters, kbId),
  }
}

async function readRecord(sql: SqlRunner, doc: ArchiveDocument): Promise<ArchiveRecord> {
  const parents = await sql.query<ArchiveParentChunk>(
    `SELECT chunk_id, level, parent_chunk_id, child_count, text, page_num, page_label, start_offset, end_offset
     FROM parent_chunks WHERE doc_id = $1 ORDER BY level, chunk_id`, [doc.doc_id])
  const [sig] = await sql.query<{ simhash: string; minhash: Uint8Array; identity: Uint8Array | null; title: string; chunk_count: number | null }>(
    'SELECT simhash, minhash, identity, title, chunk_count FROM dedup_signatures WHERE doc_id = $1', [doc.doc_id])
  const distinct = await sql.query<{ doc_a: string }>('SELECT doc_a FROM dedup_distinct WHERE doc_b = $1 ORDER BY doc_a', [doc.doc_id])
  const signature: ArchiveSignature | null = sig
    ? { simhash: sig.simhash, minhash: b64(sig.minhash)!, identity: b64(sig.identity), title: sig.title, chunk_count: sig.chunk_count }
    : null
  return { document: doc, parent_chunks: parents, signature, distinct: distinct.map((d) => d.doc_a) }
}

/**
 * The archive's entries for one KB. Each body is read by the consumer before the next entry is asked for (the tar
 * writer, or an import in this process), which is what makes a document's sums known when they are written.
 */
export async function* exportKb(deps: ExportDeps, opts: ExportOptions): AsyncGenerator<TarSource> {
  const { sql, objects, vectors } = deps.adapters
  const kbId = opts.kbId
  const totals: ArchiveEnd = { documents: 0, points: 0, bytes: 0 }
  if (opts.manifest !== false) {
    const manifest = await buildManifest(deps, kbId, opts.archiveId ?? randomUUID())
    const body = Buffer.from(JSON.stringify(manifest))
    yield { name: MANIFEST_NAME, size: body.length, body }
  } else {
    await readKb(sql, kbId)
  }
  let after = opts.after ?? ''
  for (;;) {
    opts.signal?.throwIfAborted()
    const page = await sql.query<ArchiveDocument>(
      `SELECT ${DOC_COLUMNS} FROM documents WHERE kb_id = $1 AND doc_id > $2 AND NOT ${GOING} ORDER BY doc_id LIMIT ${PAGE}`, [kbId, after])
    if (page.length === 0) break
    after = page[page.length - 1].doc_id
    const skipped = opts.skip ? await opts.skip(page.map((d) => d.doc_id)) : new Set<string>()
    for (const doc of page) {
      if (skipped.has(doc.doc_id)) continue
      opts.signal?.throwIfAborted()
      const record = Buffer.from(JSON.stringify(await readRecord(sql, doc)))
      yield { name: docEntry(doc.doc_id, 'record.json'), size: record.length, body: record }
      const sums: DocSums = { doc_id: doc.doc_id, record: { size: record.length, sha256: sha256(record) }, file: null, points: null }

      const head = doc.storage_key ? await objects.head(doc.storage_key) : null
      if (head) {
        const key = doc.storage_key!
        let hash: ReturnType<typeof hashing> | null = null
        yield {
          name: docEntry(doc.doc_id, 'file'),
          size: head.size,
          body: () => {
            hash = hashing((async function* () {
              for await (const c of await objects.get(key)) yield c as Buffer
            })())
            return hash.chunks
          },
        }
        if (!hash) throw new Error(`export: the file of ${doc.doc_id} was not read`)
        sums.file = (hash as ReturnType<typeof hashing>).digest()
        totals.bytes += head.size
      }

      const points: VectorPoint[] = SEARCHABLE.has(doc.status) ? await vectors.docPoints(kbId, doc.doc_id) : []
      if (points.length > 0) {
        const bin = encodePoints(points)
        yield { name: docEntry(doc.doc_id, 'points.bin'), size: bin.length, body: bin }
        sums.points = { size: bin.length, sha256: sha256(bin), count: points.length }
        totals.points += points.length
      }

      const sumsBody = Buffer.from(JSON.stringify(sums))
      yield { name: docEntry(doc.doc_id, 'sums.json'), size: sumsBody.length, body: sumsBody }
      totals.documents++
      opts.onDocument?.(doc.doc_id, (sums.file?.size ?? 0) + record.length + (sums.points?.size ?? 0))
    }
  }
  const end = Buffer.from(JSON.stringify(totals))
  yield { name: END_NAME, size: end.length, body: end }
}
