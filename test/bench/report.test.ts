import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { XMLValidator } from 'fast-xml-parser'
import { compareSuites, formatCompareTable, relativeChange } from '../../bench/report/compare.ts'
import { metText, renderReport, targetText } from '../../bench/report/markdown.ts'
import { comparison, factorOf, normalise } from '../../bench/report/normalise.ts'
import { barChart, escapeXml, niceAxis, ratioChart } from '../../bench/report/svg.ts'
import type { Comparison, NormalisedBench, SuiteResult } from '../../bench/report/types.ts'

function assertWellFormed(svg: string): void {
  const r = XMLValidator.validate(svg)
  assert.equal(r, true, `not well-formed XML: ${JSON.stringify(r)}`)
  assert.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/)
}

interface Bar { value: number; x: number; width: number; attrs: string }

function bars(svg: string): Bar[] {
  return [...svg.matchAll(/<rect class="bar"([^>]*)\/>/g)].map((m) => {
    const a = m[1]
    const get = (k: string) => Number(new RegExp(` ${k}="([^"]+)"`).exec(a)![1])
    return { value: get('data-value'), x: get('x'), width: get('width'), attrs: a }
  })
}

const close = (a: number, b: number, tol = 0.02) => Math.abs(a - b) <= tol * Math.max(1, Math.abs(b))

describe('SVG charts', () => {
  it('draws bars whose lengths are proportional to the values, in well-formed XML', () => {
    const svg = barChart({ title: 'Stages <ms> & "time"', unit: 'ms', groups: [
      { label: 'parse', values: { ms: 40 } }, { label: 'chunk', values: { ms: 10 } }, { label: 'embed', values: { ms: 25 } }, { label: 'idle', values: { ms: 0 } },
    ] })
    assertWellFormed(svg)
    const b = bars(svg)
    assert.deepEqual(b.map((x) => x.value), [40, 10, 25, 0])
    assert.ok(close(b[0].width / b[1].width, 4), `40 vs 10: widths ${b[0].width} and ${b[1].width}`)
    assert.ok(close(b[2].width / b[1].width, 2.5))
    assert.equal(b[3].width, 0)
    // Every bar starts on the axis.
    assert.equal(new Set(b.map((x) => x.x)).size, 1)
    assert.ok(svg.includes('Stages &lt;ms&gt; &amp; &quot;time&quot;'))
  })

  it('draws one bar per key in each group (p50 and p99), with a legend', () => {
    const svg = barChart({ title: 'Latency', unit: 'ms', groups: [
      { label: 'hybrid 1 KB', values: { p50: 3, p99: 12 } }, { label: 'hybrid 10 KBs', values: { p50: 6, p99: 30 } },
    ] })
    assertWellFormed(svg)
    const b = bars(svg)
    assert.equal(b.length, 4)
    const p99 = b.filter((x) => x.attrs.includes('data-key="p99"'))
    assert.deepEqual(p99.map((x) => x.value), [12, 30])
    assert.ok(close(p99[1].width / b[0].width, 10))
    assert.match(svg, />p50<\/text>/)
    assert.match(svg, />p99<\/text>/)
  })

  it('draws ratios on a log scale from parity: 4x twice as long as 2x, 0.5x as long as 2x but to the left', () => {
    const svg = ratioChart({ title: 'Ratios', bars: [
      { label: 'a & b', ratio: 2, target: 2 }, { label: 'c', ratio: 4 }, { label: 'd', ratio: 0.5 }, { label: 'e', ratio: 1 },
    ] })
    assertWellFormed(svg)
    const [two, four, half, one] = bars(svg)
    assert.ok(close(four.width / two.width, 2))
    assert.ok(close(half.width, two.width))
    assert.equal(one.width, 0)
    const mid = two.x
    assert.ok(close(half.x + half.width, mid), 'a bar below 1x ends on the parity line')
    assert.ok(half.attrs.includes('#c4483e') && two.attrs.includes('#3f8f4f'), 'behind in red, ahead in green')
    const target = Number(/<line class="target" data-value="2" x1="([\d.]+)"/.exec(svg)![1])
    assert.ok(close(target, mid + two.width), 'the 2x target mark sits at the end of the 2x bar')
  })

  it('escapes XML and ends linear axes on a round step just past the largest value', () => {
    assert.equal(escapeXml(`<a href="x">&'</a>`), '&lt;a href=&quot;x&quot;&gt;&amp;&apos;&lt;/a&gt;')
    assert.deepEqual(niceAxis(1412), { end: 1500, step: 500 })
    assert.deepEqual(niceAxis(284), { end: 300, step: 100 })
    assert.deepEqual(niceAxis(10), { end: 10, step: 2 })
    assert.deepEqual(niceAxis(0.03), { end: 0.03, step: 0.01 })
    assert.deepEqual(niceAxis(0), { end: 1, step: 0.2 })
  })
})

// ---- normalisation: small literal samples of each benchmark's shape ---------------------------------------

const byMetric = (cs: Comparison[], metric: string) => {
  const c = cs.find((x) => x.metric === metric)
  assert.ok(c, `no comparison '${metric}' in ${cs.map((x) => x.metric).join(', ')}`)
  return c
}

describe('normalisation of each benchmark', () => {
  it('kernel: req/s against bare uWebSockets.js with the 0.95 target (issue 40); Fastify and node:http shown, not gated', () => {
    const side = (rps: number, cpu = 10) => ({ rps_median: rps, rps_min: rps - 100, rps_max: rps + 100, p99_ms_median: 4, cpu_us_per_request_median: cpu, cpu_us_per_request_min: cpu - 1, cpu_us_per_request_max: cpu + 1 })
    const raw = { name: 'kernel', machine: { cpu: 'x', cores: 2, node: 'v20' }, sizes: { rounds: 3 }, results: {
      get: { quarry: side(30000, 11), node_http: side(20000), fastify: side(12000), uws: side(31000, 10) },
      post: { quarry: side(15000, 15.6), node_http: side(12000), fastify: side(10000), uws: side(17000, 15) },
    } }
    const n = normalise('kernel', raw)
    const get = byMetric(n.comparisons, 'GET req/s vs bare uWebSockets.js')
    assert.deepEqual([get.ours, get.baseline, get.ratio, get.target, get.target_of, get.met], [30000, 31000, 0.9677, 0.95, 'ratio', true])
    assert.deepEqual(get.baseline_range, [30900, 31100])
    assert.equal(get.tracked, undefined)
    const post = byMetric(n.comparisons, 'POST req/s vs bare uWebSockets.js')
    assert.deepEqual([post.ratio, post.target, post.met], [0.8824, 0.95, false])
    const fastify = byMetric(n.comparisons, 'GET req/s vs Fastify')
    assert.deepEqual([fastify.ratio, fastify.target, fastify.met, fastify.tracked], [2.5, undefined, undefined, false])
    assert.deepEqual(fastify.ours_range, [29900, 30100])
    const node = byMetric(n.comparisons, 'POST req/s vs node:http')
    assert.deepEqual([node.ratio, node.target, node.tracked], [1.25, undefined, false])
    assert.equal(byMetric(n.comparisons, 'GET p99 latency vs Fastify').tracked, false)
    assert.deepEqual(n.sizes, { rounds: 3 })
    // The server's CPU per request against bare uWS's, lower is better, at most 1.05x (the 5 %).
    const getCpu = byMetric(n.comparisons, 'GET server CPU per request vs bare uWebSockets.js')
    assert.deepEqual([getCpu.ours, getCpu.baseline, getCpu.higher_is_better, getCpu.target, getCpu.target_of, getCpu.met], [11, 10, false, 1.05, 'factor', false])
    assert.deepEqual([getCpu.ours_range, getCpu.baseline_range], [[10, 12], [9, 11]])
    const postCpu = byMetric(n.comparisons, 'POST server CPU per request vs bare uWebSockets.js')
    assert.deepEqual([factorOf(postCpu), postCpu.met], [1.04, true])
    // Only the rows against the ceiling carry a target.
    assert.deepEqual(n.comparisons.filter((c) => c.target !== undefined).map((c) => c.metric), [
      'GET req/s vs bare uWebSockets.js', 'GET server CPU per request vs bare uWebSockets.js',
      'POST req/s vs bare uWebSockets.js', 'POST server CPU per request vs bare uWebSockets.js',
    ])
  })

  it('kernel: a result without CPU figures (off Linux, or from before them) has no CPU rows and no note about them', () => {
    const side = (rps: number) => ({ rps_median: rps, rps_min: rps, rps_max: rps, p99_ms_median: 4 })
    const n = normalise('kernel', { results: { get: { quarry: side(9), node_http: side(5), fastify: side(4), uws: side(10) } } })
    assert.equal(n.comparisons.some((c) => c.metric.includes('CPU')), false)
    assert.equal(n.notes.some((x) => x.includes('CPU')), false)
    assert.equal(byMetric(n.comparisons, 'GET req/s vs bare uWebSockets.js').ratio, 0.9)
  })

  it('chunk and dedup: MB/s against their baselines', () => {
    const chunk = normalise('chunk', { machine: {}, text: { chars: 1000, mb: 1 }, chunkSize: 1024, chunkOverlap: 128, rounds: 3,
      quarry: { mbPerSec: 600, medianMs: 2, chunks: 10 }, langchain: { mbPerSec: 60, medianMs: 20, chunks: 11 }, ratio: 10 })
    const c = byMetric(chunk.comparisons, 'recursive chunking MB/s')
    assert.deepEqual([c.ours, c.baseline, c.ratio, c.higher_is_better], [600, 60, 10, true])
    assert.equal(chunk.sizes.chunkSize, 1024)
    const dedup = normalise('dedup', { machine: {}, corpus: { docs: 25 }, rounds: 3, quarry: { mbPerSec: 2, medianMs: 1 }, reference: { mbPerSec: 0.5, medianMs: 4 }, ratio: 4 })
    assert.equal(byMetric(dedup.comparisons, 'SimHash-64 + MinHash-128 MB/s').ratio, 4)
  })

  it('parse: pool against pdf.js with the targets the benchmark states; CPU per page lower is better', () => {
    const raw = {
      machine: { cpu: 'x', cores: 2, node: 'v20', loadavgBefore: [1], loadavgAfter: [1] }, sizes: { pdfs: 4, pagesPerPdf: 15 },
      pagesPerSec: { direct: 100, ours: 125, pool1: 95, pool2: 190 }, bestPagesPerSec: { direct: 110, ours: 130, pool1: 100, pool2: 200 },
      cpuMsPerPage: { direct: 8, pool1: 10, pool2: 10 }, ratio: { pool1VsDirect: 0.95, pool2VsDirect: 1.9 },
      bestRatio: { pool1VsDirect: 0.91, pool2VsDirect: 1.82 }, targets: { pool1VsDirect: 1, pool2VsDirect: 1.8 }, met: false,
    }
    const n = normalise('parse', raw)
    const one = byMetric(n.comparisons, 'PDF pages/s, pool of 1 worker')
    assert.deepEqual([one.ratio, one.target, one.met], [0.95, 1, false])
    const two = byMetric(n.comparisons, 'PDF pages/s, pool of 2 workers')
    assert.deepEqual([two.ratio, two.target, two.met], [1.9, 1.8, true])
    const own = byMetric(n.comparisons, 'PDF pages/s, pool of 2 workers, against our parser in the main thread')
    assert.deepEqual([own.ours, own.baseline, own.ratio, own.target], [190, 125, 1.52, undefined])
    const cpu = byMetric(n.comparisons, 'PDF CPU ms/page, pool of 1 worker')
    assert.equal(cpu.higher_is_better, false)
    assert.equal(cpu.ratio, 0.8) // 8 / 10: ours uses more CPU, so below 1
  })

  it('embed: throughput against the naive version and quality without a baseline; a missing data set skips', () => {
    const tp = (ours: number, naive: number) => ({ docs: 500, rounds: 2, avg_doc_bytes: 1500, builtin_docs_per_sec: ours, builtin_mb_per_sec: 1, naive_docs_per_sec: naive, naive_mb_per_sec: 0.5, speedup: ours / naive })
    const n = normalise('embed', { bench: 'embed', machine: {}, dimensions: 1024, sizes: { scifact: { docs: 5183, queries: 300 } },
      quality: { scifact_ndcg10: 0.61, autorag_ko_ndcg10: 0.55 }, throughput: tp(3000, 1000), throughput_12kb: tp(400, 100) })
    assert.equal(byMetric(n.comparisons, 'builtin embedder docs/s, SciFact abstracts').ratio, 3)
    assert.equal(byMetric(n.comparisons, 'builtin embedder docs/s, 12 KB documents').ratio, 4)
    const q = byMetric(n.comparisons, 'builtin embedder nDCG@10, SciFact (dense only)')
    assert.deepEqual([q.ours, q.baseline, q.ratio], [0.61, null, null])
    assert.equal(byMetric(n.comparisons, 'builtin embedder nDCG@10, autorag-ko (dense only)').ours, 0.55)
    assert.equal(n.skipped, undefined)
    const missing = normalise('embed', { bench: 'embed', machine: {}, error: 'SciFact not found under /nowhere' })
    assert.equal(missing.skipped, 'SciFact not found under /nowhere')
    assert.equal(missing.comparisons.length, 0)
  })

  it('ingest: documents/s and CPU per document against the script, peak RSS at 5,000 documents and its growth (issue 40)', () => {
    const raw = { name: 'ingest', machine: {}, sizes: { documents: 1000 }, results: {
      documents_per_s: 40, mb_per_s: 0.4, seconds: 25, outcome: { indexed: 999, failed: 1, outdated: 0 }, chunks: 200,
      stage_ms_per_doc: { validate: 1, parse: 30, chunk: 5, embed: 10 }, stage_share: {}, peak_rss_mb: 380,
      baseline_documents_per_s: 50, ratio_vs_baseline: 0.8, event_loop_delay_ms: { p99: 12.5, max: 41 },
      cpu_ms_per_doc: 17.8, baseline_cpu_ms_per_doc: 9.78,
      cpu_ms_per_doc_by_thread: { main: 6.5, compute: [3.5, 0.5], metadata: 2.25, other: 1.75, others: [3.5, 2.25, 1.5, 0.5, 0.25] },
      run_queue_wait_ms_per_doc_by_thread: { main: 2.5, compute: 3.25, metadata: 0.5, other: 1.75 },
      upload_client_cpu_ms_per_doc: 1.4, cores_busy: 1.62, file_create_us: 412.5,
      compute_pool: { tasks_per_doc: 1, wait_ms_p50: 15.13, run_ms_p50: 9.5, worker_cpu_ms_per_task: 5.25 },
      growth: { 1000: { documents_per_s: 40, peak_rss_mb: 380 }, 5000: { documents_per_s: 38, peak_rss_mb: 570 } },
      memory_at_peak_mb: { rss: 380, heap_total: 120, array_buffers: 90.5, anonymous: 330 },
    } }
    const n = normalise('ingest', raw)
    assert.ok(n.notes.includes('memory at the peak RSS, MB: rss 380, heap total 120, array buffers 90.5, anonymous 330'), n.notes.join('; '))
    const d = byMetric(n.comparisons, 'documents/s, end to end')
    assert.deepEqual([d.ours, d.baseline, d.ratio, d.target, d.target_of, d.target_at, d.met], [40, 50, 0.8, 1.2, 'ratio', 'at 1,000 documents', false])
    const cpu = byMetric(n.comparisons, 'CPU ms per document, all threads')
    assert.deepEqual([cpu.ours, cpu.baseline, cpu.higher_is_better, cpu.target, cpu.target_of, cpu.met, cpu.tracked], [17.8, 9.78, false, 1.3, 'factor', false, undefined])
    const rss5000 = byMetric(n.comparisons, 'peak RSS at 5000 documents')
    assert.deepEqual([rss5000.ours, rss5000.target, rss5000.target_of, rss5000.met], [570, 450, 'value', false])
    assert.equal(byMetric(n.comparisons, 'peak RSS at 1000 documents').target, undefined)
    const growth = byMetric(n.comparisons, 'peak RSS growth, 1000 to 5000 documents')
    assert.deepEqual([growth.ours, growth.unit, growth.target, growth.met], [50, '%', 25, false])
    // The run's own peak RSS is at 1,000 documents: its target (defined at 5,000) is shown, not judged.
    const peak = byMetric(n.comparisons, 'peak RSS')
    assert.deepEqual([peak.target, peak.target_at, peak.met], [450, 'at 5,000 documents', undefined])
    const main = byMetric(n.comparisons, 'CPU ms per document, service main thread')
    assert.deepEqual([main.ours, main.higher_is_better], [6.5, false])
    assert.ok(n.notes.some((x) => x.includes('other threads, busiest first: 3.5, 2.25, 1.5, 0.5, 0.25')), n.notes.join('; '))
    // By role: the pool's workers summed, PGlite's thread, the rest; none of them gated.
    const roles = ['compute pool', 'metadata thread (PGlite)', "V8's helper threads and libuv's pool"].map((r) => byMetric(n.comparisons, `CPU ms per document, ${r}`))
    assert.deepEqual(roles.map((c) => [c.ours, c.higher_is_better, c.tracked]), [[4, false, false], [2.25, false, false], [1.75, false, false]])
    // The upload client shares the cores (the script has no client): shown, not gated; and how busy the cores were.
    const client = byMetric(n.comparisons, 'CPU ms per document, the upload client (same cores)')
    assert.deepEqual([client.ours, client.higher_is_better, client.tracked], [1.4, false, false])
    assert.ok(n.notes.includes("cores busy over the measured run, service and upload client together: 1.62 of the machine's"), n.notes.join('; '))
    assert.ok(n.notes.includes("ms per document the service's threads waited, runnable, for a core: main 2.5, compute pool 3.25, metadata 0.5, V8's helpers and libuv 1.75"), n.notes.join('; '))
    assert.ok(n.notes.includes("compute pool: 1 tasks per document; a task waited 15.13 ms for a worker and took 9.5 ms there (p50s), for 5.25 ms of the workers' CPU"), n.notes.join('; '))
    // The file system's cost of the file each document gets (bench/ingest.bench.ts fileCreateProbe).
    assert.ok(n.notes.includes("creating a file in the service's data folder took 412.5 µs; the service creates one per document, so the file system's state moves the time per document by up to that much"), n.notes.join('; '))
    const stall = byMetric(n.comparisons, 'longest event-loop stall while ingesting')
    assert.deepEqual([stall.ours, stall.higher_is_better], [41, false])
    assert.equal(byMetric(n.comparisons, 'event-loop delay p99 while ingesting').ours, 12.5)
    const failed = byMetric(n.comparisons, 'documents failed')
    assert.deepEqual([failed.ours, failed.met], [1, false])
    const stages = n.series.find((s) => s.id === 'ingest-stages')
    assert.ok(stages)
    assert.equal(stages.kind, 'stages')
    assert.deepEqual(stages.groups.map((g) => [g.label, g.values['ms per document']]), [['validate', 1], ['parse', 30], ['chunk', 5], ['embed', 10]])
  })

  it("ingest: a peak RSS that is the kernel's high-water mark shows the highest sample beside it, whose breakdown the note is", () => {
    const results = { peak_rss_mb: 495, sampled_peak_rss_mb: 476, memory_at_peak_mb: { rss: 470, heap_total: 110 } }
    const exact = normalise('ingest', { sizes: { documents: 5000 }, results: { ...results, peak_rss_exact: true } })
    assert.equal(byMetric(exact.comparisons, 'peak RSS').ours, 495)
    const sampled = byMetric(exact.comparisons, 'peak RSS, highest of samples every 100 ms')
    assert.deepEqual([sampled.ours, sampled.tracked], [476, false])
    assert.ok(exact.notes.includes('memory at the peak RSS sampled, MB: rss 470, heap total 110'), exact.notes.join('; '))
    assert.ok(exact.notes.some((x) => x.startsWith("peak RSS is the kernel's high-water mark over the run; runs before 2026-12-02")), exact.notes.join('; '))
    // Sampled only (off Linux, or an older run): the peak is the samples' highest, and nothing is shown twice.
    const only = normalise('ingest', { sizes: { documents: 5000 }, results: { ...results, peak_rss_exact: false } })
    assert.equal(only.comparisons.some((c) => c.metric === 'peak RSS, highest of samples every 100 ms'), false)
    assert.ok(only.notes.includes('memory at the peak RSS, MB: rss 470, heap total 110'), only.notes.join('; '))
    assert.equal(only.notes.some((x) => x.startsWith("peak RSS is the kernel's high-water mark")), false)
  })

  it('ingest: targets met; at another size documents/s is not judged and the missing growth series is a note', () => {
    const met = normalise('ingest', { sizes: { documents: 1000 }, results: {
      documents_per_s: 66, baseline_documents_per_s: 50, cpu_ms_per_doc: 12, baseline_cpu_ms_per_doc: 10, peak_rss_mb: 360,
      growth: { 1000: { documents_per_s: 66, peak_rss_mb: 360 }, 5000: { documents_per_s: 60, peak_rss_mb: 440 } }, peak_rss_growth_pct: 22.2,
    } })
    assert.deepEqual(met.comparisons.filter((c) => c.met !== undefined).map((c) => [c.metric, c.met]), [
      ['documents/s, end to end', true], ['CPU ms per document, all threads', true], ['peak RSS at 5000 documents', true],
      ['peak RSS growth, 1000 to 5000 documents', true], ['documents failed', true],
    ])
    assert.equal(byMetric(met.comparisons, 'peak RSS growth, 1000 to 5000 documents').ours, 22.2)
    const quick = normalise('ingest', { sizes: { documents: 200 }, results: { documents_per_s: 90, baseline_documents_per_s: 50, cpu_ms_per_doc: 14, baseline_cpu_ms_per_doc: 10, peak_rss_mb: 300 } })
    const d = byMetric(quick.comparisons, 'documents/s, end to end')
    assert.deepEqual([d.ratio, d.target, d.met], [1.8, 1.2, undefined])
    assert.equal(byMetric(quick.comparisons, 'CPU ms per document, all threads').met, false) // 1.4x the script's
    assert.ok(!quick.comparisons.some((c) => c.metric.startsWith('peak RSS growth')))
    assert.ok(quick.notes.some((x) => x.includes('judged at 1,000 documents') && x.includes('ingested 200')), quick.notes.join('; '))
    assert.ok(quick.notes.some((x) => x.includes('--sizes=1000,5000')), quick.notes.join('; '))
  })

  it('vectors: latencies against exact search as ratios above 1 when ours is faster, and percentile series', () => {
    const lat = (p50: number, p99: number) => ({ p50_ms: p50, p99_ms: p99, mean_ms: p50 })
    const raw = { bench: 'vectors', machine: {}, sizes: { n: 2000, dims: 64 },
      build: { gen_ms: 100, upsert_ms: 500, graph_ready_ms: 800, snapshot_ms: 200 },
      crash_restart: { reopen_ms: 10, graph_caught_up_ms: 50 }, memory: { rss_mb: 90 },
      dense_top10: { hnsw: lat(0.5, 2), exact_bruteforce: lat(5, 6), speedup_p50: 10, recall_at_10: 0.98 },
      sparse_top10: { inverted_index: lat(0.2, 1), exact_bruteforce: lat(3, 9), speedup_p50: 15, score_mismatches: 0 },
      hybrid_top10: lat(0.8, 3),
      multi_kb: { one_kb: { p50_ms: 1, p99_ms: 2 }, many_kbs: { p50_ms: 2.5, p99_ms: 5 }, ratio_p50: 2.5 },
    }
    const n = normalise('vectors', raw)
    const dense = byMetric(n.comparisons, 'dense top-10 p50')
    assert.deepEqual([dense.ours, dense.baseline, dense.ratio, dense.higher_is_better], [0.5, 5, 10, false])
    assert.equal(byMetric(n.comparisons, 'sparse top-10 p50').ratio, 15)
    assert.equal(byMetric(n.comparisons, 'sparse score mismatches vs exact').met, true)
    assert.equal(byMetric(n.comparisons, 'hybrid p50, 10 KBs vs 1 KB').ratio, 0.4)
    const latency = n.series.find((s) => s.id === 'vectors-latency')
    assert.ok(latency)
    assert.deepEqual(latency.groups.find((g) => g.label === 'sparse, exact')?.values, { p50: 3, p99: 9 })
    const build = n.series.find((s) => s.id === 'vectors-build')
    assert.equal(build?.groups.find((g) => g.label === 'graph catch-up')?.values.ms, 300)
  })

  it('search (issue 40): share outside the index judged at 100k chunks, 10 KBs over 1 KB at most 1.5x, latency per scenario', () => {
    const low = (e2e: number, index: number) => ({ e2e_http: { p50_ms: e2e, p99_ms: e2e * 2, mean_ms: e2e }, baseline_direct_store: { index_p50_ms: index, total_p50_ms: index + 0.5 },
      outside_index_share: { p50_based: 1 - index / e2e },
      breakdown_p50_ms: { query_encoding: 0.2, vector_index: index, fusion_pooling_results: 0.3, json_stringify: 0.1, http_routing_validation_client: 0.4 } })
    const load = (qps: number, p50: number, p99: number) => ({ qps, p50_ms: p50, p99_ms: p99, requests: 100, rounds: { qps: { median: qps, min: qps - 10, max: qps + 10 } } })
    const raw = (chunks: number) => ({
      bench: 'search', machine: {}, sizes: { chunks, connections: 16 }, build: { reused: false },
      load: { 'hybrid 1 KB': load(400, 10, 30), 'hybrid 10 KBs': load(150, 14.4, 60), 'similarity 1 KB': load(800, 5, 12), 'similarity 10 KBs': load(500, 7.95, 20) },
      one_connection: { 'hybrid 1 KB': low(5, 4.5), 'hybrid 10 KBs': low(10, 7), 'similarity 1 KB': low(2, 1.5), 'similarity 10 KBs': low(4, 3.6) },
      ten_over_one: { hybrid: { load_p50: 1.44 }, similarity: { load_p50: 1.59 } },
    })
    const n = normalise('search', raw(100_000))
    const over = byMetric(n.comparisons, 'hybrid 1 KB: p50, HTTP vs index only (1 conn.)')
    assert.deepEqual([over.ours, over.baseline, over.ratio, over.target], [5, 4.5, 0.9, undefined])
    const share = byMetric(n.comparisons, 'hybrid 1 KB: share of the p50 outside the index (1 conn.)')
    assert.deepEqual([share.ours, share.unit, share.higher_is_better, share.target, share.target_of, share.target_at, share.met], [10, '%', false, 10, 'value', 'at 100,000 chunks', true])
    assert.equal(byMetric(n.comparisons, 'hybrid 10 KBs: share of the p50 outside the index (1 conn.)').met, false) // 30 %
    assert.equal(byMetric(n.comparisons, 'similarity 1 KB: share of the p50 outside the index (1 conn.)').met, false) // 25 %
    assert.equal(byMetric(n.comparisons, 'similarity 10 KBs: share of the p50 outside the index (1 conn.)').ours, 10)
    const hybrid = byMetric(n.comparisons, 'hybrid: p50 under load, 10 KBs vs 1 KB')
    assert.deepEqual([hybrid.ours, hybrid.baseline, hybrid.ratio, hybrid.target, hybrid.target_of, hybrid.met], [14.4, 10, 0.6944, 1.5, 'factor', true])
    const similarity = byMetric(n.comparisons, 'similarity: p50 under load, 10 KBs vs 1 KB')
    assert.deepEqual([similarity.target, similarity.met], [1.5, false]) // 1.59x
    assert.deepEqual(byMetric(n.comparisons, 'similarity 1 KB: QPS under load').ours_range, [790, 810])
    const latency = n.series.find((s) => s.id === 'search-latency')
    assert.ok(latency)
    assert.equal(latency.kind, 'percentiles')
    assert.deepEqual(latency.groups.map((g) => [g.label, g.values.p50, g.values.p99]), [['hybrid 1 KB', 10, 30], ['hybrid 10 KBs', 14.4, 60], ['similarity 1 KB', 5, 12], ['similarity 10 KBs', 7.95, 20]])
    assert.ok(n.series.some((s) => s.id === 'search-breakdown'))
    assert.ok(!n.comparisons.some((c) => /cache/.test(c.metric)), 'a result without the cache section adds no cache comparison')
    assert.ok(n.notes.includes("no cached search round trip in the result (section 'cached_round_trip')"), n.notes.join('; '))
    // At 10k chunks the share is shown with its target but not judged, and a note says why.
    const quick = normalise('search', raw(10_000))
    const q = byMetric(quick.comparisons, 'hybrid 10 KBs: share of the p50 outside the index (1 conn.)')
    assert.deepEqual([q.ours, q.target, q.met], [30, 10, undefined])
    assert.ok(quick.notes.some((x) => x.includes('judged at 100,000 chunks') && x.includes('this run had 10,000')), quick.notes.join('; '))
    assert.equal(byMetric(quick.comparisons, 'similarity: p50 under load, 10 KBs vs 1 KB').met, false)
  })

  it('search (issue 40): a cached search\'s round trip against GET /health, at most 1.3x', () => {
    const raw = {
      bench: 'search', machine: {}, sizes: { chunks: 2000, connections: 16 },
      cached_round_trip: {
        'hybrid 1 KB': { cached_p50_ms: 0.24, health_p50_ms: 0.2, cached_over_health_p50: 1.2 },
        'hybrid 10 KBs': { cached_p50_ms: 0.3, health_p50_ms: 0.2, cached_over_health_p50: 1.5 },
      },
    }
    const n = normalise('search', raw)
    const one = byMetric(n.comparisons, 'hybrid 1 KB: cached search vs GET /health, p50 (1 conn.)')
    assert.deepEqual([one.ours, one.baseline, one.unit, one.higher_is_better, one.target, one.target_of, one.met], [0.24, 0.2, 'ms', false, 1.3, 'factor', true])
    assert.equal(one.baseline_name, 'GET /health through the same client')
    assert.equal(byMetric(n.comparisons, 'hybrid 10 KBs: cached search vs GET /health, p50 (1 conn.)').met, false)
    assert.ok(!n.notes.some((x) => x.includes('cached_round_trip')))
    assert.ok(!n.comparisons.some((c) => /bare uWS/.test(c.metric)), 'no ceiling rows without the ceiling in the result')
  })

  it('search (issue 40): the cached round trip\'s ceiling in the same run, bare uWS answering the same bytes', () => {
    const raw = {
      bench: 'search', machine: {}, sizes: { chunks: 2000, connections: 16 },
      cached_round_trip: {
        'hybrid 1 KB': { cached_p50_ms: 0.14, health_p50_ms: 0.1, bare_post_p50_ms: 0.15, bare_health_p50_ms: 0.09 },
      },
    }
    const n = normalise('search', raw)
    const ceiling = byMetric(n.comparisons, 'hybrid 1 KB: ceiling, bare uWS answering the same bytes: POST vs its GET /health, p50 (1 conn.)')
    assert.deepEqual([ceiling.ours, ceiling.baseline, ceiling.unit, ceiling.higher_is_better, ceiling.target], [0.15, 0.09, 'ms', false, undefined])
    const over = byMetric(n.comparisons, 'hybrid 1 KB: cached search vs bare uWS answering the same bytes, p50 (1 conn.)')
    assert.deepEqual([over.ours, over.baseline, over.baseline_name], [0.14, 0.15, 'bare uWS answering the same request with the same bytes'])
    // the target row is unchanged: against GET /health
    assert.equal(byMetric(n.comparisons, 'hybrid 1 KB: cached search vs GET /health, p50 (1 conn.)').target, 1.3)
  })

  it('search (issue 40): the share outside the index beside its ceiling in the same run, bare uWS doing the store\'s work', () => {
    const raw = {
      bench: 'search', machine: {}, sizes: { chunks: 100_000, connections: 16 },
      one_connection: {
        'hybrid 1 KB': {
          e2e_http: { p50_ms: 4 }, baseline_direct_store: { index_p50_ms: 3.4 },
          outside_index_share: { p50_based: 0.15, ceiling_bare_store: { p50_based: 0.08, outside_p50_ms: 0.28, service_over_ceiling_outside_ms: 0.31 } },
        },
        'similarity 1 KB': { e2e_http: { p50_ms: 2 }, baseline_direct_store: { index_p50_ms: 1.9 }, outside_index_share: { p50_based: 0.05 } },
      },
    }
    const n = normalise('search', raw)
    const ceiling = byMetric(n.comparisons, "hybrid 1 KB: ceiling, bare uWS doing the store's work: share of the p50 outside the index (1 conn.)")
    assert.deepEqual([ceiling.ours, ceiling.unit, ceiling.higher_is_better, ceiling.target], [8, '%', false, undefined])
    const time = byMetric(n.comparisons, 'hybrid 1 KB: time outside the index, p50 (1 conn.)')
    assert.deepEqual([time.ours, time.baseline, time.baseline_name], [0.59, 0.28, "bare uWS doing the store's work"])
    // the target row is unchanged: the share against the store called directly, judged at 100k chunks
    const share = byMetric(n.comparisons, 'hybrid 1 KB: share of the p50 outside the index (1 conn.)')
    assert.deepEqual([share.ours, share.target, share.met], [15, 10, false])
    assert.ok(!n.comparisons.some((c) => c.metric.startsWith('similarity 1 KB') && /bare uWS/.test(c.metric)), 'no ceiling rows for a case without one')
  })

  it('search: cache hits against misses, at 1 connection and under load', () => {
    const raw = {
      bench: 'search', machine: {}, sizes: { chunks: 2000, connections: 16 },
      cache: {
        'hybrid 1 KB': { one_connection: { hit_p50_ms: 0.5, miss_p50_ms: 4, hit_over_miss_p50: 0.125 }, load: { hit_qps: 6000, miss_qps: 400, qps_ratio: 15 } },
        'hybrid 10 KBs': { one_connection: { hit_p50_ms: 0.6 }, load: { hit_qps: 5000, miss_qps: 150 } },
      },
    }
    const n = normalise('search', raw)
    const p50 = byMetric(n.comparisons, 'hybrid 1 KB: cache hit vs miss, p50 (1 conn.)')
    assert.deepEqual([p50.ours, p50.baseline, p50.ratio, p50.unit, p50.higher_is_better], [0.5, 4, 8, 'ms', false])
    const qps = byMetric(n.comparisons, 'hybrid 1 KB: cache hit vs miss, QPS under load')
    assert.deepEqual([qps.ours, qps.baseline, qps.ratio, qps.unit, qps.higher_is_better], [6000, 400, 15, 'QPS', true])
    assert.equal(byMetric(n.comparisons, 'hybrid 10 KBs: cache hit vs miss, QPS under load').ratio, 33.33)
    assert.ok(!n.comparisons.some((c) => c.metric === 'hybrid 10 KBs: cache hit vs miss, p50 (1 conn.)'))
    assert.ok(n.notes.includes("'hybrid 10 KBs: cache hit vs miss, p50 (1 conn.)' not found in the result"), 'a missing figure is a note')
  })

  it('search: pgvector against the embedded store, store only; a skipped section is a note', () => {
    const stat = (p50: number) => ({ p50_ms: p50, p99_ms: p50 * 3 })
    const raw = {
      bench: 'search', machine: {}, sizes: { chunks: 2000, connections: 16 },
      pgvector: {
        one_caller: { embedded: { similarity: stat(1), hybrid: stat(1.5) }, pgvector: { similarity: stat(4), hybrid: stat(6) } },
        load: { embedded: { similarity: { qps: 1000 }, hybrid: { qps: 800 } }, pgvector: { similarity: { qps: 250 }, hybrid: { qps: 100 } } },
        recall_at_10: { embedded: 0.95, pgvector: 0.9 },
      },
    }
    const n = normalise('search', raw)
    const p50 = byMetric(n.comparisons, 'pgvector similarity 1 KB: p50 (1 caller, store only)')
    assert.deepEqual([p50.ours, p50.baseline, p50.ratio, p50.higher_is_better, p50.baseline_name], [4, 1, 0.25, false, 'the embedded store'])
    assert.deepEqual([byMetric(n.comparisons, 'pgvector hybrid 1 KB: QPS (store only, under load)').ours, byMetric(n.comparisons, 'pgvector hybrid 1 KB: QPS (store only, under load)').ratio], [100, 0.125])
    assert.deepEqual([byMetric(n.comparisons, 'pgvector: dense recall@10 against exact search').ours, byMetric(n.comparisons, 'pgvector: dense recall@10 against exact search').baseline], [0.9, 0.95])
    const skipped = normalise('search', { bench: 'search', machine: {}, sizes: {}, pgvector: { skipped: 'TEST_POSTGRES_URL not set' } })
    assert.ok(!skipped.comparisons.some((c) => c.metric.startsWith('pgvector')))
    assert.ok(skipped.notes.includes('pgvector: skipped (TEST_POSTGRES_URL not set)'))
  })

  it('orama: our in-process search against the better Orama configuration on each figure', () => {
    const engine = (qps: [number, number, number], ndcg: [number, number, number], build: number, rss: number) => ({
      build_seconds: build, memory: { rss_mib: rss, heap_used_mib: 1, external_mib: 1 },
      ndcg_at_10: { keyword: ndcg[0], vector: ndcg[1], hybrid: ndcg[2] }, qps: { keyword: qps[0], vector: qps[1], hybrid: qps[2] },
      qps_rounds: { keyword: [qps[0] - 1, qps[0] + 1], vector: [qps[1]], hybrid: [qps[2]] },
    })
    const raw = { name: 'orama', machine: {}, sizes: { documents: 300 }, results: {
      quarry: engine([3000, 1200, 240], [0.88, 0.72, 0.78], 2, 24),
      orama: engine([30, 160, 20], [0.49, 0.72, 0.72], 2.5, 33),
      'orama (stemmed)': engine([100, 40, 96], [0.75, 0.72, 0.8], 2.2, 37),
      'quarry (exact scan)': engine([5000, 99, 500], [0.9, 0.9, 0.9], 1, 1),
    } }
    const n = normalise('orama', raw)
    const hybrid = byMetric(n.comparisons, 'hybrid queries/s vs Orama')
    assert.deepEqual([hybrid.baseline, hybrid.baseline_name, hybrid.ratio, hybrid.target, hybrid.met], [96, 'orama (stemmed)', 2.5, 2, true])
    assert.deepEqual(byMetric(n.comparisons, 'keyword queries/s vs Orama').ours_range, [2999, 3001])
    assert.equal(byMetric(n.comparisons, 'vector queries/s vs Orama').baseline, 160)
    const q = byMetric(n.comparisons, 'hybrid nDCG@10 vs Orama')
    assert.deepEqual([q.baseline, q.ratio, q.met], [0.8, 0.975, false])
    const build = byMetric(n.comparisons, 'index build time vs Orama')
    assert.deepEqual([build.baseline, build.ratio], [2.2, 1.1])
    assert.equal(normalise('orama', { name: 'orama', skipped: 'no data set at /x' }).skipped, 'no data set at /x')
  })

  it('an unknown shape still yields its latency percentiles, and missing fields become notes, not crashes', () => {
    const n = normalise('newbench', { sizes: { n: 1 }, cases: [{ label: 'fast', p50_ms: 1, p99_ms: 3 }], other: { deep: { p50_ms: 2, p99_ms: 4 } } })
    assert.equal(n.series.length, 1)
    assert.deepEqual(n.series[0].groups.map((g) => g.label), ['cases / fast', 'other / deep'])
    assert.equal(n.series[0].id, 'newbench-latency')
    const empty = normalise('chunk', { machine: {} })
    assert.equal(empty.comparisons.length, 0)
    assert.ok(empty.notes.some((x) => x.includes('recursive chunking MB/s')))
  })

  it('orients ratios so that above 1 means ours is ahead, whichever way the metric goes', () => {
    assert.equal(comparison('t', 200, 100, { unit: 'x/s' }).ratio, 2)
    assert.equal(comparison('l', 2, 8, { unit: 'ms', higher_is_better: false }).ratio, 4)
    assert.equal(comparison('z', 0, 8, { unit: 'ms', higher_is_better: false }).ratio, null)
    const v = comparison('v', 45, null, { unit: 'docs/s', target: 50 })
    assert.deepEqual([v.ratio, v.target_of, v.met], [null, 'value', false])
  })

  it('judges a factor target on ours / baseline in the metric direction, and leaves a target at another size unjudged', () => {
    const slower = (ours: number) => comparison('f', ours, 10, { unit: 'ms', higher_is_better: false, target: 1.5, target_of: 'factor' })
    assert.deepEqual([slower(15).met, slower(15.1).met, slower(9).met], [true, false, true])
    assert.equal(slower(15).ratio, 0.6667)
    assert.equal(factorOf(slower(15.9)), 1.59)
    const faster = (ours: number) => comparison('g', ours, 10, { unit: 'x/s', target: 1.2, target_of: 'factor' })
    assert.deepEqual([faster(12).met, faster(11.9).met], [true, false])
    assert.equal(comparison('n', 15, null, { unit: 'ms', higher_is_better: false, target: 1.5, target_of: 'factor' }).met, false)
    const elsewhere = comparison('s', 30, null, { unit: '%', higher_is_better: false, target: 10, target_at: 'at 100,000 chunks', judged: false })
    assert.deepEqual([elsewhere.target, elsewhere.target_at, elsewhere.met], [10, 'at 100,000 chunks', undefined])
    assert.ok(!('met' in elsewhere))
  })
})

// ---- compare ------------------------------------------------------------------------------------------

function bench(name: string, comparisons: Comparison[], sizes: Record<string, unknown> = { n: 1 }): NormalisedBench {
  return { name, status: 'ok', seconds: 1, sizes, comparisons, series: [], notes: [] }
}

function suite(benchmarks: NormalisedBench[], mode: SuiteResult['mode'] = 'quick'): SuiteResult {
  return { format: 1, started_at: '2025-01-01T00:00:00.000Z', seconds: 1, mode, machine: { cpu: 'cpu' }, git_revision: null, benchmarks, raw: {} }
}

const cmp = (metric: string, ours: number, baseline: number | null, o: Partial<Comparison> = {}): Comparison =>
  comparison(metric, ours, baseline, { unit: 'u', higher_is_better: o.higher_is_better, tracked: o.tracked })

describe('compare', () => {
  const before = suite([bench('a', [
    cmp('falls 20%', 100, 10), cmp('falls 5%', 100, 10), cmp('rises 30%', 100, 10),
    cmp('rss', 100, null, { higher_is_better: false }), cmp('noisy', 100, 10, { tracked: false }), cmp('gone', 1, 1),
  ])])
  const after = suite([bench('a', [
    cmp('falls 20%', 80, 10), cmp('falls 5%', 95, 10), cmp('rises 30%', 130, 10),
    cmp('rss', 115, null, { higher_is_better: false }), cmp('noisy', 10, 10, { tracked: false }), cmp('new', 1, 1),
  ])])

  it('flags a tracked metric worse by more than the margin, and not an improvement or a small change', () => {
    const r = compareSuites(before, after, 0.1)
    const status = Object.fromEntries(r.rows.map((x) => [x.metric, x.status]))
    assert.deepEqual(status, { 'falls 20%': 'regressed', 'falls 5%': 'same', 'rises 30%': 'improved', rss: 'regressed', noisy: 'untracked', new: 'new', gone: 'missing' })
    assert.deepEqual(r.regressions.map((x) => x.metric).sort(), ['falls 20%', 'rss'])
    const fall = r.rows.find((x) => x.metric === 'falls 20%')!
    assert.deepEqual([fall.basis, fall.before, fall.after, fall.change], ['ratio', 10, 8, -0.2])
    const rss = r.rows.find((x) => x.metric === 'rss')!
    assert.deepEqual([rss.basis, rss.change], ['value', -0.15])
    const table = formatCompareTable(r)
    assert.match(table, /falls 20%.*REGRESSED/)
    assert.match(table, /2 tracked metric\(s\) regressed by more than 10 %/)
  })

  it('takes the margin it is given', () => {
    const r = compareSuites(before, after, 0.25)
    assert.deepEqual(r.regressions.map((x) => x.metric), [])
    assert.equal(r.rows.find((x) => x.metric === 'falls 20%')!.status, 'same')
    assert.match(formatCompareTable(r), /no tracked metric regressed by more than 25 %/)
  })

  it('does not gate on runs of different sizes or modes, and says so', () => {
    const bigger = suite([bench('a', [cmp('falls 20%', 80, 10)], { n: 2 })])
    const r = compareSuites(suite([bench('a', [cmp('falls 20%', 100, 10)])]), bigger)
    assert.equal(r.regressions.length, 0)
    assert.equal(r.rows[0].status, 'sizes differ')
    assert.ok(r.warnings.some((w) => w.includes('sizes differ')))
    const smoke = compareSuites(suite([bench('a', [cmp('falls 20%', 100, 10)])], 'full'), suite([bench('a', [cmp('falls 20%', 50, 10)])], 'smoke'))
    assert.equal(smoke.regressions.length, 0)
  })

  it('measures change in the good direction, from zero as beyond any margin', () => {
    assert.equal(relativeChange(10, 12, true), 0.2)
    assert.equal(relativeChange(10, 12, false), -0.2)
    assert.equal(relativeChange(0, 0, false), 0)
    assert.equal(relativeChange(0, 1, false), -Infinity)
    const r = compareSuites(suite([bench('a', [cmp('failures', 0, null, { higher_is_better: false })])]), suite([bench('a', [cmp('failures', 2, null, { higher_is_better: false })])]))
    assert.equal(r.regressions.length, 1)
    assert.equal(r.rows[0].change, null)
  })
})

describe('report', () => {
  it('writes Markdown that links every chart it draws, with well-formed SVG files', () => {
    const s = suite([
      bench('ingest', [cmp('documents/s, end to end', 40, 20)]),
      { ...bench('search', [cmp('hybrid 1 KB: p50, HTTP vs index only (1 conn.)', 5, 4.5, { higher_is_better: false })]),
        series: [{ id: 'search-latency', title: 'Search latency', unit: 'ms', kind: 'percentiles', groups: [{ label: 'hybrid 1 KB', values: { p50: 10, p99: 30 } }] }] },
      { ...bench('kernel', []), status: 'failed', error: 'wrk is not installed' },
    ])
    const files = renderReport(s, 'stem')
    const md = files[0]
    assert.equal(md.name, 'stem.md')
    const svgs = files.slice(1)
    assert.deepEqual(svgs.map((f) => f.name), ['stem-ratios.svg', 'stem-search-latency.svg'])
    for (const f of svgs) {
      assertWellFormed(f.content)
      assert.ok(md.content.includes(`](${f.name})`), `${f.name} is linked`)
    }
    assert.match(md.content, /\| kernel \| failed: wrk is not installed \|/)
    assert.match(md.content, /\| ingest \| documents\/s, end to end \| 40 \| 20 .*\| 2x \|/)
    // The ratio chart holds one bar per comparison with a baseline.
    assert.equal(bars(svgs[0].content).length, 2)
  })

  it('lists every figure with a target, as the issue states it, with the machine it ran on', () => {
    const n = normalise('search', {
      sizes: { chunks: 10_000 },
      load: { 'similarity 1 KB': { qps: 800, p50_ms: 5, p99_ms: 12 }, 'similarity 10 KBs': { qps: 500, p50_ms: 7.95, p99_ms: 20 } },
      one_connection: { 'similarity 1 KB': { e2e_http: { p50_ms: 2 }, baseline_direct_store: { index_p50_ms: 1.36 }, outside_index_share: { p50_based: 0.32 } } },
      ten_over_one: { similarity: {} },
      cached_round_trip: { 'hybrid 1 KB': { cached_p50_ms: 0.24, health_p50_ms: 0.2 } },
    })
    const kernel = normalise('kernel', { results: { get: { quarry: { rps_median: 8620 }, uws: { rps_median: 10000 } } } })
    const s = suite([{ ...bench('search', n.comparisons), notes: n.notes }, bench('kernel', kernel.comparisons)])
    s.machine = { cpu: 'AMD EPYC', cores: 2, memory_gb: 8, node: 'v20.0.0', platform: 'linux-x64', load_average: [1, 1, 1] }
    const md = renderReport(s, 'stem')[0].content
    assert.match(md, /- machine: AMD EPYC, 2 cores, 8 GB, Node v20\.0\.0, linux-x64/)
    const section = md.slice(md.indexOf('## Targets'), md.indexOf('##', md.indexOf('## Targets') + 3))
    assert.match(section, /\| search \| similarity: p50 under load, 10 KBs vs 1 KB \| 7\.95 ms \| 5 ms \(the same chunks in 1 KB\) \| ≤ 1\.5x the baseline \(now 1\.59x\) \| \*\*no\*\* \|/)
    assert.match(section, /\| search \| similarity 1 KB: share of the p50 outside the index \(1 conn\.\) \| 32 % \| +\| ≤ 10 % at 100,000 chunks \| not judged at this size \|/)
    assert.match(section, /\| search \| hybrid 1 KB: cached search vs GET \/health, p50 \(1 conn\.\) \| 0\.24 ms \| .*\| ≤ 1\.3x the baseline \(now 1\.2x\) \| yes \|/)
    assert.match(section, /\| kernel \| GET req\/s vs bare uWebSockets\.js \| 8,?620 req\/s \| 10,?000 req\/s \(bare uWebSockets\.js, same handlers\): 0\.862x \| ≥ 0\.95x \| \*\*no\*\* \|/)
    assert.ok(!section.includes('p50, HTTP vs index only'), 'a figure without a target is not in the targets table')
    // The summary counts the judged targets only: 1 of 2 in search (the share is not judged at 10k chunks).
    assert.match(md, /\| search \| ok \| .* \| 1\/2 \|/)
    // The ratio chart marks a factor target on its own scale: at most 1.5x slower is a ratio of 1 / 1.5.
    const svg = renderReport(s, 'stem').find((f) => f.name === 'stem-ratios.svg')!.content
    assert.match(svg, /<line class="target" data-value="0\.6667"/)
    const c = byMetric(n.comparisons, 'hybrid 1 KB: cached search vs GET /health, p50 (1 conn.)')
    assert.deepEqual([targetText(c), metText(c)], ['≤ 1.3x the baseline (now 1.2x)', 'yes'])
  })
})
