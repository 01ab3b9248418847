// Sustained mixed load on the services driver set (PostgreSQL, Redis, S3 via s3rver; issue 15 item 4): searches at
// a fixed rate for 60 s while documents are uploaded into the searched KB and deleted from it, and a web connector
// syncs a loopback site again and again (a fifth of its articles change between syncs, so each sync re-ingests).
// The same searches at the same rate with no writes come first: the baseline. Reported: search p50/p99 of both and
// p99 under writes / p99 without (the ratio), and every error (a search not 200, an upload not 202, a delete not
// 202, a sync ending with last_error, a document that ended `failed`): the target is 0.
//
// Every query text is new (a counter is part of it), so the search cache never answers: both phases measure the
// search itself. Searches are open-loop (sent on a fixed schedule whatever the previous answer), so a slow answer
// does not lower the load. The load client, the uploader and the site share the service's process; the same is
// true of the baseline except for the writers, whose client work is small beside the ingest they cause.
//
// Needs TEST_POSTGRES_URL and TEST_REDIS_URL (as the services test suites); quick mode shortens both phases to 15 s.
import { startApp, type StartedApp } from '../test/helpers/app.ts'
import { serviceUrl } from '../test/helpers/services.ts'
import { startWebSite } from '../test/helpers/web-site.ts'
import { createRng, generateDocuments, vocabulary } from './lib/corpus.ts'
import { machine, percentile, round } from './lib/machine.ts'
import { comparison } from './report/normalise.ts'

export interface MixedLoadBenchOptions {
  quick?: boolean
  /** Length of each phase (baseline, then mixed), seconds. Default 60 (quick: 15). */
  seconds?: number
  /** Searches per second in both phases. */
  searchRate?: number
  /** Documents uploaded per second during the mixed phase. */
  uploadRate?: number
  /** Documents in the searched KB before the phases. */
  seedDocs?: number
  /** Articles of the connector's site. */
  articles?: number
}

type Json = any

const KB = 'mixed'
const WEB_KB = 'mixed-web'

interface Phase {
  latencies: number[]
  errors: string[]
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Open-loop searches: one every 1000/rate ms for `seconds`, each a new query text. Resolves when all answered. */
async function searchAtRate(svc: StartedApp, words: string[], rate: number, seconds: number, phase: Phase, tag: string): Promise<void> {
  const rnd = createRng(tag.length * 31 + rate)
  const total = Math.round(rate * seconds)
  const started = performance.now()
  const inFlight: Promise<void>[] = []
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / rate
    const wait = due - performance.now()
    if (wait > 0) await sleep(wait)
    const query = `${words[Math.floor(rnd() * words.length)]} ${words[Math.floor(rnd() * words.length)]} ${words[Math.floor(rnd() * words.length)]} ${tag}${i}`
    const sent = performance.now()
    inFlight.push(svc.request('/api/search', { method: 'POST', json: { query, kb_ids: [KB], top_k: 5 } }).then(async (res) => {
      await res.arrayBuffer()
      phase.latencies.push(performance.now() - sent)
      if (res.status !== 200) phase.errors.push(`search answered ${res.status}`)
    }, (err: Error) => void phase.errors.push(`search failed: ${err.message}`)))
  }
  await Promise.all(inFlight)
}

async function upload(svc: StartedApp, kb: string, name: string, bytes: Uint8Array): Promise<Response> {
  const form = new FormData()
  form.append('file', new Blob([bytes]), name)
  return svc.request(`/api/kb/${kb}/docs/upload`, { method: 'POST', body: form })
}

async function docStatus(svc: StartedApp, kb: string, docId: string): Promise<string> {
  const res = await svc.request(`/api/kb/${kb}/docs/${docId}/status`)
  return res.status === 200 ? ((await res.json()) as Json).status : `http-${res.status}`
}

/** Waits until no document of the KB is in an active state. */
async function settleKb(svc: StartedApp, kb: string, timeoutMs = 600_000): Promise<Json> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const counts = ((await (await svc.request(`/api/kb/${kb}/docs/status`)).json()) as Json).doc_counts
    const rows = await svc.app.adapters.sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM documents WHERE kb_id = $1 AND status IN ('uploading', 'fetching', 'pending', 'running', 'deleting')`, [kb])
    if (rows[0].n === 0) return counts
    if (Date.now() > deadline) throw new Error(`KB ${kb} did not settle: ${JSON.stringify(counts)}`)
    await sleep(200)
  }
}

export async function run(opts: MixedLoadBenchOptions = {}) {
  if (!serviceUrl('postgres') || !serviceUrl('redis')) {
    return { machine: machine(), skipped: 'mixed-load runs on the services driver set: set TEST_POSTGRES_URL and TEST_REDIS_URL (S3 is an s3rver it starts itself)' }
  }
  const quick = opts.quick ?? false
  const seconds = opts.seconds ?? (quick ? 15 : 60)
  const searchRate = opts.searchRate ?? 20
  const uploadRate = opts.uploadRate ?? 2
  const seedDocs = opts.seedDocs ?? (quick ? 60 : 200)
  const articles = opts.articles ?? 100
  const cleanups: (() => unknown)[] = []
  try {
    const site = await startWebSite({ articles, perPage: 25, slowMs: 0 })
    cleanups.push(() => site.close())
    const svc = await startApp({ after: (fn: () => unknown) => void cleanups.unshift(fn) }, {
      services: true,
      settings: {
        logging: { level: 'ERROR' },
        embedding: { vector_size: 1024 },
        queue_poll: { poll_interval_sec: 0.2 },
        // The generated articles share most of their words: near-duplicate detection would keep many out of the index.
        dedup: { enabled: false },
        // The generated site answers on loopback, which connectors reach only when it is listed.
        connectors: { egress: { allow: ['127.0.0.1/32'] } },
      },
    })
    for (const kb of [KB, WEB_KB]) {
      const res = await svc.request('/api/kb', { method: 'POST', json: { kb_id: kb } })
      if (res.status !== 201) throw new Error(`KB ${kb}: HTTP ${res.status}`)
    }

    // The searched KB, indexed before anything is measured; the writes' documents come from the same generator.
    const docs = await generateDocuments(seedDocs + Math.ceil(uploadRate * seconds) + 10, 11)
    for (const d of docs.slice(0, seedDocs)) {
      const res = await upload(svc, KB, d.name, d.bytes)
      if (res.status !== 202) throw new Error(`seed upload: HTTP ${res.status} ${await res.text()}`)
    }
    const seeded = await settleKb(svc, KB)
    const words = vocabulary(20_000, 11).slice(0, 5000)
    // Warm-up: the search path and the connection pool.
    await searchAtRate(svc, words, searchRate, 2, { latencies: [], errors: [] }, 'warm')

    const baseline: Phase = { latencies: [], errors: [] }
    await searchAtRate(svc, words, searchRate, seconds, baseline, 'base')

    // Mixed: the same searches, with the writers running until they end.
    const mixed: Phase = { latencies: [], errors: [] }
    const writeErrors: string[] = []
    let stop = false
    let uploads = 0
    let deletes = 0
    let syncs = 0
    let syncedStored = 0

    const uploader = (async () => {
      const pending: string[] = []
      const started = performance.now()
      for (let i = seedDocs; !stop; i++) {
        const due = started + ((i - seedDocs) * 1000) / uploadRate
        const wait = due - performance.now()
        if (wait > 0) await sleep(wait)
        if (stop) break
        const d = docs[i % docs.length]
        const res = await upload(svc, KB, `w${i}-${d.name}`, d.bytes)
        if (res.status !== 202) writeErrors.push(`upload answered ${res.status}: ${await res.text()}`)
        else {
          uploads++
          pending.push(((await res.json()) as Json).doc_id)
        }
        // Delete the oldest upload once it is indexed (an active document answers 409: wait for it instead).
        if (pending.length > 4 && (await docStatus(svc, KB, pending[0])) === 'indexed') {
          const del = await svc.request(`/api/kb/${KB}/docs/${pending[0]}`, { method: 'DELETE' })
          if (del.status !== 202) writeErrors.push(`delete answered ${del.status}: ${await del.text()}`)
          else deletes++
          pending.shift()
        }
      }
    })()

    const connector = await svc.request('/api/connectors', {
      method: 'POST', json: { kb_id: WEB_KB, name: 'site', source_type: 'web', config: { seed_urls: [`${site.url}/docs`], depth: 4, max_pages: 500, request_delay_ms: 0 } },
    })
    if (connector.status !== 201) throw new Error(`connector: HTTP ${connector.status} ${await connector.text()}`)
    const connectorId = ((await connector.json()) as Json).connector_id
    const syncer = (async () => {
      const rnd = createRng(5)
      for (let round = 0; !stop; round++) {
        const res = await svc.request(`/api/connectors/${connectorId}/sync`, { method: 'POST' })
        if (res.status !== 202) {
          writeErrors.push(`sync answered ${res.status}: ${await res.text()}`)
          break
        }
        for (;;) {
          const st = (await (await svc.request(`/api/connectors/${connectorId}/sync/status`)).json()) as Json
          if (st.sync_status === 'idle') {
            syncs++
            syncedStored += st.last_sync?.stored ?? 0
            if (st.last_error) writeErrors.push(`sync ended with: ${st.last_error}`)
            break
          }
          await sleep(100)
        }
        // A fifth of the articles change: the next sync stores them again.
        for (let k = 0; k < articles / 5; k++) {
          const i = Math.floor(rnd() * articles)
          site.setArticle(i, `Revision ${round} of article ${i}: ${words.slice((i * 7 + round) % 4000, ((i * 7 + round) % 4000) + 60).join(' ')}.`)
        }
      }
    })()

    await searchAtRate(svc, words, searchRate, seconds, mixed, 'mixed')
    stop = true
    await uploader
    await syncer
    const final = await settleKb(svc, KB)
    const webFinal = await settleKb(svc, WEB_KB)
    if (final.failed > seeded.failed) writeErrors.push(`${final.failed - seeded.failed} uploaded documents ended failed`)
    if (webFinal.failed > 0) writeErrors.push(`${webFinal.failed} connector documents ended failed`)

    const stats = (p: Phase) => ({
      requests: p.latencies.length + p.errors.filter((e) => e.startsWith('search failed')).length,
      p50_ms: round(percentile(p.latencies, 50), 2),
      p99_ms: round(percentile(p.latencies, 99), 2),
      max_ms: round(Math.max(...p.latencies), 2),
      errors: p.errors.length,
    })
    const base = stats(baseline)
    const mix = stats(mixed)
    const errors = [...baseline.errors, ...mixed.errors, ...writeErrors]
    return {
      machine: machine(),
      sizes: {
        seconds_per_phase: seconds, quick, search_rate_per_s: searchRate, upload_rate_per_s: uploadRate, seed_docs: seedDocs,
        site_articles: articles, driver_set: 'services (PostgreSQL, Redis, s3rver)', embedding_dims: 1024,
      },
      target: '0 errors; search p99 under writes reported against the same searches with no writes',
      results: {
        baseline: base,
        mixed: { ...mix, uploads, deletes, syncs, connector_documents_stored: syncedStored, kb_doc_counts: final, web_doc_counts: webFinal },
        p99_ratio_mixed_to_baseline: round(mix.p99_ms / base.p99_ms, 2),
        p50_ratio_mixed_to_baseline: round(mix.p50_ms / base.p50_ms, 2),
        errors: errors.length,
        first_errors: errors.slice(0, 5),
        met: errors.length === 0,
      },
      comparisons: [
        comparison('search p99 while documents are ingested, deleted and a connector syncs', mix.p99_ms, base.p99_ms,
          { unit: 'ms', higher_is_better: false, baseline_name: 'the same searches with no writes' }),
        comparison('search p50 under the same writes', mix.p50_ms, base.p50_ms, { unit: 'ms', higher_is_better: false, baseline_name: 'the same searches with no writes', tracked: false }),
        comparison('errors during the mixed load', errors.length, null, { unit: 'errors', higher_is_better: false, target: 0, target_of: 'value' }),
      ],
    }
  } finally {
    for (const c of cleanups) await c()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  run({ quick: process.argv.includes('--quick') }).then((r) => {
    if (!r.results) {
      console.log(r.skipped)
      return
    }
    const x = r.results
    console.log(JSON.stringify(r, null, 2))
    console.log(`search p99: ${x.mixed.p99_ms} ms under writes vs ${x.baseline.p99_ms} ms without: ${x.p99_ratio_mixed_to_baseline}x ` +
      `(p50 ${x.p50_ratio_mixed_to_baseline}x); uploads ${x.mixed.uploads}, deletes ${x.mixed.deletes}, syncs ${x.mixed.syncs}; errors ${x.errors}`)
  }, (err) => {
    console.error(err)
    process.exit(1)
  })
}
