// Connector syncs end to end, on the embedded default with the built-in worker: a first sync of a 1,000-page
// local web site (request_delay_ms 0) in pages/s, then a second sync of the unchanged site, whose time is
// reported against the first (target: at most a tenth, i.e. a ratio of 10 or more: conditional requests
// answered 304, nothing re-ingested). The same for a 1,000-file repository served in GitHub's REST shapes
// (second sync: one tree listing, no blob downloaded). A sync counts until it is idle, which includes
// waiting for what it queued to be indexed; the source phase alone (fetch_ms) is reported beside it.
//
// A web connector processes at most 500 pages per sync (spec 4.9 bounds max_pages), so the 1,000 pages are
// two sites of 500 (index, 5 listing pages, 488 articles and the helper's 6 special pages each), synced by
// two connectors of one KB at the same time.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { createApp } from '../kernel/app.ts'
import { resolveSettings } from '../kernel/config/load.ts'
import { createLogger } from '../kernel/log.ts'
import { defaultPlugins } from '../kernel/plugins.ts'
import { startGithubServer } from '../test/helpers/github-server.ts'
import { startWebSite, type WebSite, type WebSiteOptions } from '../test/helpers/web-site.ts'
import { createRng, text, vocabulary } from './lib/corpus.ts'
import { machine, round } from './lib/machine.ts'

export interface ConnectorsBenchOptions {
  quick?: boolean
  /** Articles per site (two sites); 488 makes each site exactly 500 pages. */
  articlesPerSite?: number
  /** Files in the repository. */
  files?: number
}

const TARGET_RATIO = 10

type Json = any

async function http(url: string, method: string, body?: unknown): Promise<Json> {
  const res = await fetch(url, { method, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined })
  const json = await res.json().catch(() => null)
  if (res.status >= 300) throw new Error(`${method} ${url} answered ${res.status}: ${JSON.stringify(json)}`)
  return json
}

/** Starts the syncs at once and waits until every one is idle; returns wall seconds and each last_sync. */
async function syncAll(base: string, ids: string[]): Promise<{ seconds: number; runs: Json[] }> {
  const started = performance.now()
  for (const id of ids) await http(`${base}/api/connectors/${id}/sync`, 'POST')
  const runs: Json[] = []
  for (const id of ids) {
    for (;;) {
      const s = await http(`${base}/api/connectors/${id}/sync/status`, 'GET')
      if (s.sync_status === 'idle') {
        if (s.last_error) throw new Error(`sync of ${id} failed: ${s.last_error}`)
        runs.push({ ...s.last_sync, doc_counts: s.doc_counts })
        break
      }
      await new Promise((r) => setTimeout(r, 50))
    }
  }
  return { seconds: (performance.now() - started) / 1000, runs }
}

const sum = (runs: Json[], key: string) => runs.reduce((n, r) => n + (r[key] as number), 0)

/** Generated sites served by a child process, so that answering the crawl takes no CPU from the service. */
async function startRemoteSites(count: number, options: WebSiteOptions): Promise<{ urls: string[]; close(): Promise<void> }> {
  const helper = pathToFileURL(join(dirname(fileURLToPath(import.meta.url)), '../test/helpers/web-site.ts')).href
  const code = `import { startWebSite } from ${JSON.stringify(helper)}
const sites = []
for (let i = 0; i < ${count}; i++) sites.push(await startWebSite(${JSON.stringify(options)}))
process.stdout.write(JSON.stringify(sites.map((s) => s.url)) + '\\n')
process.stdin.resume()
process.stdin.on('end', () => process.exit(0))`
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { stdio: ['pipe', 'pipe', 'inherit'] })
  const urls = await new Promise<string[]>((resolve, reject) => {
    let out = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d
      if (out.includes('\n')) resolve(JSON.parse(out.slice(0, out.indexOf('\n'))))
    })
    child.once('exit', (code) => reject(new Error(`site process exited (${code})`)))
  })
  return {
    urls,
    async close() {
      const exited = new Promise((r) => child.once('exit', r))
      child.stdin.end()
      await exited
    },
  }
}

export async function run(opts: ConnectorsBenchOptions = {}) {
  const articles = opts.articlesPerSite ?? 488
  const fileCount = opts.files ?? 1000
  const work = mkdtempSync(join(tmpdir(), 'quarry-connectors-bench-'))
  const { settings } = resolveSettings({
    data_dir: join(work, 'data'), logging: { level: 'ERROR' },
    queue_poll: { poll_interval_sec: 0.05 }, queue_worker: { max_workers: 8 },
    // The generated pages share most of their words: near-duplicate detection would keep many out of the index.
    dedup: { enabled: false },
    // The generated site and repository answer on loopback, which connectors reach only when it is listed.
    connectors: { egress: { allow: ['127.0.0.1/32'] } },
  })
  const app = await createApp({ settings, plugins: defaultPlugins(), log: createLogger('SILENT') })
  const sites: WebSite[] = []
  const closers: (() => Promise<void>)[] = []
  try {
    const base = `http://127.0.0.1:${await app.listen(0, '127.0.0.1')}`
    for (const kb of ['warm', 'web', 'git']) await http(`${base}/api/kb`, 'POST', { kb_id: kb })

    // Warm-up: a small site through the whole path (first sync, then the conditional second one).
    const warmSite = await startWebSite({ articles: 20, perPage: 10, slowMs: 0 })
    sites.push(warmSite)
    const warm = await http(`${base}/api/connectors`, 'POST', { kb_id: 'warm', name: 'warm', source_type: 'web', config: { seed_urls: [`${warmSite.url}/docs`], depth: 10, max_pages: 500, request_delay_ms: 0 } })
    await syncAll(base, [warm.connector_id])
    await syncAll(base, [warm.connector_id])

    // Web: two 500-page sites in a process of their own (a site's own work is not the service's), one
    // connector each, synced together.
    const remote = await startRemoteSites(2, { articles, perPage: Math.ceil(articles / 5), slowMs: 0 })
    closers.push(remote.close)
    const webIds: string[] = []
    for (const [i, site] of remote.urls.map((url) => ({ url })).entries()) {
      const c = await http(`${base}/api/connectors`, 'POST', { kb_id: 'web', name: `site ${i}`, source_type: 'web', config: { seed_urls: [`${site.url}/docs`], depth: 10, max_pages: 500, request_delay_ms: 0 } })
      webIds.push(c.connector_id)
    }
    const web1 = await syncAll(base, webIds)
    // Pages processed: fetched (answered) plus failed (the 500 page); robots.txt is not a page.
    const pages = sum(web1.runs, 'fetched') + sum(web1.runs, 'failed')
    const web2 = await syncAll(base, webIds)

    // Git: one repository of fileCount files (markdown and TypeScript, 1-3 KB each).
    const rnd = createRng(7)
    const vocab = vocabulary(20_000, 7)
    const files: Record<string, string> = {}
    for (let i = 0; i < fileCount; i++) {
      const dir = `area${i % 20}/part${i % 7}`
      files[i % 3 === 0 ? `${dir}/mod${i}.ts` : `${dir}/note${i}.md`] = i % 3 === 0
        ? `// module ${i}\nexport function f${i}(x: number): number {\n  // ${text(rnd, vocab, 800)}\n  return x * ${i}\n}\n`
        : `# Note ${i}\n\n${text(rnd, vocab, 1000 + Math.floor(rnd() * 2000))}\n`
    }
    const gh = await startGithubServer({ files })
    try {
      const repo = await http(`${base}/api/connectors`, 'POST', { kb_id: 'git', name: 'repo', source_type: 'github', config: { owner: 'acme', repo: 'handbook', api_url: gh.url, max_files: fileCount, request_delay_ms: 0 } })
      const git1 = await syncAll(base, [repo.connector_id])
      const blobs1 = gh.requests.filter((r) => r.path.includes('/git/blobs/')).length
      const git2 = await syncAll(base, [repo.connector_id])
      const blobs2 = gh.requests.filter((r) => r.path.includes('/git/blobs/')).length - blobs1

      const webRatio = web1.seconds / web2.seconds
      const gitRatio = git1.seconds / git2.seconds
      return {
        machine: machine(),
        sizes: { web_pages: pages, web_sites: 2, web_documents: sum(web1.runs, 'stored'), git_files: fileCount, request_delay_ms: 0, max_workers: 8 },
        target: `second sync at most 1/${TARGET_RATIO} of the first (ratio >= ${TARGET_RATIO})`,
        results: {
          web: {
            first: { seconds: round(web1.seconds, 3), pages_per_s: round(pages / web1.seconds, 1), fetch_ms: web1.runs.map((r) => r.fetch_ms), stored: sum(web1.runs, 'stored'), indexed: sum(web1.runs.map((r) => r.doc_counts), 'indexed') },
            second: { seconds: round(web2.seconds, 3), fetch_ms: web2.runs.map((r) => r.fetch_ms), stored: sum(web2.runs, 'stored'), unchanged: sum(web2.runs, 'unchanged') },
            ratio_first_to_second: round(webRatio, 1),
            met: webRatio >= TARGET_RATIO,
          },
          git: {
            first: { seconds: round(git1.seconds, 3), files_per_s: round(fileCount / git1.seconds, 1), fetch_ms: git1.runs[0].fetch_ms, stored: git1.runs[0].stored, blob_requests: blobs1 },
            second: { seconds: round(git2.seconds, 3), fetch_ms: git2.runs[0].fetch_ms, stored: git2.runs[0].stored, unchanged: git2.runs[0].unchanged, blob_requests: blobs2 },
            ratio_first_to_second: round(gitRatio, 1),
            met: gitRatio >= TARGET_RATIO,
          },
        },
      }
    } finally {
      await gh.close()
    }
  } finally {
    for (const s of sites) await s.close()
    for (const c of closers) await c()
    await app.close()
    rmSync(work, { recursive: true, force: true })
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  run({ quick: process.argv.includes('--quick') }).then((r) => console.log(JSON.stringify(r, null, 2)), (err) => {
    console.error(err)
    process.exit(1)
  })
}
