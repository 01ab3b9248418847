import { describe } from 'node:test'
import { citationsSuite } from './citations.suite.ts'
import { skipUnless } from '../helpers/services.ts'

describe('page-exact citations on the embedded default', () => citationsSuite('embedded', {}))

describe('page-exact citations on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  citationsSuite('services', { services: true }))
