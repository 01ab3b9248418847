import { describe } from 'node:test'
import { searchHangulSuite } from './search-hangul.suite.ts'
import { skipUnless } from '../helpers/services.ts'

describe('Korean keyword search on the embedded default', () => searchHangulSuite('embedded', {}))

describe('Korean keyword search on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  searchHangulSuite('services', { services: true }))
