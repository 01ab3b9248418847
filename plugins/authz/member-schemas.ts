// Request and response shapes of membership, invites, ownership transfer and users (spec 2.3, 4.4-4.6).
import { Type } from '@sinclair/typebox'
import { Timestamp } from '../../kernel/schemas.ts'
import { ROLES, type Role } from './types.ts'

const roleSchema = <R extends Role>(roles: readonly R[]) => Type.Union(roles.map((r) => Type.Literal(r)))
/** Every role, low to high (types.ts ROLES). */
export const AnyRole = roleSchema(ROLES)
/** Roles that can be granted or set here: owner only moves by transfer or succession. */
export const GrantableRole = roleSchema(ROLES.filter((r): r is Exclude<Role, 'owner'> => r !== 'owner'))

/**
 * One plain address. Separators, brackets and quotes are refused: an address list or a display-name form would
 * let an admin make the service mail someone else than the invitee (the address goes into the To header).
 */
export const Email = Type.String({
  minLength: 3, maxLength: 320, pattern: '^[^\\s@,;:<>()\\[\\]"\\\\]+@[^\\s@,;:<>()\\[\\]"\\\\]+$',
  errorMessage: 'email must be one e-mail address (local@domain)',
})
const UserId = Type.String({ minLength: 1, maxLength: 255, description: "The identity provider's user id (the token's sub)." })
const NullableString = Type.Union([Type.String(), Type.Null()])

export const MemberParams = Type.Object({ kb_id: Type.String(), user_id: Type.String() })
export const InviteParams = Type.Object({ kb_id: Type.String(), invite_id: Type.String() })
export const UserIdParams = Type.Object({ user_id: Type.String() })

export const AddMemberBody = Type.Object({ email: Email, role: GrantableRole })
export const PatchMemberBody = Type.Object({ role: GrantableRole })
export const TransferOwnerBody = Type.Object({ new_owner_user_id: UserId })
/** Optional and unchecked: the look-up never answers an error, a missing or odd e-mail is simply not found. */
export const LookupQuery = Type.Object({ email: Type.Optional(Type.String()) })
export const DeleteUsersQuery = Type.Object({ email: Email })
export const QuotaBody = Type.Object({
  max_kb_count: Type.Union([Type.Integer({ minimum: 0, maximum: 1_000_000 }), Type.Null()], {
    description: 'KBs this user may own; 0 = unlimited; null clears the override (authz.max_kb_count applies).',
  }),
})

export const Member = Type.Object({
  user_id: Type.String(),
  role: AnyRole,
  granted_by: NullableString,
  granted_at: Timestamp,
  email: Type.Union([Type.String(), Type.Null()], { description: 'From the profile cache; null when the user was never observed.' }),
  display_name: Type.Union([Type.String(), Type.Null()], { description: 'From the profile cache; null when the user was never observed.' }),
}, { title: 'Member' })

export const Invite = Type.Object({
  invite_id: Type.String(),
  kb_id: Type.String(),
  email: Type.String(),
  role: GrantableRole,
  granted_by: Type.String(),
  expires_at: Timestamp,
  status: Type.Literal('pending'),
}, { title: 'Invite' })

export const MembersResponse = Type.Object({ members: Type.Array(Member), pending_invites: Type.Array(Invite) })
export const AddMemberResponse = Type.Union([
  Type.Object({ status: Type.Literal('granted'), user_id: Type.String(), role: GrantableRole }),
  Type.Object({ status: Type.Literal('invited'), invite_id: Type.String() }),
])
export const MemberUpdatedResponse = Type.Object({ kb_id: Type.String(), user_id: Type.String(), role: GrantableRole, status: Type.Literal('updated') })
export const MemberRemovedResponse = Type.Object({ kb_id: Type.String(), user_id: Type.String(), status: Type.Literal('removed') })
export const InviteRevokedResponse = Type.Object({ invite_id: Type.String(), status: Type.Literal('revoked') })
export const TransferOwnerResponse = Type.Object({ kb_id: Type.String(), owner: Type.String() })
export const LookupResponse = Type.Object({ found: Type.Boolean(), user_id: NullableString, display_name: NullableString })
export const UserRemovedResponse = Type.Object({
  user_id: Type.String(), status: Type.Literal('removed'),
  kb_ids: Type.Array(Type.String(), { description: 'KBs whose membership was removed (some may now be frozen).' }),
})
export const QuotaResponse = Type.Object({ user_id: Type.String(), max_kb_count: Type.Union([Type.Integer(), Type.Null()]) })
