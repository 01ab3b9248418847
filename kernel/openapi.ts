// OpenAPI 3.1 from the registered routes: the same TypeBox schemas that validate requests describe them.
import { Type, type TSchema } from '@sinclair/typebox'
import type { RouteInfo } from './plugin.ts'
import { ErrorResponse, PATH_IDS, ValidationErrorResponse } from './schemas.ts'
import { boundIntegers } from './validate.ts'

/** TypeBox schemas are JSON Schema; a JSON round trip drops its symbol keys. Our custom keywords stay as x- extensions. */
function clean(schema: TSchema): Record<string, unknown> {
  return JSON.parse(JSON.stringify(schema, (key, value) => {
    if (key === 'errorMessage' || key === '$id') return undefined
    if (key === 'overridable' || key === 'env' || key === 'secret' || key === 'type_name') return undefined
    return value
  }))
}

/** What a request is validated against: the kernel bounds integers (validate.ts), so the description does too. */
const request = (schema: TSchema) => clean(boundIntegers(schema))

function parameters(schema: TSchema | undefined, where: 'path' | 'query', path = ''): unknown[] {
  const s = (schema ?? {}) as { properties?: Record<string, TSchema>; required?: string[] }
  const props = { ...s.properties }
  // Every parameter of the path template is described, declared by a schema or not (OpenAPI requires it).
  if (where === 'path') for (const [, name] of path.matchAll(/\{([^}]+)\}/g)) props[name] ??= Type.String()
  return Object.entries(props).map(([name, prop]) => ({
    name,
    in: where,
    required: where === 'path' || (s.required ?? []).includes(name),
    description: (prop as { description?: string }).description,
    // The kernel enforces the fixed id formats (a mismatch is 404), so clients see them here.
    schema: where === 'path' && PATH_IDS[name] ? { pattern: PATH_IDS[name].pattern, ...request(prop) } : request(prop),
  }))
}

/** `authRequired`: the access-controlled edition is on, so a protected operation needs the token (not optional). */
export function buildOpenApi(routes: readonly RouteInfo[], info: { title: string; version: string; description: string }, opts: { authRequired?: boolean } = {}): Record<string, unknown> {
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
      parameters: [...parameters(r.params, 'path', r.path), ...parameters(r.query, 'query')],
      responses,
    }
    if (r.bodyKind === 'json' && r.body) {
      op.requestBody = { required: true, content: { 'application/json': { schema: request(r.body) } } }
    } else if (r.bodyKind === 'multipart') {
      op.requestBody = { required: true, content: { 'multipart/form-data': { schema: r.body ? request(r.body) : { type: 'object' } } } }
    }
    if (r.access.level !== 'public') op.security = opts.authRequired ? [{ bearer: [] }] : [{ bearer: [] }, {}]
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
