// Search against document statuses after a crash (issue 42, plugins/docs/reconcile.ts), on either driver set:
// disagreements made by hand as a crash leaves them (an outdated or failed document whose vectors were not deleted,
// vectors of a document without a row, an indexed document whose vectors are incomplete) are reported by
// POST /api/admin/check and by `quarry check`, left alone without --repair, mended with it, and mended at start.
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { it } from 'node:test'
import { stringify } from 'yaml'
import { createApp, type App } from '../../kernel/app.ts'
import { createLogger } from '../../kernel/log.ts'
import { defaultPlugins } from '../../kernel/plugins.ts'
import type { CheckReport } from '../../plugins/docs/reconcile.ts'
import { point } from '../adapters/vectors.contract.ts'
import { runCli, tempDir } from '../cli/helpers.ts'
import { startApp, type StartedApp, type StartOptions } from '../helpers/app.ts'
import { waitFor } from '../helpers/wait.ts'
import { md, newKb, prose, settle, upload } from './docs.suite.ts'

type Json = any

/** A doc_id no row has (16 hex characters, as the search filter wants). */
const GHOST = 'f0f0f0f0f0f0f0f0'
const markerOf = (name: string) => `qzv${name}xk`

async function indexed(svc: Pick<StartedApp, 'request'>, kb: string, names: string[]): Promise<Record<string, string>> {
  const ids: Record<string, string> = {}
  for (const name of names) {
    const res = await upload(svc as StartedApp, kb, `${name}.md`, md(`Title ${name}`, `${prose(name, 20)} Reference ${markerOf(name)}.`))
    assert.equal(res.status, 202)
    ids[name] = ((await res.json()) as Json).doc_id
  }
  for (const id of Object.values(ids)) assert.equal((await settle(svc as StartedApp, kb, id)).status, 'indexed')
  return ids
}

/** The hits of a search restricted to one document: any hit means search finds it. */
async function hits(svc: Pick<StartedApp, 'request'>, kb: string, docId: string, query: string): Promise<number> {
  const res = await svc.request('/api/search', { method: 'POST', json: { query, kb_ids: [kb], options: { top_k: 10, filter: { doc_ids: [docId] } } } })
  assert.equal(res.status, 200)
  return ((await res.json()) as Json).results.length
}

async function check(svc: Pick<StartedApp, 'request'>, repair = false): Promise<CheckReport> {
  const res = await svc.request(`/api/admin/check${repair ? '?repair=true' : ''}`, { method: 'POST' })
  assert.equal(res.status, 200)
  return (await res.json()) as CheckReport
}

const summary = (r: CheckReport) =>
  r.disagreements.map((d) => `${d.doc_id} ${d.kind} ${d.status ?? 'no-row'}${d.repair ? ` ${d.repair}` : ''}`).sort()

/** What a crash between the two steps of a supersede leaves: the row outdated, the vectors still there. */
const outdateKeepingVectors = (svc: { app: App }, docId: string, by: string) =>
  svc.app.adapters.sql.query(`UPDATE documents SET status = 'outdated', duplicate_of = $2 WHERE doc_id = $1`, [docId, by])

/** The same service again on the same stores (data folder, database, queue, objects). */
async function restart(svc: StartedApp): Promise<StartedApp & { close(): Promise<void> }> {
  await svc.app.close()
  const app = await createApp({ settings: svc.app.settings, plugins: defaultPlugins(), log: createLogger('SILENT') })
  const port = await app.listen(0, '127.0.0.1')
  const url = `http://127.0.0.1:${port}`
  return {
    app, url, dataDir: svc.dataDir, close: () => app.close(),
    request(path, init = {}) {
      const { json, ...rest } = init
      const headers = new Headers(rest.headers)
      if (json !== undefined) headers.set('content-type', 'application/json')
      return fetch(url + path, { ...rest, headers, body: json !== undefined ? JSON.stringify(json) : rest.body })
    },
  }
}

export function reconcileSuite(label: string, opts: StartOptions): void {
  const fast = { ...opts, settings: { queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 }, ...opts.settings } }

  it(`${label}: POST /api/admin/check reports each disagreement, changes nothing without repair, mends them with it`, { timeout: 120_000 }, async (t) => {
    const svc = await startApp(t, fast)
    const kb = await newKb(svc)
    const ids = await indexed(svc, kb, ['alpha', 'bravo', 'charlie', 'delta'])
    const { sql, vectors } = svc.app.adapters
    assert.deepEqual((await check(svc)).disagreements, [], 'a fresh KB agrees')

    await outdateKeepingVectors(svc, ids.alpha, ids.delta)
    await sql.query(`UPDATE documents SET status = 'failed', last_error = 'x' WHERE doc_id = $1`, [ids.bravo])
    // Indexed, but the store holds fewer points than the document has chunks.
    await sql.query('UPDATE documents SET chunk_count = chunk_count + 1 WHERE doc_id = $1', [ids.charlie])
    await vectors.upsert(kb, [point(kb, GHOST, 0, Array.from({ length: 64 }, (_, i) => (i === 0 ? 1 : 0)))])
    assert.ok(await hits(svc, kb, ids.alpha, markerOf('alpha')) > 0, 'the outdated document is searchable: the disagreement is real')

    const expected = [
      `${ids.alpha} stale_vectors outdated`, `${ids.bravo} stale_vectors failed`, `${ids.charlie} partial_vectors indexed`, `${GHOST} stale_vectors no-row`,
    ].sort()
    const first = await check(svc)
    assert.deepEqual(summary(first), expected)
    assert.equal(first.repair, false)
    assert.equal(first.kbs >= 1 && first.documents >= 4, true)
    const charlie = first.disagreements.find((d) => d.doc_id === ids.charlie)!
    assert.equal(charlie.points, charlie.chunk_count! - 1)
    assert.deepEqual(summary(await check(svc)), expected, 'a report changes nothing')
    assert.ok(await hits(svc, kb, ids.alpha, markerOf('alpha')) > 0)

    const repaired = await check(svc, true)
    assert.deepEqual(summary(repaired), [
      `${ids.alpha} stale_vectors outdated deleted`, `${ids.bravo} stale_vectors failed deleted`,
      `${ids.charlie} partial_vectors indexed requeued`, `${GHOST} stale_vectors no-row deleted`,
    ].sort())
    assert.equal(await hits(svc, kb, ids.alpha, markerOf('alpha')), 0)
    assert.equal(await hits(svc, kb, ids.bravo, markerOf('bravo')), 0)
    assert.equal(await hits(svc, kb, GHOST, 'anything'), 0)
    // Queued again, indexed whole by the worker.
    const again = await settle(svc, kb, ids.charlie)
    assert.equal(again.status, 'indexed')
    assert.equal((await vectors.docVectors(kb, ids.charlie)).length, again.chunk_count)
    assert.ok(await hits(svc, kb, ids.charlie, markerOf('charlie')) > 0)
    assert.deepEqual((await check(svc)).disagreements, [])
  })

  it(`${label}: the service mends at start what a crash left, before search sees it`, { timeout: 120_000 }, async (t) => {
    const svc = await startApp(t, fast)
    const kb = await newKb(svc)
    const ids = await indexed(svc, kb, ['echo', 'foxtrot', 'golf'])
    await outdateKeepingVectors(svc, ids.echo, ids.golf)
    await svc.app.adapters.sql.query('UPDATE documents SET chunk_count = chunk_count + 1 WHERE doc_id = $1', [ids.foxtrot])
    assert.ok(await hits(svc, kb, ids.echo, markerOf('echo')) > 0)

    const next = await restart(svc)
    try {
      if (svc.app.adapters.queue.name === 'embedded') {
        // The one process of a data folder checks before it serves.
        assert.equal(await hits(next, kb, ids.echo, markerOf('echo')), 0)
      } else {
        // On the services the check runs beside the worker.
        await waitFor(async () => (await hits(next, kb, ids.echo, markerOf('echo'))) === 0, 'the start-up check to delete the stale vectors')
      }
      // The incomplete document is queued again (or already indexed again): no check reports it any more.
      await waitFor(async () => (await check(next)).disagreements.length === 0, 'the start-up check to queue the incomplete document again')
      const foxtrot = await settle(next as StartedApp, kb, ids.foxtrot)
      assert.equal(foxtrot.status, 'indexed')
      assert.equal((await next.app.adapters.vectors.docVectors(kb, ids.foxtrot)).length, foxtrot.chunk_count)
      assert.deepEqual((await check(next)).disagreements, [])
    } finally {
      await next.close()
    }
  })

  it(`${label}: quarry check on a running service and on its stores when stopped; --repair mends`, { timeout: 180_000 }, async (t) => {
    const svc = await startApp(t, fast)
    const kb = await newKb(svc)
    const ids = await indexed(svc, kb, ['hotel', 'india'])
    await outdateKeepingVectors(svc, ids.hotel, ids.india)
    const dir = tempDir(t)
    const s = svc.app.settings
    const config = join(dir, 'settings.yaml')
    writeFileSync(config, stringify({
      data_dir: s.data_dir, embedding: { vector_size: s.embedding.vector_size }, logging: { level: 'ERROR' },
      ...(s.postgres.host && { postgres: s.postgres, redis: s.redis, s3: s.s3 }),
    }))
    const cli = (...args: string[]) => runCli(args, { cwd: dir })

    let run = await cli('check', '--url', svc.url)
    assert.equal(run.code, 1, run.stderr)
    assert.match(run.stdout, new RegExp(`^${kb}\\s+${ids.hotel}\\s+searchable, not indexed\\s+outdated\\s+\\d+\\s+\\d+$`, 'm'))
    assert.match(run.stdout, /^1 disagreement\(s\) between search and document statuses: .*Run again with --repair/m)

    // The stores of a running service are its own: a local check refuses and says how to ask the service.
    run = await cli('check', '--config', config)
    assert.equal(run.code, 1)
    assert.match(run.stderr, /Data folder .* is in use by another Quarry process \(pid \d+ on host/)
    assert.match(run.stderr, /quarry check --url <its URL>/)

    await svc.app.close()
    run = await cli('check', '--config', config)
    assert.equal(run.code, 1, run.stderr)
    assert.match(run.stdout, new RegExp(`${ids.hotel}\\s+searchable, not indexed\\s+outdated`))
    run = await cli('check', '--config', config, '--repair')
    assert.equal(run.code, 0, run.stderr)
    assert.match(run.stdout, new RegExp(`${ids.hotel}\\s+searchable, not indexed\\s+outdated\\s+\\d+\\s+\\d+\\s+deleted$`, 'm'))
    assert.match(run.stdout, /^1 disagreement\(s\) repaired/m)
    run = await cli('check', '--config', config, '--json')
    assert.equal(run.code, 0, run.stderr)
    const report = JSON.parse(run.stdout) as CheckReport
    assert.deepEqual(report.disagreements, [])
    assert.equal(report.documents >= 2, true)
  })
}
