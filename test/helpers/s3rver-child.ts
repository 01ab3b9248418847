// s3rver as a process of its own (test/helpers/servers.ts startOwnedS3), so a test can stop it and start it again on
// the same port and folder: `node --openssl-legacy-provider --import tsx s3rver-child.ts <port> <folder> <bucket>`.
import { createRequire } from 'node:module'
import { makePutsAtomic } from './s3rver.ts'

const [port, directory, bucket] = process.argv.slice(2)
const require = createRequire(import.meta.url)
makePutsAtomic(require)
const S3rver = require('s3rver') as new (options: Record<string, unknown>) => { run(): Promise<unknown> }
await new S3rver({ address: '127.0.0.1', port: Number(port), silent: true, directory, configureBuckets: [{ name: bucket, configs: [] }] }).run()
process.stdout.write('ready\n')
