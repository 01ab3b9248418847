// What both metadata drivers share: value parsing (so both return the same JS types), error mapping.
import { serviceUnavailable } from '../../kernel/errors.ts'

/** PostgreSQL text output of timestamptz ('2026-01-02 03:04:05.678+00') to ISO 8601. */
export function parseTimestamp(text: string): string {
  const iso = text.replace(' ', 'T').replace(/([+-]\d\d)$/, '$1:00')
  const d = new Date(iso)
  return Number.isNaN(d.getTime()) ? text : d.toISOString()
}

/** int8 as a JS number: counts and byte sizes stay far below 2^53. */
export const parseInt8 = (text: string): number => Number(text)

export const OID = { INT8: 20, TIMESTAMP: 1114, TIMESTAMPTZ: 1184 } as const

/** SQLSTATE of a driver error, if any. */
export const sqlState = (err: unknown): string | undefined => (err as { code?: unknown })?.code as string | undefined

export const isUniqueViolation = (err: unknown): boolean => sqlState(err) === '23505'
export const isForeignKeyViolation = (err: unknown): boolean => sqlState(err) === '23503'

const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH', 'CONNECT_TIMEOUT', 'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', '57P01', '57P03', '53300'])

/** Connection-level failures become 503; SQL errors (constraint violations...) pass through for the caller. */
export function mapSqlError(err: unknown, engine: string): unknown {
  const code = sqlState(err)
  if (code && CONNECTION_CODES.has(code)) return serviceUnavailable(`Database unavailable (${engine}): ${(err as Error).message}`, err)
  return err
}
