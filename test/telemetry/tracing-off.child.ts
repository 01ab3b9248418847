// Run by tracing.test.ts in a process of its own: the service with tracing off must load no OpenTelemetry SDK
// or exporter module (they are imported on start only when enabled); the same process with tracing on then
// loads them, which shows that the check can see them. Prints {"off": <modules loaded>, "on": <loaded>} as its last line.
import { createRequire } from 'node:module'
import { withMetricsPlugin } from './with-metrics.ts'
import { startApp } from '../helpers/app.ts'

const require = createRequire(import.meta.url)
// @opentelemetry/api itself is always there: prom-client depends on it (exemplars), and without an SDK it is a no-op.
const otelModules = () => Object.keys(require.cache).filter((path) => /@opentelemetry[\\/](?!api[\\/])/.test(path)).length

async function run(tracing: boolean): Promise<void> {
  const cleanups: (() => unknown)[] = []
  try {
    const svc = await startApp({ after: (fn: () => unknown) => void cleanups.push(fn) }, {
      plugins: withMetricsPlugin(),
      // Nothing listens on port 9: spans that fail to export are dropped, which this check does not mind.
      settings: { tracing: { enabled: tracing, langfuse_baseurl: 'http://127.0.0.1:9', langfuse_public_key: 'pk', langfuse_secret_key: 'sk' } },
    })
    const res = await svc.request('/health')
    if (res.status !== 200) throw new Error(`/health answered ${res.status}`)
  } finally {
    for (const c of cleanups) await c()
  }
}

await run(false)
const off = otelModules()
await run(true)
process.stdout.write(`${JSON.stringify({ off, on: otelModules() > 0 })}\n`)
