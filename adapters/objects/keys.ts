// Object keys, checked the same way by every driver so that moving between local files and S3 never
// changes which keys are accepted.
import { AppError } from '../../kernel/errors.ts'

/** S3's limit on a key, in UTF-8 bytes. */
const MAX_KEY_BYTES = 1024
/** Most file systems stop at 255 bytes a name; the local driver adds a suffix to sidecar names. */
export const MAX_SEGMENT_BYTES = 240

const badKey = (key: string, why: string) =>
  new AppError('OBJECT_KEY_INVALID', 422, `Invalid object key ${JSON.stringify(key)}: ${why}`)

/** Throws AppError OBJECT_KEY_INVALID (422) unless key is a relative `/`-separated path without `.`, `..` or empty parts. */
export function checkKey(key: string): string {
  if (typeof key !== 'string' || key.length === 0) throw badKey(String(key), 'it is empty')
  checkPath(key, 'key')
  if (key.endsWith('/')) throw badKey(key, 'it ends with "/"')
  return key
}

/** A prefix follows the key rules except that it may end with `/` and may be empty (every key). */
export function checkPrefix(prefix: string): string {
  if (typeof prefix !== 'string') throw badKey(String(prefix), 'a prefix must be a string')
  if (prefix.length === 0) return prefix
  checkPath(prefix.endsWith('/') ? prefix.slice(0, -1) : prefix, 'prefix')
  return prefix
}

function checkPath(path: string, what: string): void {
  if (path.includes('\0')) throw badKey(path, `a ${what} may not contain NUL`)
  if (path.startsWith('/')) throw badKey(path, `a ${what} must be relative (no leading "/")`)
  if (Buffer.byteLength(path) > MAX_KEY_BYTES) throw badKey(path, `a ${what} is at most ${MAX_KEY_BYTES} bytes`)
  for (const segment of path.split('/')) {
    if (segment === '') throw badKey(path, `a ${what} may not contain an empty segment ("//")`)
    if (segment === '.' || segment === '..') throw badKey(path, `a ${what} may not contain "." or ".." segments`)
    if (Buffer.byteLength(segment) > MAX_SEGMENT_BYTES) throw badKey(path, `each segment is at most ${MAX_SEGMENT_BYTES} bytes`)
  }
}

/** Compares like S3 lists keys: by UTF-8 bytes. */
export const compareKeys = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b))

const TYPES: Record<string, string> = {
  pdf: 'application/pdf',
  txt: 'text/plain; charset=utf-8',
  md: 'text/markdown; charset=utf-8',
  html: 'text/html; charset=utf-8',
  htm: 'text/html; charset=utf-8',
  json: 'application/json',
  csv: 'text/csv; charset=utf-8',
  xml: 'application/xml',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  pptx: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
  hwp: 'application/x-hwp',
  hwpx: 'application/hwp+zip',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  zip: 'application/zip',
}

/** A content type guessed from the key's extension, for objects stored without one. */
export function contentTypeFor(key: string): string | undefined {
  const dot = key.lastIndexOf('.')
  if (dot < 0 || dot < key.lastIndexOf('/')) return undefined
  return TYPES[key.slice(dot + 1).toLowerCase()]
}

/** Thrown when a body's length differs from the size announced with it. */
export const sizeMismatch = (key: string, expected: number, actual: string) =>
  new AppError('OBJECT_SIZE_MISMATCH', 422, `Object ${JSON.stringify(key)}: announced size ${expected} bytes but the body had ${actual}`)
