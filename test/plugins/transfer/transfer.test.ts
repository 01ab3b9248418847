import { describe } from 'node:test'
import { skipUnless } from '../../helpers/services.ts'
import { transferSuite } from './transfer.suite.ts'

describe('KB export and import on the embedded default', () => transferSuite('embedded', {}))

describe('KB export and import on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  transferSuite('services', { services: true }))
