// [ENT] What the access-controlled edition adds to a request (issue 14): token checking (a real JWT from the
// in-process oidc-provider's token endpoint) and the role look-up, against the base edition in the same run.
// A second service, the access-controlled edition with kb_authz_enabled on, runs beside the base one on the
// same adapters (same stores, same data), so that the two answer the same requests from the same state. At one
// connection, each query goes to both in turn (the order alternating), so that the pair sees the same machine:
//   added = median over pairs of (access-controlled - base);   share = added / base p50   (target < 5 %)
// for a 1-KB hybrid search (the search cache missing on every request), and for an upload of a small file.
// On a busy machine that difference is within the noise; so the hooks' own work (token check, KB filter, role
// check) is also timed in process, in a loop, and given as a share of the same base search.
//
// Called by bench/search.bench.ts with its data; alone it builds a small data set:
//   npx tsx bench/search/authz.ts [--chunks=2000] [--pairs=400]
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { closeAdapters, createAdapters } from '../../adapters/index.ts'
import { createApp, type App } from '../../kernel/app.ts'
import { resolveSettings } from '../../kernel/config/load.ts'
import { createLogger } from '../../kernel/log.ts'
import { defaultPlugins } from '../../kernel/plugins.ts'
import type { AuthzService } from '../../plugins/authz/types.ts'
import { startOidc } from '../../test/helpers/oidc.ts'
import { machine, median, percentile, round } from '../lib/machine.ts'
import { buildSearchData, registerSearchDocuments } from './build-data.ts'
import { gateCache } from './cache-gate.ts'

export const AUTHZ_TARGET = 0.05

export interface AuthzBenchOptions {
  /** The base-edition service, listening, on the data to search. */
  app: App
  base: string
  /** The KB of the 1-KB search. */
  kbId: string
  queries: readonly string[]
  topK: number
  /** Pairs of searches measured (after a warm-up); uploads measured: a quarter of it. */
  pairs?: number
}

interface Paired {
  base_p50_ms: number
  ent_p50_ms: number
  base_p99_ms: number
  ent_p99_ms: number
  /** Median over pairs of the difference: robust to a slow sample on either side. */
  added_p50_ms: number
  added_share_of_base: number
  pairs: number
}

const SEARCHER = { client_id: 'bench-member', client_secret: 'bench-member-secret', claims: { email: 'bench-member@example.com', preferred_username: 'bench-member' } }
const ADMIN = { client_id: 'bench-admin', client_secret: 'bench-admin-secret', claims: { groups: ['/rag-super-admin'] } }
const UPLOAD_KB = 'authz-bench-uploads'

function paired(base: number[], ent: number[]): Paired {
  const added = median(base.map((b, i) => ent[i] - b))
  const baseP50 = median(base)
  return {
    base_p50_ms: round(baseP50, 3), ent_p50_ms: round(median(ent), 3),
    base_p99_ms: round(percentile(base, 99), 3), ent_p99_ms: round(percentile(ent, 99), 3),
    added_p50_ms: round(added, 4), added_share_of_base: round(added / baseP50, 4), pairs: base.length,
  }
}

async function timed(url: string, init: RequestInit, expect: number): Promise<number> {
  const t0 = performance.now()
  const res = await fetch(url, init)
  const body = await res.text()
  const ms = performance.now() - t0
  if (res.status !== expect) throw new Error(`${init.method ?? 'GET'} ${url}: HTTP ${res.status} ${body.slice(0, 200)}`)
  return ms
}

/**
 * Microseconds per request of the access-controlled edition's own work, called as its hooks call it: the token
 * check (authenticate, cached per token) then, for a search, the filter of the KB list (readable), for an upload
 * the role check (require editor). The median of 5 runs of `n` calls.
 */
async function hookWork(authz: AuthzService, header: string, kbId: string, n = 20_000) {
  const run = async (fn: () => Promise<unknown>) => {
    for (let i = 0; i < 1000; i++) await fn()
    const runs: number[] = []
    for (let r = 0; r < 5; r++) {
      const t0 = performance.now()
      for (let i = 0; i < n; i++) await fn()
      runs.push(((performance.now() - t0) * 1000) / n)
    }
    return round(median(runs), 3)
  }
  const caller = await authz.authenticate(header)
  if ((await authz.access.readable(caller, [kbId])).length !== 1) throw new Error(`the bench member cannot read ${kbId}`)
  return {
    authenticate_us: await run(() => authz.authenticate(header)),
    search_us: await run(async () => authz.access.readable(await authz.authenticate(header), [kbId])),
    upload_us: await run(async () => authz.access.require(await authz.authenticate(header), UPLOAD_KB, 'editor')),
    calls_per_run: n,
  }
}

/** Runs both measurements; the access-controlled service is started here and closed before returning. */
export async function authzOverhead(opts: AuthzBenchOptions) {
  const pairs = opts.pairs ?? 400
  const oidc = await startOidc({ clients: [SEARCHER, ADMIN] })
  let ent: App | undefined
  try {
    const s = structuredClone(opts.app.settings) as any
    s.oidc = { ...s.oidc, issuer_url: oidc.issuer, audience: oidc.audience }
    s.authz = { ...s.authz, kb_creator_roles: ['*'], max_kb_count: 0, max_docs_count: 0 }
    // The base service's worker indexes what either service queues; one worker keeps the two comparable.
    s.queue_worker = { ...s.queue_worker, enabled: false }
    ent = await createApp({ settings: s, plugins: defaultPlugins(), log: createLogger('ERROR'), adapters: opts.app.adapters })
    const entBase = `http://127.0.0.1:${await ent.listen(0, '127.0.0.1')}`
    const [member, admin] = [await oidc.clientToken(SEARCHER.client_id), await oidc.clientToken(ADMIN.client_id)]
    const json = (token: string | null, body: unknown): RequestInit => ({
      method: 'POST', body: JSON.stringify(body),
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    })

    // Roles on: the member is an editor of both KBs (not a super-admin, who would skip the look-up).
    await timed(`${entBase}/api/admin/config`, { ...json(admin, { kb_authz_enabled: true }), method: 'PATCH' }, 200)
    // A data folder kept from an earlier run (--data) holds this KB already: its uploads would be re-uploads.
    await dropUploadKb(opts.base)
    await timed(`${opts.base}/api/kb`, json(null, { kb_id: UPLOAD_KB }), 201)
    for (const kb of [opts.kbId, UPLOAD_KB]) {
      await opts.app.adapters.sql.query(
        `INSERT INTO kb_members (kb_id, user_id, role, granted_by) VALUES ($1, $2, 'editor', 'bench')
         ON CONFLICT (kb_id, user_id) DO UPDATE SET role = 'editor'`, [kb, SEARCHER.client_id])
      await ent.use<AuthzService | null>('authz')?.roles.invalidateKb(kb)
    }
    await ent.use<AuthzService | null>('authz')?.roles.invalidateUser(SEARCHER.client_id)

    // Two trailing spaces: not a query any earlier cache fill stored, so every request misses the cache.
    const search = (i: number) => ({ query: `${opts.queries[i % opts.queries.length]}  `, kb_ids: [opts.kbId], options: { mode: 'hybrid', top_k: opts.topK } })
    const check = async (url: string, token: string | null) => {
      const res = await fetch(`${url}/api/search`, json(token, search(0)))
      const body = (await res.json()) as { results?: unknown[] }
      if (res.status !== 200 || !body.results?.length) throw new Error(`search on ${url}: HTTP ${res.status}, ${body.results?.length ?? 0} results`)
    }
    await check(opts.base, null)
    await check(entBase, member)

    const measure = async (n: number, warm: number, one: (i: number, ent: boolean) => Promise<number>) => {
      const b: number[] = []
      const e: number[] = []
      for (let i = 0; i < warm + n; i++) {
        const order = i % 2 === 0 ? [false, true] : [true, false]
        const times: Record<string, number> = {}
        for (const isEnt of order) times[String(isEnt)] = await one(i, isEnt)
        if (i >= warm) {
          b.push(times.false)
          e.push(times.true)
        }
      }
      return paired(b, e)
    }

    process.stderr.write(`authz bench: ${pairs} pairs of 1-KB hybrid searches, base and access-controlled in turn\n`)
    const searchOut = await measure(pairs, 50, (i, isEnt) =>
      timed(`${isEnt ? entBase : opts.base}/api/search`, json(isEnt ? member : null, search(i)), 200))

    const uploads = Math.max(20, Math.floor(pairs / 4))
    process.stderr.write(`authz bench: ${uploads} pairs of uploads (1 KB text files)\n`)
    const text = 'Leave policy and travel rules. '.repeat(33)
    const uploadOut = await measure(uploads, 10, (i, isEnt) => {
      const form = new FormData()
      form.append('file', new Blob([`${text}${i}`], { type: 'text/plain' }), `u-${isEnt ? 'e' : 'b'}-${i}.txt`)
      return timed(`${isEnt ? entBase : opts.base}/api/kb/${UPLOAD_KB}/docs/upload`, { method: 'POST', body: form, headers: isEnt ? { authorization: `Bearer ${member}` } : {} }, 202)
    })

    // The same added work without HTTP or the machine's noise: what the hooks call, in a loop, on the hot (cached) path.
    const hookUs = await hookWork(ent.use<AuthzService>('authz'), `Bearer ${member}`, opts.kbId)

    return {
      what: 'added latency of token checking + role look-up (access-controlled edition, kb_authz_enabled on, a member) against the base edition, same adapters, 1 connection, paired',
      search_1kb_hybrid: searchOut,
      upload_1kb_text: uploadOut,
      hooks_in_process: { ...hookUs, share_of_base_search_p50: round(hookUs.search_us / 1000 / searchOut.base_p50_ms, 5) },
      target: { max_share: AUTHZ_TARGET, share: searchOut.added_share_of_base, pass: searchOut.added_share_of_base < AUTHZ_TARGET },
    }
  } finally {
    await ent?.close().catch(() => {})
    await oidc.close()
    await dropUploadKb(opts.base).catch(() => {})
  }
}

/** Deletes the uploads' KB through the base service, if it exists. */
async function dropUploadKb(base: string): Promise<void> {
  const res = await fetch(`${base}/api/kb/${UPLOAD_KB}`, { method: 'DELETE' })
  const body = await res.text()
  if (!res.ok && res.status !== 404) throw new Error(`DELETE /api/kb/${UPLOAD_KB}: HTTP ${res.status} ${body.slice(0, 200)}`)
}

export type AuthzBenchResult = Awaited<ReturnType<typeof authzOverhead>>

export function printAuthz(r: AuthzBenchResult): void {
  const pct = (x: number) => `${(x * 100).toFixed(2)} %`
  const line = (name: string, x: Paired) =>
    console.log(`  ${name.padEnd(20)} base p50 ${x.base_p50_ms.toFixed(3)} ms | access-controlled p50 ${x.ent_p50_ms.toFixed(3)} ms | added ${x.added_p50_ms.toFixed(3)} ms (${pct(x.added_share_of_base)}) over ${x.pairs} pairs; p99 ${x.base_p99_ms} vs ${x.ent_p99_ms} ms`)
  console.log(`\n[ENT] token check + role look-up, paired against the base edition (1 connection):`)
  line('1-KB hybrid search', r.search_1kb_hybrid)
  line('upload (1 KB text)', r.upload_1kb_text)
  const h = r.hooks_in_process
  console.log(`  in process, the hooks' own work per request (cached path): token ${h.authenticate_us} us; + KB filter (search) ${h.search_us} us = ${pct(h.share_of_base_search_p50)} of the base search p50; + role check (upload) ${h.upload_us} us`)
  console.log(`  target: added ${pct(r.target.share)} of a 1-KB hybrid search < ${pct(r.target.max_share)}: ${r.target.pass ? 'PASS' : 'MISS'}`)
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
  const chunks = Number(arg('chunks') ?? 2000)
  const dataDir = mkdtempSync(join(tmpdir(), 'quarry-authz-bench-'))
  let app: App | undefined
  let adapters: Awaited<ReturnType<typeof createAdapters>> | undefined
  try {
    const data = await buildSearchData({ dataDir, chunks, dimensions: 1024, splits: 10, queries: 1000 })
    const { settings } = resolveSettings({
      data_dir: dataDir, logging: { level: 'ERROR' }, embedding: { vector_size: 1024 },
      knowledge_bases: [data.kbs.one, ...data.kbs.split].map((id) => ({ id })),
    })
    const log = createLogger('ERROR')
    adapters = await createAdapters(settings, log)
    await registerSearchDocuments(adapters, data)
    adapters.searchCache = gateCache(adapters.searchCache)
    app = await createApp({ settings, plugins: defaultPlugins(), log, adapters })
    const base = `http://127.0.0.1:${await app.listen(0, '127.0.0.1')}`
    const r = await authzOverhead({ app, base, kbId: data.kbs.one, queries: data.queries, topK: 10, pairs: Number(arg('pairs') ?? 400) })
    console.log(`machine: ${JSON.stringify(machine())}`)
    console.log(`sizes: ${JSON.stringify({ chunks, dimensions: 1024, kb: data.kbs.one })}`)
    printAuthz(r)
    if (process.argv.includes('--json')) console.log(JSON.stringify(r))
  } finally {
    await app?.close().catch(() => {})
    if (adapters) await closeAdapters(adapters).catch(() => {})
    rmSync(dataDir, { recursive: true, force: true })
  }
}
