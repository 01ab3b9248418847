// One import at a time into a KB: the import holds its kb_transfers row (holder, held_until) while it writes, and
// renews the hold while it works. Another import of the same archive waits for the hold (and then usually finds
// the import done); a holder that died is taken over once its hold runs out. Each document's commit checks the
// hold (fenced), so an import that lost it writes no row beside the one that took it over.
import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { SqlRunner } from '../../adapters/ports.ts'
import { conflict } from '../../kernel/errors.ts'
import type { Logger } from '../../kernel/log.ts'

/** How long a hold lasts without renewal: how long an import killed with kill -9 keeps the next one waiting. */
export const HOLD_MS = 10_000
const RENEW_MS = HOLD_MS / 4
const WAIT_MAX_MS = 1_000

const TAKE = `UPDATE kb_transfers SET holder = $2, held_until = now() + $3 * interval '1 millisecond'
  WHERE kb_id = $1 AND (holder IS NULL OR holder = $2 OR held_until < now()) RETURNING 1`

/** Thrown where an import finds its hold gone (renewal missed for HOLD_MS): it stops without touching what it wrote. */
export class HoldLost extends Error {
  constructor(kbId: string) {
    super(`The import into KB '${kbId}' lost its hold (another import took over): send the archive again to go on`)
  }
}

export class ImportHold {
  readonly token = randomUUID()
  private timer: NodeJS.Timeout | null = null
  private lost = false
  /** Taken or created by this import: only then is there a hold to release. */
  private held = false

  constructor(private readonly sql: SqlRunner, readonly kbId: string, private readonly log: Logger) {}

  /** Values for the kb_transfers row an import creates: it holds the row from its first commit. */
  get created(): [holder: string, heldMs: number] {
    return [this.token, HOLD_MS]
  }

  /** Waits until this import holds the KB's row; false if the row is gone (the KB deleted meanwhile). */
  async take(signal?: AbortSignal): Promise<boolean> {
    for (let wait = 50; ; wait = Math.min(wait * 2, WAIT_MAX_MS)) {
      signal?.throwIfAborted()
      if ((await this.sql.query(TAKE, [this.kbId, this.token, HOLD_MS])).length > 0) {
        this.start()
        return true
      }
      if ((await this.sql.query('SELECT 1 FROM kb_transfers WHERE kb_id = $1', [this.kbId])).length === 0) return false
      // Aborted: the abort's own reason, as throwIfAborted gives it elsewhere in the import.
      await sleep(wait, undefined, { signal }).catch((err) => {
        signal?.throwIfAborted()
        throw err
      })
    }
  }

  /** Starts renewing a hold taken by the import's own insert. */
  start(): void {
    this.held = true
    this.timer ??= setInterval(() => void this.renew(), RENEW_MS).unref()
  }

  private async renew(): Promise<void> {
    try {
      const rows = await this.sql.query(
        `UPDATE kb_transfers SET held_until = now() + $3 * interval '1 millisecond' WHERE kb_id = $1 AND holder = $2 RETURNING 1`,
        [this.kbId, this.token, HOLD_MS])
      if (rows.length === 0) this.lost = true
    } catch (err) {
      // The next renewal tries again; the commit of each document checks the hold itself.
      this.log.warn({ err, kb_id: this.kbId }, 'import: renewing the hold on the KB failed')
    }
  }

  /** Throws HoldLost once a renewal found the hold taken. */
  check(): void {
    if (this.lost) throw new HoldLost(this.kbId)
  }

  /** The fenced form of a statement on the KB's kb_transfers row: `AND holder = $n` with this import's token. */
  async update(db: SqlRunner, set: string, params: unknown[]): Promise<void> {
    const rows = await db.query(`UPDATE kb_transfers SET ${set} WHERE kb_id = $1 AND holder = $${params.length + 2} RETURNING 1`, [this.kbId, ...params, this.token])
    if (rows.length === 0) {
      this.lost = true
      throw new HoldLost(this.kbId)
    }
  }

  async release(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
    if (!this.held) return
    this.held = false
    await this.sql.query('UPDATE kb_transfers SET holder = NULL, held_until = NULL WHERE kb_id = $1 AND holder = $2', [this.kbId, this.token])
  }
}

/** HoldLost as the HTTP answer: 409, nothing was lost (the other import writes the same archive). */
export const holdLostConflict = (err: HoldLost) => conflict(err.message, 'IMPORT_TAKEN_OVER')
