// A service closes without waiting out a queue poll interval: close() stops the consumers (the documents worker,
// the connectors' sync consumer) even when their poll is out at that moment, where its nudge finds no wait to end.
// With a poll interval of an hour, a close that waited for the next poll would outlast the test's timeout (before the
// fix, closing a service on Redis took the default interval, 5 s, every time).
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { startApp } from '../helpers/app.ts'
import { skipUnless } from '../helpers/services.ts'

const HOUR = { queue_worker: { enabled: true }, queue_poll: { poll_interval_sec: 3600 } }

function closesAtOnce(label: string, services: boolean): void {
  it(`${label}: close() returns while a poll interval of an hour has not passed`, { timeout: 120_000 }, async () => {
    for (let i = 0; i < 3; i++) {
      const cleanups: (() => unknown)[] = []
      const svc = await startApp({ after: (fn: () => unknown) => cleanups.push(fn) }, { services, settings: HOUR })
      // At once after the start, while the consumers' first poll is out (on Redis, a round trip).
      await svc.app.close()
      // Closed: the service answers no more.
      await assert.rejects(svc.request('/health'))
      for (const c of cleanups) await c()
    }
  })
}

describe('closing with a long poll interval', () => {
  closesAtOnce('embedded default', false)
  describe('PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () => closesAtOnce('services', true))
})
