// Connectors across processes: kill -9 during a sync then restart (nothing left fetching or running, the
// sync ended as interrupted), abort from an API process of a sync running in a worker process, and one
// schedule firing claimed once by two API processes sharing PostgreSQL and Redis.
import { describe, it, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createApp } from '../../../kernel/app.ts'
import { resolveSettings } from '../../../kernel/config/load.ts'
import { createLogger } from '../../../kernel/log.ts'
import type { Plugin } from '../../../kernel/plugin.ts'
import { defaultPlugins } from '../../../kernel/plugins.ts'
import { createConnectorsPlugin } from '../../../plugins/connectors/index.ts'
import { SYNC_TOPIC, type ConnectorsService } from '../../../plugins/connectors/service.ts'
import { startApp, type StartedApp } from '../../helpers/app.ts'
import { skipUnless } from '../../helpers/services.ts'
import { waitFor } from '../../helpers/wait.ts'
import { startWebSite } from '../../helpers/web-site.ts'
import { CONNECTOR_TEST_SETTINGS, connectorDocs, createConnector, newKb, syncAndWait, syncStatus, waitIdle, webConfig } from './connectors.suite.ts'

type Json = any
const INTERRUPTED = 'Sync interrupted: the process running it stopped'

/** The default plugins with the connectors plugin declaring a dead sync after staleMs (the default is a minute). */
const pluginsWith = (staleMs: number, scheduleRefreshMs = 15_000): Plugin<any>[] =>
  defaultPlugins().map((p) => (p.name === 'connectors' ? createConnectorsPlugin({ staleMs, scheduleRefreshMs }) : p))

interface Child {
  proc: ChildProcess
  url: string
  kill(): Promise<void>
}

async function spawnChild(t: TestContext, raw: Json, mode: 'api' | 'worker', staleMs?: number): Promise<Child> {
  const args = [fileURLToPath(new URL('./sync-child.ts', import.meta.url)), JSON.stringify(raw), mode, ...(staleMs ? [String(staleMs)] : [])]
  const proc = spawn(process.execPath, ['--openssl-legacy-provider', '--import', 'tsx', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  proc.stderr!.on('data', (d) => (stderr += d))
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()))
  t.after(async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL')
    await exited
  })
  const url = await new Promise<string>((resolve, reject) => {
    let out = ''
    proc.stdout!.on('data', (d) => {
      out += d
      const m = /listening (\S+)\n|ready\n/.exec(out)
      if (m) resolve(m[1] ?? '')
    })
    proc.once('exit', (code) => reject(new Error(`child exited (${code}) before it was ready: ${stderr}`)))
  })
  return {
    proc, url,
    async kill() {
      proc.kill('SIGKILL')
      await exited
    },
  }
}

/**
 * The settings of `base` for another process on the same PostgreSQL, Redis and S3, with a data folder of its
 * own (without Qdrant the vectors are embedded, and an embedded store belongs to one process).
 */
function sharedSettings(t: TestContext, base: StartedApp): Json {
  const dataDir = mkdtempSync(join(tmpdir(), 'quarry-sibling-'))
  t.after(() => rmSync(dataDir, { recursive: true, force: true }))
  return { ...JSON.parse(JSON.stringify(base.app.settings)), data_dir: dataDir }
}

/** A second service on the same PostgreSQL, Redis and S3 as `base` (another API process). */
async function startSibling(t: TestContext, base: StartedApp, overrides: Json, plugins: Plugin<any>[]): Promise<StartedApp> {
  const raw = { ...sharedSettings(t, base), ...overrides }
  const { settings } = resolveSettings(raw, { REDIS_PASSWORD: undefined })
  const app = await createApp({ settings, plugins, log: createLogger('SILENT') })
  t.after(() => app.close())
  const port = await app.listen(0, '127.0.0.1')
  const url = `http://127.0.0.1:${port}`
  return {
    app, url, dataDir: '',
    request(path, init = {}) {
      const { json, ...rest } = init
      const headers = new Headers(rest.headers)
      if (json !== undefined) headers.set('content-type', 'application/json')
      return fetch(url + path, { ...rest, headers, body: json !== undefined ? JSON.stringify(json) : rest.body })
    },
  }
}

const viaUrl = (url: string): StartedApp => ({
  app: null as never, url, dataDir: '',
  request(path, init = {}) {
    const { json, ...rest } = init
    const headers = new Headers(rest.headers)
    if (json !== undefined) headers.set('content-type', 'application/json')
    return fetch(url + path, { ...rest, headers, body: json !== undefined ? JSON.stringify(json) : rest.body })
  },
})

describe('connectors across processes on the embedded default', () => {
  it('kill -9 during a sync, then restart: the sync ends as interrupted, nothing stays fetching or running, a new sync completes', async (t) => {
    const site = await startWebSite({ articles: 20, perPage: 10, slowMs: 10 })
    t.after(() => site.close())
    const dataDir = mkdtempSync(join(tmpdir(), 'quarry-kill-'))
    t.after(() => rmSync(dataDir, { recursive: true, force: true }))
    const raw = { data_dir: dataDir, logging: { level: 'ERROR' }, embedding: { vector_size: 64 }, server: { shutdown_grace_sec: 2 }, ...CONNECTOR_TEST_SETTINGS }
    const child = await spawnChild(t, raw, 'api')
    const remote = viaUrl(child.url)
    const kb = await newKb(remote)
    const c = await createConnector(remote, { kb_id: kb, name: 'kill', source_type: 'web', config: webConfig(site) })
    const release = site.hold()
    t.after(release)
    assert.equal((await remote.request(`/api/connectors/${c.connector_id}/sync`, { method: 'POST' })).status, 202)
    await waitFor(async () => (await syncStatus(remote, c.connector_id)).doc_counts.total >= 2, 'pages stored before the held articles')
    await child.kill()
    release()

    const svc = await startApp(t, { settings: raw })
    const st = await syncStatus(svc, c.connector_id)
    assert.equal(st.sync_status, 'idle')
    assert.equal(st.status, 'error')
    assert.equal(st.last_error, INTERRUPTED)
    await waitFor(async () => {
      const docs = await connectorDocs(svc, c.connector_id)
      return docs.every((d: Json) => !['fetching', 'running', 'pending'].includes(d.status))
    }, 'no document left in flight')
    const after = await syncAndWait(svc, c.connector_id)
    assert.equal(after.status, 'active')
    assert.equal(after.last_error, null)
    assert.equal(after.doc_counts.indexed, 22)
  })
})

describe('connectors across processes on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () => {
  it('a sync running in a worker process is aborted from an API process; kill -9 of the worker mid-sync is recovered by the API process', async (t) => {
    const site = await startWebSite({ articles: 20, perPage: 10, slowMs: 10 })
    t.after(() => site.close())
    // The API process consumes nothing: every sync runs in the worker process.
    const api = await startApp(t, { services: true, settings: { ...CONNECTOR_TEST_SETTINGS, queue_worker: { enabled: false } }, plugins: pluginsWith(1500) })
    const worker = await spawnChild(t, sharedSettings(t, api), 'worker', 1500)
    const kb = await newKb(api)
    const c = await createConnector(api, { kb_id: kb, name: 'remote', source_type: 'web', config: webConfig(site) })
    let release = site.hold()
    t.after(() => release())
    assert.equal((await api.request(`/api/connectors/${c.connector_id}/sync`, { method: 'POST' })).status, 202)
    let seen: Json = null
    await waitFor(async () => {
      const s = seen = await syncStatus(api, c.connector_id)
      return s.doc_counts.indexed >= 2 && site.requests.some((r) => r.path.startsWith('/docs/article/'))
    }, 'the worker crawling', 20_000).catch((err) => {
      throw new Error(`${err.message}: ${JSON.stringify(seen)} ${site.requests.map((r) => r.path)}`)
    })
    const res = await api.request(`/api/connectors/${c.connector_id}/sync/abort`, { method: 'POST' })
    assert.equal(res.status, 202)
    const abortedAt = Date.now()
    assert.equal((await syncStatus(api, c.connector_id)).sync_status, 'idle')
    release()
    const final = await waitFor(async () => {
      const s = await syncStatus(api, c.connector_id)
      return s.last_sync?.outcome === 'aborted' && s
    }, 'the worker recording the aborted run')
    assert.equal(final.doc_counts.pending + final.doc_counts.running + final.doc_counts.fetching, 0)
    assert.deepEqual(site.requests.filter((r) => r.at > abortedAt + 50).map((r) => r.path), [], 'the worker starts no request after the abort')
    for (const d of await connectorDocs(api, c.connector_id, '&status=failed')) assert.equal(d.last_error, 'Aborted')

    // kill -9 of the worker during the next sync: the API process ends the run once its heartbeat is stale.
    release = site.hold()
    assert.equal((await api.request(`/api/connectors/${c.connector_id}/sync`, { method: 'POST' })).status, 202)
    const before = site.requests.length
    await waitFor(async () => site.requests.length > before || (await api.app.adapters.sql.query(
      `SELECT 1 FROM connectors WHERE connector_id = $1::uuid AND sync_owner IS NOT NULL`, [c.connector_id])).length > 0, 'the worker claiming the run')
    await waitFor(async () => (await syncStatus(api, c.connector_id)).doc_counts.pending + (await syncStatus(api, c.connector_id)).doc_counts.running === 0, 'documents settled')
    await worker.kill()
    release()
    const st = await waitIdle(api, c.connector_id, 30_000)
    assert.equal(st.status, 'error')
    assert.equal(st.last_error, INTERRUPTED)
    assert.equal(st.doc_counts.fetching, 0)
    assert.equal(st.doc_counts.running, 0)
  })

  it('a run whose event never reached the queue (its process died first) ends as interrupted once stale; a queued one waits', async (t) => {
    const site = await startWebSite({ articles: 2, perPage: 2, slowMs: 10 })
    t.after(() => site.close())
    // Nothing consumes here; a stale window of a minute keeps the periodic pass out of the way of the calls below.
    const api = await startApp(t, { services: true, settings: { ...CONNECTOR_TEST_SETTINGS, queue_worker: { enabled: false } }, plugins: pluginsWith(60_000) })
    const kb = await newKb(api)
    const c = await createConnector(api, { kb_id: kb, name: 'lost', source_type: 'web', config: webConfig(site) })
    assert.equal((await api.request(`/api/connectors/${c.connector_id}/sync`, { method: 'POST' })).status, 202)
    await api.app.adapters.sql.query(`UPDATE connectors SET sync_started_at = now() - interval '2 minutes' WHERE connector_id = $1::uuid`, [c.connector_id])
    const svc = api.app.use<ConnectorsService>('connectors')
    assert.equal(await svc.recover(false), 0, 'its event is queued: it waits for a consumer')
    assert.notEqual((await syncStatus(api, c.connector_id)).sync_status, 'idle')

    assert.equal(await api.app.adapters.queue.removeByKey(SYNC_TOPIC, c.connector_id), 1)
    assert.equal(await svc.recover(false), 1)
    const st = await syncStatus(api, c.connector_id)
    assert.equal(st.sync_status, 'idle')
    assert.equal(st.last_error, INTERRUPTED)
    assert.equal((await api.request(`/api/connectors/${c.connector_id}/sync`, { method: 'POST' })).status, 202, 'a new sync can start')
  })

  it('two API processes: one schedule firing starts one sync; a schedule change made in one is picked up by the other', async (t) => {
    const site = await startWebSite({ articles: 4, perPage: 4, slowMs: 10 })
    t.after(() => site.close())
    const a = await startApp(t, { services: true, settings: CONNECTOR_TEST_SETTINGS, plugins: pluginsWith(60_000, 300) })
    const b = await startSibling(t, a, {}, pluginsWith(60_000, 300))
    const kb = await newKb(a)
    const c = await createConnector(a, { kb_id: kb, name: 'sched', source_type: 'web', sync_schedule: '0 * * * *', schedule_enabled: true, config: webConfig(site, { seed_urls: [`${site.url}/docs/article/1`], depth: 0, skip_seed_pages: false }) })
    const sa = a.app.use<ConnectorsService>('connectors')
    const sb = b.app.use<ConnectorsService>('connectors')
    await waitFor(async () => sb.scheduler.nextRun(c.connector_id) !== null, 'the other process registering the schedule')
    const at = new Date(Date.UTC(2026, 5, 1, 12, 0))
    const outcomes = await Promise.all([sa.fireSchedule(c.connector_id, at), sb.fireSchedule(c.connector_id, at)])
    assert.deepEqual(outcomes.sort(), ['claimed_elsewhere', 'started'])
    const st = await waitIdle(a, c.connector_id)
    assert.equal(st.last_sync.trigger, 'schedule')
    const [{ n }] = await a.app.adapters.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM connector_runs WHERE connector_id = $1::uuid', [c.connector_id])
    assert.equal(n, 1)

    await a.request(`/api/connectors/${c.connector_id}`, { method: 'PATCH', json: { sync_schedule: '30 2 * * *' } })
    await waitFor(async () => sb.scheduler.nextRun(c.connector_id)?.getUTCHours() === 2, 'the other process picking up the change')
    await a.request(`/api/connectors/${c.connector_id}`, { method: 'PATCH', json: { sync_schedule: null } })
    await waitFor(async () => sb.scheduler.nextRun(c.connector_id) === null, 'the other process dropping the schedule')
  })
})
