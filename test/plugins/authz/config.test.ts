// The runtime system config and /api/me on both driver sets (config.suite.ts).
import { describe } from 'node:test'
import { skipUnless } from '../../helpers/services.ts'
import { configSuite } from './config.suite.ts'

describe('authz system config on the embedded default', () => configSuite('embedded', {}))

describe('authz system config on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  configSuite('services', { services: true }))
