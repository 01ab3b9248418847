import { describe } from 'node:test'
import { dedupQualitySuite } from './dedup-quality.suite.ts'
import { skipUnless } from '../helpers/services.ts'

describe('near-duplicate detection on the embedded default', () => dedupQualitySuite('embedded', {}))

describe('near-duplicate detection on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  dedupQualitySuite('services', { services: true }))
