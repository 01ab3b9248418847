// Spec 4.8: connector endpoints, plus the older service's sync/reset.
import { reply, type PluginContext } from '../../kernel/plugin.ts'
import { ErrorResponse, ValidationErrorResponse } from '../../kernel/schemas.ts'
import { DocList } from '../docs/schemas.ts'
import {
  AbortRequested, ConnectorDeleting, ConnectorDocsQuery, ConnectorList, ConnectorListQuery, ConnectorParams, ConnectorSchema,
  CreateConnectorBody, PatchConnectorBody, SyncReset, SyncStarted, SyncStatusResponse,
} from './schemas.ts'
import type { AuthzService } from '../authz/types.ts'
import type { ConnectorsService } from './service.ts'

const err = (description: string) => ({ description, schema: ErrorResponse })
const invalid = { 422: { description: 'Validation error', schema: ValidationErrorResponse } }
const MAX_PAGE_SIZE = 100
/** [ENT] The role spec 4.8 asks on the connector's KB (resolved by the 'connector' resolver the plugin registers). */
const onConnector = (level: 'viewer' | 'editor' | 'admin') => ({ level, kb: { from: 'params' as const, name: 'connector_id', via: 'connector' } })

export function registerConnectorRoutes(ctx: PluginContext, service: ConnectorsService, authz: AuthzService | null = null): void {
  const tags = ['connectors']
  const path = '/api/connectors/{connector_id}'

  ctx.route({
    method: 'POST', path: '/api/connectors', summary: 'Create a connector', tags, body: CreateConnectorBody, status: 201,
    access: { level: 'admin', kb: { from: 'body', name: 'kb_id' } },
    responses: {
      201: { description: 'The connector', schema: ConnectorSchema }, 404: err('Knowledge base not found'),
      409: err('A connector for this source exists in the KB'), ...invalid,
    },
    handler: async (req) => reply(201, await service.create(req.body)),
  })

  ctx.route({
    method: 'GET', path: '/api/connectors', summary: 'List connectors', tags, query: ConnectorListQuery,
    access: { level: 'authenticated' }, description: '[ENT] Only connectors of KBs the caller is a member of, and of public KBs.',
    responses: { 200: { description: 'Connectors', schema: ConnectorList }, ...invalid },
    handler: async (req) => {
      const list = await service.list({ ...req.query, sort_order: req.query.sort_order as 'asc' | 'desc' })
      if (!authz || !req.caller) return list
      const readable = new Set(await authz.access.readable(req.caller))
      return { ...list, items: list.items.filter((c) => readable.has(c.kb_id)) }
    },
  })

  ctx.route({
    method: 'GET', path, summary: 'Get a connector', tags, params: ConnectorParams, access: onConnector('viewer'),
    responses: { 200: { description: 'The connector', schema: ConnectorSchema }, 404: err('Connector not found') },
    handler: (req) => service.get(req.params.connector_id),
  })

  ctx.route({
    method: 'PATCH', path, summary: 'Update a connector (config is replaced whole; send ******** to keep a stored secret)', tags,
    params: ConnectorParams, body: PatchConnectorBody, access: onConnector('editor'),
    responses: { 200: { description: 'The connector', schema: ConnectorSchema }, 404: err('Connector not found'), 409: err('Duplicate source'), ...invalid },
    handler: (req) => service.patch(req.params.connector_id, req.body),
  })

  ctx.route({
    method: 'DELETE', path, summary: 'Delete a connector and every document it collected (in the background)', tags,
    params: ConnectorParams, status: 202, access: onConnector('admin'),
    responses: { 202: { description: 'Deleting', schema: ConnectorDeleting }, 404: err('Connector not found'), 409: err('A sync is running') },
    handler: async (req) => reply(202, await service.remove(req.params.connector_id)),
  })

  ctx.route({
    method: 'POST', path: `${path}/sync`, summary: 'Start a sync', tags, params: ConnectorParams, status: 202, access: onConnector('editor'),
    responses: { 202: { description: 'Started', schema: SyncStarted }, 404: err('Connector not found'), 409: err('Paused, or a sync started under 30 minutes ago is running') },
    handler: async (req) => reply(202, await service.sync(req.params.connector_id)),
  })

  ctx.route({
    method: 'POST', path: `${path}/sync/abort`, summary: 'Abort the running sync', tags, params: ConnectorParams, status: 202, access: onConnector('editor'),
    responses: { 202: { description: 'Abort requested', schema: AbortRequested }, 404: err('Connector not found'), 409: err('No sync is running') },
    handler: async (req) => reply(202, await service.abort(req.params.connector_id)),
  })

  ctx.route({
    method: 'POST', path: `${path}/sync/reset`, summary: 'Force the sync state to idle (older service)', tags, params: ConnectorParams,
    access: onConnector('editor'),
    responses: { 200: { description: 'Idle', schema: SyncReset }, 404: err('Connector not found') },
    handler: (req) => service.reset(req.params.connector_id),
  })

  ctx.route({
    method: 'GET', path: `${path}/sync/status`, summary: 'Sync state and document counts', tags, params: ConnectorParams, access: onConnector('viewer'),
    responses: { 200: { description: 'Sync status', schema: SyncStatusResponse }, 404: err('Connector not found') },
    handler: (req) => service.status(req.params.connector_id),
  })

  ctx.route({
    method: 'GET', path: `${path}/docs`, summary: 'Documents the connector collected', tags, params: ConnectorParams, query: ConnectorDocsQuery,
    access: onConnector('viewer'),
    responses: { 200: { description: 'A page of documents', schema: DocList }, 404: err('Connector not found'), ...invalid },
    handler: (req) => {
      const q = req.query
      return service.documents(req.params.connector_id, {
        status: q.status as never, sourceType: q.source_type, search: q.search, sortBy: q.sort_by as never, sortOrder: q.sort_order as 'asc' | 'desc',
        page: q.page, pageSize: Math.min(q.page_size, MAX_PAGE_SIZE),
      })
    },
  })
}
