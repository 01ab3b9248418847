import { describe } from 'node:test'
import { searchFilterSuite } from './search-filter.suite.ts'
import { skipUnless } from '../helpers/services.ts'

describe('search filters on the embedded default', () => searchFilterSuite('embedded', {}))

describe('search filters on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  searchFilterSuite('services', { services: true }))
