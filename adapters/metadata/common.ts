// What both metadata drivers share: value parsing (so both return the same JS types), error mapping.
import { serviceUnavailable } from '../../kernel/errors.ts'

export { OID, parseInt8, parseTimestamp } from './codecs.mjs'

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
