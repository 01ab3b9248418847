// The KB archive (issue 39): what `GET /api/kb/{kb}/export` writes and `POST /api/kb/import` and `quarry migrate`
// read. A tar (tar.ts) of, in this order:
//
//   quarry-kb.json                    the manifest (Manifest): the KB record, its settings overrides, connectors
//                                     (secrets named, never their values), members, the embedding model, the counts
//                                     the import must reach and the sample searches it must answer the same
//   docs/<doc_id>/record.json         per document, in doc_id order: its row, parent chunks, dedup signature and
//   docs/<doc_id>/file                the pairs declared distinct; the original file (absent when none is stored);
//   docs/<doc_id>/points.bin          its vector points (points.ts); and the sha256 and size of each of those
//   docs/<doc_id>/sums.json           entries, written after them (a streaming writer knows a hash only at the end)
//   end.json                          how many documents this part held: an archive without it was cut short
//
// An export resumed after an interruption (`?after=<doc_id>&manifest=false`) is the same stream from the next
// document on; concatenated behind the complete documents of the first part it makes one archive.
import { createHash } from 'node:crypto'
import type { SampleSearch } from './samples.ts'
import type { TarEntry, TarSource } from './tar.ts'

export const ARCHIVE_FORMAT = 'quarry-kb-archive'
export const ARCHIVE_VERSION = 1
export const MANIFEST_NAME = 'quarry-kb.json'
export const END_NAME = 'end.json'
export const ARCHIVE_CONTENT_TYPE = 'application/x-tar'

export const docEntry = (docId: string, part: 'record.json' | 'file' | 'points.bin' | 'sums.json') => `docs/${encodeURIComponent(docId)}/${part}`
const DOC_ENTRY = /^docs\/([^/]+)\/(record\.json|file|points\.bin|sums\.json)$/

export function parseDocEntry(name: string): { docId: string; part: string } | null {
  const m = DOC_ENTRY.exec(name)
  if (!m) return null
  try {
    return { docId: decodeURIComponent(m[1]), part: m[2] }
  } catch {
    return null
  }
}

/** A connector as exported: the config without its literal secrets, each named in `secrets`. */
export interface ArchiveConnector {
  connector_id: string
  name: string
  source_type: string
  config: Record<string, unknown>
  source_key: string
  sync_schedule: string | null
  schedule_enabled: boolean
  status: string
  last_error: string | null
  last_synced_at: string | null
  last_sync: unknown
  created_at: string
  updated_at: string
  /**
   * Every secret of the config: `env` ones stay in the config (they name a variable, not a value), `literal` ones
   * (stored encrypted) were left out and must be entered again on the imported connector. `quarry migrate` alone
   * keeps them, still sealed (`sealed`): the target runs with the same CONNECTOR_SECRET_KEY; no archive holds them.
   */
  secrets: { field: string; kind: 'env' | 'literal'; env?: string; username?: string; sealed?: true }[]
}

export interface Manifest {
  format: typeof ARCHIVE_FORMAT
  version: typeof ARCHIVE_VERSION
  /** Names this export: a resumed import must be fed the same archive. */
  archive_id: string
  created_at: string
  source: { kb_id: string; metadata: string; vectors: string; objects: string }
  kb: {
    kb_id: string; kb_name: string; description: string | null; tags: string[]; status: string; visibility: string
    created_by: string | null; created_at: string; updated_at: string
  }
  overrides: Record<string, unknown>
  embedding: { provider: string; model: string; dimensions: number }
  /** What the archive holds (documents being removed for good when it was made are left out). */
  counts: { documents: number; by_status: Record<string, number>; points: number; bytes: number }
  connectors: ArchiveConnector[]
  members: { user_id: string; role: string; granted_by: string | null; granted_at: string }[]
  invites: { invite_id: string; email: string; role: string; granted_by: string; status: string; created_at: string; expires_at: string }[]
  /** Sample searches the import must answer the same (samples.ts). */
  samples: SampleSearch[]
}

/** A document row as exported (documents table, heartbeat left out). */
export interface ArchiveDocument {
  doc_id: string; kb_id: string; title: string; source_type: string; source: string; storage_key: string | null
  connector_id: string | null; run_id: string | null; status: string; pending_op: string | null; doc_type: string | null
  content_type: string | null; chunk_count: number | null; file_size: number | null; embedding_model: string | null
  last_error: string | null; etag: string | null; source_uri: string | null; content_version: string | null
  duplicate_of: string | null; dedup: Record<string, unknown> | null; chunk_strategy: string | null
  doc_created_at: string | null; process_started_at: string | null; process_finished_at: string | null
  deleted_at: string | null; created_at: string; updated_at: string
}

export interface ArchiveParentChunk {
  chunk_id: string; level: number; parent_chunk_id: string | null; child_count: number; text: string
  page_num: number; page_label: string; start_offset: number; end_offset: number
}

export interface ArchiveSignature {
  simhash: string
  /** base64 of the bytea columns */
  minhash: string
  identity: string | null
  title: string
  chunk_count: number | null
}

export interface ArchiveRecord {
  document: ArchiveDocument
  parent_chunks: ArchiveParentChunk[]
  signature: ArchiveSignature | null
  /** Documents declared distinct from this one (dedup_distinct) that come before it in the archive. */
  distinct: string[]
}

export interface EntrySum {
  size: number
  sha256: string
}

export interface DocSums {
  doc_id: string
  record: EntrySum
  file: EntrySum | null
  points: (EntrySum & { count: number }) | null
}

export interface ArchiveEnd {
  /** Documents in this part (a resumed export's part holds the documents after its cursor). */
  documents: number
  points: number
  bytes: number
}

export const sha256 = (data: Uint8Array | string) => createHash('sha256').update(data).digest('hex')

/** The checksum of a document: of its entries' checksums, as recorded in kb_transfer_docs. */
export const docChecksum = (s: DocSums) => sha256(`${s.record.sha256}:${s.file?.sha256 ?? '-'}:${s.points?.sha256 ?? '-'}`)

/**
 * Ids in a KB imported under another kb_id than its source's: doc_id and connector_id are unique across the
 * deployment, so they are derived from the new KB and the old id (the same archive always maps to the same ids,
 * which is what lets an interrupted import resume). Into the same kb_id they stay as they are.
 */
export function derivedDocId(kbId: string, docId: string): string {
  return createHash('sha256').update(`quarry-import\0${kbId}\0${docId}`).digest('hex').slice(0, 16)
}

export function derivedUuid(kbId: string, id: string): string {
  const h = createHash('sha256').update(`quarry-import-connector\0${kbId}\0${id}`).digest()
  h[6] = (h[6] & 0x0f) | 0x50
  h[8] = (h[8] & 0x3f) | 0x80
  const x = h.subarray(0, 16).toString('hex')
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`
}

/** Hashes chunks as they pass; `digest()` once they all have. */
export function hashing(chunks: AsyncIterable<Uint8Array>): { chunks: AsyncGenerator<Buffer>; digest(): { sha256: string; size: number } } {
  const h = createHash('sha256')
  let size = 0
  let done = false
  async function* pass(): AsyncGenerator<Buffer> {
    for await (const c of chunks) {
      h.update(c)
      size += c.length
      yield Buffer.isBuffer(c) ? c : Buffer.from(c.buffer, c.byteOffset, c.byteLength)
    }
    done = true
  }
  let result: { sha256: string; size: number } | null = null
  return {
    chunks: pass(),
    digest() {
      if (!done) throw new Error('hashing: the body was not read to its end')
      return (result ??= { sha256: h.digest('hex'), size })
    },
  }
}

/** Entries made in this process (an export feeding an import directly: `quarry migrate`) as the tar reader's. */
export async function* asEntries(sources: AsyncIterable<TarSource>): AsyncGenerator<TarEntry> {
  for await (const s of sources) {
    let read = false
    const chunks = (): AsyncIterable<Buffer> => {
      if (read) throw new Error(`entry ${s.name} was read already`)
      read = true
      const body = s.body
      if (body instanceof Uint8Array) return (async function* () { yield Buffer.from(body.buffer, body.byteOffset, body.byteLength) })()
      return (async function* () {
        for await (const c of body()) yield Buffer.isBuffer(c) ? c : Buffer.from(c.buffer, c.byteOffset, c.byteLength)
      })()
    }
    const entry: TarEntry = {
      name: s.name,
      size: s.size,
      chunks,
      async buffer(limit) {
        if (s.size > limit) throw new Error(`entry ${s.name} holds ${s.size} bytes, more than the ${limit} expected`)
        const parts: Buffer[] = []
        for await (const c of chunks()) parts.push(c)
        return Buffer.concat(parts)
      },
    }
    yield entry
    // An entry the consumer did not read is read now: its hash must be complete before the next one.
    if (!read) for await (const _ of chunks()) { /* drained */ }
  }
}
