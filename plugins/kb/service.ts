// Knowledge bases and their settings overrides, on the metadata port.
import type { Adapters, SqlRunner } from '../../adapters/ports.ts'
import { isUniqueViolation } from '../../adapters/metadata/common.ts'
import { effectiveKbSettings, kbSettingsView, validateOverrides, type KbSettingsView, type Overrides } from '../../kernel/config/kb-settings.ts'
import type { KbSettings, Settings } from '../../kernel/config/schema.ts'
import { conflict } from '../../kernel/errors.ts'
import { kbNotFound } from './errors.ts'

export interface KnowledgeBase {
  kb_id: string
  kb_name: string
  description: string | null
  tags: string[]
  status: string
  /** 'private' or 'public' ([ENT]: a public KB is read as viewer by every authenticated caller). */
  visibility: Visibility
  created_at: string
  updated_at: string
}

export const VISIBILITIES = ['private', 'public'] as const
export type Visibility = (typeof VISIBILITIES)[number]

export interface CreateKb {
  kb_id: string
  kb_name?: string
  /** Absent or null: no description (it reads back as null, as in the older service). */
  description?: string | null
  tags?: string[]
  visibility?: Visibility
}

export const KB_SORT_COLUMNS = ['kb_id', 'kb_name', 'status', 'created_at', 'updated_at'] as const
export interface KbListOrder {
  sortBy: (typeof KB_SORT_COLUMNS)[number]
  sortOrder: 'asc' | 'desc'
}

export type PatchKb = Partial<Omit<CreateKb, 'kb_id'>>

const COLUMNS = 'kb_id, kb_name, description, tags, status, visibility, created_at, updated_at'

// The older service's texts (notes.md), which its clients match on.
export { kbNotFound }
const kbExists = (kbId: string) => conflict(`KB already exists: ${kbId}`, 'KB_EXISTS')

/**
 * Runs before a KB is deleted; throws (e.g. 409) to refuse. Other plugins register theirs (connectors). It runs
 * inside the delete's transaction, which holds the KB row FOR UPDATE: read through `db` (the embedded store
 * serialises transactions, so a query on another runner would wait for this one). Work that must not start
 * while a KB is being deleted reads the KB row FOR SHARE, and so waits for the outcome.
 */
export type KbDeleteGuard = (kbId: string, db: SqlRunner) => void | Promise<void>

export interface KbService {
  /** `db`: a transaction to create it in (the access-controlled edition adds the owner in the same one). */
  create(input: CreateKb, createdBy?: string | null, db?: SqlRunner): Promise<KnowledgeBase>
  /** Default order: kb_id ascending. */
  list(order?: KbListOrder): Promise<KnowledgeBase[]>
  get(kbId: string): Promise<KnowledgeBase>
  exists(kbId: string): Promise<boolean>
  patch(kbId: string, input: PatchKb): Promise<void>
  /** Order: vector collection, stored objects, metadata (document rows cascade). */
  delete(kbId: string): Promise<{ s3_objects_deleted: number }>
  addDeleteGuard(guard: KbDeleteGuard): void
  /** Creates the settings' pre-registered KBs that are absent; never modifies existing ones. */
  ensurePreregistered(kbs: Settings['knowledge_bases']): Promise<string[]>
  getOverrides(kbId: string): Promise<Overrides>
  replaceOverrides(kbId: string, overrides: Overrides): Promise<Overrides>
  patchOverrides(kbId: string, overrides: Overrides): Promise<Overrides>
  clearOverrides(kbId: string): Promise<void>
  /** Global settings merged with the KB's overrides: what ingestion and auto-merge use. */
  effectiveSettings(kbId: string): Promise<KbSettings>
  settingsView(kbId: string): Promise<KbSettingsView>
}

export function createKbService(adapters: Adapters, settings: Readonly<Settings>): KbService {
  const { sql } = adapters
  const deleteGuards: KbDeleteGuard[] = []

  const requireKb = async (db: SqlRunner, kbId: string, lock = false) => {
    const rows = await db.query(`SELECT 1 FROM knowledge_bases WHERE kb_id = $1${lock ? ' FOR UPDATE' : ''}`, [kbId])
    if (rows.length === 0) throw kbNotFound(kbId)
  }

  const readOverrides = async (db: SqlRunner, kbId: string): Promise<Overrides> => {
    const rows = await db.query<{ overrides: Overrides }>('SELECT overrides FROM kb_settings_overrides WHERE kb_id = $1', [kbId])
    return rows[0]?.overrides ?? {}
  }

  const writeOverrides = async (db: SqlRunner, kbId: string, overrides: Overrides) => {
    await db.query(
      `INSERT INTO kb_settings_overrides (kb_id, overrides, updated_at) VALUES ($1, $2::jsonb, now())
       ON CONFLICT (kb_id) DO UPDATE SET overrides = EXCLUDED.overrides, updated_at = now()`,
      [kbId, overrides],
    )
  }

  const service: KbService = {
    async create(input, createdBy = null, db = sql) {
      try {
        const rows = await db.query<KnowledgeBase>(
          `INSERT INTO knowledge_bases (kb_id, kb_name, description, tags, created_by, visibility)
           VALUES ($1, $2, $3, $4::jsonb, $5, $6) RETURNING ${COLUMNS}`,
          [input.kb_id, input.kb_name ?? '', input.description ?? null, input.tags ?? [], createdBy, input.visibility ?? 'private'],
        )
        return rows[0]
      } catch (err) {
        if (isUniqueViolation(err)) throw kbExists(input.kb_id)
        throw err
      }
    },
    list({ sortBy, sortOrder }: KbListOrder = { sortBy: 'kb_id', sortOrder: 'asc' }) {
      // The column is written into the SQL text: only a known one may get there, whoever the caller is.
      if (!(KB_SORT_COLUMNS as readonly string[]).includes(sortBy)) throw new Error(`not a sort column: ${sortBy}`)
      const dir = sortOrder === 'desc' ? 'DESC' : 'ASC'
      // kb_id breaks ties, so that equal names or timestamps page in a stable order.
      return sql.query<KnowledgeBase>(`SELECT ${COLUMNS} FROM knowledge_bases ORDER BY ${sortBy} ${dir}${sortBy === 'kb_id' ? '' : `, kb_id ${dir}`}`)
    },
    async get(kbId) {
      const rows = await sql.query<KnowledgeBase>(`SELECT ${COLUMNS} FROM knowledge_bases WHERE kb_id = $1`, [kbId])
      if (rows.length === 0) throw kbNotFound(kbId)
      return rows[0]
    },
    async exists(kbId) {
      return (await sql.query('SELECT 1 FROM knowledge_bases WHERE kb_id = $1', [kbId])).length > 0
    },
    async patch(kbId, input) {
      const sets: string[] = []
      const params: unknown[] = [kbId]
      for (const key of ['kb_name', 'description', 'tags', 'visibility'] as const) {
        if (input[key] === undefined) continue
        params.push(input[key])
        sets.push(`${key} = $${params.length}${key === 'tags' ? '::jsonb' : ''}`)
      }
      const rows = await sql.query(
        `UPDATE knowledge_bases SET ${[...sets, 'updated_at = now()'].join(', ')} WHERE kb_id = $1 RETURNING kb_id`,
        params,
      )
      if (rows.length === 0) throw kbNotFound(kbId)
    },
    addDeleteGuard: (guard) => void deleteGuards.push(guard),
    async delete(kbId) {
      // Guards and delete in one transaction on the locked row: nothing a guard refuses can start in between.
      return sql.transaction(async (tx) => {
        await requireKb(tx, kbId, true)
        for (const guard of deleteGuards) await guard(kbId, tx)
        await adapters.vectors.dropCollection(kbId)
        const removed = await adapters.objects.deletePrefix(`${kbId}/`)
        await tx.query('DELETE FROM knowledge_bases WHERE kb_id = $1', [kbId])
        return { s3_objects_deleted: removed }
      })
    },
    async ensurePreregistered(kbs) {
      const created: string[] = []
      for (const kb of kbs) {
        const rows = await sql.query(
          `INSERT INTO knowledge_bases (kb_id, kb_name, description, tags) VALUES ($1, $2, $3, $4::jsonb)
           ON CONFLICT (kb_id) DO NOTHING RETURNING kb_id`,
          [kb.id, kb.name, kb.description ?? null, kb.tags],
        )
        if (rows.length > 0) created.push(kb.id)
      }
      return created
    },
    async getOverrides(kbId) {
      await requireKb(sql, kbId)
      return readOverrides(sql, kbId)
    },
    replaceOverrides: (kbId, overrides) =>
      sql.transaction(async (tx) => {
        await requireKb(tx, kbId, true)
        const next = validateOverrides(overrides, settings as Settings, {})
        await writeOverrides(tx, kbId, next)
        return next
      }),
    patchOverrides: (kbId, overrides) =>
      sql.transaction(async (tx) => {
        await requireKb(tx, kbId, true)
        const next = validateOverrides(overrides, settings as Settings, await readOverrides(tx, kbId))
        await writeOverrides(tx, kbId, next)
        return next
      }),
    async clearOverrides(kbId) {
      await requireKb(sql, kbId)
      await sql.query('DELETE FROM kb_settings_overrides WHERE kb_id = $1', [kbId])
    },
    async effectiveSettings(kbId) {
      // One round trip: this runs for every document the worker processes.
      const rows = await sql.query<{ overrides: Overrides | null }>(
        'SELECT o.overrides FROM knowledge_bases k LEFT JOIN kb_settings_overrides o ON o.kb_id = k.kb_id WHERE k.kb_id = $1', [kbId])
      if (rows.length === 0) throw kbNotFound(kbId)
      return effectiveKbSettings(settings as Settings, rows[0].overrides ?? {})
    },
    async settingsView(kbId) {
      return kbSettingsView(settings as Settings, await service.getOverrides(kbId))
    },
  }
  return service
}
