// OpenAPI 3.1 from the registered routes: the same TypeBox schemas that validate requests describe them.
import type { TSchema } from '@sinclair/typebox'
import type { RouteInfo } from './plugin.ts'
import { ErrorResponse, ValidationErrorResponse } from './schemas.ts'

/** TypeBox schemas are JSON Schema; a JSON round trip drops its symbol keys. Our custom keywords stay as x- extensions. */
function clean(schema: TSchema): Record<string, unknown> {
  return JSON.parse(JSON.stringify(schema, (key, value) => {
    if (key === 'errorMessage' || key === '$id') return undefined
    if (key === 'overridable' || key === 'env' || key === 'secret' || key === 'type_name') return undefined
    return value
  }))
}

function parameters(schema: TSchema | undefined, where: 'path' | 'query'): unknown[] {
  if (!schema) return []
  const s = schema as { properties?: Record<string, TSchema>; required?: string[] }
  return Object.entries(s.properties ?? {}).map(([name, prop]) => ({
    name,
    in: where,
    required: where === 'path' || (s.required ?? []).includes(name),
    description: (prop as { description?: string }).description,
    schema: clean(prop),
  }))
}

export function buildOpenApi(routes: readonly RouteInfo[], info: { title: string; version: string; description: string }): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {}
  for (const r of routes) {
    if (r.hidden) continue
    const responses: Record<string, unknown> = {}
    for (const [status, spec] of Object.entries(r.responses)) {
      responses[status] = {
        description: spec.description,
        ...(spec.schema ? { content: { [spec.contentType ?? 'application/json']: { schema: clean(spec.schema) } } } : {}),
      }
    }
    if (!responses[String(r.status)]) responses[String(r.status)] = { description: 'Success' }
    if ((r.params || r.query || r.body) && !responses['422']) {
      responses['422'] = { description: 'Validation error', content: { 'application/json': { schema: { $ref: '#/components/schemas/ValidationError' } } } }
    }
    responses['500'] ??= { description: 'Unexpected error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } }

    const op: Record<string, unknown> = {
      operationId: r.operationId,
      summary: r.summary,
      ...(r.description ? { description: r.description } : {}),
      tags: r.tags,
      parameters: [...parameters(r.params, 'path'), ...parameters(r.query, 'query')],
      responses,
    }
    if (r.bodyKind === 'json' && r.body) {
      op.requestBody = { required: true, content: { 'application/json': { schema: clean(r.body) } } }
    } else if (r.bodyKind === 'multipart') {
      op.requestBody = { required: true, content: { 'multipart/form-data': { schema: r.body ? clean(r.body) : { type: 'object' } } } }
    }
    if (r.access.level !== 'public') op.security = [{ bearer: [] }, {}]
    ;(paths[r.path] ??= {})[r.method.toLowerCase()] = op
  }
  return {
    openapi: '3.1.0',
    info,
    paths,
    components: {
      schemas: { Error: clean(ErrorResponse), ValidationError: clean(ValidationErrorResponse) },
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'Access-controlled edition only.' } },
    },
  }
}
