// Document rows on the metadata port. Status changes go through transition(): a compare-and-set on the
// states the caller expects, so a write based on a stale read never lands (a `fail` is never overwritten).
import { randomBytes } from 'node:crypto'
import type { Sql, SqlRunner } from '../../adapters/ports.ts'
import { isForeignKeyViolation, isUniqueViolation } from '../../adapters/metadata/common.ts'
import { kbNotFound } from '../kb/service.ts'
import { STABLE, STATUSES, type DocStatus } from './states.ts'
import { coalescer } from './coalesce.ts'
import type { DedupRecord } from './dedup.ts'

export interface DocumentRecord {
  doc_id: string
  kb_id: string
  title: string
  source_type: string
  source: string
  storage_key: string | null
  connector_id: string | null
  /** The connector sync run that fetched the current content (with connector_id it names the run); null for uploads. */
  run_id: string | null
  status: DocStatus
  doc_type: string | null
  chunk_count: number | null
  file_size: number | null
  embedding_model: string | null
  last_error: string | null
  etag: string | null
  source_uri: string | null
  content_version: string | null
  duplicate_of: string | null
  /** The dedup verdict that concerns the document (plugins/docs/dedup.ts DedupRecord); null: unique, or dedup off. */
  dedup: DedupRecord | null
  content_type: string | null
  /** The chunking strategy of the last processing run (the KB's effective chunking.strategy then). */
  chunk_strategy: string | null
  /** When the current content arrived (upload or re-upload); a reindex keeps it. */
  doc_created_at: string | null
  /** Start and end of the last processing run; the end is null while it runs. */
  process_started_at: string | null
  process_finished_at: string | null
  /** Set while the document is soft-deleted. */
  deleted_at: string | null
  created_at: string
  updated_at: string
}

const COLUMNS = `doc_id, kb_id, title, source_type, source, storage_key, connector_id::text AS connector_id, run_id::text AS run_id, status, doc_type,
  chunk_count, file_size, embedding_model, last_error, etag, source_uri, content_version, duplicate_of, dedup, content_type, chunk_strategy,
  doc_created_at, process_started_at, process_finished_at, deleted_at, created_at, updated_at`

/** Fields a transition may set along with the status. */
export type DocFields = Partial<Pick<DocumentRecord,
  'title' | 'storage_key' | 'doc_type' | 'chunk_count' | 'file_size' | 'embedding_model' | 'last_error' | 'etag' |
  'source_uri' | 'content_version' | 'duplicate_of' | 'content_type' | 'dedup' | 'run_id'>> & {
  pending_op?: PendingOp
  /** New content arrived (a re-upload): doc_created_at becomes now. */
  received?: boolean
}

/** What a pending document waits for, so that recovery can queue it again. */
export type PendingOp = 'ingest' | 'delete' | 'delete_hard'

const SETTABLE = new Set(['title', 'storage_key', 'doc_type', 'chunk_count', 'file_size', 'embedding_model', 'last_error', 'etag', 'source_uri', 'content_version', 'duplicate_of', 'content_type', 'pending_op', 'dedup', 'run_id'])

export const newDocId = (): string => randomBytes(8).toString('hex')

export const SORT_COLUMNS = ['updated_at', 'created_at', 'source', 'title', 'chunk_count', 'file_size'] as const
export type SortColumn = (typeof SORT_COLUMNS)[number]

export interface ListFilter {
  kbId?: string
  status?: DocStatus
  sourceType?: string
  search?: string
  connectorId?: string
  sortBy: SortColumn
  sortOrder: 'asc' | 'desc'
  page: number
  pageSize: number
}

export type DocCounts = Record<DocStatus | 'total', number>

const HEARTBEAT_STATES = new Set<DocStatus>(['uploading', 'fetching', 'running', 'deleting'])

export interface DocRepoOptions {
  /** The global chunking.strategy, recorded on a claimed document whose KB does not override it. */
  chunkStrategy: string
}

export type ClaimedDocument = DocumentRecord & { kb_overrides: Record<string, unknown> | null }

export interface NewDocument {
  doc_id: string; kb_id: string; source: string; status: DocStatus; title: string; source_type: string; doc_type: string | null
  connector_id?: string | null; source_uri?: string | null; content_type?: string | null; storage_key?: string | null
  file_size?: number | null; etag?: string | null; content_version?: string | null; pending_op?: PendingOp | null
}

/** The columns of an insert, in the statement's order. */
const INSERT_FIELDS = ['doc_id', 'kb_id', 'source', 'status', 'title', 'source_type', 'doc_type', 'connector_id', 'source_uri', 'content_type',
  'storage_key', 'file_size', 'etag', 'content_version', 'pending_op'] as const satisfies readonly (keyof NewDocument)[]

const INSERT_INTO = `INSERT INTO documents (${INSERT_FIELDS.join(', ')}, heartbeat_at, doc_created_at)`

type InsertOutcome = { row: DocumentRecord | null; err?: unknown }

export function createDocRepo(db: SqlRunner, opts: DocRepoOptions) {
  const claim = coalescer(async (docIds: string[]): Promise<(ClaimedDocument | null)[]> => {
    // Sorted: concurrent claimers lock rows in one order (PostgreSQL).
    const ids = [...new Set(docIds)].sort()
    // The strategy recorded is the one the pipeline derives from the overrides returned (one statement, one snapshot).
    const rows = await db.query<ClaimedDocument>(
      `UPDATE documents SET status = 'running', updated_at = now(), heartbeat_at = now(), last_error = NULL,
         process_started_at = now(), process_finished_at = NULL,
         chunk_strategy = COALESCE((SELECT o.overrides->>'chunking.strategy' FROM kb_settings_overrides o WHERE o.kb_id = documents.kb_id), $2)
       WHERE doc_id = ANY($1::text[]) AND status = 'pending'
       RETURNING ${COLUMNS}, (SELECT o.overrides FROM kb_settings_overrides o WHERE o.kb_id = documents.kb_id) AS kb_overrides`,
      [ids, opts.chunkStrategy],
    )
    const byId = new Map(rows.map((r) => [r.doc_id, r]))
    // One claim wins a document; another claim of it in the same batch finds it running, as it would alone.
    return docIds.map((id) => {
      const row = byId.get(id) ?? null
      byId.delete(id)
      return row
    })
  })

  const insertMany = coalescer(async (docs: NewDocument[]): Promise<InsertOutcome[]> => {
    if (docs.length > 1) {
      try {
        // A name (or id) that exists already is skipped and answers null, as the single insert's unique violation does.
        const rows = await db.query<DocumentRecord>(
          `${INSERT_INTO}
           SELECT d.*, now(), now() FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::uuid[],
             $9::text[], $10::text[], $11::text[], $12::bigint[], $13::text[], $14::text[], $15::text[]) AS d
           ON CONFLICT DO NOTHING RETURNING ${COLUMNS}`,
          INSERT_FIELDS.map((f) => docs.map((d) => d[f] ?? null)),
        )
        const byId = new Map(rows.map((r) => [r.doc_id, r]))
        return docs.map((d) => ({ row: byId.get(d.doc_id) ?? null }))
      } catch {
        // One bad row (a missing KB) fails the whole statement: each document is then inserted alone, for its own answer.
      }
    }
    return Promise.all(docs.map((d) => insertOne(d).then((row) => ({ row }), (err: unknown) => ({ row: null, err }))))
  })

  async function insertOne(doc: NewDocument): Promise<DocumentRecord | null> {
    try {
      const rows = await db.query<DocumentRecord>(
        `${INSERT_INTO}
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8::uuid, $9, $10, $11, $12, $13, $14, $15, now(), now()) RETURNING ${COLUMNS}`,
        INSERT_FIELDS.map((f) => doc[f] ?? null),
      )
      return rows[0]
    } catch (err) {
      if (isUniqueViolation(err)) return null
      if (isForeignKeyViolation(err)) throw kbNotFound(doc.kb_id)
      throw err
    }
  }

  return {
    async get(kbId: string, docId: string): Promise<DocumentRecord | null> {
      const rows = await db.query<DocumentRecord>(`SELECT ${COLUMNS} FROM documents WHERE doc_id = $1 AND kb_id = $2`, [docId, kbId])
      return rows[0] ?? null
    },

    async getById(docId: string): Promise<DocumentRecord | null> {
      const rows = await db.query<DocumentRecord>(`SELECT ${COLUMNS} FROM documents WHERE doc_id = $1`, [docId])
      return rows[0] ?? null
    },

    async findBySource(kbId: string, source: string): Promise<DocumentRecord | null> {
      const rows = await db.query<DocumentRecord>(`SELECT ${COLUMNS} FROM documents WHERE kb_id = $1 AND source = $2`, [kbId, source])
      return rows[0] ?? null
    },

    /**
     * A new row in `status`; null when (kb_id, source) exists already (an earlier or concurrent upload).
     * Throws KB_NOT_FOUND (404) when the KB does not exist (the foreign key says so: no look-up before). Inserts
     * made together (concurrent uploads) go out as one statement.
     */
    async insert(doc: NewDocument): Promise<DocumentRecord | null> {
      const { row, err } = await insertMany(doc)
      if (err) throw err
      return row
    },

    /** Compare-and-set: moves the document to `to` only if its status is one of `from`. */
    async transition(docId: string, from: readonly DocStatus[], to: DocStatus, fields: DocFields = {}): Promise<DocumentRecord | null> {
      const params: unknown[] = [docId, from as DocStatus[], to]
      const sets = [
        'status = $3', 'updated_at = now()', HEARTBEAT_STATES.has(to) ? 'heartbeat_at = now()' : 'heartbeat_at = NULL',
        to === 'deleted' ? 'deleted_at = now()' : 'deleted_at = NULL',
        // In SET, `status` is still the old value: a run that ends (here or by a fail through the API) gets its end time.
        ...((STABLE as readonly string[]).includes(to) ? [`process_finished_at = CASE WHEN status = 'running' THEN now() ELSE process_finished_at END`] : []),
      ]
      if (fields.received) sets.push('doc_created_at = now()')
      for (const [key, value] of Object.entries(fields)) {
        if (!SETTABLE.has(key) || value === undefined) continue
        if (key === 'dedup') {
          // the object itself: both drivers serialise a jsonb parameter (a string would be stored as a JSON string)
          params.push(value)
          sets.push(`dedup = $${params.length}::jsonb`)
          continue
        }
        params.push(value)
        sets.push(`${key} = $${params.length}${key === 'run_id' ? '::uuid' : ''}`)
      }
      const rows = await db.query<DocumentRecord>(
        `UPDATE documents SET ${sets.join(', ')} WHERE doc_id = $1 AND status = ANY($2::text[]) RETURNING ${COLUMNS}`,
        params,
      )
      return rows[0] ?? null
    },

    /**
     * The worker's claim: pending -> running, returning the record and the KB's settings overrides in the
     * same statement (one round trip on the hot path). Null when the document is not pending. Claims made
     * while one is being written go out together in the next statement (the worker reserves several events
     * at once): on the embedded store each statement cost about 1 ms of the metadata thread.
     */
    claimIngest(docId: string): Promise<ClaimedDocument | null> {
      return claim(docId)
    },

    async pendingOp(docId: string): Promise<PendingOp | null> {
      const rows = await db.query<{ pending_op: PendingOp | null }>('SELECT pending_op FROM documents WHERE doc_id = $1', [docId])
      return rows[0]?.pending_op ?? null
    },

    async heartbeat(docIds: readonly string[]): Promise<void> {
      if (docIds.length === 0) return
      await db.query('UPDATE documents SET heartbeat_at = now() WHERE doc_id = ANY($1::text[])', [docIds as string[]])
    },

    /**
     * Of the runs given (a document and its claim's process_started_at), those whose row is no longer in that run:
     * gone, out of `running` (failed through the API), or running a later claim. Timestamps match to the
     * millisecond (they cross as ISO strings; two claims of one document are never that close).
     */
    async leftRunning(runs: readonly { docId: string; startedAt: string | null }[]): Promise<string[]> {
      if (runs.length === 0) return []
      const rows = await db.query<{ doc_id: string }>(
        `SELECT r.doc_id FROM unnest($1::text[], $2::timestamptz[]) AS r(doc_id, started_at)
           LEFT JOIN documents d ON d.doc_id = r.doc_id
         WHERE d.doc_id IS NULL OR d.status <> 'running'
            OR (r.started_at IS NOT NULL AND (d.process_started_at IS NULL OR abs(extract(epoch FROM d.process_started_at - r.started_at)) >= 0.001))`,
        [runs.map((r) => r.docId), runs.map((r) => r.startedAt)],
      )
      return rows.map((r) => r.doc_id)
    },

    /** Rows in an active state whose heartbeat is older than staleMs (left behind by a crashed process). */
    async stale(states: readonly DocStatus[], staleMs: number): Promise<DocumentRecord[]> {
      return db.query<DocumentRecord>(
        `SELECT ${COLUMNS} FROM documents WHERE status = ANY($1::text[])
           AND (heartbeat_at IS NULL OR heartbeat_at <= now() - ($2::float8 * interval '1 millisecond'))
         ORDER BY updated_at LIMIT 1000`,
        [states as DocStatus[], staleMs],
      )
    },

    /** Pending rows untouched for staleMs or longer, oldest first: each should have a queued event (the worker checks). */
    async pendingSince(staleMs: number): Promise<(DocumentRecord & { pending_op: PendingOp | null })[]> {
      return db.query<DocumentRecord & { pending_op: PendingOp | null }>(
        `SELECT ${COLUMNS}, pending_op FROM documents WHERE status = 'pending' AND updated_at <= now() - ($1::float8 * interval '1 millisecond')
         ORDER BY updated_at LIMIT 1000`,
        [staleMs],
      )
    },

    /** Hard delete of the row only if it is still in one of `from`. */
    async remove(docId: string, from: readonly DocStatus[]): Promise<boolean> {
      const rows = await db.query('DELETE FROM documents WHERE doc_id = $1 AND status = ANY($2::text[]) RETURNING doc_id', [docId, from as DocStatus[]])
      return rows.length > 0
    },

    async list(f: ListFilter): Promise<{ items: DocumentRecord[]; total: number }> {
      const where: string[] = []
      const params: unknown[] = []
      const add = (sql: string, value: unknown) => {
        params.push(value)
        where.push(sql.replace('?', `$${params.length}`))
      }
      if (f.kbId !== undefined) add('kb_id = ?', f.kbId)
      if (f.status !== undefined) add('status = ?', f.status)
      else where.push(`status <> 'deleted'`)
      if (f.sourceType !== undefined) add('source_type = ?', f.sourceType)
      if (f.connectorId !== undefined) add('connector_id = ?::uuid', f.connectorId)
      if (f.search) {
        params.push(`%${f.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`)
        const p = `$${params.length}`
        where.push(`(source ILIKE ${p} ESCAPE '\\' OR title ILIKE ${p} ESCAPE '\\' OR doc_id ILIKE ${p} ESCAPE '\\')`)
      }
      const whereSql = where.length ? `WHERE ${where.join(' AND ')}` : ''
      const dir = f.sortOrder === 'asc' ? 'ASC' : 'DESC'
      const order = `${f.sortBy} ${dir} NULLS LAST, doc_id ${dir}`
      const [{ total }] = await db.query<{ total: number }>(`SELECT count(*)::int AS total FROM documents ${whereSql}`, params)
      params.push(f.pageSize, (f.page - 1) * f.pageSize)
      const items = await db.query<DocumentRecord>(
        `SELECT ${COLUMNS} FROM documents ${whereSql} ORDER BY ${order} LIMIT $${params.length - 1} OFFSET $${params.length}`,
        params,
      )
      return { items, total }
    },

    async counts(kbId?: string): Promise<Map<string, DocCounts>> {
      const rows = await db.query<{ kb_id: string; status: DocStatus; n: number }>(
        `SELECT kb_id, status, count(*)::int AS n FROM documents ${kbId !== undefined ? 'WHERE kb_id = $1' : ''} GROUP BY kb_id, status`,
        kbId !== undefined ? [kbId] : [],
      )
      const out = new Map<string, DocCounts>()
      for (const r of rows) {
        let c = out.get(r.kb_id)
        if (!c) out.set(r.kb_id, (c = emptyCounts()))
        c[r.status] = r.n
        c.total += r.n
      }
      return out
    },

    /** Every document of a KB in one of `states` (KB reindex). */
    async byStatus(kbId: string, states: readonly DocStatus[]): Promise<DocumentRecord[]> {
      return db.query<DocumentRecord>(`SELECT ${COLUMNS} FROM documents WHERE kb_id = $1 AND status = ANY($2::text[]) ORDER BY created_at`, [kbId, states as DocStatus[]])
    },

    /** Outdated documents superseded by docId (they must be indexed again when docId goes away). */
    async duplicatesOf(docId: string): Promise<DocumentRecord[]> {
      return db.query<DocumentRecord>(`SELECT ${COLUMNS} FROM documents WHERE duplicate_of = $1 AND status = 'outdated'`, [docId])
    },

    /** Non-deleted documents of a KB (the [ENT] document cap counts these). */
    async countLive(kbId: string): Promise<number> {
      const [{ n }] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM documents WHERE kb_id = $1 AND status <> 'deleted'`, [kbId])
      return n
    },
  }
}

export type DocRepo = ReturnType<typeof createDocRepo>

export function emptyCounts(): DocCounts {
  const c = { total: 0 } as DocCounts
  for (const s of STATUSES) c[s] = 0
  return c
}

/** A document that would exceed the [ENT] document cap: the KB's non-deleted documents and the cap. */
export interface DocCapBlock {
  count: number
  max: number
}

/**
 * Non-deleted documents of the KB when adding `source` would make a new one; null when a non-deleted document of
 * that source exists (a replacement is not a new document). A deleted one coming back counts as new.
 */
async function countIfNew(db: SqlRunner, kbId: string, source: string): Promise<number | null> {
  const [row] = await db.query<{ replaces: boolean; n: number }>(
    `SELECT EXISTS (SELECT 1 FROM documents WHERE kb_id = $1 AND source = $2 AND status <> 'deleted') AS replaces,
       (SELECT count(*)::int FROM documents WHERE kb_id = $1 AND status <> 'deleted') AS n`,
    [kbId, source],
  )
  return row.replaces ? null : row.n
}

/** The cheap check before any work (no lock): the block when the KB is at the cap already. */
export async function docCapPrecheck(db: SqlRunner, kbId: string, source: string, max: number): Promise<DocCapBlock | null> {
  const n = await countIfNew(db, kbId, source)
  return n !== null && n >= max ? { count: n, max } : null
}

/**
 * The [ENT] document cap's atomic step: `add` (which inserts or revives the document of `source` through the repo
 * it is handed) runs in one transaction with the count, under a lock on the KB row, so that concurrent additions
 * at cap - 1 let exactly one through. While a cap is in force every addition to the KB comes through here (a
 * super-admin's with max Infinity: never refused, still serialised), so no insert of the same source races this one. The lock is FOR NO KEY UPDATE: it serialises these steps and KB writes, not
 * the foreign-key checks of other document writes. Everything inside must go through the repo given (the embedded
 * store serialises transactions: another runner would wait for this one). 404 when the KB does not exist.
 */
export async function addWithinDocCap<R>(db: Sql, opts: DocRepoOptions, kbId: string, source: string, max: number,
  add: (repo: DocRepo) => Promise<R>): Promise<{ ok: true; value: R } | ({ ok: false } & DocCapBlock)> {
  return db.transaction(async (tx) => {
    const kb = await tx.query('SELECT 1 FROM knowledge_bases WHERE kb_id = $1 FOR NO KEY UPDATE', [kbId])
    if (kb.length === 0) throw kbNotFound(kbId)
    const n = await countIfNew(tx, kbId, source)
    if (n !== null && n >= max) return { ok: false as const, count: n, max }
    const repo = createDocRepo(tx, opts)
    // An insert that meets an existing row would abort the transaction (PostgreSQL; the driver rethrows at commit
    // even when it was caught): under the lock the row is looked for first, and the insert answers null as outside.
    const insert = repo.insert
    repo.insert = async (doc) => ((await repo.findBySource(doc.kb_id, doc.source)) ? null : insert(doc))
    return { ok: true as const, value: await add(repo) }
  })
}
