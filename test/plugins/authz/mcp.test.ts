// MCP under the access-controlled edition on both driver sets (mcp.suite.ts).
import { describe } from 'node:test'
import { skipUnless } from '../../helpers/services.ts'
import { mcpAuthzSuite } from './mcp.suite.ts'

describe('authz MCP tools on the embedded default', () => mcpAuthzSuite('embedded', {}))

describe('authz MCP tools on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  mcpAuthzSuite('services', { services: true }))
