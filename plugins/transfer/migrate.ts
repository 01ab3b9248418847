// `quarry migrate --from A.yaml --to B.yaml`: every KB of one set of stores copied into another (the embedded engines
// to PostgreSQL, Redis, S3 and a vector server, or back), with the service stopped. Each KB is the KB export
// (export.ts) fed straight into the KB import (import.ts) in this process: the same entries, checksums, read-backs
// and verification as an archive, without the archive. The import's progress lives in the target's metadata
// (kb_transfers, kb_transfer_docs), committed with each document's row, so a run killed at any point (kill -9) is
// taken up by the next one, which reads nothing of what the target already holds and writes no document twice.
import { createHash } from 'node:crypto'
import { existsSync } from 'node:fs'
import { closeAdapters, createAdapters, createSql, dataPath, lockDataDir, usesDataDir, chooseDrivers } from '../../adapters/index.ts'
import type { Adapters, Sql, SqlRunner } from '../../adapters/ports.ts'
import type { Settings } from '../../kernel/config/schema.ts'
import type { Logger } from '../../kernel/log.ts'
import { asEntries } from './archive.ts'
import { exportKb, type ExportDeps } from './export.ts'
import { importArchive, transferState, type ImportReport } from './import.ts'

export interface MigratePlanKb {
  kb_id: string
  documents: number
  points: number
  bytes: number
  /** In the target: absent, partly copied by an earlier run, copied, or a KB of the same id that migrate did not make. */
  target: 'absent' | 'partial' | 'copied' | 'foreign'
  /** Documents the target holds already (a partial copy). */
  copied: number
}

export interface MigrateKbResult {
  kb_id: string
  outcome: 'copied' | 'resumed' | 'already_copied' | 'failed'
  /** Documents this run wrote, and those it found in the target already (written by an earlier run: not read again). */
  written: number
  already_there: number
  error?: string
  report?: ImportReport
}

export interface MigrateResult {
  dry_run: boolean
  from: string
  to: string
  plan: MigratePlanKb[]
  kbs: MigrateKbResult[]
  /** Deployment-wide rows copied once (user profiles, runtime config), absent ones only. */
  deployment: { user_profiles: number; system_config: number }
  ok: boolean
}

export interface MigrateOptions {
  /** Only these KBs (default: every KB of the source). */
  kbIds?: readonly string[]
  dryRun?: boolean
  log: Logger
  onKbStart?(kb: MigratePlanKb): void
  onDocument?(kbId: string, e: { docId: string; written: boolean; bytes: number }): void
  onKbDone?(r: MigrateKbResult): void
}

export class MigrateError extends Error {}

/** Where a set of stores keeps its metadata: two settings files naming the same place are one deployment. */
export function metadataPlace(s: Readonly<Settings>): string {
  return s.postgres.host ? `postgres://${s.postgres.host}:${s.postgres.port}/${s.postgres.dbname}` : `pglite:${dataPath(s, 'pglite')}`
}

export function describeStores(s: Readonly<Settings>): string {
  const d = chooseDrivers(s)
  return `metadata ${d.metadata}, vectors ${d.vectors}, objects ${d.objects}, queue ${d.queue}${usesDataDir(s) ? ` (data_dir ${dataPath(s)})` : ''}`
}

/** The archive id of one KB's migration from this source: the same on every run, so that a run resumes the last. */
export const migrationId = (from: Readonly<Settings>, kbId: string) =>
  `migrate:${createHash('sha256').update(metadataPlace(from)).digest('hex').slice(0, 12)}:${kbId}`

function checkPair(from: Readonly<Settings>, to: Readonly<Settings>): void {
  if (metadataPlace(from) === metadataPlace(to)) throw new MigrateError(`--from and --to name the same metadata store (${metadataPlace(from)}): nothing to migrate`)
  if (usesDataDir(from) && usesDataDir(to) && dataPath(from) === dataPath(to)) {
    throw new MigrateError(`--from and --to share data_dir ${dataPath(from)}: give the target a data_dir of its own`)
  }
}

async function sourceKbs(sql: SqlRunner, only: readonly string[] | undefined): Promise<string[]> {
  const all = (await sql.query<{ kb_id: string }>('SELECT kb_id FROM knowledge_bases ORDER BY kb_id')).map((r) => r.kb_id)
  if (!only || only.length === 0) return all
  const missing = only.filter((k) => !all.includes(k))
  if (missing.length > 0) throw new MigrateError(`not in the source: ${missing.join(', ')}`)
  return all.filter((k) => only.includes(k))
}

/** The target's view of a KB (read-only). Null sql: the target holds nothing yet. */
async function targetView(sql: SqlRunner | null, from: Readonly<Settings>, kbId: string): Promise<{ target: MigratePlanKb['target']; copied: number }> {
  if (!sql) return { target: 'absent', copied: 0 }
  const [kb] = await sql.query<{ kb: boolean; transfers: boolean }>(
    `SELECT to_regclass('knowledge_bases') IS NOT NULL AS kb, to_regclass('kb_transfers') IS NOT NULL AS transfers`)
  if (!kb.kb) return { target: 'absent', copied: 0 }
  if ((await sql.query('SELECT 1 FROM knowledge_bases WHERE kb_id = $1', [kbId])).length === 0) return { target: 'absent', copied: 0 }
  const state = kb.transfers ? await transferState(sql, kbId) : null
  if (!state || state.archive_id !== migrationId(from, kbId)) return { target: 'foreign', copied: 0 }
  return { target: state.state === 'done' ? 'copied' : 'partial', copied: state.documents }
}

async function plan(a: Pick<Adapters, 'sql' | 'vectors'>, from: Readonly<Settings>, target: SqlRunner | null, kbIds: string[]): Promise<MigratePlanKb[]> {
  const out: MigratePlanKb[] = []
  for (const kbId of kbIds) {
    const [c] = await a.sql.query<{ n: number; bytes: number }>(
      'SELECT count(*)::int AS n, coalesce(sum(file_size), 0)::float8 AS bytes FROM documents WHERE kb_id = $1', [kbId])
    out.push({ kb_id: kbId, documents: c.n, points: await a.vectors.count(kbId), bytes: Number(c.bytes), ...(await targetView(target, from, kbId)) })
  }
  return out
}

/** Deployment-wide rows the target lacks: user profiles (display cache, KB caps) and the runtime config. */
async function copyDeployment(a: Sql, b: Sql): Promise<MigrateResult['deployment']> {
  let profiles = 0
  let after = ''
  for (;;) {
    const rows = await a.query<Record<string, unknown>>(
      `SELECT user_id, email, display_name, preferred_username, max_kb_count, created_at, updated_at FROM user_profiles WHERE user_id > $1 ORDER BY user_id LIMIT 500`, [after])
    if (rows.length === 0) break
    after = rows[rows.length - 1].user_id as string
    for (const r of rows) {
      const done = await b.query(
        `INSERT INTO user_profiles (user_id, email, display_name, preferred_username, max_kb_count, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6::timestamptz, $7::timestamptz) ON CONFLICT (user_id) DO NOTHING RETURNING 1`,
        [r.user_id, r.email, r.display_name, r.preferred_username, r.max_kb_count, r.created_at, r.updated_at])
      profiles += done.length
    }
  }
  let config = 0
  for (const r of await a.query<Record<string, unknown>>('SELECT key, value, updated_by, updated_at FROM system_config ORDER BY key')) {
    const done = await b.query(
      'INSERT INTO system_config (key, value, updated_by, updated_at) VALUES ($1, $2::jsonb, $3, $4::timestamptz) ON CONFLICT (key) DO NOTHING RETURNING 1',
      [r.key, r.value, r.updated_by, r.updated_at])
    config += done.length
  }
  return { user_profiles: profiles, system_config: config }
}

/** A read-only look at the target for --dry-run: its metadata only, nothing created (an absent embedded store stays absent). */
async function openTargetMetadata(to: Readonly<Settings>): Promise<{ sql: Sql | null; release(): Promise<void> }> {
  if (!to.postgres.host && !existsSync(dataPath(to, 'pglite'))) return { sql: null, release: async () => {} }
  const lock = usesDataDir(to) && existsSync(dataPath(to)) ? await lockDataDir(to) : null
  try {
    const sql = await createSql(to)
    return { sql, async release() { await sql.close(); lock?.release() } }
  } catch (err) {
    lock?.release()
    throw err
  }
}

export async function migrateDeployment(from: Readonly<Settings>, to: Readonly<Settings>, opts: MigrateOptions): Promise<MigrateResult> {
  checkPair(from, to)
  const result: MigrateResult = {
    dry_run: opts.dryRun === true, from: describeStores(from), to: describeStores(to), plan: [], kbs: [], deployment: { user_profiles: 0, system_config: 0 }, ok: true,
  }
  // Each side's data folder lock (embedded engines): a service running on either refuses the migration.
  const a = await createAdapters(from, opts.log)
  try {
    const kbIds = await sourceKbs(a.sql, opts.kbIds)
    if (opts.dryRun) {
      const target = await openTargetMetadata(to)
      try {
        result.plan = await plan(a, from, target.sql, kbIds)
      } finally {
        await target.release()
      }
      result.ok = result.plan.every((p) => p.target !== 'foreign')
      return result
    }
    const b = await createAdapters(to, opts.log)
    try {
      result.plan = await plan(a, from, b.sql, kbIds)
      const exportDeps: ExportDeps = { adapters: a, keepSealedSecrets: true }
      for (const p of result.plan) {
        opts.onKbStart?.(p)
        const r = await migrateKb(a, b, from, to, exportDeps, p, opts)
        result.kbs.push(r)
        opts.onKbDone?.(r)
      }
      result.deployment = await copyDeployment(a.sql, b.sql)
      result.ok = result.kbs.every((k) => k.outcome !== 'failed' && (k.report?.verification.ok ?? true))
    } finally {
      await closeAdapters(b, opts.log)
    }
    return result
  } finally {
    await closeAdapters(a, opts.log)
  }
}

async function migrateKb(a: Adapters, b: Adapters, from: Readonly<Settings>, to: Readonly<Settings>, exportDeps: ExportDeps, p: MigratePlanKb, opts: MigrateOptions): Promise<MigrateKbResult> {
  const kbId = p.kb_id
  if (p.target === 'foreign') {
    return { kb_id: kbId, outcome: 'failed', written: 0, already_there: 0, error: `KB '${kbId}' exists in the target and was not copied there by quarry migrate from this source: delete it there, or leave it out (--kb)` }
  }
  if (p.target === 'copied') {
    const state = await transferState(b.sql, kbId)
    return { kb_id: kbId, outcome: 'already_copied', written: 0, already_there: state?.documents ?? 0, report: state?.report ?? undefined }
  }
  const archiveId = migrationId(from, kbId)
  // What the target holds already is not even read from the source.
  let alreadyThere = 0
  let written = 0
  const skip = async (docIds: string[]) => {
    const there = new Set((await b.sql.query<{ source_doc_id: string }>(
      'SELECT source_doc_id FROM kb_transfer_docs WHERE kb_id = $1 AND source_doc_id = ANY($2::text[])', [kbId, docIds])).map((r) => r.source_doc_id))
    alreadyThere += there.size
    return there
  }
  try {
    const entries = asEntries(exportKb(exportDeps, { kbId, archiveId, skip }))
    const report = await importArchive({
      adapters: b, settings: to, log: opts.log,
      createKb: async (write) => {
        await b.sql.transaction(write)
      },
      mayResume: async () => {},
    }, entries, {
      kbId, mode: 'migrate',
      onDocument: (e) => {
        if (e.written) written++
        opts.onDocument?.(kbId, e)
      },
    })
    return { kb_id: kbId, outcome: report.status === 'resumed' ? 'resumed' : 'copied', written, already_there: alreadyThere + report.documents.skipped, report }
  } catch (err) {
    return { kb_id: kbId, outcome: 'failed', written, already_there: alreadyThere, error: (err as Error).message }
  }
}
