// Objects in an S3-compatible bucket (AWS, MinIO, Ceph, s3rver). The bucket must exist beforehand
// (spec 2.9): the driver never creates it, ping answers false and every call fails clearly without it.
import { createHash } from 'node:crypto'
import { createReadStream, promises as fs } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pipeline, Transform, type Readable } from 'node:stream'
import { AppError, storageFailure } from '../../kernel/errors.ts'
import type { ObjectInfo, ObjectStore } from '../ports.ts'
import { checkKey, checkPrefix, contentTypeFor, sizeMismatch } from './keys.ts'

export interface S3ObjectStoreOptions {
  /** `host:port` or a URL; without a scheme, `insecure` chooses http or https. */
  endpoint: string
  accessKey: string
  secretKey: string
  bucket: string
  /** Has no practical effect on S3-compatible servers; defaults to us-east-1. */
  region?: string
  /** true = plain HTTP. */
  insecure?: boolean
  /** Tries per request, retries included (SDK default 3). */
  maxAttempts?: number
  /** Time allowed to open a connection before the request fails. */
  connectTimeoutMs?: number
  /** Keys per list page and per DeleteObjects call (at most 1000, S3's limit). */
  pageSize?: number
  /** Bodies of unknown size up to this many bytes are buffered in memory; larger ones spool to a temp file. */
  memorySpoolBytes?: number
}

const MEMORY_SPOOL_BYTES = 8 * 1024 * 1024
const MAX_BATCH = 1000
const HEAD_CONCURRENCY = 8

const notFound = (key: string) => new AppError('OBJECT_NOT_FOUND', 404, `Object ${JSON.stringify(key)} not found`)
const unquote = (etag: string | undefined): string => (etag ?? '').replace(/^(W\/)?"|"$/g, '')

export function s3EndpointUrl(endpoint: string, insecure = false): string {
  const trimmed = endpoint.trim().replace(/\/+$/, '')
  if (!trimmed) throw new Error('S3 endpoint is empty')
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(trimmed) ? trimmed : `${insecure ? 'http' : 'https'}://${trimmed}`
}

export async function createS3ObjectStore(options: S3ObjectStoreOptions): Promise<ObjectStore> {
  if (!options?.bucket) throw new Error('createS3ObjectStore: bucket is required')
  const endpoint = s3EndpointUrl(options.endpoint, options.insecure)
  const bucket = options.bucket
  const batch = Math.max(1, Math.min(MAX_BATCH, options.pageSize ?? MAX_BATCH))
  const spoolBytes = options.memorySpoolBytes ?? MEMORY_SPOOL_BYTES
  const secrets = [options.secretKey].filter((s): s is string => typeof s === 'string' && s.length >= 4)

  const s3 = await import('@aws-sdk/client-s3')
  const client = new s3.S3Client({
    endpoint,
    region: options.region || 'us-east-1',
    forcePathStyle: true,
    credentials: options.accessKey ? { accessKeyId: options.accessKey, secretAccessKey: options.secretKey ?? '' } : undefined,
    maxAttempts: options.maxAttempts ?? 3,
    // S3-compatible servers do not all understand the aws-chunked trailing checksums newer SDKs send by default.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    requestHandler: { connectionTimeout: options.connectTimeoutMs ?? 5000, requestTimeout: 120_000 },
    // Failures reach the caller as AppErrors; the SDK's own console warnings would only repeat them.
    logger: { trace() {}, debug() {}, info() {}, warn() {}, error() {} },
  })
  // DeleteObjects requires a body checksum; older S3-compatible servers accept only Content-MD5, not the SDK's CRC32.
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const request = args.request as { headers?: Record<string, string>; body?: unknown }
      if (context.commandName === 'DeleteObjectsCommand' && request.headers && typeof request.body === 'string' && !request.headers['content-md5']) {
        request.headers['content-md5'] = createHash('md5').update(request.body).digest('base64')
      }
      return next(args)
    },
    { step: 'build', name: 'quarryDeleteObjectsContentMd5' },
  )

  const redact = (text: string) => secrets.reduce((t, s) => t.split(s).join('***'), text)

  function failure(op: string, err: unknown, key?: string): AppError {
    if (err instanceof AppError) return err
    const e = (err ?? {}) as { name?: string; message?: string; code?: string; errors?: { message?: string }[] }
    let why: string
    if (e.name === 'NoSuchBucket') why = 'the bucket does not exist (it must be created beforehand)'
    else {
      // Node reports a refused connection to a dual-stack host as an AggregateError with an empty message.
      const message = e.message || e.errors?.map((x) => x.message).join('; ') || String(err)
      why = [e.name && e.name !== 'Error' ? e.name : '', e.code ?? '', message].filter(Boolean).join(': ')
    }
    const what = key === undefined ? op : `${op} of ${JSON.stringify(key)}`
    return storageFailure(redact(`Object storage ${endpoint}: ${what} on bucket '${bucket}' failed: ${why}`), err)
  }

  const isNotFound = (err: unknown): boolean => {
    const e = err as { name?: string; $metadata?: { httpStatusCode?: number } } | null
    if (!e || e.name === 'NoSuchBucket') return false
    return e.name === 'NoSuchKey' || e.name === 'NotFound' || e.$metadata?.httpStatusCode === 404
  }

  async function putBuffer(key: string, body: Uint8Array, contentType: string | undefined): Promise<ObjectInfo> {
    const md5 = createHash('md5').update(body).digest()
    try {
      await client.send(new s3.PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentLength: body.byteLength, ContentType: contentType, ContentMD5: md5.toString('base64') }))
    } catch (err) {
      throw failure('put', err, key)
    }
    return { size: body.byteLength, etag: md5.toString('hex'), contentType }
  }

  async function putFile(key: string, file: string, size: number, md5: Buffer, contentType: string | undefined): Promise<ObjectInfo> {
    try {
      await client.send(new s3.PutObjectCommand({ Bucket: bucket, Key: key, Body: createReadStream(file), ContentLength: size, ContentType: contentType, ContentMD5: md5.toString('base64') }))
    } catch (err) {
      throw failure('put', err, key)
    }
    return { size, etag: md5.toString('hex'), contentType }
  }

  /** Streams a body of announced size straight through, hashing and counting it on the way. */
  async function putStream(key: string, body: Readable, size: number, contentType: string | undefined): Promise<ObjectInfo> {
    const hash = createHash('md5')
    let seen = 0
    let mismatch: AppError | undefined
    // The chunk that completes the announced size is held back until the body ends: were it sent at once,
    // the store would have a whole request (and keep it) before a longer body's extra bytes showed up.
    let last: Buffer | undefined
    const meter = new Transform({
      transform(chunk: Buffer, _enc, done) {
        seen += chunk.length
        if (seen > size) return done((mismatch = sizeMismatch(key, size, `more than ${size}`)))
        hash.update(chunk)
        if (seen === size) {
          last = chunk
          return done()
        }
        done(null, chunk)
      },
      flush(done) {
        if (seen !== size) return done((mismatch = sizeMismatch(key, size, String(seen))))
        done(null, last)
      },
    })
    // The SDK pipes the body without watching its errors: a failed or wrong-sized body must abort the request itself.
    const abort = new AbortController()
    pipeline(body, meter, (err) => {
      if (err) abort.abort(err)
    })
    let etag: string
    try {
      const out = await client.send(new s3.PutObjectCommand({ Bucket: bucket, Key: key, Body: meter, ContentLength: size, ContentType: contentType }), { abortSignal: abort.signal })
      etag = unquote(out.ETag)
    } catch (err) {
      if (mismatch) throw mismatch
      if (abort.signal.aborted) throw storageFailure(`Object storage ${endpoint}: put of ${JSON.stringify(key)} on bucket '${bucket}' stopped: the body failed: ${(abort.signal.reason as Error)?.message}`, abort.signal.reason)
      throw failure('put', err, key)
    }
    if (mismatch) throw mismatch
    const md5 = hash.digest('hex')
    // A plain-MD5 ETag that differs means the bytes stored are not the bytes sent.
    if (/^[0-9a-f]{32}$/.test(etag) && etag !== md5) throw storageFailure(`Object storage ${endpoint}: put of ${JSON.stringify(key)} on bucket '${bucket}' stored different bytes (ETag ${etag}, sent MD5 ${md5})`)
    return { size, etag: md5, contentType }
  }

  /** Bodies of unknown length: small ones are buffered, large ones spooled to disk, so one PutObject with a Content-MD5 suffices. */
  async function putUnknown(key: string, body: Readable, contentType: string | undefined): Promise<ObjectInfo> {
    const chunks: Buffer[] = []
    let size = 0
    const it = body[Symbol.asyncIterator]()
    for (;;) {
      const { value, done } = await it.next()
      if (done) return putBuffer(key, Buffer.concat(chunks, size), contentType)
      const chunk = typeof value === 'string' ? Buffer.from(value) : (value as Buffer)
      chunks.push(chunk)
      size += chunk.length
      if (size > spoolBytes) break
    }
    const dir = await fs.mkdtemp(join(tmpdir(), 'quarry-s3-'))
    try {
      const file = join(dir, 'body')
      const fh = await fs.open(file, 'w')
      const hash = createHash('md5')
      try {
        const write = async (buf: Buffer) => {
          hash.update(buf)
          for (let off = 0; off < buf.length; ) off += (await fh.write(buf, off, buf.length - off)).bytesWritten
        }
        for (const chunk of chunks.splice(0)) await write(chunk)
        for await (const value of { [Symbol.asyncIterator]: () => it }) {
          const chunk = typeof value === 'string' ? Buffer.from(value) : (value as Buffer)
          size += chunk.length
          await write(chunk)
        }
      } finally {
        await fh.close()
      }
      return await putFile(key, file, size, hash.digest(), contentType)
    } finally {
      await fs.rm(dir, { recursive: true, force: true })
    }
  }

  async function head(key: string): Promise<ObjectInfo | null> {
    try {
      const out = await client.send(new s3.HeadObjectCommand({ Bucket: bucket, Key: key }))
      return { size: out.ContentLength ?? 0, etag: unquote(out.ETag), contentType: out.ContentType }
    } catch (err) {
      if (isNotFound(err)) return null
      throw failure('head', err, key)
    }
  }

  /** Deletes keys known to exist; returns how many S3 reports deleted. */
  async function deleteBatch(keys: readonly string[], op: string): Promise<number> {
    if (keys.length === 0) return 0
    let out
    try {
      out = await client.send(new s3.DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys.map((Key) => ({ Key })), Quiet: true } }))
    } catch (err) {
      throw failure(op, err)
    }
    const errors = out.Errors ?? []
    if (errors.length > 0) {
      const first = errors[0]
      throw storageFailure(redact(`Object storage ${endpoint}: ${op} on bucket '${bucket}' could not delete ${errors.length} of ${keys.length} objects (first: ${JSON.stringify(first.Key)} ${first.Code}: ${first.Message})`))
    }
    return keys.length
  }

  async function* listKeys(prefix: string, op: string): AsyncGenerator<string[]> {
    let token: string | undefined
    do {
      let page
      try {
        page = await client.send(new s3.ListObjectsV2Command({ Bucket: bucket, Prefix: prefix || undefined, ContinuationToken: token, MaxKeys: batch }))
      } catch (err) {
        throw failure(op, err)
      }
      const keys = (page.Contents ?? []).map((o) => o.Key).filter((k): k is string => typeof k === 'string')
      if (keys.length > 0) yield keys
      token = page.IsTruncated ? page.NextContinuationToken : undefined
    } while (token)
  }

  return {
    name: 's3',

    async put(key, body, opts = {}) {
      checkKey(key)
      const contentType = opts.contentType ?? contentTypeFor(key)
      if (body instanceof Uint8Array) {
        if (opts.size !== undefined && opts.size !== body.byteLength) throw sizeMismatch(key, opts.size, String(body.byteLength))
        return putBuffer(key, body, contentType)
      }
      return opts.size === undefined ? putUnknown(key, body, contentType) : putStream(key, body, opts.size, contentType)
    },

    async get(key) {
      checkKey(key)
      try {
        const out = await client.send(new s3.GetObjectCommand({ Bucket: bucket, Key: key }))
        return out.Body as Readable
      } catch (err) {
        if (isNotFound(err)) throw notFound(key)
        throw failure('get', err, key)
      }
    },

    async head(key) {
      checkKey(key)
      return head(key)
    },

    async delete(keys) {
      keys.forEach(checkKey)
      // DeleteObjects reports every key as deleted, present or not; the count must say which existed.
      const unique = [...new Set(keys)]
      const existing: string[] = []
      let next = 0
      const worker = async () => {
        while (next < unique.length) {
          const key = unique[next++]
          if (await head(key)) existing.push(key)
        }
      }
      await Promise.all(Array.from({ length: Math.min(HEAD_CONCURRENCY, unique.length) }, worker))
      let count = 0
      for (let i = 0; i < existing.length; i += batch) count += await deleteBatch(existing.slice(i, i + batch), 'delete')
      return count
    },

    async deletePrefix(prefix) {
      checkPrefix(prefix)
      if (prefix === '') throw new AppError('OBJECT_KEY_INVALID', 422, 'deletePrefix needs a non-empty prefix (refusing to delete every object)')
      let count = 0
      // Continuation tokens name the last key seen, so deleting a page does not disturb the next one.
      const op = `deletePrefix ${JSON.stringify(prefix)}`
      for await (const keys of listKeys(prefix, op)) count += await deleteBatch(keys, op)
      return count
    },

    async *list(prefix) {
      checkPrefix(prefix)
      for await (const keys of listKeys(prefix, `list of prefix ${JSON.stringify(prefix)}`)) yield* keys
    },

    async ping() {
      try {
        await client.send(new s3.HeadBucketCommand({ Bucket: bucket }))
        return true
      } catch {
        return false
      }
    },

    async close() {
      client.destroy()
    },
  }
}
