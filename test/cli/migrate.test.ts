// `quarry migrate` (issue 39) for real, as a child process: a deployment that grew on the embedded engines moves to
// PostgreSQL + Redis + S3 (s3rver) with vectors in pgvector, killed with SIGKILL part-way and run again, then back to
// a fresh embedded folder. Every object write to S3 passes a loopback proxy that counts them (and holds them, to
// stop the first run at a known point), and PostgreSQL's own insert counters count the document rows: nothing is
// written twice. The moved KBs answer searches as the original did, and a run after a complete one copies nothing.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, request as httpRequest } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import postgres from 'postgres'
import { stringify } from 'yaml'
import { startApp, type StartedApp } from '../helpers/app.ts'
import { createTempDatabase } from '../helpers/pg.ts'
import { serviceUrl, skipUnless } from '../helpers/services.ts'
import { startS3rver } from '../helpers/s3rver.ts'
import { waitFor } from '../helpers/wait.ts'
import { assertSameAcrossStores, buildSourceKb, listAll, snapshot } from '../plugins/transfer/transfer.suite.ts'
import { runCli, startCli } from './helpers.ts'

type Json = any

/** An HTTP proxy in front of S3 that counts object writes (PUT of a key) and can hold them after the n-th. */
async function startS3Proxy(t: { after(fn: () => unknown): void }, upstream: string) {
  const target = new URL(upstream)
  let forwardedPuts = 0
  let holdAfter = Infinity
  const held: (() => void)[] = []
  const server = createServer((req, res) => {
    const isPut = req.method === 'PUT' && (req.url ?? '').split('?')[0].split('/').filter(Boolean).length >= 2
    const forward = () => {
      const up = httpRequest({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (ur) => {
        res.writeHead(ur.statusCode ?? 502, ur.headers)
        ur.pipe(res)
      })
      up.on('error', () => res.socket?.destroy())
      req.pipe(up)
    }
    if (isPut && forwardedPuts >= holdAfter) {
      held.push(() => req.socket.destroy())
      return
    }
    if (isPut) forwardedPuts++
    forward()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise<void>((resolve) => {
    held.splice(0).forEach((h) => h())
    server.closeAllConnections()
    server.close(() => resolve())
  }))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    puts: () => forwardedPuts,
    held: () => held.length,
    holdAfter: (n: number) => void (holdAfter = n),
    release: () => {
      holdAfter = Infinity
      held.splice(0).forEach((h) => h())
    },
  }
}

const tmp = (t: { after(fn: () => unknown): void }, prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

const writeYaml = (dir: string, name: string, settings: Record<string, unknown>) => {
  const p = join(dir, name)
  writeFileSync(p, stringify({ logging: { level: 'ERROR' }, embedding: { vector_size: 64 }, ...settings }))
  return p
}

describe('quarry migrate between the embedded engines and the services', { skip: skipUnless('postgres') || skipUnless('redis') }, () => {
  it('moves every KB to PostgreSQL + Redis + S3 + pgvector, resumes after kill -9 writing nothing twice, and moves them back', { timeout: 600_000 }, async (t) => {
    const work = tmp(t, 'quarry-migrate-')
    // A: the embedded deployment, filled through its API, then stopped.
    const a = await startApp(t, { settings: { connectors: { egress: { allow: ['127.0.0.1/32'] } } } })
    const src = await buildSourceKb(a)
    assert.equal((await a.request('/api/kb', { method: 'POST', json: { kb_id: 'another', kb_name: 'Another' } })).status, 201)
    const form = new FormData()
    form.append('file', new Blob([`# Another\n\n${randomBytes(200).toString('hex')} about ledgers and inventories.\n`]), 'another.md')
    assert.equal((await a.request('/api/kb/another/docs/upload', { method: 'POST', body: form })).status, 202)
    await waitFor(async () => (await listAll(a, 'another'))[0]?.status === 'indexed', 'the other KB to be indexed', 60_000)
    const sqlA = a.app.adapters.sql
    // What the access-controlled edition keeps beside the KBs: members, an invite, a profile, the runtime config.
    await sqlA.query(`INSERT INTO kb_members (kb_id, user_id, role, granted_by) VALUES ($1, 'u-owner', 'owner', 'u-owner'), ($1, 'u-viewer', 'viewer', 'u-owner')`, [src.kb])
    await sqlA.query(`INSERT INTO kb_invites (invite_id, kb_id, email, role, granted_by, expires_at) VALUES ('7f0c1c9e-93f1-4c2b-9a55-0c8a3c3d9d11', $1, 'new@example.com', 'editor', 'u-owner', now() + interval '3 days')`, [src.kb])
    await sqlA.query(`INSERT INTO user_profiles (user_id, email, display_name, max_kb_count) VALUES ('u-owner', 'owner@example.com', 'Owner', 7)`)
    await sqlA.query(`INSERT INTO system_config (key, value) VALUES ('max_docs_count', '500'::jsonb)`)
    const before = await snapshot(a, src.kb, src.queries)
    const beforeOther = await snapshot(a, 'another', ['ledgers and inventories'])
    // Hybrid's dense ranks come from each store's own index (the embedded store's i8 graph, pgvector's halfvec HNSW), so
    // compared with B, hybrid answers are the same results; back on the embedded store (C), the same order too.
    const acrossStores = { acrossStores: true }
    const beforeAcross = await snapshot(a, src.kb, src.queries, acrossStores)
    const beforeOtherAcross = await snapshot(a, 'another', ['ledgers and inventories'], acrossStores)
    await a.app.close()

    // B: the services. Object writes go through the counting proxy.
    const pgUrl = serviceUrl('postgres')!
    const db = await createTempDatabase(pgUrl)
    t.after(() => db.drop())
    const s3 = await startS3rver()
    t.after(() => s3.close())
    const proxy = await startS3Proxy(t, s3.endpoint)
    const redis = new URL(serviceUrl('redis')!)
    const services = (endpoint: string) => ({
      data_dir: tmp(t, 'quarry-migrate-b-'),
      vector_store: 'pgvector',
      postgres: { host: db.host, port: db.port, user: db.user, dbname: db.database },
      redis: { host: redis.hostname, port: Number(redis.port || 6379), key_prefix: `qm-${randomBytes(4).toString('hex')}` },
      s3: { endpoint, access_key: s3.accessKey, secret_key: s3.secretKey, rag_bucket: s3.bucket, insecure: true },
    })
    const bSettings = services(proxy.url)
    const fromA = writeYaml(work, 'a.yaml', { data_dir: a.dataDir })
    const toB = writeYaml(work, 'b.yaml', bSettings)
    const pg = postgres(pgUrl.replace(/\/[^/]*$/, `/${db.database}`), { max: 1, onnotice: () => {} })
    t.after(() => pg.end())
    const env = { CONNECTOR_SECRET_KEY: process.env.CONNECTOR_SECRET_KEY! }

    // A dry run says what it would do and touches nothing.
    const dry = await runCli(['migrate', '--from', fromA, '--to', toB, '--dry-run', '--json'], { cwd: work, env })
    assert.equal(dry.code, 0, dry.stderr)
    const plan = JSON.parse(dry.stdout) as Json
    assert.deepEqual(plan.plan.map((p: Json) => [p.kb_id, p.documents, p.target]), [['another', 1, 'absent'], [src.kb, 11, 'absent']])
    assert.equal((await pg`SELECT to_regclass('knowledge_bases') AS t`)[0].t, null, 'the dry run created nothing in the target')
    assert.equal(proxy.puts(), 0)

    // Killed while the sixth file is on its way: five documents are in, whole.
    proxy.holdAfter(5)
    const first = startCli(['migrate', '--from', fromA, '--to', toB, '--json'], { cwd: work, env })
    await waitFor(async () => proxy.held() > 0, 'the sixth object write', 120_000)
    first.child.kill('SIGKILL')
    await first.exited
    proxy.release()
    const copiedFirst = Number((await pg`SELECT count(*)::int AS n FROM kb_transfer_docs`)[0].n)
    assert.equal(copiedFirst, 5, 'the KB of one document, then four of the other')
    assert.equal(proxy.puts(), 5)

    // Again: it goes on where it stopped.
    const second = await runCli(['migrate', '--from', fromA, '--to', toB, '--json'], { cwd: work, env })
    assert.equal(second.code, 0, second.stderr + second.stdout)
    const result = JSON.parse(second.stdout) as Json
    const byKb = Object.fromEntries(result.kbs.map((k: Json) => [k.kb_id, k]))
    assert.deepEqual([byKb.another.outcome, byKb.another.written], ['already_copied', 0])
    assert.deepEqual([byKb[src.kb].outcome, byKb[src.kb].written, byKb[src.kb].already_there], ['resumed', 7, 4])
    const v = byKb[src.kb].report.verification
    assert.equal(v.ok, true, JSON.stringify(v))
    assert.deepEqual(v.counts.documents, { expected: 11, actual: 11 })
    assert.equal(v.searches.matched, v.searches.checked)
    assert.ok(v.searches.checked >= 8)
    assert.deepEqual(result.deployment, { user_profiles: 1, system_config: 1 })
    // Each file written once, each document row inserted once (the statistics count aborted inserts too).
    assert.equal(proxy.puts(), 12)
    await waitFor(async () => Number((await pg`SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'documents'`)[0]?.n_tup_ins) === 12, 'the insert statistics', 10_000)

    // And once more: nothing to do.
    const third = await runCli(['migrate', '--from', fromA, '--to', toB], { cwd: work, env })
    assert.equal(third.code, 0, third.stderr)
    assert.match(third.stdout, /already copied/)
    assert.equal(proxy.puts(), 12)

    // The service on B answers as A did; members, invite, profile, runtime config and the sealed secret came along.
    const bDirect = { ...bSettings, s3: { ...bSettings.s3, endpoint: s3.endpoint } }
    const b = await startApp(t, { settings: { ...bDirect, connectors: { egress: { allow: ['127.0.0.1/32'] } } } })
    assert.equal(b.app.adapters.vectors.name, 'pgvector')
    assertSameAcrossStores(await snapshot(b, src.kb, src.queries, acrossStores), beforeAcross)
    assertSameAcrossStores(await snapshot(b, 'another', ['ledgers and inventories'], acrossStores), beforeOtherAcross)
    const sqlB = b.app.adapters.sql
    assert.deepEqual((await sqlB.query<Json>('SELECT user_id, role FROM kb_members WHERE kb_id = $1 ORDER BY user_id', [src.kb])).map((r: Json) => [r.user_id, r.role]),
      [['u-owner', 'owner'], ['u-viewer', 'viewer']])
    assert.equal((await sqlB.query<Json>('SELECT email FROM kb_invites WHERE kb_id = $1', [src.kb]))[0].email, 'new@example.com')
    assert.equal((await sqlB.query<Json>(`SELECT max_kb_count FROM user_profiles WHERE user_id = 'u-owner'`))[0].max_kb_count, 7)
    const [conn] = await sqlB.query<Json>('SELECT config, status FROM connectors WHERE kb_id = $1', [src.kb])
    assert.match(conn.config.auth_headers.Authorization, /^enc:v1:/, 'migrate keeps the sealed secret (same CONNECTOR_SECRET_KEY)')
    assert.equal(conn.status, 'active')
    await b.app.close()

    // Back to a fresh embedded folder, from B (stopped), with pgvector as the source this time.
    const cDir = tmp(t, 'quarry-migrate-c-')
    const toC = writeYaml(work, 'c.yaml', { data_dir: cDir })
    const fromB = writeYaml(work, 'b2.yaml', bDirect)
    const back = await runCli(['migrate', '--from', fromB, '--to', toC, '--json'], { cwd: work, env })
    assert.equal(back.code, 0, back.stderr + back.stdout)
    const backResult = JSON.parse(back.stdout) as Json
    assert.deepEqual(backResult.kbs.map((k: Json) => [k.kb_id, k.outcome, k.written, k.report.verification.ok]), [['another', 'copied', 1, true], [src.kb, 'copied', 11, true]])
    const c = await startApp(t, { settings: { data_dir: cDir, connectors: { egress: { allow: ['127.0.0.1/32'] } } } })
    assert.equal(c.app.adapters.sql.name, 'pglite')
    assert.deepEqual(await snapshot(c, src.kb, src.queries), before)
    assert.deepEqual(await snapshot(c, 'another', ['ledgers and inventories']), beforeOther)
  })
})
