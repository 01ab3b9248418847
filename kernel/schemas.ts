// Schemas every plugin shares: error bodies and identifiers (notes.md).
import { Type } from '@sinclair/typebox'
import { clip } from './errors.ts'

export const ErrorResponse = Type.Object({ detail: Type.String() }, { $id: 'ErrorResponse', title: 'Error' })

export const ValidationErrorResponse = Type.Object({
  detail: Type.Array(Type.Object({
    loc: Type.Array(Type.Union([Type.String(), Type.Integer()])),
    msg: Type.String(),
    type: Type.String(),
  })),
}, { $id: 'ValidationErrorResponse', title: 'ValidationError' })

export const KB_ID_PATTERN = '^[a-z0-9][a-z0-9_-]{0,62}$'

export const KbId = Type.String({
  pattern: KB_ID_PATTERN,
  description: 'Lowercase letters, digits, - and _; starts with a letter or digit; at most 63 characters.',
  errorMessage: 'kb_id must be 1-63 characters of a-z, 0-9, - and _, starting with a letter or digit',
})

/** Path parameter: any string (an id that cannot exist answers 404 before the handler runs: PATH_IDS). */
export const KbIdParam = Type.Object({ kb_id: Type.String() })

export const DOC_ID_PATTERN = '^[0-9a-f]{16}$'
export const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'

export interface PathIdFormat {
  pattern: string
  code: string
  /** The resource's not-found text (notes.md, wire details), given every path parameter of the request. */
  notFound(params: Readonly<Record<string, string>>): string
}

/**
 * Identifiers with a fixed format, by path-parameter name. The kernel applies them to every route whose path
 * names one, before any hook or handler: a value that cannot match names no resource, so it answers 404 with
 * that resource's text (the value clipped), and never reaches storage (a uuid column refuses a non-UUID, text
 * refuses NUL). A route's own params schema still validates what passes.
 */
export const PATH_IDS: Readonly<Record<string, PathIdFormat>> = {
  kb_id: { pattern: KB_ID_PATTERN, code: 'KB_NOT_FOUND', notFound: (p) => `KB not found: ${clip(p.kb_id)}` },
  doc_id: { pattern: DOC_ID_PATTERN, code: 'DOC_NOT_FOUND', notFound: (p) => `Document not found: kb=${clip(p.kb_id ?? '')} doc_id=${clip(p.doc_id)}` },
  connector_id: { pattern: UUID_PATTERN, code: 'CONNECTOR_NOT_FOUND', notFound: (p) => `Connector not found: ${clip(p.connector_id)}` },
}

export const Timestamp = Type.String({ format: 'date-time' })

const PATH_ID_RES = new Map(Object.entries(PATH_IDS).map(([name, format]) => [name, new RegExp(format.pattern)]))

/**
 * Whether a value could be an id of that name (any value, for a name without a fixed format). The kernel
 * checks path parameters with it; code that takes ids elsewhere (MCP tool arguments) answers "not found" for
 * a value that fails it, before a query is sent.
 */
export const couldExist = (name: string, value: string): boolean => PATH_ID_RES.get(name)?.test(value) ?? true
