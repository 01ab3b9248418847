import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { describe, it } from 'node:test'
import { startAuthzFixture } from '../../helpers/authz-fixture.ts'
import { skipUnless } from '../../helpers/services.ts'
import { expect429, rateLimitSuite, RATE_LIMIT_SETTINGS } from './rate-limit.suite.ts'

describe('rate limiting on the embedded default (in-process counters)', () => rateLimitSuite('embedded', {}))

describe('rate limiting on PostgreSQL + Redis + S3 (Redis counters)', { skip: skipUnless('postgres') || skipUnless('redis') }, () => {
  rateLimitSuite('services', { services: true })

  it('services: two processes on the same Redis count one user together', async (t) => {
    const redis = { key_prefix: `qt-${randomBytes(4).toString('hex')}` }
    const settings = { rate_limit: RATE_LIMIT_SETTINGS, redis }
    const a = await startAuthzFixture(t, { services: true, authzEnabled: false, settings })
    const b = await startAuthzFixture(t, { services: true, authzEnabled: false, settings })
    assert.equal((await a.asUser('rl-shared', '/api/kb')).status, 200)
    assert.equal((await b.asUser('rl-shared', '/api/kb')).status, 200)
    assert.equal((await a.asUser('rl-shared', '/api/kb')).status, 200)
    assert.equal((await b.asUser('rl-shared', '/api/kb')).status, 200)
    await expect429(await a.asUser('rl-shared', '/api/kb'), 'default', 60)
    await expect429(await b.asUser('rl-shared', '/api/kb'), 'default', 60)
  })
})
