// What the metrics and tracing tests share: the plugin list, and settings for tests that call createApp
// themselves (a worker-mode app, a start that must fail) instead of startApp.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { resolveSettings } from '../../kernel/config/load.ts'
import type { Settings } from '../../kernel/config/schema.ts'
import { defaultPlugins } from '../../kernel/plugins.ts'
import metrics from '../../plugins/metrics/index.ts'

/** The default plugins with the metrics plugin, whether or not kernel/plugins.ts lists it already. */
export const withMetricsPlugin = () => [...defaultPlugins().filter((p) => p !== metrics), metrics]

/** Embedded engines in a temporary folder that t.after removes; raw is merged over the test defaults. */
export function tempSettings(t: { after(fn: () => unknown): void }, raw: Record<string, any> = {}): Readonly<Settings> {
  const dataDir = mkdtempSync(join(tmpdir(), 'quarry-test-'))
  t.after(() => rmSync(dataDir, { recursive: true, force: true }))
  return resolveSettings({ data_dir: dataDir, logging: { level: 'ERROR' }, embedding: { vector_size: 64 }, ...raw }).settings
}
