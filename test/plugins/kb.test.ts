import { describe } from 'node:test'
import { kbApiSuite } from './kb.suite.ts'
import { skipUnless } from '../helpers/services.ts'

describe('knowledge-base API on the embedded default', () => kbApiSuite('embedded', {}))

describe('knowledge-base API on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  kbApiSuite('services', { services: true }))
