import { describe } from 'node:test'
import { docsStopSuite } from './docs-stop.suite.ts'
import { skipUnless } from '../helpers/services.ts'

describe('stopping a running document on the embedded default', () => docsStopSuite('embedded', {}))

describe('stopping a running document on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  docsStopSuite('services', { services: true }))
