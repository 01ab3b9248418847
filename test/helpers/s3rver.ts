// An in-process S3 server (s3rver) on an ephemeral 127.0.0.1 port with one bucket, for the S3 driver's
// tests. Node must run with --openssl-legacy-provider: s3rver's list continuation tokens use DES.
import { randomBytes } from 'node:crypto'
import { promises as fs } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

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

export async function startS3rver(opts: { bucket?: string } = {}): Promise<S3rverHandle> {
  // s3rver is CommonJS without type declarations.
  const S3rver = createRequire(import.meta.url)('s3rver') as S3rverClass
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
