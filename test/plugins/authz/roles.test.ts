// Roles and KB rules of the access-controlled edition on both driver sets (roles.suite.ts).
import { describe } from 'node:test'
import { skipUnless } from '../../helpers/services.ts'
import { rolesSuite } from './roles.suite.ts'

describe('authz roles and KB rules on the embedded default', () => rolesSuite('embedded', {}))

describe('authz roles and KB rules on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  rolesSuite('services', { services: true }))
