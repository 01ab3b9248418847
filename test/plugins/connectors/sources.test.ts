import { describe } from 'node:test'
import { sourcesSuite } from './sources.suite.ts'
import { skipUnless } from '../../helpers/services.ts'

describe('connector sources (GitHub, Confluence) on the embedded default', () => sourcesSuite('embedded', {}))

describe('connector sources (GitHub, Confluence) on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  sourcesSuite('services', { services: true }))
