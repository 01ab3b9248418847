// A cluster that survives faults (issue 39): 2 API processes and 2 worker processes on the scale-out driver set, with
// servers the test owns so that it may break them: PostgreSQL (initdb in a temporary folder, pgvector as the vector
// store), a redis-server that keeps nothing on disk (as this machine's and CI's), and s3rver in a process of its own.
// A client spreads uploads and searches over both APIs while, during ingestion, a worker is killed with -9 and
// started again, Redis is restarted (its queue lost), PostgreSQL is restarted (immediate shutdown: a crash for its
// data) and S3 is stopped for 10 s. Afterwards every accepted document is indexed exactly once (a trigger the test
// adds counts every move to `indexed`) or failed with a reason a client can act on, nothing is pending or running,
// every indexed document is found from both APIs with all its points, and both APIs count what the client sent.
// Then docs/s of 1 worker against 2 is measured on a quiet cluster (a diagnostic, not an assertion).
//
// Run alone (CI runs it as its own step): npm run test:cluster
import assert from 'node:assert/strict'
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os, { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, it, type TestContext } from 'node:test'
import postgres from 'postgres'
import { stringify } from 'yaml'
import { freePort } from '../helpers/ports.ts'
import { postgresBin, startOwnedPostgres, startOwnedRedis, startOwnedS3, type OwnedServer } from '../helpers/servers.ts'
import { servicesRequired } from '../helpers/services.ts'
import { waitFor } from '../helpers/wait.ts'

type Json = any

const DOCUMENTS = Number(process.env.QUARRY_CLUSTER_DOCS ?? 480)
const UPLOADERS = 4
const KB = 'cluster'

/** Why the suite cannot run here: no PostgreSQL binaries, no redis-server, or no pgvector installed for them. */
function missing(): string | false {
  const bin = postgresBin()
  let reason: string | false = false
  if (!bin) reason = 'no PostgreSQL binaries under /usr/lib/postgresql'
  else {
    const share = execFileSync(join(bin, 'pg_config'), ['--sharedir']).toString().trim()
    if (!existsSync(join(share, 'extension', 'vector.control'))) reason = 'pgvector is not installed (../shared/vendor/install-pgvector.sh)'
    else {
      try {
        execFileSync('redis-server', ['--version'])
      } catch {
        reason = 'redis-server is not installed'
      }
    }
  }
  if (reason && servicesRequired()) throw new Error(`${reason}, but QUARRY_REQUIRE_SERVICES=1: the cluster suite must run`)
  return reason
}

/** Pseudo-words from a seeded generator: every document's text is its own, so dedup keeps them all. */
function documentText(i: number): string {
  let x = (i * 2654435761) >>> 0 || 1
  const next = () => ((x = (x * 1103515245 + 12345) >>> 0), x / 2 ** 32)
  const syllables = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'ti', 'vo', 'ze', 'po', 'gu', 'da', 'fe', 'hi', 'jo', 'be']
  const word = () => Array.from({ length: 2 + Math.floor(next() * 3) }, () => syllables[Math.floor(next() * syllables.length)]).join('')
  const paragraph = () => Array.from({ length: 6 }, () => {
    const w = Array.from({ length: 8 + Math.floor(next() * 8) }, word)
    return `${w[0][0].toUpperCase()}${w[0].slice(1)} ${w.slice(1).join(' ')}.`
  }).join(' ')
  return `# Field report ${i}\n\n${paragraph()} Reference ${marker(i)}.\n\n${paragraph()}\n\n${paragraph()}\n`
}

/** A word no other document holds: letters only, so that every tokenizer keeps it whole. */
const marker = (i: number) => `qzc${[...String(i).padStart(4, '0')].map((d) => 'abcdefghij'[Number(d)]).join('')}xk`
const nameOf = (i: number) => `report-${String(i).padStart(4, '0')}.md`
const indexOf = (source: string) => Number(/^report-(\d+)\.md$/.exec(source)?.[1] ?? NaN)

/** A reason a client can act on: it names what to do (upload again, reindex, try again) or the store that failed. */
const ACTIONABLE = /upload it again|reindex|try again|unavailable|not reachable/i

interface Proc {
  name: string
  role: 'serve' | 'worker'
  config: string
  port?: number
  child?: ChildProcess
  log: string
}

describe('a cluster of 2 API and 2 worker processes', { skip: missing() }, () => {
  it('survives a killed worker and restarts of Redis, PostgreSQL and S3 during ingestion', { timeout: 1_200_000 }, async (t) => {
    const work = mkdtempSync(join(tmpdir(), 'quarry-cluster-'))
    t.after(() => rmSync(work, { recursive: true, force: true }))
    const pg = await startOwnedPostgres()
    t.after(() => pg.close())
    await pg.createDatabase('quarry')
    const redis = await startOwnedRedis({ persist: false })
    t.after(() => redis.close())
    const s3 = await startOwnedS3('quarry-cluster')
    t.after(() => s3.close())

    const procs: Proc[] = []
    t.after(() => {
      for (const p of procs) p.child?.kill('SIGKILL')
    })
    const settingsFor = (role: Proc['role'], port: number) => ({
      data_dir: mkdtempSync(join(work, `data-${role}-`)),
      server: { host: '127.0.0.1', port, shutdown_grace_sec: 5 },
      logging: { level: 'WARNING' },
      vector_store: 'pgvector',
      embedding: { vector_size: 64 },
      postgres: { host: '127.0.0.1', port: pg.port, dbname: 'quarry', user: 'postgres', pool_size: 6 },
      redis: { host: '127.0.0.1', port: redis.port, key_prefix: 'cluster' },
      s3: { endpoint: s3.endpoint, access_key: s3.accessKey, secret_key: s3.secretKey, rag_bucket: s3.bucket, insecure: true },
      queue_worker: { enabled: role === 'worker', max_workers: 4 },
      queue_poll: { poll_interval_sec: 0.5, max_per_poll: 4, retry_interval_sec: 1 },
    })
    const addProc = async (name: string, role: Proc['role']) => {
      const port = await freePort()
      const config = join(work, `${name}.yaml`)
      writeFileSync(config, stringify(settingsFor(role, port)))
      const p: Proc = { name, role, config, port: role === 'serve' ? port : undefined, log: '' }
      procs.push(p)
      return p
    }
    const start = async (p: Proc) => {
      const child = spawn(process.execPath, ['kernel/run.mjs', 'kernel/main.ts', p.role, '--config', p.config], { stdio: ['ignore', 'pipe', 'pipe'] })
      p.child = child
      const keep = (d: string) => (p.log = (p.log + d).slice(-20_000))
      child.stdout!.setEncoding('utf8').on('data', keep)
      child.stderr!.setEncoding('utf8').on('data', keep)
      if (p.role === 'serve') {
        await waitFor(async () => {
          if (child.exitCode !== null) throw new Error(`${p.name} exited: ${p.log.slice(-3000)}`)
          return (await fetch(`http://127.0.0.1:${p.port}/ready`)).ok
        }, `${p.name} to be ready`, 120_000, 100)
      } else {
        // A worker serves no HTTP: it is up once it has run its start-up recovery and polls (a second is plenty).
        await sleep(1500)
        if (child.exitCode !== null) throw new Error(`${p.name} exited: ${p.log.slice(-3000)}`)
      }
    }
    const stop = async (p: Proc, signal: NodeJS.Signals) => {
      const child = p.child
      if (!child || child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
      child.kill(signal)
      await exited
    }

    const api1 = await addProc('api-1', 'serve')
    const api2 = await addProc('api-2', 'serve')
    const worker1 = await addProc('worker-1', 'worker')
    const worker2 = await addProc('worker-2', 'worker')
    // The first start runs the migrations; the others find them done.
    await start(api1)
    await Promise.all([start(api2), start(worker1), start(worker2)])
    const apis = [api1, api2].map((p) => `http://127.0.0.1:${p.port}`)

    // Every move of a document to `indexed`, counted by PostgreSQL itself.
    const sql = postgres(pg.url('quarry'), { max: 2, onnotice: () => {} })
    t.after(() => sql.end({ timeout: 1 }))
    await sql.unsafe(`
      CREATE TABLE test_indexed_moves (doc_id text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
      CREATE FUNCTION test_count_indexed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN INSERT INTO test_indexed_moves (doc_id) VALUES (NEW.doc_id); RETURN NEW; END $$;
      CREATE TRIGGER test_count_indexed AFTER INSERT OR UPDATE OF status ON documents
        FOR EACH ROW WHEN (NEW.status = 'indexed') EXECUTE FUNCTION test_count_indexed();
      CREATE TABLE test_claims (doc_id text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
      CREATE FUNCTION test_count_claims() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN INSERT INTO test_claims (doc_id) VALUES (NEW.doc_id); RETURN NEW; END $$;
      CREATE TRIGGER test_count_claims AFTER UPDATE OF status ON documents
        FOR EACH ROW WHEN (NEW.status = 'running' AND OLD.status <> 'running') EXECUTE FUNCTION test_count_claims();`)

    const call = async (api: string, path: string, init: RequestInit & { json?: unknown } = {}) =>
      fetch(`${api}${path}`, {
        ...init,
        headers: init.json !== undefined ? { 'content-type': 'application/json' } : init.headers,
        body: init.json !== undefined ? JSON.stringify(init.json) : init.body,
        signal: AbortSignal.timeout(30_000),
      })
    assert.equal((await call(apis[0], '/api/kb', { method: 'POST', json: { kb_id: KB, kb_name: 'Cluster' } })).status, 201)

    // --- uploads, spread over both APIs, while the faults happen -----------------------------------------------------
    /** Accepted uploads: index -> doc_id. */
    const accepted = new Map<number, string>()
    /** Answers that made the client send again, by status (or by network error code). */
    const retried: Record<string, number> = {}
    /** Searches during the faults: answered, and not answered (by status or error). */
    const searches = { ok: 0, failed: {} as Record<string, number> }
    const count = (o: Record<string, number>, k: string) => (o[k] = (o[k] ?? 0) + 1)
    let next = 0
    let faultsDone = false
    let burstUntil = 0
    const uploader = async (u: number) => {
      for (let i = next++; i < DOCUMENTS; i = next++) {
        const api = apis[i % 2]
        let uncertain = false
        for (let attempt = 0; ; attempt++) {
          if (attempt > 400) throw new Error(`upload of ${nameOf(i)} kept failing: ${JSON.stringify(retried)}`)
          const form = new FormData()
          form.append('file', new Blob([documentText(i)]), nameOf(i))
          let res: Response
          try {
            res = await call(api, `/api/kb/${KB}/docs/upload`, { method: 'POST', body: form })
          } catch (err) {
            // Cut off or refused: the outcome is unknown, so the same file is sent again (same name: same document).
            count(retried, (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name)
            uncertain = true
            await sleep(250)
            continue
          }
          const body = (await res.json().catch(() => ({}))) as Json
          if (res.status === 202) {
            accepted.set(i, body.doc_id)
            break
          }
          // An earlier attempt that was cut off got through: the document is being processed under its name.
          if (res.status === 409 && uncertain && /active/.test(body.detail ?? '')) {
            const found = (await (await call(api, `/api/kb/${KB}/docs?search=${nameOf(i)}&page_size=5`)).json()) as Json
            const doc = found.items?.find((d: Json) => d.source === nameOf(i))
            if (doc) {
              accepted.set(i, doc.doc_id)
              break
            }
          }
          count(retried, String(res.status))
          if (res.status < 500 && res.status !== 409 && res.status !== 429) throw new Error(`upload of ${nameOf(i)}: ${res.status} ${JSON.stringify(body)}`)
          uncertain = true
          await sleep(250)
        }
        // Paced, so that ingestion lasts through the faults (but for a burst that keeps both workers busy).
        if (!faultsDone && accepted.size >= burstUntil) await sleep(120 * UPLOADERS)
        // Now and then a search through the other API, which must answer or say why not.
        if (i % 10 === u) {
          try {
            const res = await call(apis[(i + 1) % 2], '/api/search', { method: 'POST', json: { query: 'field report reference', kb_ids: [KB], options: { top_k: 5 } } })
            if (res.ok) searches.ok++
            else count(searches.failed, String(res.status))
          } catch (err) {
            count(searches.failed, (err as Error).name)
          }
        }
      }
    }
    const uploadsStarted = Date.now()
    const uploading = Promise.all(Array.from({ length: UPLOADERS }, (_, u) => uploader(u)))

    const faults: string[] = []
    const at = (what: string) => faults.push(`${((Date.now() - uploadsStarted) / 1000).toFixed(1)} s ${what} (${accepted.size} accepted)`)
    const untilAccepted = (n: number) => waitFor(async () => accepted.size >= n, `${n} uploads accepted`, 300_000, 100)
    await untilAccepted(Math.round(DOCUMENTS * 0.08))
    // A burst, and the kill once more documents are running than one worker takes (4): worker-1 holds some of them.
    burstUntil = accepted.size + Math.round(DOCUMENTS * 0.15)
    const runningAtKill = await waitFor(async () => {
      const rows = await sql<{ doc_id: string }[]>`SELECT doc_id FROM documents WHERE status = 'running'`
      return rows.length > 4 ? rows.map((r) => r.doc_id) : null
    }, 'both workers to be busy', 60_000, 10)
    at(`kill -9 worker-1 (${runningAtKill.length} documents running)`)
    await stop(worker1, 'SIGKILL')
    await sleep(2000)
    await start(worker1)
    at('worker-1 started again')

    /** Once `share` of the documents are accepted: the server stopped (`how` says how), down for `downMs`, started again. */
    const outage = async (share: number, name: string, how: string, server: OwnedServer, mode: 'clean' | 'kill', downMs: number) => {
      await untilAccepted(Math.round(DOCUMENTS * share))
      at(`${name} stopped (${how})`)
      await server.stop(mode)
      await sleep(downMs)
      await server.start()
      at(`${name} started again`)
    }
    await outage(0.3, 'Redis', 'its keys are lost', redis, 'clean', 2000)
    await outage(0.5, 'PostgreSQL', 'immediate', pg, 'kill', 2000)
    await outage(0.7, 'S3', 'killed', s3, 'kill', 10_000)
    faultsDone = true
    await uploading
    at('all uploads accepted')

    // --- afterwards ---------------------------------------------------------------------------------------------------
    // What was left and why, for a failure: the rows not settled, and the end of every process's log.
    const leftBehind = async (why: string) => {
      const left = await sql`SELECT doc_id, source, status, process_started_at, heartbeat_at, updated_at, last_error FROM documents
        WHERE status NOT IN ('indexed', 'failed') ORDER BY updated_at LIMIT 20`.catch((e: Error) => e.message)
      return new Error(`${why}; faults ${faults.join('; ')}; left ${JSON.stringify(left)}\n${procs.map((p) => `--- ${p.name}\n${p.log.slice(-4000)}`).join('\n')}`)
    }
    let lastCounts: Json = null
    const settled = await waitFor(async () => {
      // A process that died by itself (not the kill above) is the failure, whatever the counts.
      const dead = procs.find((p) => p.child && (p.child.exitCode !== null || p.child.signalCode !== null))
      if (dead) return { dead: `${dead.name} exited (${dead.child!.exitCode ?? dead.child!.signalCode}) while the documents settled` }
      const c = ((await (await call(apis[0], `/api/kb/${KB}/docs/status`)).json()) as Json).doc_counts
      lastCounts = c
      return c.pending + c.running + c.uploading + c.deleting === 0 ? c : null
    }, 'every document to settle', 600_000, 1000).catch(async (err: Error) => {
      throw await leftBehind(`${err.message}; counts ${JSON.stringify(lastCounts)}`)
    })
    if (settled.dead) throw await leftBehind(settled.dead)
    at('every document settled')

    const list = async (api: string) => {
      const docs: Json[] = []
      for (let page = 1; ; page++) {
        const body = (await (await call(api, `/api/kb/${KB}/docs?page=${page}&page_size=100&sort_by=source&sort_order=asc`)).json()) as Json
        docs.push(...body.items)
        if (docs.length >= body.total || body.items.length === 0) return docs
      }
    }
    const [docs1, docs2] = await Promise.all(apis.map(list))
    const bySource = new Map<string, Json[]>()
    for (const d of docs1) bySource.set(d.source, [...(bySource.get(d.source) ?? []), d])

    // Counts: one document per name sent, the same list and counts from both APIs.
    assert.equal(accepted.size, DOCUMENTS, 'every upload was accepted in the end')
    assert.deepEqual([...bySource].filter(([, ds]) => ds.length !== 1).map(([s, ds]) => `${s} x${ds.length}`), [], 'one document per name')
    assert.equal(docs1.length, DOCUMENTS, 'API 1 lists what the client sent')
    assert.deepEqual(docs2.map((d) => `${d.doc_id} ${d.status}`), docs1.map((d) => `${d.doc_id} ${d.status}`), 'both APIs list the same documents')
    const counts2 = ((await (await call(apis[1], `/api/kb/${KB}/docs/status`)).json()) as Json).doc_counts
    assert.equal(settled.total, DOCUMENTS)
    assert.equal(counts2.total, DOCUMENTS)
    assert.deepEqual([...accepted].filter(([i, id]) => bySource.get(nameOf(i))?.[0]?.doc_id !== id).map(([i]) => nameOf(i)), [], 'each accepted doc_id is the one listed under its name')

    // Indexed exactly once, or failed with a reason to act on.
    const moves = new Map<string, number>()
    for (const r of await sql<{ doc_id: string; n: number }[]>`SELECT doc_id, count(*)::int AS n FROM test_indexed_moves GROUP BY doc_id`) moves.set(r.doc_id, r.n)
    const indexed = docs1.filter((d) => d.status === 'indexed')
    const failed = docs1.filter((d) => d.status === 'failed')
    const other = docs1.filter((d) => d.status !== 'indexed' && d.status !== 'failed')
    assert.deepEqual(other.map((d) => `${d.source} ${d.status}`), [], 'every document indexed or failed')
    assert.deepEqual(indexed.filter((d) => moves.get(d.doc_id) !== 1).map((d) => `${d.source} indexed ${moves.get(d.doc_id) ?? 0} times`), [], 'indexed exactly once')
    const claims = new Map<string, number>()
    for (const r of await sql<{ doc_id: string; n: number }[]>`SELECT doc_id, count(*)::int AS n FROM test_claims GROUP BY doc_id`) claims.set(r.doc_id, r.n)
    const reclaimed = runningAtKill.filter((id) => (claims.get(id) ?? 0) > 1)
    assert.ok(reclaimed.length > 0, 'some documents the killed worker was processing were taken up again')
    assert.deepEqual(failed.filter((d) => !ACTIONABLE.test(d.last_error ?? '')).map((d) => `${d.source}: ${d.last_error}`), [], 'every failure says what to do')

    // Whole: every indexed document's points in pgvector are its chunk_count; no points of any other document.
    const points = new Map<string, number>()
    const table = (await sql<{ t: string }[]>`SELECT 'quarry_vec_' || id AS t FROM quarry_vector_collections WHERE kb_id = ${KB}`)[0]?.t
    assert.ok(table, 'the KB has a points table in pgvector')
    for (const r of await sql.unsafe<{ doc_id: string; n: number }[]>(`SELECT doc_id, count(*)::int AS n FROM "${table}" GROUP BY doc_id`)) points.set(r.doc_id, r.n)
    assert.deepEqual(indexed.filter((d) => points.get(d.doc_id) !== d.chunk_count).map((d) => `${d.source}: ${points.get(d.doc_id) ?? 0} points, chunk_count ${d.chunk_count}`), [], 'indexed documents whole')
    assert.deepEqual(failed.filter((d) => points.has(d.doc_id)).map((d) => d.source), [], 'no points of failed documents')

    // Found from both APIs by its own marker.
    const notFound: string[] = []
    for (const d of indexed) {
      for (const api of apis) {
        const res = await call(api, '/api/search', { method: 'POST', json: { query: marker(indexOf(d.source)), kb_ids: [KB], options: { top_k: 5 } } })
        const body = (await res.json()) as Json
        if (!body.results?.some((r: Json) => r.doc_id === d.doc_id)) notFound.push(`${d.source} via ${api}`)
      }
    }
    assert.deepEqual(notFound, [], 'every indexed document is found from both APIs')
    // Nothing waits in the queue (a killed worker's reservations lapse with their lease and are dropped then).
    const depth = async () => {
      const metrics = await (await call(apis[0], '/metrics')).text()
      return Object.fromEntries([...metrics.matchAll(/^quarry_queue_messages\{[^}]*state="(\w+)"[^}]*\} (\d+)/gm)].map((m) => [m[1], Number(m[2])]))
    }
    // Events that met a document already done are dropped when they come up (a retry interval at most).
    const queued = await waitFor(async () => {
      const d = await depth()
      return 'ready' in d && d.ready + d.delayed === 0 ? d : null
    }, 'nothing ready or delayed in the queue', 30_000, 500)

    t.diagnostic(`faults: ${faults.join('; ')}`)
    t.diagnostic(`runs: ${reclaimed.length} of the ${runningAtKill.length} documents running at the kill were taken up again; ${[...claims.values()].filter((n) => n > 1).length} documents ran more than once in all (the kill, transient failures), each indexed once`)
    t.diagnostic(`documents: ${DOCUMENTS} sent, ${indexed.length} indexed, ${failed.length} failed (${[...new Set(failed.map((d) => d.last_error))].join(' | ')})`)
    t.diagnostic(`client retries by answer: ${JSON.stringify(retried)}; searches during the run: ${searches.ok} answered, failed ${JSON.stringify(searches.failed)}; queue ${JSON.stringify(queued)}`)
    assert.ok(indexed.length >= DOCUMENTS * 0.9, `most documents indexed (${indexed.length} of ${DOCUMENTS})`)

    // --- docs/s with 1 worker against 2, on the quiet cluster -------------------------------------------------------
    // The workers are stopped while a batch is uploaded, then started: from the first claim to the last document
    // indexed (PostgreSQL's clock, through the triggers) is indexing alone, without the uploads or a worker's start.
    const throughput = async (label: string, from: number, n: number, workers: Proc[]) => {
      await Promise.all([worker1, worker2].map((w) => stop(w, 'SIGTERM')))
      const ids: string[] = []
      let k = from
      await Promise.all(Array.from({ length: 8 }, async () => {
        for (let i = k++; i < from + n; i = k++) {
          const form = new FormData()
          form.append('file', new Blob([documentText(i)]), nameOf(i))
          const res = await call(apis[i % 2], `/api/kb/${KB}/docs/upload`, { method: 'POST', body: form })
          assert.equal(res.status, 202, `${label} upload ${i}`)
          ids.push(((await res.json()) as Json).doc_id)
        }
      }))
      await Promise.all(workers.map(start))
      await waitFor(async () => {
        const [r] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM documents WHERE doc_id = ANY(${ids}) AND status = 'indexed'`
        return r.n === n
      }, `${label} to index ${n} documents`, 600_000, 100)
      const [span] = await sql<{ s: number }[]>`SELECT extract(epoch FROM (SELECT max(at) FROM test_indexed_moves WHERE doc_id = ANY(${ids}))
        - (SELECT min(at) FROM test_claims WHERE doc_id = ANY(${ids})))::float8 AS s`
      return { seconds: span.s, rate: n / span.s }
    }
    const n = Math.max(60, Math.round(DOCUMENTS / 2))
    const one = await throughput('1 worker', 10_000, n, [worker1])
    const two = await throughput('2 workers', 20_000, n, [worker1, worker2])
    t.diagnostic(`indexing throughput, ${n} queued documents of about 2.5 KB, first claim to last indexed: 1 worker ${one.rate.toFixed(1)} docs/s (${one.seconds.toFixed(2)} s), 2 workers ${two.rate.toFixed(1)} docs/s (${two.seconds.toFixed(2)} s): ${(two.rate / one.rate).toFixed(2)}x on ${os.availableParallelism()} cores (${os.cpus()[0]?.model ?? 'unknown CPU'})`)
  })
})
