// Metrics and tracing: one instance per process, as Prometheus scrapes a process and one exporter sends its
// spans. Instrumented code imports `telemetry` and calls it unconditionally: with tracing off a span is the
// plain call, and no OpenTelemetry module is ever loaded (adapters/telemetry/otlp.ts is imported on start).
import { performance } from 'node:perf_hooks'
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { Settings } from './config/schema.ts'
import type { Logger } from './log.ts'

export type SpanAttributes = Record<string, string | number | boolean>

/** What adapters/telemetry/otlp.ts provides once tracing is on. */
export interface Tracer {
  span<T>(name: string, fn: () => T, attributes?: SpanAttributes): T
  /** Runs fn in a span whose status follows the HTTP status of fn's result. */
  request<R extends { status: number }>(name: string, attributes: SpanAttributes, fn: () => R | Promise<R>): R | Promise<R>
  /** Sends the spans still buffered, then stops exporting. */
  shutdown(): Promise<void>
}

/** Latency buckets in seconds: 1 ms to 30 s, dense where a search or a request usually ends. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
/** Ingest stages run from a millisecond (validate) to minutes (a large PDF's parse, a slow embedder). */
const STAGE_BUCKETS = [0.001, 0.005, 0.025, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 180, 600]

/** The route label of a request that matched no route: raw paths would make the label set unbounded. */
export const UNMATCHED_ROUTE = 'unmatched'

/** KB counts as a bounded label: one KB, a few, many. */
export function kbCountLabel(n: number): string {
  if (n <= 1) return '1'
  if (n <= 5) return '2-5'
  if (n <= 20) return '6-20'
  return '21+'
}

type Labels = Record<string, string>
interface Cell { labels: Labels; count: number; sum: number; /** per bucket of LATENCY_BUCKETS, not cumulative */ buckets: number[] }
interface MetricValue { labels: Record<string, string | number>; value: number; metricName?: string; sharedLabels?: Labels }

/**
 * A count and a latency histogram over three labels, kept off prom-client's per-call path: its inc and observe
 * check and hash their labels on every call, which cost more than the rest of the kernel's work for a small
 * request (issue 17). A call adds to plain numbers in its label set's cell, found through three maps without
 * building a key; the registry reads the cells through metric objects that give what prom-client's own Counter
 * and Histogram give (get, getForPromString, reset), so /metrics shows the same series. Used for the HTTP
 * requests (method, route, status) and the searches (mode, kbs, cache).
 */
class Meter {
  private readonly tree = new Map<string, Map<string, Map<string | number, Cell>>>()
  private cells: Cell[] = []

  /** names: the three labels, in the order they are shown and record() takes their values. */
  constructor(private readonly names: readonly [string, string, string]) {}

  // The last label set recorded and its cell: a run of one route's requests finds its cell without a map.
  private lastA: string | null = null
  private lastB: string | null = null
  private lastC: string | number | null = null
  private lastCell: Cell | null = null

  record(a: string, b: string, c: string | number, seconds: number): void {
    let cell: Cell | undefined
    if (a === this.lastA && b === this.lastB && c === this.lastC) cell = this.lastCell!
    else {
      cell = this.find(a, b, c)
      this.lastA = a
      this.lastB = b
      this.lastC = c
      this.lastCell = cell
    }
    cell.count++
    cell.sum += seconds
    for (let i = 0; i < LATENCY_BUCKETS.length; i++) {
      if (seconds <= LATENCY_BUCKETS[i]) {
        cell.buckets[i]++
        break
      }
    }
  }

  private find(a: string, b: string, c: string | number): Cell {
    let byB = this.tree.get(a)
    if (!byB) this.tree.set(a, (byB = new Map()))
    let byC = byB.get(b)
    if (!byC) byB.set(b, (byC = new Map()))
    let cell = byC.get(c)
    if (!cell) {
      const [na, nb, nc] = this.names
      cell = { labels: { [na]: a, [nb]: b, [nc]: String(c) }, count: 0, sum: 0, buckets: LATENCY_BUCKETS.map(() => 0) }
      byC.set(c, cell)
      this.cells.push(cell)
    }
    return cell
  }

  reset(): void {
    this.tree.clear()
    this.cells = []
    this.lastA = this.lastB = this.lastC = this.lastCell = null
  }

  counter(name: string, help: string) {
    const values = (): MetricValue[] => this.cells.map((c) => ({ labels: { ...c.labels }, value: c.count }))
    const get = async () => ({ name: metric.name, help, type: 'counter', values: values(), aggregator: 'sum' })
    const metric = { name, help, type: 'counter', aggregator: 'sum', get, getForPromString: get, reset: () => this.reset() }
    return metric
  }

  histogram(name: string, help: string) {
    // as prom-client's Histogram: cumulative buckets, +Inf, sum and count per label set; the label set shared
    const values = (): MetricValue[] => this.cells.flatMap((c): MetricValue[] => {
      let acc = 0
      return [
        ...LATENCY_BUCKETS.map((le, i) => ({ labels: { le }, value: (acc += c.buckets[i]), metricName: `${name}_bucket`, sharedLabels: c.labels })),
        { labels: { le: '+Inf' }, value: c.count, metricName: `${name}_bucket`, sharedLabels: c.labels },
        { labels: {}, value: c.sum, metricName: `${name}_sum`, sharedLabels: c.labels },
        { labels: {}, value: c.count, metricName: `${name}_count`, sharedLabels: c.labels },
      ]
    })
    const splayed = (v: MetricValue): MetricValue => ({ labels: { ...v.labels, ...v.sharedLabels }, value: v.value, metricName: v.metricName })
    const metric = {
      name, help, type: 'histogram', aggregator: 'sum',
      getForPromString: async () => ({ name, help, type: 'histogram', values: values(), aggregator: 'sum' }),
      get: async () => ({ name, help, type: 'histogram', values: values().map(splayed), aggregator: 'sum' }),
      reset: () => this.reset(),
    }
    return metric
  }
}

function createInstruments(registry: Registry) {
  const http = new Meter(['method', 'route', 'status'])
  const search = new Meter(['mode', 'kbs', 'cache'])
  const httpRequests = http.counter('quarry_http_requests_total', 'HTTP requests answered, by method, route template and status.')
  const httpDuration = http.histogram('quarry_http_request_duration_seconds', 'Time from routing to the response, by method, route template and status.')
  const searchDuration = search.histogram('quarry_search_duration_seconds', 'Search latency as reported in meta.latency_ms, by mode, number of KBs searched and cache outcome.')
  registry.registerMetric(httpRequests as never)
  registry.registerMetric(httpDuration as never)
  registry.registerMetric(searchDuration as never)
  return {
    http,
    httpRequests,
    httpDuration,
    search,
    searchDuration,
    ingestStage: new Histogram({
      name: 'quarry_ingest_stage_duration_seconds', help: 'Duration of one ingest stage of one document.',
      labelNames: ['stage'] as const, buckets: STAGE_BUCKETS, registers: [registry],
    }),
    connectorSyncs: new Counter({
      name: 'quarry_connector_syncs_total', help: 'Connector syncs finished, by source type and outcome (completed, failed, timed_out, aborted, interrupted).',
      labelNames: ['source_type', 'outcome'] as const, registers: [registry],
    }),
    dedupVerdicts: new Counter({
      name: 'quarry_dedup_verdicts_total', help: 'Dedup verdicts on new documents, by verdict (unique, identical, title_changed, similar, sibling, overlap).',
      labelNames: ['verdict'] as const, registers: [registry],
    }),
    rateLimited: new Counter({
      name: 'quarry_rate_limit_rejections_total', help: 'Requests refused with 429 by the rate limiter, by rule name.',
      labelNames: ['rule'] as const, registers: [registry],
    }),
  }
}

export type Instruments = ReturnType<typeof createInstruments>

export interface Telemetry {
  /** Process-wide metrics: the named instruments and process metrics (prom-client defaults). */
  readonly registry: Registry
  readonly metrics: Instruments
  readonly tracing: boolean
  /** fn inside a span named `name` (a child of the active span); with tracing off, fn() and nothing else. */
  span<T>(name: string, fn: () => T, attributes?: SpanAttributes): T
  /**
   * Measures one HTTP request and, with tracing, runs it inside the request's span so that the stages it
   * calls nest under it. Synchronous results stay synchronous. route: the template (/api/kb/{kb_id}), or null.
   */
  request<R extends { status: number }>(method: string, route: string | null, fn: () => R | Promise<R>): R | Promise<R>
  /**
   * The metric part of request() alone, for a request answered without a span (tracing off): started is the
   * performance.now() of when routing began.
   */
  observeRequest(method: string, route: string | null, started: number, status: number): void
  /** Search latency; the number of KBs is bucketed (kbCountLabel). */
  searched(mode: string, kbCount: number, cache: 'hit' | 'miss' | 'none', ms: number): void
  /** Starts exporting spans when settings.tracing.enabled; a second start while on is refused. */
  startTracing(settings: Readonly<Settings>, log: Logger): Promise<void>
  stopTracing(): Promise<void>
}

export function createTelemetry(): Telemetry {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  const metrics = createInstruments(registry)
  let tracer: Tracer | null = null

  const observe = (method: string, route: string, started: number, status: number) => {
    metrics.http.record(method, route, status, (performance.now() - started) / 1000)
  }

  return {
    registry,
    metrics,
    get tracing() {
      return tracer !== null
    },
    span(name, fn, attributes) {
      return tracer === null ? fn() : tracer.span(name, fn, attributes)
    },
    request(method, route, fn) {
      const started = performance.now()
      const label = route ?? UNMATCHED_ROUTE
      const out = tracer === null
        ? fn()
        : tracer.request(`${method} ${label}`, { 'http.request.method': method, 'http.route': label }, fn)
      if (out instanceof Promise) {
        return out.then((r) => {
          observe(method, label, started, r.status)
          return r
        })
      }
      observe(method, label, started, out.status)
      return out
    },
    observeRequest(method, route, started, status) {
      observe(method, route ?? UNMATCHED_ROUTE, started, status)
    },
    searched(mode, kbCount, cache, ms) {
      metrics.search.record(mode, kbCountLabel(kbCount), cache, ms / 1000)
    },
    async startTracing(settings, log) {
      if (!settings.tracing.enabled) return
      if (tracer !== null) throw new Error('tracing is already started in this process')
      const { createOtlpTracer } = await import('../adapters/telemetry/otlp.ts')
      tracer = createOtlpTracer(settings.tracing, log)
    },
    async stopTracing() {
      const t = tracer
      tracer = null
      await t?.shutdown()
    },
  }
}

export const telemetry: Telemetry = createTelemetry()
