// Multipart bodies streamed through busboy: each file reaches the caller as a stream while it arrives,
// so an upload is never buffered whole and a file over the cap is refused as soon as it passes it.
import type { Readable } from 'node:stream'
import busboy from 'busboy'
import { AppError, unprocessable } from '../errors.ts'
import type { Request } from '../plugin.ts'

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
}

/** Returns the non-file fields. Rejects with 422 when the body is not multipart/form-data. */
export function readMultipart(req: Request<any, any, any>, opts: MultipartOptions): Promise<Record<string, string>> {
  const type = req.headers['content-type'] ?? ''
  if (!type.toLowerCase().startsWith('multipart/form-data')) {
    return Promise.reject(unprocessable(`Expected a multipart/form-data body, got '${type || 'no content type'}'`, 'NOT_MULTIPART'))
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
      reject(unprocessable(`Malformed multipart body: ${(err as Error).message}`, 'BAD_MULTIPART'))
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

    parser.on('field', (name, value) => {
      fields[name] = value
    })
    parser.on('file', (field, stream, info) => {
      // The reader sees a stream error through its own read; this listener keeps an unread one from crashing.
      stream.on('error', () => {})
      stream.on('limit', () => {
        stream.destroy(new AppError('FILE_TOO_LARGE', 422, `File '${info.filename}' is larger than the ${formatBytes(opts.maxFileBytes)} limit`))
      })
      chain = chain.then(async () => {
        if (failed) {
          stream.resume()
          return
        }
        await opts.onFile({ field, filename: info.filename ?? '', mimeType: info.mimeType, stream })
        // Whatever the handler did not read is drained so the next part can arrive.
        if (!stream.readableEnded && !stream.destroyed) stream.resume()
      })
      chain.catch(fail)
    })
    parser.on('filesLimit', () => fail(unprocessable(`Too many files: at most ${opts.maxFiles}`, 'TOO_MANY_FILES')))
    parser.on('error', (err: Error) => fail(unprocessable(`Malformed multipart body: ${err.message}`, 'BAD_MULTIPART')))
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
