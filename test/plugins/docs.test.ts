import { describe } from 'node:test'
import { docsSuite } from './docs.suite.ts'
import { skipUnless } from '../helpers/services.ts'

describe('documents on the embedded default', () => docsSuite('embedded', {}))

describe('documents on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  docsSuite('services', { services: true }))
