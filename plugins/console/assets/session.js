// What the console knows about the caller and what each role may do, so that no view offers a button whose only
// possible answer is 403 (the route table's minimum roles; a super-admin is owner on every KB; a frozen KB refuses
// every write above viewer; kb_authz_enabled false skips the KB checks but not the super-admin ones).
import { get } from './api.js'

export const session = {
  /** 'base' | 'access-controlled' */
  edition: 'base',
  oidc: null,
  /** GET /api/me (access-controlled edition), else null. */
  me: null,
  /** kb_id -> KB as GET /api/kb lists it (my_role included). */
  kbs: new Map(),
}

const RANK = { viewer: 0, editor: 1, admin: 2, owner: 3 }
export const ROLES = Object.keys(RANK)

export const ent = () => session.edition === 'access-controlled'
export const superAdmin = () => ent() && session.me?.is_super_admin === true
const checksOn = () => ent() && session.me?.kb_authz_enabled === true

/** The caller's role on a KB, as the access check will see it; null: none. */
export function roleOn(kb) {
  if (!checksOn()) return 'owner'
  if (superAdmin()) return 'owner'
  return kb?.my_role ?? null
}

/** May the caller do what needs `min` on this KB? */
export function can(kb, min) {
  if (!kb) return false
  const role = roleOn(kb)
  if (role === null || RANK[role] < RANK[min]) return false
  return !(checksOn() && kb.status === 'frozen' && min !== 'viewer')
}

export const canById = (kbId, min) => can(session.kbs.get(kbId), min)

export function canCreateKb() {
  if (!ent()) return true
  const me = session.me
  if (!me) return false
  if (me.is_super_admin) return true
  return me.can_create_kb && (me.max_kb_count === 0 || me.kb_count < me.max_kb_count)
}

/**
 * Members, invites and ownership: admins and owners while role checks are on; while they are off only a
 * super-admin may change them (docs/access-control.md, "Members, invites, ownership").
 */
export function canManageMembers(kb) {
  if (!ent() || !kb) return false
  if (superAdmin()) return true
  return checksOn() && can(kb, 'admin')
}

export function canTransfer(kb) {
  if (!ent() || !kb) return false
  if (superAdmin()) return true
  return checksOn() && kb.status !== 'frozen' && roleOn(kb) === 'owner'
}

export async function loadKbs() {
  const { knowledge_bases } = await get('/api/kb')
  session.kbs = new Map(knowledge_bases.map((k) => [k.kb_id, k]))
  return knowledge_bases
}

export async function loadMe() {
  if (ent()) session.me = await get('/api/me')
}

export async function kbOf(kbId) {
  if (!session.kbs.has(kbId)) {
    const kb = await get(`/api/kb/${encodeURIComponent(kbId)}`)
    session.kbs.set(kbId, kb)
  }
  return session.kbs.get(kbId)
}
