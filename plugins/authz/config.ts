// The runtime system config of spec 2.8 (kb_authz_enabled, max_docs_count): rows of system_config, read through
// the same kind of cache as roles and dropped in every process by the 'config' event of each PATCH.
import type { Sql, SqlRunner } from '../../adapters/ports.ts'
import type { AuthzBus, Caller, SystemConfig, SystemConfigStore } from './types.ts'
import { Cache } from './roles.ts'

export interface CachedConfigStore extends SystemConfigStore {
  /** Synchronous when cached: the access hook's fast path. */
  getCached(): SystemConfig | Promise<SystemConfig>
  close(): void
}

const KEYS = ['kb_authz_enabled', 'max_docs_count'] as const

export function createConfigStore(opts: {
  sql: Sql
  bus: AuthzBus
  ttlSeconds: number
  defaults: SystemConfig
  storable?: () => boolean
}): CachedConfigStore {
  const { sql, bus, defaults } = opts
  const cache = new Cache<'config', SystemConfig>(() => opts.ttlSeconds * 1000, opts.storable)

  const read = async (db: SqlRunner): Promise<SystemConfig> => {
    const rows = await db.query<{ key: string; value: unknown }>(
      `SELECT key, value FROM system_config WHERE key = ANY($1::text[])`, [KEYS])
    const out: SystemConfig = { ...defaults }
    for (const { key, value } of rows) {
      if (key === 'kb_authz_enabled' && typeof value === 'boolean') out.kb_authz_enabled = value
      if (key === 'max_docs_count' && Number.isInteger(value) && (value as number) >= 0) out.max_docs_count = value as number
    }
    return out
  }

  const unsubscribe = bus.subscribe((event) => {
    if (event.type === 'config' || event.type === 'all') cache.clear()
  })

  const getCached = () => cache.get('config', () => read(sql))
  return {
    getCached,
    get: async () => getCached(),
    async patch(input: Partial<SystemConfig>, by: Caller) {
      const { next, claimed } = await sql.transaction(async (tx) => {
        // The kb_authz_enabled row (default false, not a file setting) exists before it is locked, so two
        // concurrent PATCHes serialise on it. max_docs_count gets a row only when set: until then the file value applies.
        await tx.query(
          `INSERT INTO system_config (key, value) VALUES ('kb_authz_enabled', 'false'::jsonb) ON CONFLICT (key) DO NOTHING`)
        await tx.query(`SELECT 1 FROM system_config WHERE key = 'kb_authz_enabled' FOR UPDATE`)
        const before = await read(tx)
        const next = { ...before, ...input }
        for (const key of KEYS) {
          if (input[key] === undefined) continue
          await tx.query(
            `INSERT INTO system_config (key, value, updated_by) VALUES ($1, $2::text::jsonb, $3)
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_by = EXCLUDED.updated_by, updated_at = now()`,
            [key, JSON.stringify(input[key]), by.user_id])
        }
        let claimed = 0
        if (!before.kb_authz_enabled && next.kb_authz_enabled) {
          // Spec 4.6: the super-admin switching role checks on becomes owner of every KB without one, frozen ones
          // included; those become active, as after a super-admin's transfer-owner (spec 3.2).
          const rows = await tx.query<{ kb_id: string }>(
            `INSERT INTO kb_members (kb_id, user_id, role, granted_by)
             SELECT k.kb_id, $1, 'owner', $1 FROM knowledge_bases k
             WHERE NOT EXISTS (SELECT 1 FROM kb_members m WHERE m.kb_id = k.kb_id AND m.role = 'owner')
             ON CONFLICT (kb_id, user_id) DO UPDATE SET role = 'owner', granted_by = EXCLUDED.granted_by, granted_at = now()
             RETURNING kb_id`, [by.user_id])
          claimed = rows.length
          if (claimed > 0) {
            await tx.query(`UPDATE knowledge_bases SET status = 'active', updated_at = now() WHERE kb_id = ANY($1::text[]) AND status = 'frozen'`,
              [rows.map((r) => r.kb_id)])
          }
        }
        return { next, claimed }
      })
      // Published before the response: the next request anywhere reads the new config (and roles).
      await bus.publish(claimed > 0 ? { type: 'all' } : { type: 'config' })
      return next
    },
    close: unsubscribe,
  }
}
