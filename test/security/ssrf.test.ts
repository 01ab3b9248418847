// Server-side request forgery (issue 37, OWASP API7): connectors reach only where the operator allows. Run in the
// base edition and in the access-controlled one (oidc-provider, a KB owner creating connectors), on both driver
// sets. Refused destinations are checked through the public API: 422 at create and PATCH naming the field and the
// setting, for every address class as a literal (in each spelling the URL parser reads as that address) and
// through a name; at sync time for connectors stored before the policy, names that answer differently later
// (DNS rebinding), and redirect hops (GitHub, Confluence attachments). Host names are resolved by a resolver the
// test controls (the connectors plugin's `resolve`), never the machine's. Traffic goes to loopback only: the
// refused addresses that could be connected to are 127.0.0.2 servers that count every request they get (it must
// stay 0); private, link-local and metadata addresses are only ever refused, or allowed at create and never synced.
import assert from 'node:assert/strict'
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http'
import { createServer as createTcpServer, isIP, type AddressInfo, type Socket } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { ConfigError } from '../../kernel/config/load.ts'
import { defaultPlugins } from '../../kernel/plugins.ts'
import { createConnectorsPlugin } from '../../plugins/connectors/index.ts'
import type { Resolve } from '../../plugins/connectors/egress.ts'
import { startApp, uniqueId, type StartedApp, type StartOptions } from '../helpers/app.ts'
import { startAuthzFixture } from '../helpers/authz-fixture.ts'
import { startConfluenceServer } from '../helpers/confluence-server.ts'
import { startGithubServer } from '../helpers/github-server.ts'
import { skipUnless } from '../helpers/services.ts'
import { waitFor } from '../helpers/wait.ts'
import { startWebSite, type WebSite } from '../helpers/web-site.ts'
import { CONNECTOR_TEST_SETTINGS } from '../plugins/connectors/connectors.suite.ts'

type Json = any
type Edition = 'base' | 'access-controlled'

// ---------------------------------------------------------------------------------------------------------------
// Servers and the resolver.

/** Names the test resolves: a fixed answer, or one that depends on how many times the name was asked. */
function testResolver() {
  const answers = new Map<string, (call: number) => string[]>()
  const calls = new Map<string, number>()
  const resolve: Resolve = async (host) => {
    const name = host.toLowerCase()
    const n = (calls.get(name) ?? 0) + 1
    calls.set(name, n)
    const answer = answers.get(name)
    if (!answer) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' })
    return answer(n).map((address) => ({ address, family: isIP(address) }))
  }
  return {
    resolve,
    set(name: string, answer: string[] | ((call: number) => string[])) {
      answers.set(name, typeof answer === 'function' ? answer : () => answer)
      calls.delete(name)
    },
    calls: (name: string) => calls.get(name) ?? 0,
  }
}
type TestResolver = ReturnType<typeof testResolver>

interface Counted {
  url: string
  port: number
  requests: string[]
  close(): Promise<void>
}

/** An HTTP server on `host` that answers every request (and counts it); a refused destination's stays at 0. */
async function httpServer(host: string, port: number, handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<Counted> {
  const requests: string[] = []
  const server = createServer((req, res) => {
    requests.push(req.url ?? '')
    handler(req, res)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => resolve())
  })
  const actual = (server.address() as AddressInfo).port
  return {
    url: `http://${host}:${actual}`, port: actual, requests,
    async close() {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

const SECRET = 'internal-only-secret-7f3a'
const secretPage = (_req: IncomingMessage, res: ServerResponse) => {
  res.writeHead(200, { 'content-type': 'text/html' })
  res.end(`<!doctype html><html><head><title>Internal</title></head><body><h1>Internal</h1><p>${SECRET} ${'internal text '.repeat(30)}</p></body></html>`)
}

/** A port on 127.0.0.2 that accepts connections and never answers (what a filtered host looks like). */
async function blackHole(): Promise<{ port: number; connections: () => number; close(): Promise<void> }> {
  const sockets = new Set<Socket>()
  let count = 0
  const server = createTcpServer((s) => {
    count++
    sockets.add(s)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.2', () => resolve()))
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => count,
    async close() {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** A port on 127.0.0.2 nothing listens on (connections would be refused). */
async function closedPort(): Promise<number> {
  const s = await httpServer('127.0.0.2', 0, () => {})
  await s.close()
  return s.port
}

// ---------------------------------------------------------------------------------------------------------------
// One service per edition, with a KB owner's view of it.

interface Harness {
  edition: Edition
  svc: StartedApp
  resolver: TestResolver
  /** A request as the KB owner (the base edition has no callers to tell apart). */
  request(path: string, init?: RequestInit & { json?: unknown }): Promise<Response>
  newKb(): Promise<string>
}

async function startHarness(t: { after(fn: () => unknown): void }, edition: Edition, driver: StartOptions, egress: Json): Promise<Harness> {
  const resolver = testResolver()
  const plugins = defaultPlugins().map((p) => (p.name === 'connectors' ? createConnectorsPlugin({ resolve: resolver.resolve }) : p))
  const settings = { ...CONNECTOR_TEST_SETTINGS, queue_worker: { enabled: true }, connectors: { egress } }
  if (edition === 'base') {
    const svc = await startApp(t, { ...driver, plugins, settings })
    return {
      edition, svc, resolver, request: svc.request,
      async newKb() {
        const kb = uniqueId()
        assert.equal((await svc.request('/api/kb', { method: 'POST', json: { kb_id: kb } })).status, 201)
        return kb
      },
    }
  }
  const f = await startAuthzFixture(t, { ...driver, plugins, settings })
  return { edition, svc: f.svc, resolver, request: (path, init) => f.as('owner', path, init), newKb: () => f.createKb() }
}

const createWeb = (h: Harness, kb: string, seeds: string[], extra: Json = {}) =>
  h.request('/api/connectors', { method: 'POST', json: { kb_id: kb, name: `web-${uniqueId('c')}`, source_type: 'web', config: { seed_urls: seeds, request_delay_ms: 0, ...extra } } })

async function created(res: Response): Promise<Json> {
  const body = await res.json() as Json
  assert.equal(res.status, 201, JSON.stringify(body))
  return body
}

/** 422 with one issue at `loc`: the refusal text, then the setting that would allow it. */
async function refused(res: Response, loc: (string | number)[], host: string, cls: string): Promise<void> {
  const body = await res.json() as Json
  assert.equal(res.status, 422, `${host}: ${JSON.stringify(body)}`)
  assert.equal(body.detail.length, 1, JSON.stringify(body))
  const [issue] = body.detail
  assert.deepEqual(issue.loc, loc)
  assert.equal(issue.type, 'destination_not_allowed')
  assert.ok(issue.msg.startsWith(`Destination not allowed: ${host} (${cls}); an operator allows it in the settings with connectors.egress.allow`), issue.msg)
  if (cls === 'private') assert.match(issue.msg, /connectors\.egress\.private_networks: allow/)
}

async function syncAndWait(h: Harness, id: string): Promise<Json> {
  const res = await h.request(`/api/connectors/${id}/sync`, { method: 'POST' })
  assert.equal(res.status, 202, await res.clone().text())
  return waitFor(async () => {
    const st = await (await h.request(`/api/connectors/${id}/sync/status`)).json() as Json
    return st.sync_status === 'idle' && st
  }, `connector ${id} idle`, 60_000, 50)
}

/** A connector as if stored before the policy existed (or under an older allow-list): its config written directly. */
async function storeConfig(h: Harness, id: string, config: Json): Promise<void> {
  await h.svc.app.adapters.sql.query('UPDATE connectors SET config = $2::text::jsonb WHERE connector_id = $1::uuid', [id, JSON.stringify(config)])
}

// The shared services' policy: the test servers' loopback address, one private CIDR, two names (one a wildcard)
// and one IPv6 address on one port. Private ranges otherwise follow the edition's default.
const SHARED_EGRESS = { allow: ['127.0.0.1/32', '10.20.0.0/16', 'wiki.corp.test', '*.apps.corp.test', 'intranet.corp.test', '[fd00:20::1]:8443'] }

// ---------------------------------------------------------------------------------------------------------------

function ssrfSuite(edition: Edition, label: string, driver: StartOptions): void {
  const cleanups: (() => unknown)[] = []
  const t = { after: (fn: () => unknown) => void cleanups.push(fn) }
  let h: Harness
  let site: WebSite
  /** Same port as the site, on 127.0.0.2: where a rebinding name would lead. */
  let secret: Counted
  const privateRefused = edition === 'access-controlled'

  before(async () => {
    site = await startWebSite({ articles: 4, perPage: 10, slowMs: 0 })
    cleanups.push(() => site.close())
    secret = await httpServer('127.0.0.2', Number(new URL(site.url).port), secretPage)
    cleanups.push(() => secret.close())
    h = await startHarness(t, edition, driver, SHARED_EGRESS)
  })
  after(async () => {
    for (const fn of cleanups.reverse()) await fn()
  })

  it(`${label}: every address class as a literal is refused at create with 422 naming the field and the setting; private ranges by the edition's default`, async () => {
    const kb = await h.newKb()
    const own = Number(new URL(h.svc.url).port)
    const cases: [string, string, string][] = [
      ['http://127.0.0.2/docs', '127.0.0.2', 'loopback'],
      ['http://127.255.255.254:8080/', '127.255.255.254', 'loopback'],
      ['http://[::1]:8080/', '::1', 'loopback'],
      ['http://169.254.1.1/', '169.254.1.1', 'link-local'],
      ['http://[fe80::1]/', 'fe80::1', 'link-local'],
      ['http://169.254.169.254/latest/meta-data/', '169.254.169.254', 'cloud metadata'],
      ['http://[fd00:ec2::254]/latest/meta-data/', 'fd00:ec2::254', 'cloud metadata'],
      ['http://100.100.100.200/latest/meta-data/', '100.100.100.200', 'cloud metadata'],
      ['http://0.0.0.0:8080/', '0.0.0.0', 'unspecified'],
      ['http://[::]:8080/', '::', 'unspecified'],
      ['http://224.0.0.1/', '224.0.0.1', 'multicast'],
      ['http://[ff02::1]/', 'ff02::1', 'multicast'],
      ['http://240.0.0.1/', '240.0.0.1', 'reserved'],
      ['http://255.255.255.255/', '255.255.255.255', 'reserved'],
      // The service itself, on the loopback address the list allows: its own port is refused all the same.
      [`http://127.0.0.1:${own}/openapi.json`, '127.0.0.1', 'own listener'],
      // server.port (8000 by default) counts too, wherever the service was told to listen.
      ['http://127.0.0.1:8000/', '127.0.0.1', 'own listener'],
    ]
    for (const [url, host, cls] of cases) await refused(await createWeb(h, kb, [url]), ['body', 'config', 'seed_urls', 0], host, cls)
    const privates: [string, string][] = [
      ['http://10.0.0.1/', '10.0.0.1'], ['http://172.16.0.1/', '172.16.0.1'], ['http://172.31.255.1/', '172.31.255.1'],
      ['http://192.168.1.1/', '192.168.1.1'], ['http://100.64.0.1/', '100.64.0.1'], ['http://[fc00::1]/', 'fc00::1'], ['http://[fd12:3456::1]/', 'fd12:3456::1'],
    ]
    for (const [url, host] of privates) {
      const res = await createWeb(h, kb, [url])
      if (privateRefused) await refused(res, ['body', 'config', 'seed_urls', 0], host, 'private')
      else await created(res)
    }
    // Neighbours of the ranges are public: created (and never synced here).
    for (const url of ['http://172.32.0.1/', 'http://100.128.0.1/', 'http://11.0.0.1/', 'http://[2001:4860::1]/']) await created(await createWeb(h, kb, [url]))
    // Each source's field is named: the second seed, base_url, api_url.
    await refused(await createWeb(h, kb, [`${site.url}/docs`, 'http://169.254.169.254/']), ['body', 'config', 'seed_urls', 1], '169.254.169.254', 'cloud metadata')
    await refused(await h.request('/api/connectors', { method: 'POST', json: { kb_id: kb, name: 'wiki', source_type: 'confluence', config: { base_url: 'http://127.0.0.2:8090', space_key: 'ENG' } } }),
      ['body', 'config', 'base_url'], '127.0.0.2', 'loopback')
    await refused(await h.request('/api/connectors', { method: 'POST', json: { kb_id: kb, name: 'ghe', source_type: 'github', config: { owner: 'acme', repo: 'r', api_url: 'http://[fd00:ec2::254]/api/v3' } } }),
      ['body', 'config', 'api_url'], 'fd00:ec2::254', 'cloud metadata')
  })

  it(`${label}: decimal, octal, hex and IPv6 spellings of loopback and metadata addresses are read as those addresses`, async () => {
    const kb = await h.newKb()
    const cases: [string, string, string][] = [
      ['http://2130706434/', '127.0.0.2', 'loopback'], // decimal
      ['http://0177.0.0.2/', '127.0.0.2', 'loopback'], // octal
      ['http://0x7f000002/', '127.0.0.2', 'loopback'], // hex
      ['http://0x7f.2/', '127.0.0.2', 'loopback'], // short hex
      ['http://127.2/', '127.0.0.2', 'loopback'], // short dotted
      ['http://0x7F.0.0.02:8080/', '127.0.0.2', 'loopback'],
      ['http://[::ffff:127.0.0.2]/', '::ffff:7f00:2', 'loopback'], // IPv4-mapped
      ['http://[0:0:0:0:0:ffff:7f00:2]/', '::ffff:7f00:2', 'loopback'],
      ['http://[::127.0.0.2]/', '::7f00:2', 'loopback'], // IPv4-compatible
      ['http://[64:ff9b::127.0.0.2]/', '64:ff9b::7f00:2', 'loopback'], // NAT64
      ['http://[2002:7f00:2::]/', '2002:7f00:2::', 'loopback'], // 6to4
      ['http://2852039166/', '169.254.169.254', 'cloud metadata'],
      ['http://0xa9.0xfe.0xa9.0xfe/', '169.254.169.254', 'cloud metadata'],
      ['http://[::ffff:169.254.169.254]/', '::ffff:a9fe:a9fe', 'cloud metadata'],
      ['http://0/', '0.0.0.0', 'unspecified'],
    ]
    for (const [url, host, cls] of cases) await refused(await createWeb(h, kb, [url]), ['body', 'config', 'seed_urls', 0], host, cls)
    // 127.0.0.1 is listed: its other spellings are the same address, and pass.
    for (const url of ['http://2130706433:9/a', 'http://0x7f.1:9/b', 'http://[::ffff:127.0.0.1]:9/c']) await created(await createWeb(h, kb, [url]))
  })

  it(`${label}: names are checked on what they resolve to (every class), with the same refusals; a name that does not resolve is left to the sync`, async () => {
    const kb = await h.newKb()
    const r = h.resolver
    const names: [string, string[], string][] = [
      ['loop.test', ['127.0.0.2'], 'loopback'],
      ['loop6.test', ['::1'], 'loopback'],
      ['mapped.test', ['::ffff:127.0.0.2'], 'loopback'],
      ['linklocal.test', ['169.254.7.7'], 'link-local'],
      ['metadata.test', ['169.254.169.254'], 'cloud metadata'],
      ['metadata6.test', ['fd00:ec2::254'], 'cloud metadata'],
      ['unspecified.test', ['0.0.0.0'], 'unspecified'],
      ['multicast.test', ['239.1.2.3'], 'multicast'],
      ['both.test', ['169.254.169.254', '127.0.0.2'], 'cloud metadata'],
    ]
    for (const [name, addresses] of names) r.set(name, addresses)
    for (const [name, , cls] of names) await refused(await createWeb(h, kb, [`http://${name}/`]), ['body', 'config', 'seed_urls', 0], name, cls)
    r.set('private.test', ['10.9.8.7'])
    r.set('private6.test', ['fd00::9'])
    for (const name of ['private.test', 'private6.test']) {
      const res = await createWeb(h, kb, [`http://${name}/`])
      if (privateRefused) await refused(res, ['body', 'config', 'seed_urls', 0], name, 'private')
      else await created(res)
    }
    // The service itself through a name: localhost is loopback whatever a resolver says (RFC 6761), and its port is ours.
    await refused(await createWeb(h, kb, [`http://localhost:${new URL(h.svc.url).port}/`]), ['body', 'config', 'seed_urls', 0], 'localhost', 'own listener')
    // A name with one allowed address among refused ones: created, and a sync would connect to the allowed one only.
    r.set('mixed.test', ['127.0.0.2', '127.0.0.1'])
    await created(await createWeb(h, kb, ['http://mixed.test:9/']))
    await created(await createWeb(h, kb, ['http://nowhere.test/']))
    assert.equal(r.calls('nowhere.test'), 1, 'the name was looked up')
  })

  it(`${label}: the allow-list lets through exactly what it names (CIDR, name, wildcard, address with port); a name never unlocks loopback`, async () => {
    const kb = await h.newKb()
    const r = h.resolver
    r.set('wiki.corp.test', ['10.30.0.1'])
    r.set('sub.wiki.corp.test', ['10.30.0.1'])
    r.set('other.corp.test', ['10.30.0.1'])
    r.set('x.apps.corp.test', ['10.40.0.1'])
    r.set('apps.corp.test', ['10.40.0.1'])
    r.set('intranet.corp.test', ['127.0.0.2'])
    const allowed = ['http://10.20.3.4/', 'http://10.20.255.255:8080/', 'http://wiki.corp.test/', 'http://WIKI.corp.test./x', 'http://x.apps.corp.test/', 'https://[fd00:20::1]:8443/', `${site.url}/docs`]
    for (const url of allowed) await created(await createWeb(h, kb, [url]))
    const unlisted: [string, string][] = [
      ['http://10.21.0.1/', '10.21.0.1'], ['http://10.19.255.255/', '10.19.255.255'], ['http://other.corp.test/', 'other.corp.test'],
      ['http://sub.wiki.corp.test/', 'sub.wiki.corp.test'], ['http://apps.corp.test/', 'apps.corp.test'], ['https://[fd00:20::1]/', 'fd00:20::1'],
      ['http://[fd00:20::2]:8443/', 'fd00:20::2'],
    ]
    for (const [url, host] of unlisted) {
      const res = await createWeb(h, kb, [url])
      if (privateRefused) await refused(res, ['body', 'config', 'seed_urls', 0], host, 'private')
      else await created(res)
    }
    // Listed by name, but it resolves to loopback: only an address or CIDR entry admits loopback.
    await refused(await createWeb(h, kb, ['http://intranet.corp.test/']), ['body', 'config', 'seed_urls', 0], 'intranet.corp.test', 'loopback')
    await refused(await createWeb(h, kb, ['http://127.0.0.2/']), ['body', 'config', 'seed_urls', 0], '127.0.0.2', 'loopback')
  })

  it(`${label}: PATCH checks the new config the same way (422 naming the seed) and leaves the connector as it was`, async () => {
    const kb = await h.newKb()
    const c = await created(await createWeb(h, kb, [`${site.url}/docs`]))
    const res = await h.request(`/api/connectors/${c.connector_id}`, { method: 'PATCH', json: { config: { ...c.config, seed_urls: [`${site.url}/docs`, 'http://0x7f.2/'] } } })
    await refused(res, ['body', 'config', 'seed_urls', 1], '127.0.0.2', 'loopback')
    h.resolver.set('rebound.test', ['169.254.169.254'])
    await refused(await h.request(`/api/connectors/${c.connector_id}`, { method: 'PATCH', json: { config: { ...c.config, seed_urls: ['http://rebound.test/'] } } }),
      ['body', 'config', 'seed_urls', 0], 'rebound.test', 'cloud metadata')
    const now = await (await h.request(`/api/connectors/${c.connector_id}`)).json() as Json
    assert.deepEqual(now.config.seed_urls, [`${site.url}/docs`])
  })

  it(`${label}: connectors stored before the policy are refused at sync time with one text, whether the port answers, refuses or never answers; nothing is sent`, async () => {
    const kb = await h.newKb()
    const hole = await blackHole()
    cleanups.push(() => hole.close())
    const closed = await closedPort()
    const ports = { answers: secret.port, refuses: closed, silent: hole.port }
    const before = secret.requests.length
    const lastErrors: Record<string, string[]> = {}
    for (const [kind, port] of Object.entries(ports)) {
      // Created against the allowed site, then pointed elsewhere behind the API's back (an older service's rows).
      const web = await created(await createWeb(h, kb, [`${site.url}/docs/${kind}`], { request_timeout_sec: 1 }))
      await storeConfig(h, web.connector_id, { ...web.config, seed_urls: [`http://2130706434:${port}/docs`] })
      const gh = await created(await h.request('/api/connectors', { method: 'POST', json: { kb_id: kb, name: `gh-${kind}`, source_type: 'github', config: { owner: 'acme', repo: kind, api_url: site.url, request_delay_ms: 0, request_timeout_sec: 1 } } }))
      await storeConfig(h, gh.connector_id, { ...gh.config, api_url: `http://127.0.0.2:${port}/api/v3` })
      const wiki = await created(await h.request('/api/connectors', { method: 'POST', json: { kb_id: kb, name: `wiki-${kind}`, source_type: 'confluence', config: { base_url: `${site.url}/${kind}`, space_key: 'ENG', request_delay_ms: 0, request_timeout_sec: 1 } } }))
      await storeConfig(h, wiki.connector_id, { ...wiki.config, base_url: `http://[::ffff:127.0.0.2]:${port}` })
      lastErrors[kind] = []
      for (const c of [web, gh, wiki]) {
        const st = await syncAndWait(h, c.connector_id)
        assert.equal(st.status, 'error')
        lastErrors[kind].push(st.last_error.replace(`:${port}`, ':PORT'))
      }
    }
    assert.deepEqual(lastErrors.answers, [
      'No seed URL could be fetched (http://127.0.0.2:PORT/docs: Destination not allowed: 127.0.0.2 (loopback))',
      'Destination not allowed: 127.0.0.2 (loopback)',
      'Destination not allowed: ::ffff:7f00:2 (loopback)',
    ])
    assert.deepEqual(lastErrors.refuses, lastErrors.answers)
    assert.deepEqual(lastErrors.silent, lastErrors.answers)
    assert.equal(secret.requests.length, before, 'no request reached 127.0.0.2')
    assert.equal(hole.connections(), 0, 'no connection reached 127.0.0.2')
  })

  it(`${label}: a name checked at create that resolves elsewhere at sync (DNS rebinding) is refused before any request, robots.txt included`, async () => {
    const kb = await h.newKb()
    const port = new URL(site.url).port
    // First answer (the check at create): the allowed site. Every later one: 127.0.0.2, same port.
    h.resolver.set('rebind.test', (call) => [call === 1 ? '127.0.0.1' : '127.0.0.2'])
    const siteBefore = site.requests.length
    const secretBefore = secret.requests.length
    const c = await created(await createWeb(h, kb, [`http://rebind.test:${port}/docs`], { depth: 1 }))
    const st = await syncAndWait(h, c.connector_id)
    assert.equal(st.last_error, `No seed URL could be fetched (http://rebind.test:${port}/docs: Destination not allowed: rebind.test (loopback))`)
    assert.equal(h.resolver.calls('rebind.test'), 2)
    assert.equal(secret.requests.length, secretBefore, 'nothing reached 127.0.0.2, robots.txt included')
    assert.equal(site.requests.length, siteBefore)
    assert.equal(st.doc_counts.total, 0)
  })

  it(`${label}: the address checked is the address connected to: one lookup per connection, pinned (a second lookup would have led to 127.0.0.2)`, async () => {
    const kb = await h.newKb()
    const port = new URL(site.url).port
    // Create and the sync's connection get 127.0.0.1; any further lookup gets 127.0.0.2. A client that checked one
    // answer and then connected by name would ask again and reach the secret server.
    h.resolver.set('flip.test', (call) => [call <= 2 ? '127.0.0.1' : '127.0.0.2'])
    const secretBefore = secret.requests.length
    const c = await created(await createWeb(h, kb, [`http://flip.test:${port}/docs/article/1`], { depth: 0, skip_seed_pages: false, respect_robots_txt: false }))
    const st = await syncAndWait(h, c.connector_id)
    assert.equal(st.last_error, null)
    assert.equal(h.resolver.calls('flip.test'), 2)
    assert.equal(secret.requests.length, secretBefore)
    assert.equal(site.requests.at(-1)?.path, '/docs/article/1')
    const docs = await (await h.request(`/api/connectors/${c.connector_id}/docs`)).json() as Json
    assert.deepEqual(docs.items.map((d: Json) => d.source), [`http://flip.test:${port}/docs/article/1`])
  })

  it(`${label}: GitHub: a redirect chain from an allowed host is followed while it stays allowed, and refused at the first hop that is not`, async () => {
    const kb = await h.newKb()
    const gh = await startGithubServer({ files: { 'README.md': '# Handbook\n\nHow the team works, written down at some length for the index.\n' } })
    cleanups.push(() => gh.close())
    let target = (path: string) => `${gh.url}${path}`
    // The configured host: every API call answers 302 to /hop, which answers 307 to wherever `target` says.
    const front = await httpServer('127.0.0.1', 0, (req, res) => {
      const u = new URL(req.url ?? '/', 'http://x')
      const location = u.pathname.startsWith('/hop/') ? target(req.url!.slice(4)) : `/hop${req.url}`
      res.writeHead(u.pathname.startsWith('/hop/') ? 307 : 302, { location }).end()
    })
    cleanups.push(() => front.close())
    process.env.CONNECTOR_TEST_SSRF_GH = 'ghp_not_for_other_origins'
    cleanups.push(() => delete process.env.CONNECTOR_TEST_SSRF_GH)
    const c = await created(await h.request('/api/connectors', { method: 'POST', json: { kb_id: kb, name: 'gh', source_type: 'github', config: { owner: 'acme', repo: 'handbook', api_url: front.url, auth_token_secret: 'CONNECTOR_TEST_SSRF_GH', request_delay_ms: 0 } } }))
    const ok = await syncAndWait(h, c.connector_id)
    assert.equal(ok.last_error, null)
    assert.equal(ok.doc_counts.total, 1)
    assert.ok(gh.requests.length > 0)
    // The credential stays with the configured origin: the other port on 127.0.0.1 is another origin.
    assert.ok(gh.requests.every((r) => r.authorization === null))

    const secretBefore = secret.requests.length
    target = (path: string) => `http://127.0.0.2:${secret.port}${path}`
    const st = await syncAndWait(h, c.connector_id)
    assert.equal(st.last_error, 'Destination not allowed: 127.0.0.2 (loopback)')
    h.resolver.set('evil.test', ['127.0.0.2'])
    target = (path: string) => `http://evil.test:${secret.port}${path}`
    assert.equal((await syncAndWait(h, c.connector_id)).last_error, 'Destination not allowed: evil.test (loopback)')
    target = (path: string) => `http://[::ffff:7f00:2]:${secret.port}${path}`
    assert.equal((await syncAndWait(h, c.connector_id)).last_error, 'Destination not allowed: ::ffff:7f00:2 (loopback)')
    assert.equal(secret.requests.length, secretBefore)
    assert.equal(st.doc_counts.total, 1, 'the document of the earlier sync is kept')
  })

  it(`${label}: Confluence: an attachment download redirected to a refused address fails that attachment; the page is stored, nothing is sent there`, async () => {
    const kb = await h.newKb()
    const wiki = await startConfluenceServer({
      pages: [{ id: '101', title: 'Runbook', html: `<p>${'How to run the service, step by step. '.repeat(12)}</p>`, attachments: [{ title: 'notes.md', body: '# Notes\n\nAttachment text long enough to be indexed as a document of its own.\n' }] }],
    })
    cleanups.push(() => wiki.close())
    let download = (path: string) => `${wiki.url}${path}`
    // The configured site: API calls proxied to the wiki (its links keep this host), downloads answered 302.
    const front = await httpServer('127.0.0.1', 0, (req, res) => {
      if (req.url?.startsWith('/download/')) return void res.writeHead(302, { location: download(req.url) }).end()
      const upstream = httpRequest(`${wiki.url}${req.url}`, { headers: { ...req.headers } }, (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers)
        up.pipe(res)
      })
      upstream.on('error', () => res.destroy())
      upstream.end()
    })
    cleanups.push(() => front.close())
    const c = await created(await h.request('/api/connectors', { method: 'POST', json: { kb_id: kb, name: 'wiki', source_type: 'confluence', config: { base_url: front.url, space_key: 'ENG', request_delay_ms: 0 } } }))
    const ok = await syncAndWait(h, c.connector_id)
    assert.equal(ok.last_error, null)
    assert.equal(ok.doc_counts.total, 2, 'page and attachment, the download followed to an allowed host')

    const secretBefore = secret.requests.length
    download = (path: string) => `http://127.0.0.2:${secret.port}${path}`
    // A new version makes the attachment worth downloading again.
    wiki.setPage({ ...wiki.pages.get('101')!, attachments: [{ title: 'notes.md', body: '# Notes v2\n\nChanged.\n', version: 2 }] })
    const st = await syncAndWait(h, c.connector_id)
    assert.equal(st.last_error, null, 'one attachment failing does not fail the sync')
    assert.equal(st.last_sync.failed, 1)
    assert.equal(secret.requests.length, secretBefore)
  })
}

function editionOverrides(edition: Edition, label: string, driver: StartOptions): void {
  it(`${label}: private_networks overrides the edition's default; the own port is allowed only by an entry naming it`, async (t) => {
    const flipped = edition === 'base' ? 'refuse' : 'allow'
    const h = await startHarness(t, edition, driver, { private_networks: flipped, allow: ['127.0.0.1/32', '127.0.0.1:8000', 'wiki.corp.test'] })
    const kb = await h.newKb()
    h.resolver.set('wiki.corp.test', ['10.30.0.1'])
    h.resolver.set('other.corp.test', ['10.30.0.1'])
    await created(await createWeb(h, kb, ['http://wiki.corp.test/']))
    for (const [url, host] of [['http://10.0.0.1/', '10.0.0.1'], ['http://other.corp.test/', 'other.corp.test'], ['http://[fd00::1]/', 'fd00::1']]) {
      const res = await createWeb(h, kb, [url])
      if (flipped === 'refuse') await refused(res, ['body', 'config', 'seed_urls', 0], host, 'private')
      else await created(res)
    }
    // Allowing private ranges admits nothing else.
    await refused(await createWeb(h, kb, ['http://169.254.169.254/']), ['body', 'config', 'seed_urls', 0], '169.254.169.254', 'cloud metadata')
    await refused(await createWeb(h, kb, ['http://127.0.0.2/']), ['body', 'config', 'seed_urls', 0], '127.0.0.2', 'loopback')
    // server.port is named with its address: allowed; the port actually listened on is not.
    await created(await createWeb(h, kb, ['http://127.0.0.1:8000/']))
    await refused(await createWeb(h, kb, [`http://127.0.0.1:${new URL(h.svc.url).port}/`]), ['body', 'config', 'seed_urls', 0], '127.0.0.1', 'own listener')
  })

  it(`${label}: with no allow-list, loopback is refused (the connector tests' 127.0.0.1 is a setting, not a default)`, async (t) => {
    const h = await startHarness(t, edition, driver, {})
    const kb = await h.newKb()
    await refused(await createWeb(h, kb, ['http://127.0.0.1:9/']), ['body', 'config', 'seed_urls', 0], '127.0.0.1', 'loopback')
    await refused(await createWeb(h, kb, ['http://localhost:9/']), ['body', 'config', 'seed_urls', 0], 'localhost', 'loopback')
    const res = await createWeb(h, kb, ['http://192.168.0.10/'])
    if (edition === 'base') await created(res)
    else await refused(res, ['body', 'config', 'seed_urls', 0], '192.168.0.10', 'private')
  })
}

describe('SSRF, base edition, embedded', () => {
  ssrfSuite('base', 'base/embedded', {})
  editionOverrides('base', 'base/embedded', {})
})

describe('SSRF, access-controlled edition, embedded', () => {
  ssrfSuite('access-controlled', 'ent/embedded', {})
  editionOverrides('access-controlled', 'ent/embedded', {})
})

describe('SSRF, base edition, PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  ssrfSuite('base', 'base/services', { services: true }))

describe('SSRF, access-controlled edition, PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  ssrfSuite('access-controlled', 'ent/services', { services: true }))

describe('SSRF settings', () => {
  it('an allow-list the policy cannot read stops the start, every bad entry named', async (t) => {
    const bad = ['10.0.0.0/33', '10.0.0.1/8', 'wiki..corp', '127.1', '0x7f.1', '[::1', '[::1]:0', 'host:99999', '-wiki.corp', '[10.0.0.1]']
    const err = await startApp(t, { settings: { connectors: { egress: { allow: ['127.0.0.1/32', ...bad, 'wiki.corp.example', '*.corp.example:443', '[::1]:8080', 'fd00::/8'] } } } })
      .then(() => null, (e: unknown) => e)
    assert.ok(err instanceof ConfigError, String(err))
    assert.equal(err.problems.length, bad.length, err.problems.join('\n'))
    assert.ok(err.problems.every((p) => p.startsWith('connectors.egress.allow: ')))
    assert.match(err.problems[0], /'10\.0\.0\.0\/33': the prefix length must be 0\.\.32/)
    assert.match(err.problems[1], /'10\.0\.0\.1\/8' has bits set after its prefix: write 10\.0\.0\.0\/8/)
    assert.match(err.problems[3], /'127\.1' spells the address 127\.0\.0\.1: write it as 127\.0\.0\.1/)
  })

  it("private_networks takes only 'auto', 'allow' or 'refuse'", async (t) => {
    await assert.rejects(startApp(t, { settings: { connectors: { egress: { private_networks: 'sometimes' } } } }), /connectors\.egress\.private_networks/)
  })
})
