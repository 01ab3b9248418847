// Issue 15, security suite: secrets never appear in a response, a log line or an error. The service runs the
// access-controlled edition with every kind of secret set to a value of its own (embedding and rerank API
// keys, SMTP and identity-provider admin secrets, S3's secret key with the services, connector passwords as a
// literal and through env:NAME, CONNECTOR_SECRET_KEY itself, the callers' bearer tokens), its log written at
// DEBUG into memory. A run then makes each of them fail where it is used (a provider that answers 401 and
// echoes the key back, a reranker that fails, an SMTP server that is not there, an admin API that refuses,
// a web site that refuses the password) and reads every GET operation as the super-admin. Every response
// body and header, and every log line, is searched for every secret value.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:net'
import type { AddressInfo } from 'node:net'
import { createLogger } from '../../kernel/log.ts'
import { startAuthzFixture } from '../helpers/authz-fixture.ts'
import { startFakeEmbeddingServer } from '../helpers/fake-embedding-server.ts'
import { startFakeRerankServer } from '../helpers/fake-rerank-server.ts'
import { skipUnless } from '../helpers/services.ts'
import { waitFor } from '../helpers/wait.ts'
import { startWebSite } from '../helpers/web-site.ts'
import type { StartOptions } from '../helpers/app.ts'
import { operationsFrom } from './fuzz-engine.ts'

type Json = any

const secret = (what: string) => `${what}-${randomBytes(9).toString('hex')}`

/** A port nothing listens on (an SMTP server that is down). */
async function deadPort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r))
  const port = (s.address() as AddressInfo).port
  await new Promise<void>((r) => s.close(() => r()))
  return port
}

function secretsSuite(label: string, opts: StartOptions): void {
  it(`${label}: no secret value in any response, header, log line or error, through a run where each of them fails`, async (t) => {
    const S = {
      embedKey: secret('sk-embed'), rerankKey: secret('rr-key'), smtpPassword: secret('smtp-pw'), oidcAdminSecret: secret('oidc-admin'),
      connectorKey: secret('conn-key'), literalPassword: secret('lit-pw'), envPassword: secret('env-pw'),
    }
    // The connectors plugin reads its sealing key, and a sync its env: references, from the environment.
    const saved = { key: process.env.CONNECTOR_SECRET_KEY, pw: process.env.CONNECTOR_SECTEST_PASSWORD }
    process.env.CONNECTOR_SECRET_KEY = S.connectorKey
    process.env.CONNECTOR_SECTEST_PASSWORD = S.envPassword
    t.after(() => {
      for (const [name, v] of [['CONNECTOR_SECRET_KEY', saved.key], ['CONNECTOR_SECTEST_PASSWORD', saved.pw]] as const) {
        if (v === undefined) delete process.env[name]
        else process.env[name] = v
      }
    })

    const embed = await startFakeEmbeddingServer({ dimensions: 64 })
    const rerank = await startFakeRerankServer()
    const site = await startWebSite({ articles: 1, basicUser: 'reader', basicPassword: 'the-right-password' })
    t.after(async () => {
      await embed.close()
      await rerank.close()
      await site.close()
    })
    const lines: string[] = []
    const log = createLogger('DEBUG', { write: (line: string) => void lines.push(line) })
    const fx = await startAuthzFixture(t, {
      ...opts,
      log,
      settings: {
        queue_worker: { enabled: true },
        queue_poll: { poll_interval_sec: 0.1, retry_interval_sec: 0.2 },
        provider: { name: 'hosted', url: embed.url, api_key: S.embedKey },
        embedding: { model: 'sectest-embed', vector_size: 64, max_retries: 1 },
        retrieval: { rerank: { enabled: true, url: rerank.url, api_key: S.rerankKey, timeout_sec: 1 } },
        smtp: { host: '127.0.0.1', port: await deadPort(), username: 'mailer', password: S.smtpPassword },
        // Non-empty, so a look-up asks the issuer's token endpoint for an admin token, which it refuses.
        oidc: { admin_url: 'http://127.0.0.1:9/admin/realms/quarry', admin_client_id: 'quarry-admin', admin_client_secret: S.oidcAdminSecret },
      },
    })
    const { svc } = fx
    const s3Secret = (svc.app.settings as Json).s3?.secret_key as string | undefined
    const ownerToken = await fx.token('u-owner')
    const superToken = await fx.token('u-super', { superAdmin: true })
    const values: Record<string, string> = { ...S, ownerToken, superToken, ...(opts.services && s3Secret ? { s3Secret } : {}) }

    const seen: string[] = []
    const record = async (what: string, res: Response) => {
      const body = await res.text()
      seen.push(`${what} -> ${res.status} ${JSON.stringify([...res.headers])} ${body}`)
      return { status: res.status, body }
    }

    const kb = await fx.createKb()
    // The embedding provider refuses the key and echoes it, as some do: the document fails with a reason.
    embed.setDefault({ status: 401, message: `Incorrect API key provided: ${S.embedKey}` })
    const docId = await fx.uploadDoc(kb, 'refused.md', 'Leave policy: request annual leave two weeks ahead.')
    const failedDoc = await waitFor(async () => {
      const d = JSON.parse((await record('doc status', await fx.as('owner', `/api/kb/${kb}/docs/${docId}/status`))).body)
      return d.status === 'failed' ? d : null
    }, 'the document to fail on the refused key')
    assert.match(failedDoc.last_error, /401|API key/i, 'the failure names its cause')
    embed.setDefault({})
    // Then the provider accepts it: a document indexed, searched with a reranker that fails (fused order kept).
    const okDoc = await fx.uploadDoc(kb, 'ok.md', 'Sick leave needs a note from a doctor after three days.')
    await waitFor(async () => JSON.parse((await record('doc status', await fx.as('owner', `/api/kb/${kb}/docs/${okDoc}/status`))).body).status === 'indexed', 'indexed')
    rerank.mode = 'fail'
    assert.equal((await record('search', await fx.as('owner', '/api/search', { method: 'POST', json: { query: 'sick leave note', kb_ids: [kb] } }))).status, 200)
    assert.ok(rerank.requests.some((r) => r.authorization?.includes(S.rerankKey)), 'the reranker was called with its key')

    // Connectors: a literal password and an env: one, both refused by the site.
    const connectorIds: string[] = []
    for (const password of [S.literalPassword, 'env:CONNECTOR_SECTEST_PASSWORD']) {
      const { status, body } = await record('create connector', await fx.as('owner', '/api/connectors', {
        method: 'POST',
        json: { kb_id: kb, name: `guarded-${connectorIds.length}`, source_type: 'web', config: { seed_urls: [`${site.url}/members?c=${connectorIds.length}`], auth_basic: { username: 'reader', password }, request_delay_ms: 0 } },
      }))
      assert.equal(status, 201, body)
      const id = JSON.parse(body).connector_id as string
      connectorIds.push(id)
      assert.equal((await record('sync', await fx.as('owner', `/api/connectors/${id}/sync`, { method: 'POST' }))).status, 202)
    }
    for (const id of connectorIds) {
      const st = await waitFor(async () => {
        const s = JSON.parse((await record('sync status', await fx.as('owner', `/api/connectors/${id}/sync/status`))).body)
        return s.sync_status === 'idle' ? s : null
      }, 'the refused sync to end', 60_000)
      assert.match(st.last_error, /HTTP 401/, 'the site refused the password')
    }
    // An invite (its e-mail fails: no SMTP server) and a directory look-up (the admin client is refused).
    await record('invite', await fx.as('owner', `/api/kb/${kb}/members`, { method: 'POST', json: { email: 'newcomer@example.com', role: 'viewer' } }))
    await record('lookup', await fx.as('super_admin', '/api/users/lookup?email=someone%40example.com'))
    // Forged tokens: refused without being echoed.
    await record('forged', await svc.request('/api/kb', { headers: { authorization: `Bearer ${ownerToken.slice(0, -4)}AAAA` } }))
    await record('malformed', await svc.request('/api/kb', { headers: { authorization: `Bearer ${S.embedKey}` } }))

    // Every GET operation as the super-admin, with this run's ids.
    const doc = (await (await svc.request('/openapi.json')).json()) as Json
    const ids: Record<string, string> = { kb_id: kb, doc_id: okDoc, connector_id: connectorIds[0], user_id: 'u-owner' }
    for (const op of operationsFrom(doc).filter((o) => o.method === 'GET')) {
      const path = op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => ids[name] ?? 'x1')
      await record(op.id, await fx.as('super_admin', path))
    }
    await new Promise((r) => setTimeout(r, 500)) // the mailer and pino write in the background

    assert.ok(lines.length > 50, `the log was captured (${lines.length} lines)`)
    // Each secret's failure really happened and was logged (a run where nothing failed would prove nothing).
    for (const msg of ['document failed', 'reranker failed; fused order returned', 'user directory look-up failed', 'e-mail not sent']) {
      assert.ok(lines.some((l) => l.includes(`"msg":"${msg}`)), `logged: ${msg}`)
    }
    assert.ok(lines.some((l) => l.includes('Incorrect API key provided: ***')), 'the echoed key is masked, the rest of the reason kept')
    const leaks: string[] = []
    for (const [name, value] of Object.entries(values)) {
      for (const l of lines) if (l.includes(value)) leaks.push(`log line has ${name}: ${l.slice(0, 400)}`)
      for (const r of seen) if (r.includes(value)) leaks.push(`response has ${name}: ${r.slice(0, 400)}`)
      // A token's signature alone identifies it; so does a key's random tail.
      const tail = value.slice(-16)
      for (const l of lines) if (l.includes(tail) && !l.includes(value)) leaks.push(`log line has part of ${name}: ${l.slice(0, 400)}`)
    }
    assert.deepEqual(leaks.slice(0, 10), [], `${leaks.length} leaks`)
    t.diagnostic(`${lines.length} log lines and ${seen.length} responses searched for ${Object.keys(values).length} secrets`)
  })
}

describe('secrets on the embedded default', () => secretsSuite('embedded', {}))

describe('secrets on PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  secretsSuite('services', { services: true }))
