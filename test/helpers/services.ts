// Real-service test switches. A server-backed suite runs when its URL is set; in CI
// (QUARRY_REQUIRE_SERVICES=1) a missing URL fails the run instead of skipping the suite.
import type { TestContext } from 'node:test'

export type ServiceName = 'postgres' | 'redis'

const ENV: Record<ServiceName, string> = {
  postgres: 'TEST_POSTGRES_URL',
  redis: 'TEST_REDIS_URL',
}

export const servicesRequired = (): boolean => process.env.QUARRY_REQUIRE_SERVICES === '1'

/** The service URL, or undefined when the suite must be skipped. Throws when CI requires it. */
export function serviceUrl(name: ServiceName): string | undefined {
  const url = process.env[ENV[name]]
  if (url) return url
  if (servicesRequired()) throw new Error(`${ENV[name]} is not set but QUARRY_REQUIRE_SERVICES=1: the ${name} suite must run`)
  return undefined
}

/** For describe(..., { skip }) options: a reason string when the service is not configured. */
export function skipUnless(name: ServiceName): string | false {
  return serviceUrl(name) ? false : `${ENV[name]} not set`
}

export function skipIfMissing(t: TestContext, name: ServiceName): string | undefined {
  const url = serviceUrl(name)
  if (!url) t.skip(`${ENV[name]} not set`)
  return url
}
