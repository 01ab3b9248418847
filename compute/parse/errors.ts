// Parse failures are AppErrors (422) with a stable code; parse.task.ts returns them as { ok: false } data,
// and their message becomes the document's last_error, so each one says what is wrong with the file.
import { AppError } from '../../kernel/errors.ts'

export const ParseCode = {
  EMPTY: 'PARSE_EMPTY',
  NOT_TEXT: 'PARSE_NOT_TEXT',
  ENCODING: 'PARSE_ENCODING',
  ENCRYPTED: 'PARSE_ENCRYPTED',
  CORRUPT: 'PARSE_CORRUPT',
  TRUNCATED: 'PARSE_TRUNCATED',
  TOO_LARGE: 'PARSE_TOO_LARGE',
  NO_CONTENT: 'PARSE_NO_CONTENT',
  UNSUPPORTED: 'PARSE_UNSUPPORTED_TYPE',
  PLUGIN: 'PARSE_PLUGIN',
  FAILED: 'PARSE_FAILED',
} as const

export type ParseCode = (typeof ParseCode)[keyof typeof ParseCode]

export const parseError = (code: ParseCode, message: string, cause?: unknown) => new AppError(code, 422, message, { cause })

export const errorMessage = (err: unknown): string => (err instanceof Error ? err.message : String(err))
