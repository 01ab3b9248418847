// Spec 4.2 (knowledge bases) and 4.3 (per-KB settings overrides).
import { kbSettingsSchema } from '../../kernel/config/kb-settings.ts'
import { reply, type PluginContext } from '../../kernel/plugin.ts'
import { ErrorResponse, KbIdParam, ValidationErrorResponse } from '../../kernel/schemas.ts'
import {
  CreateKbBody, EffectiveSettings, KbDeletedResponse, KbListQuery, KbStatusResponse, KnowledgeBase, KnowledgeBaseList, OverridesBody,
  OverridesResponse, OverridesWriteResponse, PatchKbBody, SettingsSchemaResponse,
} from './schemas.ts'
import type { AuthzService, Caller, Role } from '../authz/types.ts'
import type { KbService, KnowledgeBase as KbRecord } from './service.ts'

const notFound = { 404: { description: 'Knowledge base not found', schema: ErrorResponse } }
const invalid = { 422: { description: 'Validation error', schema: ValidationErrorResponse } }
const kbAccess = (level: 'viewer' | 'admin' | 'owner') => ({ level, kb: { from: 'params' as const, name: 'kb_id' } })

export function registerKbRoutes(ctx: PluginContext, kbs: KbService, authz: AuthzService | null): void {
  const tags = ['knowledge-bases']

  /**
   * [ENT] GET /api/kb: the KBs the caller holds a role on plus the public ones (a super-admin: all), each with
   * my_role, when kb_authz_enabled is true; every KB and no my_role otherwise (and in the base edition).
   */
  const scoped = async (all: KbRecord[], caller: Caller | null): Promise<(KbRecord & { my_role?: Role | null })[]> => {
    if (!authz || !caller || !(await authz.config.get()).kb_authz_enabled) return all
    const { access } = authz
    const readable = new Set(await access.readable(caller, all.map((kb) => kb.kb_id)))
    return Promise.all(all.filter((kb) => readable.has(kb.kb_id)).map(async (kb) => ({ ...kb, my_role: await access.myRole(caller, kb.kb_id) })))
  }

  ctx.route({
    method: 'GET', path: '/api/kb', summary: 'List knowledge bases (by kb_id ascending unless sort_by/sort_order say otherwise)', tags,
    query: KbListQuery,
    responses: { 200: { description: 'Knowledge bases', schema: KnowledgeBaseList }, ...invalid },
    handler: async (req) => ({
      knowledge_bases: await scoped(await kbs.list({ sortBy: req.query.sort_by, sortOrder: req.query.sort_order }), req.caller),
    }),
  })

  ctx.route({
    method: 'POST', path: '/api/kb', summary: 'Create a knowledge base', tags, body: CreateKbBody, status: 201,
    description: '[ENT] Needs one of authz.kb_creator_roles and a KB count below the cap (super-admins bypass both); the creator becomes owner.',
    responses: {
      201: { description: 'Created', schema: KbStatusResponse }, 403: { description: '[ENT] Not a KB creator, or at the KB cap', schema: ErrorResponse },
      409: { description: 'kb_id exists', schema: ErrorResponse }, ...invalid,
    },
    handler: async (req) => {
      const caller = req.caller
      const kb = authz && caller
        ? await authz.createKb(caller, (db) => kbs.create(req.body, caller.user_id, db))
        : await kbs.create(req.body, null)
      return { kb_id: kb.kb_id, status: 'created' }
    },
  })

  ctx.route({
    method: 'GET', path: '/api/kb/{kb_id}', summary: 'Get a knowledge base', tags, params: KbIdParam, access: kbAccess('viewer'),
    responses: { 200: { description: 'The knowledge base', schema: KnowledgeBase }, ...notFound },
    handler: async (req) => {
      const kb = await kbs.get(req.params.kb_id)
      if (!authz || !req.caller || !(await authz.config.get()).kb_authz_enabled) return kb
      return { ...kb, my_role: await authz.access.myRole(req.caller, kb.kb_id) }
    },
  })

  ctx.route({
    method: 'PATCH', path: '/api/kb/{kb_id}', summary: 'Update a knowledge base (only the fields passed; tags replaced whole)', tags,
    params: KbIdParam, body: PatchKbBody, access: kbAccess('admin'),
    responses: { 200: { description: 'Updated', schema: KbStatusResponse }, ...notFound, ...invalid },
    handler: async (req) => {
      await kbs.patch(req.params.kb_id, req.body)
      // Visibility decides who reads it: every process must see the change on its next request.
      if (req.body.visibility !== undefined) await authz?.roles.invalidateKb(req.params.kb_id)
      return { kb_id: req.params.kb_id, status: 'updated' }
    },
  })

  ctx.route({
    method: 'DELETE', path: '/api/kb/{kb_id}', summary: 'Delete a knowledge base with its vectors, files and documents', tags,
    params: KbIdParam, access: kbAccess('owner'),
    responses: { 200: { description: 'Deleted', schema: KbDeletedResponse }, ...notFound },
    handler: async (req) => {
      const { s3_objects_deleted } = await kbs.delete(req.params.kb_id)
      // Its members' cached roles go with it, so a KB re-created under the same id starts with none.
      await authz?.roles.invalidateKb(req.params.kb_id)
      return { kb_id: req.params.kb_id, status: 'deleted', s3_objects_deleted }
    },
  })

  const settingsTags = ['kb-settings']

  ctx.route({
    method: 'GET', path: '/api/kb/{kb_id}/settings', summary: 'Effective settings of a knowledge base', tags: settingsTags,
    params: KbIdParam, access: kbAccess('viewer'),
    responses: { 200: { description: 'Global settings merged with the KB overrides', schema: EffectiveSettings }, ...notFound },
    handler: (req) => kbs.settingsView(req.params.kb_id),
  })

  ctx.route({
    method: 'GET', path: '/api/kb/{kb_id}/settings/schema', summary: 'Schema of every per-KB setting', tags: settingsTags,
    params: KbIdParam, access: kbAccess('viewer'),
    responses: { 200: { description: 'Dot-key schema', schema: SettingsSchemaResponse }, ...notFound },
    handler: async (req) => {
      await kbs.get(req.params.kb_id)
      return { schema: kbSettingsSchema() }
    },
  })

  ctx.route({
    method: 'GET', path: '/api/kb/{kb_id}/settings/overrides', summary: 'Stored overrides of a knowledge base', tags: settingsTags,
    params: KbIdParam, access: kbAccess('viewer'),
    responses: { 200: { description: 'Overrides', schema: OverridesResponse }, ...notFound },
    handler: async (req) => ({ overrides: await kbs.getOverrides(req.params.kb_id) }),
  })

  ctx.route({
    method: 'PUT', path: '/api/kb/{kb_id}/settings/overrides', summary: 'Replace all overrides (absent keys reset to global)', tags: settingsTags,
    params: KbIdParam, body: OverridesBody, access: kbAccess('owner'),
    responses: { 200: { description: 'Final overrides', schema: OverridesWriteResponse }, ...notFound, ...invalid },
    handler: async (req) => ({ kb_id: req.params.kb_id, overrides: await kbs.replaceOverrides(req.params.kb_id, req.body.overrides) }),
  })

  ctx.route({
    method: 'PATCH', path: '/api/kb/{kb_id}/settings/overrides', summary: 'Upsert overrides (null clears a key)', tags: settingsTags,
    params: KbIdParam, body: OverridesBody, access: kbAccess('owner'),
    responses: { 200: { description: 'Final overrides', schema: OverridesWriteResponse }, ...notFound, ...invalid },
    handler: async (req) => ({ kb_id: req.params.kb_id, overrides: await kbs.patchOverrides(req.params.kb_id, req.body.overrides) }),
  })

  ctx.route({
    method: 'DELETE', path: '/api/kb/{kb_id}/settings/overrides', summary: 'Clear all overrides', tags: settingsTags,
    params: KbIdParam, access: kbAccess('owner'),
    responses: { 200: { description: 'Cleared', schema: KbStatusResponse }, ...notFound },
    handler: async (req) => {
      await kbs.clearOverrides(req.params.kb_id)
      return reply(200, { kb_id: req.params.kb_id, status: 'overrides_cleared' })
    },
  })
}
