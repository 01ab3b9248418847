// Schedules (notes.md): croner jobs in UTC in every process that runs the plugin. A firing is claimed once
// across processes by a run key (connector + scheduled time) in the metadata store, so several API
// processes never start the same scheduled sync twice. Local changes apply at once; changes made by other
// processes are picked up by a periodic re-read.
import { Cron } from 'croner'
import type { Logger } from '../../kernel/log.ts'
import type { ConnectorRepo } from './repo.ts'

export interface Scheduler {
  start(): Promise<void>
  /** Replaces (or removes, with null) one connector's job in this process. */
  apply(connectorId: string, cron: string | null): void
  /** Next firing of a connector's job in this process (tests, logs). */
  nextRun(connectorId: string): Date | null
  stop(): void
}

/** Croner's parser in the 5-field form of spec 2.5; throws with croner's reason on a bad expression. */
export function checkCron(expr: string): void {
  const job = new Cron(expr, { timezone: 'UTC', mode: '5-part', paused: true })
  job.stop()
}

/** The scheduled time of a firing: a 5-field cron fires on whole minutes. */
export const scheduledMinute = (d: Date) => new Date(Math.floor(d.getTime() / 60_000) * 60_000)

export function createScheduler(deps: {
  repo: ConnectorRepo
  log: Logger
  fire(connectorId: string, scheduledAt: Date): Promise<unknown>
  refreshMs: number
}): Scheduler {
  const jobs = new Map<string, { cron: string; job: Cron }>()
  let timer: NodeJS.Timeout | null = null
  let stopped = false

  const apply = (id: string, cron: string | null) => {
    const current = jobs.get(id)
    if (current && current.cron === cron) return
    current?.job.stop()
    jobs.delete(id)
    if (cron === null || stopped) return
    try {
      const job = new Cron(cron, { timezone: 'UTC', mode: '5-part' }, (self: Cron) => {
        const at = scheduledMinute(self.currentRun() ?? new Date())
        void deps.fire(id, at).catch((err) => deps.log.warn({ err, connector_id: id }, 'scheduled sync failed to start'))
      })
      jobs.set(id, { cron, job })
    } catch (err) {
      deps.log.warn({ err, connector_id: id, cron }, 'invalid stored schedule ignored')
    }
  }

  const refresh = async () => {
    const rows = await deps.repo.scheduled()
    const live = new Set(rows.map((r) => r.connector_id))
    for (const id of [...jobs.keys()]) if (!live.has(id)) apply(id, null)
    for (const r of rows) apply(r.connector_id, r.sync_schedule)
  }

  return {
    async start() {
      await refresh()
      timer = setInterval(() => {
        void refresh().catch((err) => deps.log.warn({ err }, 'schedule refresh failed'))
        void deps.repo.pruneRuns(7 * 24 * 3600_000).catch(() => {})
      }, deps.refreshMs)
      timer.unref()
    },
    apply,
    nextRun: (id) => jobs.get(id)?.job.nextRun() ?? null,
    stop() {
      stopped = true
      if (timer) clearInterval(timer)
      for (const { job } of jobs.values()) job.stop()
      jobs.clear()
    },
  }
}
