// Child process of the multi-process connector tests: runs the service from the raw settings in argv[2], in
// the mode of argv[3] ('api' listens and prints "listening <url>"; 'worker' prints "ready"), until killed.
// argv[4], when given, is the connectors plugin's stale limit in ms (every process of a test uses the same).
import { pathToFileURL } from 'node:url'
import { createApp } from '../../../kernel/app.ts'
import { resolveSettings } from '../../../kernel/config/load.ts'
import { createLogger } from '../../../kernel/log.ts'
import { defaultPlugins } from '../../../kernel/plugins.ts'
import { createConnectorsPlugin } from '../../../plugins/connectors/index.ts'

async function main(rawJson: string, mode: 'api' | 'worker', staleMs: number | undefined): Promise<void> {
  const { settings } = resolveSettings(JSON.parse(rawJson), { REDIS_PASSWORD: undefined })
  const plugins = defaultPlugins().map((p) => (p.name === 'connectors' && staleMs ? createConnectorsPlugin({ staleMs }) : p))
  const app = await createApp({ settings, plugins, log: createLogger('SILENT'), mode })
  if (mode === 'api') {
    const port = await app.listen(0, '127.0.0.1')
    process.stdout.write(`listening http://127.0.0.1:${port}\n`)
  } else process.stdout.write('ready\n')
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv[2], process.argv[3] === 'worker' ? 'worker' : 'api', process.argv[4] ? Number(process.argv[4]) : undefined).catch((err: unknown) => {
    console.error(err)
    process.exit(1)
  })
}
