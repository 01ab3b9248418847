// `quarry check [--repair]`: does search agree with every document status? (plugins/docs/reconcile.ts)
// Against a running service it asks the service (POST /api/admin/check, super-admin); with --local or --config it
// opens the stores of the settings itself, which with the embedded engines takes the data folder's lock: it refuses
// while a service runs on that folder, and a service started meanwhile refuses until it is done.
import type { CheckReport } from '../plugins/docs/reconcile.ts'
import type { Client } from './client.ts'
import { table } from './table.ts'

type Out = NodeJS.WritableStream

/** The check through a running service. */
export function checkRemote(client: Client, repair: boolean): Promise<CheckReport> {
  return client.json<CheckReport>('POST', `/api/admin/check?repair=${repair}`)
}

/** The check on the stores the settings name (argv's --config, else where the service looks), opened here. */
export async function checkLocal(configArgs: readonly string[], repair: boolean): Promise<CheckReport> {
  const { loadSettings } = await import('../kernel/config/load.ts')
  const { closeAdapters, createAdapters } = await import('../adapters/index.ts')
  const { reconcile } = await import('../plugins/docs/reconcile.ts')
  const { FolderLockedError } = await import('../adapters/lock.ts')
  const { settings } = loadSettings({ argv: configArgs })
  let adapters
  try {
    adapters = await createAdapters(settings)
  } catch (err) {
    if (err instanceof FolderLockedError) {
      throw new Error(`${err.message}\nTo check a running service, ask it: quarry check --url <its URL>${repair ? ' --repair' : ''}`)
    }
    throw err
  }
  try {
    return await reconcile({ adapters }, { repair })
  } finally {
    await closeAdapters(adapters)
  }
}

/** Prints the report; the exit status: 0 when everything agrees or was repaired, 1 when something disagrees. */
export function printReport(report: CheckReport, json: boolean, out: Out): number {
  const found = report.disagreements.length
  if (json) out.write(`${JSON.stringify(report, null, 2)}\n`)
  else {
    if (found > 0) {
      const header = ['kb_id', 'doc_id', 'disagreement', 'status', 'points', 'chunk_count', ...(report.repair ? ['repair'] : [])]
      const rows = report.disagreements.map((d) => [
        d.kb_id, d.doc_id, d.kind === 'stale_vectors' ? 'searchable, not indexed' : 'indexed, vectors incomplete',
        d.status ?? '(no row)', d.points, d.chunk_count ?? '-', ...(report.repair ? [d.repair ?? '-'] : []),
      ])
      out.write(`${table(header, rows)}\n`)
    }
    const checked = `${report.kbs} KB(s), ${report.documents} document(s), ${report.points} point(s) checked in ${report.ms} ms`
    if (found === 0) out.write(`Search agrees with every document status: ${checked}.\n`)
    else if (report.repair) out.write(`${found} disagreement(s) repaired (deleted: vectors removed; requeued: indexed again; resolved: agreed by then): ${checked}.\n`)
    else out.write(`${found} disagreement(s) between search and document statuses: ${checked}. Run again with --repair to mend them.\n`)
  }
  return found > 0 && !report.repair ? 1 : 0
}
