// docker-compose.yml and the settings it mounts, checked without a Docker engine (none runs on our build
// machines): the services, their health checks, volumes and start order, and that the settings file loads
// through the service's own settings validation with the secrets the compose file passes.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'
import { resolveSettings } from '../../kernel/config/load.ts'

const root = (p: string) => fileURLToPath(new URL(`../../${p}`, import.meta.url))
type Json = any

// Merge keys (`<<: *quarry`) are YAML 1.1, which compose reads; the yaml package needs to be told.
const compose = parse(readFileSync(root('docker-compose.yml'), 'utf8'), { merge: true }) as Json
const services = compose.services as Record<string, Json>
const SECRETS = ['POSTGRES_PASSWORD', 'REDIS_PASSWORD', 'S3_SECRET_KEY', 'QDRANT_API_KEY']

describe('docker-compose.yml', () => {
  it('has the engines, the bucket creator, the API and a separate worker', () => {
    assert.deepEqual(Object.keys(services).sort(), ['api', 'minio', 'minio-init', 'postgres', 'qdrant', 'redis', 'worker'])
    assert.deepEqual(services.api.command, ['npm', 'start'])
    assert.deepEqual(services.worker.command, ['npm', 'run', 'worker'])
    assert.deepEqual(services.api.ports, ['8000:8000'])
    assert.equal(services.worker.ports, undefined, 'the worker serves no HTTP')
    for (const name of ['postgres', 'redis', 'qdrant', 'minio']) assert.equal(services[name].ports, undefined, `${name} stays inside the compose network`)
  })

  it('gives every long-running service a health check, and the API waits for them and for the buckets', () => {
    for (const name of ['postgres', 'redis', 'qdrant', 'minio', 'api']) {
      const hc = services[name].healthcheck
      assert.ok(Array.isArray(hc?.test) && ['CMD', 'CMD-SHELL'].includes(hc.test[0]), `${name} has a health check`)
      assert.ok(hc.interval && hc.retries > 0, `${name}: interval and retries`)
    }
    assert.match(services.api.healthcheck.test.join(' '), /\/ready\b/)
    assert.deepEqual(services.worker.healthcheck, { disable: true }, 'the image check of /health cannot apply to the worker')
    for (const name of ['api', 'worker']) {
      assert.deepEqual(services[name].depends_on, {
        postgres: { condition: 'service_healthy' },
        redis: { condition: 'service_healthy' },
        qdrant: { condition: 'service_healthy' },
        'minio-init': { condition: 'service_completed_successfully' },
      })
    }
    assert.deepEqual(services['minio-init'].depends_on, { minio: { condition: 'service_healthy' } })
    assert.equal(services['minio-init'].restart, 'no')
  })

  it('keeps the engines\' data in named volumes', () => {
    const mounts: Record<string, string> = { postgres: '/var/lib/postgresql/data', redis: '/data', qdrant: '/qdrant/storage', minio: '/data' }
    for (const [name, path] of Object.entries(mounts)) {
      const volume = (services[name].volumes as string[]).map((v) => v.split(':')).find(([, p]) => p === path)
      assert.ok(volume, `${name} mounts ${path}`)
      assert.ok(volume[0] in compose.volumes, `${name}: '${volume[0]}' is a named volume`)
    }
    assert.ok(services.redis.command.join(' ').includes('--appendonly yes'), 'queued events survive a Redis restart')
  })

  it('passes the secrets from the environment only, and refuses to start without them', () => {
    for (const name of ['api', 'worker']) {
      const env = services[name].environment as Record<string, string>
      for (const s of SECRETS) assert.match(env[s], new RegExp(`^\\$\\{${s}:\\?`), `${name}: ${s} is required from the environment`)
      assert.deepEqual(services[name].volumes, ['./deploy/settings.compose.yaml:/app/settings.yaml:ro'])
    }
    for (const [name, svc] of Object.entries(services)) {
      for (const [key, value] of Object.entries((svc.environment ?? {}) as Record<string, string>)) {
        if (/PASSWORD|SECRET|API_KEY/.test(key)) assert.match(value, /^\$\{[A-Z0-9_]+:\?/, `${name}: ${key} takes its value from the environment`)
      }
    }
    const settings = parse(readFileSync(root('deploy/settings.compose.yaml'), 'utf8')) as Json
    for (const section of ['postgres', 'redis', 's3', 'qdrant']) {
      for (const key of ['password', 'secret_key', 'api_key']) assert.equal(settings[section][key], undefined, `no ${section}.${key} in the settings file`)
    }
  })

  it('creates the buckets the settings name, with the access key the settings use', () => {
    const raw = parse(readFileSync(root('deploy/settings.compose.yaml'), 'utf8')) as Json
    const script = services['minio-init'].entrypoint.join(' ') as string
    assert.match(script, new RegExp(`mc mb --ignore-existing quarry/${raw.s3.rag_bucket} quarry/${raw.s3.dagster_bucket}`))
    assert.equal(services.minio.environment.MINIO_ROOT_USER, raw.s3.access_key)
  })
})

/** `docker compose` (v2 plugin) or `docker-compose` (v1), whichever this machine has; neither needs an engine for `config`. */
function composeClient(): string[] | undefined {
  if (spawnSync('docker', ['compose', 'version']).status === 0) return ['docker', 'compose']
  if (spawnSync('docker-compose', ['version']).status === 0) return ['docker-compose']
  return undefined
}
const client = composeClient()

describe('docker compose config', { skip: client ? false : 'no docker compose client on this machine' }, () => {
  const config = (env: Record<string, string>) =>
    spawnSync(client![0], [...client!.slice(1), '-f', root('docker-compose.yml'), 'config', '-q'], { env: { PATH: process.env.PATH, ...env }, encoding: 'utf8' })

  it('accepts the file with the secrets set, and refuses it naming a missing one', () => {
    const ok = config(Object.fromEntries(SECRETS.map((s) => [s, 'test-secret'])))
    assert.equal(ok.status, 0, ok.stderr)
    const missing = config(Object.fromEntries(SECRETS.filter((s) => s !== 'REDIS_PASSWORD').map((s) => [s, 'test-secret'])))
    assert.notEqual(missing.status, 0)
    assert.match(missing.stderr, /set REDIS_PASSWORD \(see deploy\/compose\.env\.example\)/)
  })
})

describe('deploy/settings.compose.yaml', () => {
  const raw = parse(readFileSync(root('deploy/settings.compose.yaml'), 'utf8')) as Json
  const env = Object.fromEntries(SECRETS.map((s) => [s, `test-${s.toLowerCase()}`]))

  it('loads through resolveSettings without problems or warnings', () => {
    const { settings, warnings } = resolveSettings(raw, env, 'deploy/settings.compose.yaml')
    assert.deepEqual(warnings, [])
    assert.equal(settings.queue_worker.enabled, false, 'the API does not consume the queue: the worker service does')
    assert.equal(settings.postgres.password, env.POSTGRES_PASSWORD)
    assert.equal(settings.redis.password, env.REDIS_PASSWORD)
    assert.equal(settings.s3.secret_key, env.S3_SECRET_KEY)
    assert.equal(settings.qdrant.api_key, env.QDRANT_API_KEY)
  })

  it('points every engine at its compose service', () => {
    const { settings } = resolveSettings(raw, env)
    assert.equal(settings.postgres.host, 'postgres')
    assert.equal(settings.postgres.user, services.postgres.environment.POSTGRES_USER)
    assert.equal(settings.postgres.dbname, services.postgres.environment.POSTGRES_DB)
    assert.equal(settings.redis.host, 'redis')
    assert.equal(settings.qdrant.host, 'qdrant')
    assert.equal(settings.s3.endpoint, 'minio:9000')
    assert.equal(settings.server.port, Number(services.api.ports[0].split(':')[1]))
  })
})
