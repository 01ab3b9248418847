// Child process of crash-loop.test.ts: the service as kernel/main.ts serves it (settings from --config), except that
// it kills itself with SIGKILL, with probability QUARRY_CRASH_SUPERSEDE_KILL, in the middle of a supersede: after a
// document has been moved to `outdated` and before its vectors are deleted (the vector store's deleteByDoc of a
// document this process has just made outdated). It writes "supersede-kill <doc_id>" to stderr first.
import { writeSync } from 'node:fs'
import { createAdapters } from '../../adapters/index.ts'
import type { Sql, SqlRunner, VectorStore } from '../../adapters/ports.ts'
import { createApp } from '../../kernel/app.ts'
import { loadSettings } from '../../kernel/config/load.ts'
import { createLogger } from '../../kernel/log.ts'
import { defaultPlugins } from '../../kernel/plugins.ts'

const killChance = Number(process.env.QUARRY_CRASH_SUPERSEDE_KILL ?? '0')
const { settings } = loadSettings()
const log = createLogger(settings.logging.level)
let adapters: Awaited<ReturnType<typeof createAdapters>>
try {
  adapters = await createAdapters(settings, log)
} catch (err) {
  log.fatal({ err }, 'start failed')
  log.flush()
  process.exit(1)
}

/**
 * Documents this process moved to `outdated`: a status write (`UPDATE documents SET status = $3 ...`, $3 the new
 * status), or the superseded document of a revision's finishing statement (plugins/docs/dedup.ts finishIndexed, `WITH
 * sig AS ...`, $12 the document it supersedes in the same statement).
 */
const outdated = new Set<string>()
const note = (text: string, params?: readonly unknown[]) => {
  if (/^\s*UPDATE documents\b/.test(text) && params?.[2] === 'outdated' && typeof params[0] === 'string') outdated.add(params[0])
  if (/^\s*WITH sig AS\b/.test(text) && typeof params?.[11] === 'string') outdated.add(params[11])
}
const runner = <R extends SqlRunner>(r: R): R => Object.assign(Object.create(r) as R, {
  query: (text: string, params?: readonly unknown[]) => {
    note(text, params)
    return r.query(text, params)
  },
})
const sql: Sql = Object.assign(runner(adapters.sql), {
  transaction: <T>(fn: (tx: SqlRunner) => Promise<T>) => adapters.sql.transaction((tx) => fn(runner(tx))),
})
const vectors: VectorStore = Object.assign(Object.create(adapters.vectors) as VectorStore, {
  deleteByDoc: (kbId: string, docId: string) => {
    if (outdated.delete(docId) && Math.random() < killChance) {
      writeSync(2, `supersede-kill ${docId}\n`)
      process.kill(process.pid, 'SIGKILL')
    }
    return adapters.vectors.deleteByDoc(kbId, docId)
  },
})

try {
  const app = await createApp({ settings, plugins: defaultPlugins(), log, adapters: { ...adapters, sql, vectors } })
  await app.listen()
} catch (err) {
  log.fatal({ err }, 'start failed')
  log.flush()
  process.exit(1)
}
