import { describe } from 'node:test'
import { skipUnless } from '../helpers/services.ts'
import { badInputSuite } from './bad-input.suite.ts'

describe('bad input on the embedded default', () => badInputSuite('embedded', {}))

describe('bad input on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  badInputSuite('services', { services: true }))
