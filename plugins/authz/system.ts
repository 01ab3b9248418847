// Spec 4.6 [ENT], the caller and the system: GET /api/me and GET/PATCH /api/admin/config (the runtime config of
// spec 2.8, stored in the metadata store and effective in every process at once).
import { Type } from '@sinclair/typebox'
import type { Sql } from '../../adapters/ports.ts'
import type { Settings } from '../../kernel/config/schema.ts'
import type { PluginContext } from '../../kernel/plugin.ts'
import { ErrorResponse, ValidationErrorResponse } from '../../kernel/schemas.ts'
import { canCreateKb, kbQuota } from './kb-create.ts'
import type { SystemConfigStore } from './types.ts'

export const SystemConfigSchema = Type.Object({
  kb_authz_enabled: Type.Boolean({ description: 'false: every KB role check is skipped (a valid token suffices).' }),
  max_docs_count: Type.Integer({ minimum: 0, description: 'Non-deleted documents per KB; 0 = unlimited.' }),
}, { title: 'SystemConfig' })

export const PatchSystemConfigBody = Type.Object({
  kb_authz_enabled: Type.Optional(Type.Boolean()),
  max_docs_count: Type.Optional(Type.Integer({ minimum: 0 })),
}, { additionalProperties: false, title: 'PatchSystemConfig' })

export const MeResponse = Type.Object({
  user_id: Type.String(),
  email: Type.Union([Type.String(), Type.Null()]),
  preferred_username: Type.Union([Type.String(), Type.Null()]),
  is_super_admin: Type.Boolean(),
  can_create_kb: Type.Boolean({ description: 'The caller holds one of authz.kb_creator_roles (or is a super-admin).' }),
  kb_authz_enabled: Type.Boolean(),
  max_kb_count: Type.Integer({ description: 'The KB cap that applies to the caller (own quota, else authz.max_kb_count); 0 = unlimited. Informational for super-admins.' }),
  kb_count: Type.Integer({ description: 'KBs the caller owns.' }),
}, { title: 'Me' })

const superAdminRefusal = { 403: { description: 'Not a super-admin', schema: ErrorResponse } }

export function registerSystemRoutes(ctx: PluginContext, deps: { sql: Sql; settings: Readonly<Settings>; config: SystemConfigStore }): void {
  const { sql, settings, config } = deps
  const tags = ['users']

  ctx.route({
    method: 'GET', path: '/api/me', summary: 'The caller: identity, KB creation rights and quota', tags, access: { level: 'authenticated' },
    responses: { 200: { description: 'The caller', schema: MeResponse } },
    handler: async (req) => {
      const caller = req.caller!
      const [cfg, quota] = await Promise.all([config.get(), kbQuota(sql, caller.user_id, settings)])
      return {
        user_id: caller.user_id,
        email: caller.email,
        preferred_username: caller.preferred_username,
        is_super_admin: caller.is_super_admin,
        can_create_kb: canCreateKb(caller, settings),
        kb_authz_enabled: cfg.kb_authz_enabled,
        max_kb_count: quota.max_kb_count,
        kb_count: quota.kb_count,
      }
    },
  })

  ctx.route({
    method: 'GET', path: '/api/admin/config', summary: 'Runtime system config', tags: ['admin'], access: { level: 'super_admin' },
    responses: { 200: { description: 'The config', schema: SystemConfigSchema }, ...superAdminRefusal },
    handler: () => config.get(),
  })

  ctx.route({
    method: 'PATCH', path: '/api/admin/config', summary: 'Change the runtime system config (only the fields passed)', tags: ['admin'],
    description: 'Effective in every process at once. Switching kb_authz_enabled on makes the caller owner of every KB that has no owner; a frozen one among them becomes active.',
    body: PatchSystemConfigBody, access: { level: 'super_admin' },
    responses: { 200: { description: 'The config', schema: SystemConfigSchema }, ...superAdminRefusal, 422: { description: 'Validation error', schema: ValidationErrorResponse } },
    handler: (req) => config.patch(req.body, req.caller!),
  })
}
