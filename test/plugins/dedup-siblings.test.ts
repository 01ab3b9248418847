import { describe } from 'node:test'
import { dedupSiblingsSuite } from './dedup-siblings.suite.ts'
import { skipUnless } from '../helpers/services.ts'

describe('dedup siblings, overlaps and restore on the embedded default', () => dedupSiblingsSuite('embedded', {}))

describe('dedup siblings, overlaps and restore on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  dedupSiblingsSuite('services', { services: true }))
