import { describe } from 'node:test'
import { cliIngestSuite } from './ingest.suite.ts'
import { skipUnless } from '../helpers/services.ts'

describe('quarry ingest against the embedded default', () => cliIngestSuite('embedded', {}))

describe('quarry ingest against PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  cliIngestSuite('services', { services: true }))
