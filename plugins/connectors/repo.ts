// Connector rows on the metadata port. Sync state changes are compare-and-sets on sync_run_id: a run writes
// only while it is the connector's current run, so an aborted or dead run never overwrites its successor.
import { randomUUID } from 'node:crypto'
import type { SqlRunner } from '../../adapters/ports.ts'
import { isForeignKeyViolation, isUniqueViolation } from '../../adapters/metadata/common.ts'
import { AppError, clip, conflict } from '../../kernel/errors.ts'
import type { ConnectorStatus, SourceType } from './schemas.ts'

export interface LastSync {
  /** The run's id: the run_id of the documents it fetched. */
  run_id: string
  trigger: 'manual' | 'schedule'
  outcome: 'completed' | 'aborted' | 'failed' | 'interrupted' | 'timed_out'
  started_at: string
  finished_at: string
  fetched: number
  stored: number
  unchanged: number
  skipped: number
  failed: number
  pruned: number
  truncated: boolean
  /** Time the source took (requests, storing, queueing), before waiting for indexing. */
  fetch_ms: number
}

export interface ConnectorRow {
  connector_id: string
  kb_id: string
  name: string
  source_type: SourceType
  config: Record<string, unknown>
  sync_schedule: string | null
  schedule_enabled: boolean
  sync_status: 'idle' | 'running'
  sync_started_at: string | null
  last_synced_at: string | null
  status: ConnectorStatus
  last_error: string | null
  created_at: string
  updated_at: string
  sync_run_id: string | null
  sync_heartbeat_at: string | null
  abort_requested: boolean
  last_sync: LastSync | null
}

const COLUMNS = `connector_id::text AS connector_id, kb_id, name, source_type, config, sync_schedule, schedule_enabled, sync_status,
  sync_started_at, last_synced_at, status, last_error, created_at, updated_at, sync_run_id::text AS sync_run_id, sync_heartbeat_at,
  abort_requested, last_sync`

/** Spec 8: the liveness window of a sync; a run older than this is treated as dead. */
export const SYNC_WINDOW_MS = 30 * 60 * 1000

export interface ConnectorFilter {
  kbId?: string
  sourceType?: string
  status?: string
  search?: string
  sortBy: string
  sortOrder: 'asc' | 'desc'
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
export const isUuid = (s: string) => UUID.test(s)

/** notes.md: same kb_id, source_type and config source; the older service's text. */
export const duplicateConnector = (kbId: string) => conflict(`Connector already exists in KB: ${clip(kbId)}`, 'CONNECTOR_EXISTS')

export function createConnectorRepo(db: SqlRunner) {
  const one = async (text: string, params: unknown[]) => (await db.query<ConnectorRow>(text, params))[0] ?? null

  return {
    async get(id: string): Promise<ConnectorRow | null> {
      if (!isUuid(id)) return null
      return one(`SELECT ${COLUMNS} FROM connectors WHERE connector_id = $1::uuid`, [id])
    },

    async insert(c: { kb_id: string; name: string; source_type: SourceType; config: Record<string, unknown>; source_key: string; sync_schedule: string | null; schedule_enabled: boolean }): Promise<ConnectorRow> {
      try {
        return (await one(
          `INSERT INTO connectors (connector_id, kb_id, name, source_type, config, source_key, sync_schedule, schedule_enabled)
           VALUES ($1::uuid, $2, $3, $4, $5::jsonb, $6, $7, $8) RETURNING ${COLUMNS}`,
          [randomUUID(), c.kb_id, c.name, c.source_type, c.config, c.source_key, c.sync_schedule, c.schedule_enabled],
        ))!
      } catch (err) {
        if (isUniqueViolation(err)) throw duplicateConnector(c.kb_id)
        if (isForeignKeyViolation(err)) throw new AppError('KB_NOT_FOUND', 404, `KB not found: ${c.kb_id}`)
        throw err
      }
    },

    async update(id: string, fields: Partial<Pick<ConnectorRow, 'name' | 'config' | 'sync_schedule' | 'schedule_enabled' | 'status' | 'last_error'>> & { source_key?: string }): Promise<ConnectorRow | null> {
      const params: unknown[] = [id]
      const sets = ['updated_at = now()']
      for (const [key, value] of Object.entries(fields)) {
        if (value === undefined) continue
        params.push(value)
        sets.push(`${key} = $${params.length}${key === 'config' ? '::jsonb' : ''}`)
      }
      try {
        return await one(`UPDATE connectors SET ${sets.join(', ')} WHERE connector_id = $1::uuid RETURNING ${COLUMNS}`, params)
      } catch (err) {
        if (isUniqueViolation(err)) {
          // The 409 names the connector's KB (kb_id never changes); the failed statement ran outside any transaction.
          const [row] = await db.query<{ kb_id: string }>('SELECT kb_id FROM connectors WHERE connector_id = $1::uuid', [id])
          throw duplicateConnector(row?.kb_id ?? '')
        }
        throw err
      }
    },

    async list(f: ConnectorFilter): Promise<ConnectorRow[]> {
      const dir = f.sortOrder === 'asc' ? 'ASC' : 'DESC'
      const search = f.search ? `%${f.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%` : null
      // An absent filter is a NULL parameter: one statement shape, whatever is filtered on.
      return db.query<ConnectorRow>(
        `SELECT ${COLUMNS} FROM connectors
         WHERE ($1::text IS NULL OR kb_id = $1) AND ($2::text IS NULL OR source_type = $2) AND ($3::text IS NULL OR status = $3)
           AND ($4::text IS NULL OR name ILIKE $4 ESCAPE '\\')
         ORDER BY ${f.sortBy} ${dir} NULLS LAST, connector_id ${dir}`,
        [f.kbId ?? null, f.sourceType ?? null, f.status ?? null, search],
      )
    },

    /** Connectors with a schedule, for the scheduler's view (id, cron, and when the row last changed). */
    scheduled: () => db.query<{ connector_id: string; sync_schedule: string; updated_at: string }>(
      `SELECT connector_id::text AS connector_id, sync_schedule, updated_at FROM connectors WHERE sync_schedule IS NOT NULL`),

    /** The syncs of a KB that are running (DELETE /api/kb guard). */
    async runningIn(kbId: string): Promise<string[]> {
      const rows = await db.query<{ connector_id: string }>(
        `SELECT connector_id::text AS connector_id FROM connectors WHERE kb_id = $1 AND sync_status = 'running' ORDER BY connector_id`, [kbId])
      return rows.map((r) => r.connector_id)
    },

    /**
     * Spec 3.3: idle -> running, or running -> running once the previous run is older than the window.
     * Null when the connector is paused, or running inside the window (the caller reads why).
     */
    startSync(id: string, runId: string): Promise<ConnectorRow | null> {
      return one(
        `UPDATE connectors SET sync_status = 'running', sync_started_at = now(), sync_run_id = $2::uuid, sync_heartbeat_at = now(),
           abort_requested = false, sync_owner = NULL, updated_at = now()
         WHERE connector_id = $1::uuid AND status <> 'paused'
           AND (sync_status = 'idle' OR sync_started_at IS NULL OR sync_started_at <= now() - ($3::float8 * interval '1 millisecond'))
           -- Waits for a KB delete in progress (it holds the row FOR UPDATE); a deleted KB starts nothing.
           AND EXISTS (SELECT 1 FROM knowledge_bases k WHERE k.kb_id = connectors.kb_id FOR SHARE)
         RETURNING ${COLUMNS}`,
        [id, runId, SYNC_WINDOW_MS],
      )
    },

    /** A consumer takes a queued run: exactly one process gets it (a redelivered message finds it owned). */
    async claim(id: string, runId: string, owner: string): Promise<ConnectorRow | null> {
      return one(
        `UPDATE connectors SET sync_owner = $3, sync_heartbeat_at = now() WHERE connector_id = $1::uuid AND sync_run_id = $2::uuid
           AND sync_status = 'running' AND sync_owner IS NULL AND NOT abort_requested RETURNING ${COLUMNS}`, [id, runId, owner])
    },

    /** Whether the run may go on: still the current run and no abort asked for (read before each request). */
    async mayContinue(id: string, runId: string): Promise<boolean> {
      const rows = await db.query(
        `SELECT 1 FROM connectors WHERE connector_id = $1::uuid AND sync_run_id = $2::uuid AND sync_status = 'running' AND NOT abort_requested`,
        [id, runId])
      return rows.length > 0
    },

    /** The run's heartbeat (so other processes see it alive); false when it may not go on. */
    async checkpoint(id: string, runId: string): Promise<boolean> {
      const rows = await db.query(
        `UPDATE connectors SET sync_heartbeat_at = now() WHERE connector_id = $1::uuid AND sync_run_id = $2::uuid
           AND sync_status = 'running' AND NOT abort_requested RETURNING 1`, [id, runId])
      return rows.length > 0
    },

    /**
     * Ends a run. `error` null: success (status error -> active, last_error cleared; spec 3.3); otherwise
     * status error with the reason. Only the current run may finish itself.
     */
    finish(id: string, runId: string, result: { error: string | null; lastSync: LastSync; synced: boolean }): Promise<ConnectorRow | null> {
      return one(
        `UPDATE connectors SET sync_status = 'idle', sync_run_id = NULL, sync_owner = NULL, sync_heartbeat_at = NULL, last_sync = $3::jsonb,
           last_synced_at = CASE WHEN $5 THEN now() ELSE last_synced_at END,
           status = CASE WHEN $4::text IS NULL THEN (CASE WHEN status = 'error' THEN 'active' ELSE status END)
                         WHEN status = 'paused' THEN status ELSE 'error' END,
           last_error = $4::text, updated_at = now()
         WHERE connector_id = $1::uuid AND sync_run_id = $2::uuid RETURNING ${COLUMNS}`,
        [id, runId, result.lastSync, result.error, result.synced],
      )
    },

    /** An aborted run records what it did without touching status (spec 3.3: an error stays error). */
    recordAborted: (id: string, lastSync: LastSync) =>
      db.query(`UPDATE connectors SET last_sync = $2::jsonb WHERE connector_id = $1::uuid AND sync_run_id IS NULL`, [id, lastSync]),

    /** Spec 3.3: running -> idle at once; the loop sees the flag at its next checkpoint. */
    requestAbort(id: string): Promise<ConnectorRow | null> {
      return one(
        `UPDATE connectors SET sync_status = 'idle', abort_requested = true, sync_run_id = NULL, sync_owner = NULL, sync_heartbeat_at = NULL, updated_at = now()
         WHERE connector_id = $1::uuid AND sync_status = 'running' RETURNING ${COLUMNS}`, [id])
    },

    /** The older service's sync/reset: idle whatever the state, without the abort effects on documents. */
    reset: (id: string) => one(
      `UPDATE connectors SET sync_status = 'idle', sync_run_id = NULL, sync_owner = NULL, sync_heartbeat_at = NULL, updated_at = now()
       WHERE connector_id = $1::uuid RETURNING ${COLUMNS}`, [id]),

    /**
     * Running syncs whose process is gone: claimed runs whose heartbeat is older than staleMs, or, with
     * `all` (the single process of an embedded deployment, at start), every running sync.
     */
    stale: (staleMs: number, all: boolean) => db.query<ConnectorRow>(
      `SELECT ${COLUMNS} FROM connectors WHERE sync_status = 'running' AND ($2 OR (sync_owner IS NOT NULL
         AND (sync_heartbeat_at IS NULL OR sync_heartbeat_at <= now() - ($1::float8 * interval '1 millisecond'))))`, [staleMs, all]),

    /**
     * Runs started staleMs ago or more that no process has claimed: each should have its event queued (the
     * caller checks).
     */
    unclaimed: (staleMs: number) => db.query<ConnectorRow>(
      `SELECT ${COLUMNS} FROM connectors WHERE sync_status = 'running' AND sync_owner IS NULL
         AND sync_started_at <= now() - ($1::float8 * interval '1 millisecond')`, [staleMs]),

    /** Ends a dead run (its process stopped): idle, status error with the reason. `unclaimed`: only if no one owns it. */
    interrupt: (id: string, runId: string | null, reason: string, unclaimed = false) => one(
      `UPDATE connectors SET sync_status = 'idle', sync_run_id = NULL, sync_owner = NULL, sync_heartbeat_at = NULL, last_error = $3,
         status = CASE WHEN status = 'paused' THEN status ELSE 'error' END, updated_at = now()
       WHERE connector_id = $1::uuid AND sync_status = 'running' AND sync_run_id IS NOT DISTINCT FROM $2::uuid
         AND (NOT $4::boolean OR sync_owner IS NULL) RETURNING ${COLUMNS}`,
      [id, runId, reason, unclaimed]),

    /** Removes the row unless a sync is running; null when it was running (or absent). */
    async remove(id: string): Promise<boolean> {
      const rows = await db.query(`DELETE FROM connectors WHERE connector_id = $1::uuid AND sync_status <> 'running' RETURNING 1`, [id])
      return rows.length > 0
    },

    /** Claims a schedule firing: true for exactly one caller across every process. */
    async claimRun(id: string, scheduledAt: Date): Promise<boolean> {
      const rows = await db.query(
        `INSERT INTO connector_runs (run_key, connector_id, scheduled_at) VALUES ($1, $2::uuid, $3) ON CONFLICT (run_key) DO NOTHING RETURNING 1`,
        [`${id}@${scheduledAt.toISOString()}`, id, scheduledAt.toISOString()],
      )
      return rows.length > 0
    },

    pruneRuns: (olderThanMs: number) =>
      db.query(`DELETE FROM connector_runs WHERE claimed_at < now() - ($1::float8 * interval '1 millisecond')`, [olderThanMs]),
  }
}

export type ConnectorRepo = ReturnType<typeof createConnectorRepo>
