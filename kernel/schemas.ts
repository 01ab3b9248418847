// Schemas every plugin shares: error bodies and identifiers (notes.md).
import { Type } from '@sinclair/typebox'

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

/** Path parameter: any string (an id that cannot exist answers 404, not 422). */
export const KbIdParam = Type.Object({ kb_id: Type.String() })

export const Timestamp = Type.String({ format: 'date-time' })
