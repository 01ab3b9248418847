// Entry point: `node kernel/run.mjs kernel/main.ts [serve|worker|mcp] [--config settings.yaml]` (npm start, npm run worker,
// npm run mcp: compiled, see kernel/run.mjs), or `tsx kernel/main.ts ...` straight from the sources.
import { fixMallocThresholds, trimHeap } from './allocator.ts'
import { createApp, type App } from './app.ts'
import { ConfigError, loadSettings } from './config/load.ts'
import { createLogger } from './log.ts'
import { defaultPlugins } from './plugins.ts'
import type { McpService } from '../plugins/mcp/index.ts'

/**
 * After start, what starting left free in glibc's heap (PGlite's WebAssembly compilation above all) goes back to
 * the OS (trimHeap): an idle service 243 -> 188 MB of RSS.
 */
const START_TRIM_MS = 5000

const command = process.argv.slice(2).find((a) => !a.startsWith('-') && !process.argv[process.argv.indexOf(a) - 1]?.startsWith('--config')) ?? 'serve'

async function main(): Promise<void> {
  // Before the stores open: glibc's mmap and trim thresholds stay at their starting 128 KB (kernel/allocator.ts).
  fixMallocThresholds()
  let loaded
  try {
    loaded = loadSettings()
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`)
      process.exit(2)
    }
    throw err
  }
  // In `mcp` mode stdout carries the protocol: logs go to stderr.
  const log = createLogger(loaded.settings.logging.level, command === 'mcp' ? process.stderr : undefined)
  log.info({ settings: loaded.source, command }, 'starting')
  for (const w of loaded.warnings) log.warn(w)

  if (command !== 'serve' && command !== 'worker' && command !== 'mcp') {
    log.error({ command }, `unknown command '${command}': use serve, worker or mcp`)
    process.exit(2)
  }

  let app: App
  try {
    // `worker` consumes the queue without serving HTTP: run as many as needed, on as many machines, against
    // one Redis (the embedded queue belongs to the single process that owns data_dir).
    // `mcp` serves the MCP tools on stdin/stdout without HTTP; it only reads, so it never consumes the queue.
    const settings = command === 'mcp' ? { ...loaded.settings, queue_worker: { ...loaded.settings.queue_worker, enabled: false } } : loaded.settings
    app = await createApp({ settings, plugins: defaultPlugins(), log, mode: command === 'worker' ? 'worker' : 'api' })
    if (command === 'serve') await app.listen()
    if (command === 'mcp') {
      const session = await app.use<McpService>('mcp').serveStdio()
      void session.closed.then(() => stop('stdin closed'))
    }
  } catch (err) {
    log.fatal({ err }, 'start failed')
    log.flush()
    process.exit(1)
  }
  setTimeout(() => {
    const before = process.memoryUsage.rss()
    const ms = trimHeap()
    if (ms !== null) log.info({ trim_ms: ms, rss_before_mb: Math.round(before / 2 ** 20), rss_after_mb: Math.round(process.memoryUsage.rss() / 2 ** 20) }, 'start-up memory returned to the OS')
  }, START_TRIM_MS).unref()

  let stopping = false
  const stop = async (signal: string) => {
    if (stopping) return
    stopping = true
    log.info({ signal }, 'shutting down')
    const force = setTimeout(() => process.exit(1), (loaded.settings.server.shutdown_grace_sec + 20) * 1000)
    force.unref()
    await app.close()
    process.exit(0)
  }
  process.once('SIGTERM', () => void stop('SIGTERM'))
  process.once('SIGINT', () => void stop('SIGINT'))
}

void main()
