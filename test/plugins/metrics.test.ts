import { describe } from 'node:test'
import { metricsSuite } from './metrics.suite.ts'
import { skipUnless } from '../helpers/services.ts'

describe('metrics on the embedded default', () => metricsSuite('embedded', {}))

describe('metrics on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  metricsSuite('services', { services: true }))
