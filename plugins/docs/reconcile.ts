// Reconciliation of the metadata and the vector store (issue 42): after any crash, search agrees with every
// document's status. A status change and its vector writes are separate steps in separate stores (a supersede moves
// the newer document to `indexed`, then the older one to `outdated`, then deletes the older one's vectors), so a
// process killed between two steps leaves them disagreeing. This pass finds and mends the two ways they can:
//
// - stale vectors: points of a document that is `outdated`, `deleted` or `failed`, or that has no row. Search
//   reads vectors only, so such a document is still found. Repair deletes the points (and its parent-chunk rows).
// - partial vectors: an `indexed` document whose points in the store are not its chunk_count (a store that lost
//   writes, a collection gone). Search finds it incomplete. Repair deletes what is left and queues it again
//   (pending, then an ingest event), as start-up recovery queues a `running` one.
//
// Documents in an active state (uploading, fetching, pending, running, deleting) are some process's work in
// progress, and start-up recovery (worker.ts) already re-queues the ones a dead process left: they are not looked at.
//
// It runs at start, before the worker takes events (plugins/docs/index.ts), through `quarry check [--repair]`
// (cli/check.ts: on a stopped data folder, or through POST /api/admin/check on a running service). On the services
// driver set other processes write meanwhile, so every repair is checked again where it acts: a stale document's
// row is locked (SELECT ... FOR UPDATE) while its points are deleted, so a retry or reindex cannot move it and
// write new points in between; a partial document is counted again before it is re-queued, and re-queued by a
// compare-and-set from `indexed` only, under the same row lock. The points are listed before the rows are read, so a document indexed
// after the listing is never taken for partial by a stale listing.
import type { Adapters } from '../../adapters/ports.ts'
import type { Logger } from '../../kernel/log.ts'
import { createDocRepo } from './repo.ts'
import { INGEST_TOPIC, type DocEvent } from './service.ts'

/** Statuses whose documents must never be found by search. */
export const UNSEARCHABLE = ['outdated', 'deleted', 'failed'] as const

export type DisagreementKind = 'stale_vectors' | 'partial_vectors'

export interface Disagreement {
  kb_id: string
  doc_id: string
  kind: DisagreementKind
  /** The row's status, or null when the document has no row. */
  status: string | null
  /** The row's chunk_count (null without a row, or when never set). */
  chunk_count: number | null
  /** The document's points in the vector store when listed. */
  points: number
  /**
   * With repair: 'deleted' (stale vectors removed), 'requeued' (partial: removed and queued again), 'resolved' (it
   * agreed by the time it was repaired: another process moved or finished it); absent without repair.
   */
  repair?: 'deleted' | 'requeued' | 'resolved'
}

export interface CheckReport {
  repair: boolean
  kbs: number
  /** Documents of the KBs checked (rows). */
  documents: number
  /** Points listed in the vector store. */
  points: number
  disagreements: Disagreement[]
  ms: number
}

export interface ReconcileDeps {
  adapters: Pick<Adapters, 'sql' | 'vectors' | 'queue'>
  log?: Logger
}

interface Row {
  doc_id: string
  status: string
  chunk_count: number | null
}

const isUnsearchable = (status: string | null) => status === null || (UNSEARCHABLE as readonly string[]).includes(status)

/** Checks every KB (or the ones named) and, with repair, mends what disagrees. */
export async function reconcile(deps: ReconcileDeps, opts: { repair: boolean; kbIds?: readonly string[] }): Promise<CheckReport> {
  const started = performance.now()
  const { sql, vectors } = deps.adapters
  const kbIds = opts.kbIds ?? (await sql.query<{ kb_id: string }>('SELECT kb_id FROM knowledge_bases ORDER BY kb_id')).map((r) => r.kb_id)
  const report: CheckReport = { repair: opts.repair, kbs: kbIds.length, documents: 0, points: 0, disagreements: [], ms: 0 }
  for (const kbId of kbIds) {
    // Points first, rows second (see the top of this file).
    const counts = await vectors.docChunkCounts(kbId)
    const rows = await sql.query<Row>('SELECT doc_id, status, chunk_count FROM documents WHERE kb_id = $1', [kbId])
    const byId = new Map(rows.map((r) => [r.doc_id, r]))
    report.documents += rows.length
    const found: Disagreement[] = []
    for (const [docId, points] of counts) {
      report.points += points
      const row = byId.get(docId)
      if (row === undefined || isUnsearchable(row.status)) {
        found.push({ kb_id: kbId, doc_id: docId, kind: 'stale_vectors', status: row?.status ?? null, chunk_count: row?.chunk_count ?? null, points })
      }
    }
    for (const row of rows) {
      if (row.status !== 'indexed') continue
      const points = counts.get(row.doc_id) ?? 0
      // A row indexed before chunk_count was recorded: only an empty one is known to be wrong.
      if (row.chunk_count === null ? points === 0 : points !== row.chunk_count) {
        found.push({ kb_id: kbId, doc_id: row.doc_id, kind: 'partial_vectors', status: row.status, chunk_count: row.chunk_count, points })
      }
    }
    if (opts.repair) {
      for (const d of found) {
        d.repair = d.kind === 'stale_vectors' ? await deleteStale(deps, d) : await requeuePartial(deps, d)
        deps.log?.warn({ kb_id: d.kb_id, doc_id: d.doc_id, status: d.status, points: d.points, chunk_count: d.chunk_count, repair: d.repair }, d.kind === 'stale_vectors'
          ? 'vectors of a document that is not indexed: search found it'
          : 'indexed document with incomplete vectors')
      }
    }
    report.disagreements.push(...found)
  }
  report.ms = Math.round(performance.now() - started)
  return report
}

/** Deletes a non-indexed document's points while its row is locked, unless it has become indexable meanwhile. */
async function deleteStale(deps: ReconcileDeps, d: Disagreement): Promise<'deleted' | 'resolved'> {
  const { sql, vectors } = deps.adapters
  return sql.transaction(async (tx) => {
    const rows = await tx.query<{ status: string }>('SELECT status FROM documents WHERE doc_id = $1 FOR UPDATE', [d.doc_id])
    // doc_ids are random (repo.newDocId): a missing row never comes back.
    if (!isUnsearchable(rows[0]?.status ?? null)) return 'resolved'
    await vectors.deleteByDoc(d.kb_id, d.doc_id)
    await tx.query('DELETE FROM parent_chunks WHERE doc_id = $1', [d.doc_id])
    return 'deleted'
  })
}

/** Counts an indexed document's points again while its row is locked and, when they still disagree, deletes them and queues it again. */
async function requeuePartial(deps: ReconcileDeps, d: Disagreement): Promise<'requeued' | 'resolved'> {
  const { sql, vectors, queue } = deps.adapters
  const moved = await sql.transaction(async (tx) => {
    const rows = await tx.query<Row>('SELECT doc_id, status, chunk_count FROM documents WHERE doc_id = $1 FOR UPDATE', [d.doc_id])
    const row = rows[0]
    if (row?.status !== 'indexed') return false
    // Locked as indexed: no run of it can start (a claim moves it from pending, a reindex from indexed) until commit.
    const points = (await vectors.docVectors(d.kb_id, d.doc_id)).length
    if (row.chunk_count === null ? points > 0 : points === row.chunk_count) return false
    await vectors.deleteByDoc(d.kb_id, d.doc_id)
    // The repository's own compare-and-set, in this transaction (its row lock is ours).
    return (await createDocRepo(tx, { chunkStrategy: '' }).transition(d.doc_id, ['indexed'], 'pending', { pending_op: 'ingest' })) !== null
  })
  if (!moved) return 'resolved'
  // A crash before this enqueue leaves a pending row without an event, which start-up recovery queues (worker.ts).
  await queue.enqueue<DocEvent>(INGEST_TOPIC, d.doc_id, { op: 'ingest', kb_id: d.kb_id, doc_id: d.doc_id, force: true })
  return 'requeued'
}
