import { describe } from 'node:test'
import { connectorsSuite } from './connectors.suite.ts'
import { skipUnless } from '../../helpers/services.ts'

describe('connectors on the embedded default', () => connectorsSuite('embedded', {}))

describe('connectors on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  connectorsSuite('services', { services: true }))
