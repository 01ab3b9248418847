// The RoleStore (types.ts): per-KB roles, KB state and the public KBs, read from the metadata store through a
// per-process cache. The hot path of every KB request is two Map hits; a change anywhere reaches every process
// through the AuthzBus and drops what it touched before the change's response is sent.
import type { Sql } from '../../adapters/ports.ts'
import type { AuthzBus, AuthzEvent, KbState, Role, RoleStore } from './types.ts'

/** Bounds memory when many distinct users or KBs pass through one process. */
const MAX_ENTRIES = 20_000

interface Entry<T> {
  value: T
  expires: number
}

/**
 * A bounded TTL map. The generation counter closes the race between a load and an invalidation: a load that
 * started before an invalidation would store what the invalidation meant to drop, so it is not stored.
 */
export class Cache<K, V> {
  private readonly map = new Map<K, Entry<V>>()
  private readonly inflight = new Map<K, Promise<V>>()
  private generation = 0

  constructor(private readonly ttlMs: () => number, private readonly storable: () => boolean = () => true) {}

  get(key: K, load: () => Promise<V>): V | Promise<V> {
    const hit = this.map.get(key)
    if (hit && hit.expires > Date.now()) return hit.value
    let pending = this.inflight.get(key)
    if (pending) return pending
    const gen = this.generation
    pending = load().then(
      (value) => {
        if (this.inflight.get(key) === pending) this.inflight.delete(key)
        const ttl = this.ttlMs()
        if (gen === this.generation && ttl > 0 && this.storable()) {
          if (this.map.size >= MAX_ENTRIES) this.map.delete(this.map.keys().next().value as K)
          this.map.delete(key)
          this.map.set(key, { value, expires: Date.now() + ttl })
        }
        return value
      },
      (err) => {
        if (this.inflight.get(key) === pending) this.inflight.delete(key)
        throw err
      },
    )
    this.inflight.set(key, pending)
    return pending
  }

  delete(key: K): void {
    this.generation++
    this.map.delete(key)
    this.inflight.delete(key)
  }

  /** Drops the entries whose value matches (e.g. every user holding a role on a deleted KB). */
  deleteWhere(test: (value: V) => boolean): void {
    this.generation++
    for (const [key, entry] of this.map) if (test(entry.value)) this.map.delete(key)
    this.inflight.clear()
  }

  clear(): void {
    this.generation++
    this.map.clear()
    this.inflight.clear()
  }
}

export interface CachedRoleStore extends RoleStore {
  /** Synchronous when cached: the access hook's fast path. */
  rolesOfCached(userId: string): ReadonlyMap<string, Role> | Promise<ReadonlyMap<string, Role>>
  kbStateCached(kbId: string): KbState | Promise<KbState>
  close(): void
}

const ABSENT: KbState = Object.freeze({ exists: false, frozen: false, public: false })

export function createRoleStore(opts: { sql: Sql; bus: AuthzBus; ttlSeconds: number; storable?: () => boolean }): CachedRoleStore {
  const { sql, bus } = opts
  const ttl = () => opts.ttlSeconds * 1000
  const users = new Cache<string, ReadonlyMap<string, Role>>(ttl, opts.storable)
  const kbs = new Cache<string, KbState>(ttl, opts.storable)
  const publics = new Cache<'all', ReadonlySet<string>>(ttl, opts.storable)

  const loadRoles = async (userId: string) => {
    const rows = await sql.query<{ kb_id: string; role: Role }>('SELECT kb_id, role FROM kb_members WHERE user_id = $1', [userId])
    return new Map(rows.map((r) => [r.kb_id, r.role]))
  }
  const loadKb = async (kbId: string): Promise<KbState> => {
    const rows = await sql.query<{ status: string; visibility: string }>('SELECT status, visibility FROM knowledge_bases WHERE kb_id = $1', [kbId])
    if (rows.length === 0) return ABSENT
    return { exists: true, frozen: rows[0].status === 'frozen', public: rows[0].visibility === 'public' }
  }
  const loadPublic = async () =>
    new Set((await sql.query<{ kb_id: string }>("SELECT kb_id FROM knowledge_bases WHERE visibility = 'public'")).map((r) => r.kb_id))

  const apply = (event: AuthzEvent) => {
    switch (event.type) {
      case 'user':
        users.delete(event.user_id)
        break
      case 'kb':
        kbs.delete(event.kb_id)
        publics.clear()
        // A deleted (and maybe re-created) KB must not keep its old members' roles.
        users.deleteWhere((roles) => roles.has(event.kb_id))
        break
      case 'all':
        users.clear()
        kbs.clear()
        publics.clear()
        break
    }
  }
  const unsubscribe = bus.subscribe(apply)

  const rolesOfCached = (userId: string) => users.get(userId, () => loadRoles(userId))
  const kbStateCached = (kbId: string) => kbs.get(kbId, () => loadKb(kbId))
  return {
    rolesOfCached,
    kbStateCached,
    publicKbIds: async () => publics.get('all', loadPublic),
    invalidateUser: (userId) => bus.publish({ type: 'user', user_id: userId }),
    invalidateKb: (kbId) => bus.publish({ type: 'kb', kb_id: kbId }),
    close: unsubscribe,
  }
}
