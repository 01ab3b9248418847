import { describe } from 'node:test'
import { hardeningSuite } from './hardening.suite.ts'
import { skipUnless } from '../../helpers/services.ts'

describe('connector hardening on the embedded default', () => hardeningSuite('embedded', {}))

// The KB delete / sync start race needs row locks seen from another connection: PostgreSQL only (the embedded
// store runs one transaction at a time, so a start cannot slip into a delete there).
describe('connector hardening on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  hardeningSuite('services', { services: true, pgLocks: true }))
