// Multipart bodies streamed through busboy: each file reaches the caller as a stream while it arrives,
// so an upload is never buffered whole and a file over the cap is refused as soon as it passes it.
import { PassThrough, type Readable } from 'node:stream'
import busboy from 'busboy'
import { AppError, clip, unprocessable, ValidationError } from '../errors.ts'
import type { Request } from '../plugin.ts'
import { unstorable, unstorableIssue } from '../validate.ts'

export interface MultipartFile {
  field: string
  filename: string
  mimeType: string
  /** Emits an AppError 422 (code FILE_TOO_LARGE) once more than maxFileBytes have arrived. */
  stream: Readable
}

export interface MultipartOptions {
  maxFileBytes: number
  maxFiles?: number
  /** Called once per file, in order; the next file is not read until the returned promise settles. */
  onFile(file: MultipartFile): Promise<void>
  /**
   * A file part whose name cannot be stored (control characters, too long): without this option the whole form is
   * refused with that 422; with it the part is drained and reported here, in order, and the form goes on (a batch
   * reports it as one failed entry and keeps the others).
   */
  onRefusedFile?(refused: { field: string; filename: string; error: ValidationError }): void
}

/**
 * A file name becomes a document's source, title and object key: it must be storable, carry no control
 * character (it reaches listings and Content-Disposition), and fit one object-key segment (240 bytes, the
 * object stores' limit in adapters/objects/keys.ts, below most file systems' 255), which is also far below
 * PostgreSQL's limit for the unique index on (kb_id, source).
 */
export const MAX_FILENAME_BYTES = 240
const CONTROL = /[\u0000-\u001f\u007f]/

function filePartIssue(field: string, filename: string, mimeType: string): ValidationError | null {
  const partMsg = unstorable(field) ?? unstorable(mimeType)
  if (partMsg) return new ValidationError([unstorableIssue(['body', clip(field)], partMsg)])
  const loc = ['body', clip(field), 'filename']
  const msg = unstorable(filename)
  if (msg) return new ValidationError([unstorableIssue(loc, msg)])
  if (CONTROL.test(filename)) return new ValidationError([{ loc, msg: 'File name should not contain control characters', type: 'value_error' }])
  if (Buffer.byteLength(filename) > MAX_FILENAME_BYTES) {
    return new ValidationError([{ loc, msg: `File name should have at most ${MAX_FILENAME_BYTES} bytes in UTF-8, not ${Buffer.byteLength(filename)}`, type: 'string_too_long' }])
  }
  return null
}

/** Returns the non-file fields. Rejects with 422 when the body is not multipart/form-data. */
export function readMultipart(req: Request<any, any, any>, opts: MultipartOptions): Promise<Record<string, string>> {
  const type = req.headers['content-type'] ?? ''
  if (!type.toLowerCase().startsWith('multipart/form-data')) {
    return Promise.reject(unprocessable(`Expected a multipart/form-data body, got '${clip(type) || 'no content type'}'`, 'NOT_MULTIPART'))
  }
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy
    try {
      parser = busboy({
        headers: { ...req.headers, 'content-type': type },
        limits: { fileSize: opts.maxFileBytes, files: opts.maxFiles ?? Infinity, fieldSize: 1024 * 1024 },
        defParamCharset: 'utf8',
      })
    } catch (err) {
      reject(unprocessable(`Malformed multipart body: ${clip((err as Error).message)}`, 'BAD_MULTIPART'))
      return
    }
    const fields: Record<string, string> = {}
    let chain = Promise.resolve()
    let failed = false
    const source = req.stream()
    const fail = (err: unknown) => {
      if (failed) return
      failed = true
      source.unpipe(parser)
      source.resume()
      reject(err)
    }

    // busboy's types promise strings, but a part with `name=""` (or no filename, or no type) gives undefined.
    parser.on('field', (rawName: string | undefined, value: string) => {
      const name = rawName ?? ''
      const msg = unstorable(name) ?? unstorable(value)
      if (msg) fail(new ValidationError([unstorableIssue(['body', clip(name)], msg)]))
      else fields[name] = value
    })
    parser.on('file', (rawField: string | undefined, part, info) => {
      // The reader sees a stream error through its own read; this listener keeps an unread one from crashing.
      part.on('error', () => {})
      const field = rawField ?? ''
      const refused = filePartIssue(field, info.filename ?? '', info.mimeType ?? '')
      if (refused) {
        part.resume()
        const report = opts.onRefusedFile
        if (!report || unstorable(field) || unstorable(info.mimeType ?? '')) fail(refused)
        else chain = chain.then(() => report({ field, filename: info.filename ?? '', error: refused }))
        return
      }
      // The handler reads a stream of its own: busboy finishes the form only once every part's stream has
      // ended, so a part over the cap must never be destroyed, only cut off from its reader and drained.
      // (Destroying it hung a batch request with a file over the cap forever.)
      const stream = new PassThrough()
      stream.on('error', () => {})
      part.on('error', (err) => stream.destroy(err))
      part.on('limit', () => {
        stream.destroy(new AppError('FILE_TOO_LARGE', 422, `File '${clip(info.filename ?? '')}' is larger than the ${formatBytes(opts.maxFileBytes)} limit`))
      })
      part.pipe(stream)
      chain = chain.then(async () => {
        if (failed) {
          part.resume()
          return
        }
        await opts.onFile({ field, filename: info.filename ?? '', mimeType: info.mimeType ?? '', stream })
        // Whatever the handler did not read is drained so the next part can arrive (pipe lets go of a destroyed reader).
        if (stream.destroyed) part.resume()
        else if (!stream.readableEnded) stream.resume()
      })
      chain.catch(fail)
    })
    parser.on('filesLimit', () => fail(unprocessable(`Too many files: at most ${opts.maxFiles}`, 'TOO_MANY_FILES')))
    parser.on('error', (err: Error) => fail(unprocessable(`Malformed multipart body: ${clip(err.message)}`, 'BAD_MULTIPART')))
    parser.on('close', () => {
      chain.then(() => {
        if (!failed) resolve(fields)
      }, fail)
    })
    source.on('error', fail)
    source.pipe(parser)
  })
}

export function formatBytes(n: number): string {
  if (n >= 1024 * 1024 && n % (1024 * 1024) === 0) return `${n / 1024 / 1024} MB`
  if (n >= 1024 && n % 1024 === 0) return `${n / 1024} KB`
  return `${n} bytes`
}
