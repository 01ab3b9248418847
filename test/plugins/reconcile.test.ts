import { describe } from 'node:test'
import { skipUnless } from '../helpers/services.ts'
import { reconcileSuite } from './reconcile.suite.ts'

describe('search against document statuses on the embedded default', () => reconcileSuite('embedded', {}))

describe('search against document statuses on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  reconcileSuite('services', { services: true }))
