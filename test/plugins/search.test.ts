import { describe } from 'node:test'
import { searchSuite } from './search.suite.ts'
import { skipUnless } from '../helpers/services.ts'

describe('search on the embedded default', () => searchSuite('embedded', {}))

describe('search on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  searchSuite('services', { services: true }))
