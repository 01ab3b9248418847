// The route x identity x frozen matrix (matrix.suite.ts) on both driver sets.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { skipUnless } from '../../helpers/services.ts'
import { coverageGaps, ENTRIES, matrixSuite } from './matrix.suite.ts'

test('a route added without a matrix entry fails the matrix, and so does an entry left behind', () => {
  const routes = Object.keys(ENTRIES).map((k) => ({ method: k.split(' ')[0] as 'GET', path: k.split(' ')[1] }))
  assert.deepEqual(coverageGaps(routes), [])
  assert.deepEqual(coverageGaps([...routes.slice(1), { method: 'POST', path: '/api/kb/{kb_id}/new-thing' }]), [
    'route POST /api/kb/{kb_id}/new-thing has no matrix entry',
    `matrix entry ${Object.keys(ENTRIES)[0]} names no route`,
  ])
})

describe('authz matrix on the embedded default', () => matrixSuite('embedded'))

describe('authz matrix on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  matrixSuite('services', { services: true }))
