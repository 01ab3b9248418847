// Which failures of a document's run are the infrastructure's and pass: a store that is unreachable or
// restarting (S3 stopped, PostgreSQL restarting, Redis down). The document is not at fault,
// so its run is retried later (pipeline.ts) instead of failing it; only a fault that outlasts every retry fails it,
// with a reason that says to reindex it once the store is back.
import { AppError } from '../../kernel/errors.ts'

/** Network errors (Node, undici), postgres.js connection states, and SQLSTATEs of a server going away or full. */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ECONNABORTED',
  'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_CLOSED',
  'CONNECT_TIMEOUT', 'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED',
  '57P01', '57P02', '57P03', '53300', '08000', '08001', '08003', '08006',
])

/** Whether err (or an error it wraps) says a store or provider is unreachable or unavailable for now. */
export function isTransient(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof AppError && e.status === 503) return true
    const code = (e as { code?: unknown }).code
    if (typeof code === 'string' && CONNECTION_CODES.has(code)) return true
    // The AWS SDK: a server error or throttling answer of the object store.
    const http = (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode
    if (typeof http === 'number' && (http >= 500 || http === 429)) return true
    if (e instanceof AggregateError && e.errors.some(isTransient)) return true
  }
  return false
}

/** Retries of a run that met a transient failure: the delay before retry n (1-based), and how many there are. */
export const TRANSIENT_RETRIES = 10
export const retryDelayMs = (n: number): number => Math.min(60_000, 1000 * 2 ** (n - 1))
