// Tracing on: OpenTelemetry spans exported over OTLP/HTTP to Langfuse's endpoint. Only kernel/telemetry.ts
// imports this file, and only when tracing.enabled, so that a service without tracing loads none of it.
import { context, SpanStatusCode, type Span } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace'
import { ATTR_HTTP_RESPONSE_STATUS_CODE, ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions'
import type { Settings } from '../../kernel/config/schema.ts'
import { AppError } from '../../kernel/errors.ts'
import { tracingProblems } from '../../kernel/config/load.ts'
import type { Logger } from '../../kernel/log.ts'
import type { SpanAttributes, Tracer } from '../../kernel/telemetry.ts'

/**
 * Langfuse receives OTLP at {base}/api/public/otel; the traces signal is its /v1/traces. Given a URL in code,
 * the exporter posts to it as is (it appends /v1/traces only to an endpoint read from the environment).
 */
export const otlpTracesUrl = (baseUrl: string) => `${baseUrl.replace(/\/+$/, '')}/api/public/otel/v1/traces`

export function createOtlpTracer(s: Readonly<Settings['tracing']>, log: Logger): Tracer {
  // Settings from resolveSettings were checked there; settings made some other way are checked here.
  const problems = tracingProblems(s)
  if (problems.length > 0) throw new AppError('TELEMETRY_CONFIG', 500, problems[0])
  // Parent/child links across awaits; a second registration (another app in this process) keeps the first.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  const exporter = new OTLPTraceExporter({
    url: otlpTracesUrl(s.langfuse_baseurl),
    headers: {
      authorization: `Basic ${Buffer.from(`${s.langfuse_public_key}:${s.langfuse_secret_key}`).toString('base64')}`,
      // Langfuse makes spans sent with this header readable at once (its OpenTelemetry integration guide).
      'x-langfuse-ingestion-version': '4',
    },
  })
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: s.service_name }),
    spanProcessors: [new BatchSpanProcessor({ exporter })],
  })
  const tracer = provider.getTracer('quarry')
  log.info({ url: otlpTracesUrl(s.langfuse_baseurl), service_name: s.service_name }, 'tracing on')

  const fail = (span: Span, err: unknown) => {
    span.recordException(err instanceof Error ? err : String(err))
    span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) })
    span.end()
  }

  /** Ends the span when fn's value settles (then) or at once; settle sets the status from the value. */
  function inSpan<T>(name: string, attributes: SpanAttributes | undefined, fn: () => T, settle?: (span: Span, value: Awaited<T>) => void): T {
    return tracer.startActiveSpan(name, { attributes }, (span) => {
      let out: T
      try {
        out = fn()
      } catch (err) {
        fail(span, err)
        throw err
      }
      if (out instanceof Promise) {
        return out.then(
          (value) => {
            settle?.(span, value)
            span.end()
            return value
          },
          (err) => {
            fail(span, err)
            throw err
          },
        ) as T
      }
      settle?.(span, out as Awaited<T>)
      span.end()
      return out
    })
  }

  return {
    span: (name, fn, attributes) => inSpan(name, attributes, fn),
    request: (name, attributes, fn) =>
      inSpan(name, attributes, fn, (span, result) => {
        span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, result.status)
        // OpenTelemetry's HTTP server rule: a 4xx is the client's doing, only a 5xx marks the span failed.
        if (result.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR })
      }),
    async shutdown() {
      try {
        await provider.shutdown()
      } catch (err) {
        log.warn({ err: (err as Error).message }, 'tracing: spans not sent at shutdown')
      }
    },
  }
}
