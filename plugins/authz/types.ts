// The access-controlled edition's shared shapes ([ENT], spec 2.2-2.3, 2.8, 3.2, 4.4-4.6, 5): what the authz
// plugin's parts (authentication, roles and the access check, membership and invites, ownership, users and
// system config) and the plugins that call them agree on.
import type { SqlRunner } from '../../adapters/ports.ts'
import type { Caller, Role } from '../../kernel/plugin.ts'

export type { Caller, Role }

/** Low to high; a minimum role includes every higher one. */
export const ROLES: readonly Role[] = ['viewer', 'editor', 'admin', 'owner']
export const roleRank = (role: Role): number => ROLES.indexOf(role)
export const atLeast = (role: Role | null, min: Role): boolean => role !== null && roleRank(role) >= roleRank(min)
/** The role a caller holds on an existing KB: owner for a super-admin, else the membership, else viewer on a public KB. */
export const effectiveRole = (caller: Caller, member: Role | null | undefined, isPublic: boolean): Role | null =>
  caller.is_super_admin ? 'owner' : (member ?? (isPublic ? 'viewer' : null))

/** Runtime system config (spec 2.8), stored in the metadata store (table system_config). */
export interface SystemConfig {
  kb_authz_enabled: boolean
  /** Non-deleted documents per KB; 0 = unlimited. The runtime value replaces authz.max_docs_count. */
  max_docs_count: number
}

/** What changed, published to every process (Redis pub/sub with the services, in process when embedded). */
export type AuthzEvent =
  | { type: 'user'; user_id: string } // that user's roles changed
  | { type: 'kb'; kb_id: string } // that KB's members, state (frozen), visibility, or existence changed
  | { type: 'config' } // the runtime system config changed
  | { type: 'invites' } // pending invites were created, revoked, accepted or expired
  | { type: 'all' }

export interface AuthzBus {
  /** Applied in this process before it returns, then published to the others. */
  publish(event: AuthzEvent): Promise<void>
  subscribe(listener: (event: AuthzEvent) => void): () => void
  close(): Promise<void>
}

export interface KbState {
  exists: boolean
  frozen: boolean
  public: boolean
}

/** Roles, read through a cache (role_cache_ttl_seconds) that every change invalidates at once in every process. */
export interface RoleStore {
  /** Ids of the public KBs. */
  publicKbIds(): Promise<ReadonlySet<string>>
  /** Call after a write that changed a user's roles (grant, role change, removal, transfer, deprovision). */
  invalidateUser(userId: string): Promise<void>
  /** Call after a write that changed a KB's members, state or visibility, or deleted it. */
  invalidateKb(kbId: string): Promise<void>
}

export interface SystemConfigStore {
  /** Cached; every PATCH is visible in every process at once. */
  get(): Promise<SystemConfig>
  /** Only the passed fields change. Switching kb_authz_enabled on makes `by` owner of every ownerless KB. */
  patch(input: Partial<SystemConfig>, by: Caller): Promise<SystemConfig>
}

/**
 * The access check of spec 5.6 for code that does not go through a route's `access` (MCP tools, handlers with
 * rules of their own such as self-removal). Every method is a no-op pass for a null caller (base edition).
 */
export interface AccessControl {
  /**
   * Throws 404 (KB absent), 403 (no role, role too low, or a write above viewer to a frozen KB). Passes for a
   * super-admin (frozen still refuses writes, except where `allowFrozen`), and when kb_authz_enabled is false.
   * Returns the caller's effective role (super-admin: 'owner'; kb_authz_enabled false: null).
   */
  require(caller: Caller | null, kbId: string, min: Role, opts?: { allowFrozen?: boolean }): Promise<Role | null>
  /** The caller's role on the KB as `my_role` shows it (public KB without membership: 'viewer'); null: none. */
  myRole(caller: Caller | null, kbId: string): Promise<Role | null>
  /** The ids the caller may read, in the given order; every KB the caller may read when `kbIds` is omitted. */
  readable(caller: Caller | null, kbIds?: readonly string[]): Promise<string[]>
}

/** Maps a route's `access.kb.via` value (e.g. a connector_id) to the KB it belongs to; null when absent. */
export type KbResolver = (value: string, db: SqlRunner) => Promise<string | null>

/** What the authz plugin returns (null in the base edition). */
export interface AuthzService {
  /** For transports that do not go through the route hook: the Caller of an Authorization header value. */
  authenticate(authorization: string | undefined): Promise<Caller>
  access: AccessControl
  roles: RoleStore
  config: SystemConfigStore
  /** Plugins that name KBs indirectly register how (connectors: 'connector'). */
  registerResolver(name: string, resolve: KbResolver): void
  /**
   * KB creation (spec 4.2 [ENT]): 403 without a creator group or at the cap (checked regardless of
   * kb_authz_enabled; super-admin bypasses). Run `create` inside; the caller becomes owner in the same transaction.
   */
  createKb<T>(caller: Caller, create: (db: SqlRunner) => Promise<T & { kb_id: string }>): Promise<T & { kb_id: string }>
}
