// An in-process S3 server (s3rver) on an ephemeral 127.0.0.1 port with one bucket, for the S3 driver's
// tests. Node must run with --openssl-legacy-provider: s3rver's list continuation tokens use DES.
import { createHash, randomBytes } from 'node:crypto'
import { createWriteStream, promises as fs } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { Transform, type Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'

interface S3rverInstance {
  run(): Promise<AddressInfo>
  close(): Promise<void>
}
type S3rverClass = new (options: Record<string, unknown>) => S3rverInstance

export interface S3rverHandle {
  /** `http://127.0.0.1:<port>` */
  endpoint: string
  accessKey: string
  secretKey: string
  bucket: string
  region: string
  close(): Promise<void>
}

/** s3rver's built-in account. */
const ACCESS_KEY = 'S3RVER'
const SECRET_KEY = 'S3RVER'

interface StoredObject {
  bucket: string
  key: string
  content: Buffer | Readable
  metadata: Record<string, string>
}
interface FilesystemStore {
  getResourcePath(bucket: string, key: string, resource: string): string
  putMetadata(bucket: string, key: string, metadata: Record<string, string>, md5: string): Promise<void>
  putObject(object: StoredObject): Promise<{ size: number; md5: string }>
}

/**
 * S3 stores an object whole or not at all. s3rver writes the body straight into the object's file, so a
 * request cut off half-way leaves a partial object that lists (and its promise never settles). Its store
 * is patched to write a temporary file (not listed: it lacks the object suffix) renamed into place only
 * when the body arrived whole, as S3 itself behaves.
 */
export function makePutsAtomic(require: NodeRequire): void {
  const store = (require('s3rver/lib/stores/filesystem') as { prototype: FilesystemStore }).prototype
  if ((store as { quarryAtomic?: boolean }).quarryAtomic) return
  Object.assign(store, {
    quarryAtomic: true,
    async putObject(this: FilesystemStore, object: StoredObject) {
      const objectPath = this.getResourcePath(object.bucket, object.key, 'object')
      await fs.mkdir(dirname(objectPath), { recursive: true })
      const temp = `${objectPath}.${randomBytes(6).toString('hex')}.upload`
      const md5 = createHash('md5')
      let size = 0
      try {
        if (Buffer.isBuffer(object.content)) {
          md5.update(object.content)
          size = object.content.length
          await fs.writeFile(temp, object.content)
        } else {
          const meter = new Transform({
            transform(chunk: Buffer, _enc, done) {
              md5.update(chunk)
              size += chunk.length
              done(null, chunk)
            },
          })
          await pipeline(object.content, meter, createWriteStream(temp))
        }
        await fs.rename(temp, objectPath)
      } catch (err) {
        await fs.rm(temp, { force: true })
        throw err
      }
      const digest = md5.digest('hex')
      await this.putMetadata(object.bucket, object.key, object.metadata, digest)
      return { size, md5: digest }
    },
  })
}

export async function startS3rver(opts: { bucket?: string } = {}): Promise<S3rverHandle> {
  // s3rver is CommonJS without type declarations.
  const require = createRequire(import.meta.url)
  makePutsAtomic(require)
  const S3rver = require('s3rver') as S3rverClass
  const directory = await fs.mkdtemp(join(tmpdir(), 'quarry-s3rver-'))
  const bucket = opts.bucket ?? `quarry-test-${randomBytes(4).toString('hex')}`
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory,
    configureBuckets: [{ name: bucket, configs: [] }],
  })
  let address: AddressInfo
  try {
    address = await server.run()
  } catch (err) {
    await fs.rm(directory, { recursive: true, force: true })
    throw err
  }
  let closed = false
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    accessKey: ACCESS_KEY,
    secretKey: SECRET_KEY,
    bucket,
    region: 'us-east-1',
    async close() {
      if (closed) return
      closed = true
      await server.close()
      await fs.rm(directory, { recursive: true, force: true })
    },
  }
}
