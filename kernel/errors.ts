// One error class with a stable code, an HTTP status and a message a user can act on.
// Only the kernel turns errors into responses (kernel/http/respond.ts).

export interface ValidationIssue {
  loc: (string | number)[]
  msg: string
  type: string
}

/**
 * Cuts a user-supplied value to at most `max` characters before it is echoed in an error text, marking the
 * cut with its full length, so that a 10,000-character id does not come back whole. A surrogate pair is
 * never split (the cut would leave a lone surrogate that JSON encoders and PostgreSQL refuse).
 */
export function clip(value: string, max = 200): string {
  if (value.length <= max) return value
  let end = Math.max(0, max)
  const last = value.charCodeAt(end - 1)
  if (last >= 0xd800 && last <= 0xdbff) end -= 1
  return `${value.slice(0, end)}…[${value.length} chars]`
}

export class AppError extends Error {
  readonly code: string
  readonly status: number
  /** Extra fields merged into the response body next to `detail` (a batch's `results`). */
  readonly extra?: Record<string, unknown>
  readonly headers?: Record<string, string>

  constructor(code: string, status: number, message: string, opts: { cause?: unknown; extra?: Record<string, unknown>; headers?: Record<string, string> } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause })
    this.name = 'AppError'
    this.code = code
    this.status = status
    this.extra = opts.extra
    this.headers = opts.headers
  }
}

/** 422 with the list body `{detail: [{loc, msg, type}]}`. */
export class ValidationError extends AppError {
  readonly issues: ValidationIssue[]
  constructor(issues: ValidationIssue[]) {
    super('VALIDATION', 422, issues.map((i) => `${i.loc.join('.')}: ${i.msg}`).join('; '))
    this.issues = issues
  }
}

export const notFound = (what: string, code = 'NOT_FOUND') => new AppError(code, 404, what)
export const conflict = (message: string, code = 'CONFLICT') => new AppError(code, 409, message)
export const unprocessable = (message: string, code = 'UNPROCESSABLE') => new AppError(code, 422, message)
export const forbidden = (message: string, code = 'FORBIDDEN') => new AppError(code, 403, message)
/** Object storage failed: 502. */
export const storageFailure = (message: string, cause?: unknown) => new AppError('STORAGE_UNAVAILABLE', 502, message, { cause })
/** Queue or database failed: 503. */
export const serviceUnavailable = (message: string, cause?: unknown) => new AppError('SERVICE_UNAVAILABLE', 503, message, { cause })

export const invalid = (loc: (string | number)[], msg: string, type = 'value_error') => new ValidationError([{ loc, msg, type }])
