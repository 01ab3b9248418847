import { describe } from 'node:test'
import { baseEditionNoCap, docsCapSuite } from './docs-cap.suite.ts'
import { skipUnless } from '../helpers/services.ts'

describe('document cap on the embedded default', () => {
  docsCapSuite('embedded', {})
  baseEditionNoCap('embedded', {})
})

describe('document cap on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () => {
  docsCapSuite('services', { services: true })
  baseEditionNoCap('services', { services: true })
})
