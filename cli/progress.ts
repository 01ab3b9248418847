// Progress of a long run: on a terminal a bar redrawn in place, with rate and time left; otherwise (a pipe, a
// log file, CI=true) a plain line every few seconds, since carriage returns turn a log into one long line.
// With a byte total it also shows bytes/s and bases the time left on bytes, which tracks mixed file sizes
// better than a file count does.
export interface Progress {
  /** `n` items finished, carrying `bytes` of the byte total. */
  tick(n?: number, bytes?: number): void
  set(done: number): void
  done(): void
}

export interface ProgressOptions {
  unit?: string
  stream?: NodeJS.WritableStream & { isTTY?: boolean; columns?: number }
  /** Redraw interval; default 100 ms on a terminal, 5 s otherwise. */
  everyMs?: number
  /** Total bytes behind the items (files): adds bytes/s and sizes to the line. */
  bytesTotal?: number
}

export const formatDuration = (s: number): string =>
  s >= 3600 ? `${(s / 3600).toFixed(1)}h` : s >= 60 ? `${Math.floor(s / 60)}m${String(Math.round(s % 60)).padStart(2, '0')}s` : `${s.toFixed(0)}s`

/** Binary units, one decimal: what `ls -lh` and most progress bars show. */
export function formatSize(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let v = Math.round(n)
  let i = 0
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024
    i++
  }
  return i === 0 ? `${v} B` : `${v.toFixed(1)} ${units[i]}`
}

export function progress(label: string, total: number, opts: ProgressOptions = {}): Progress {
  const stream = opts.stream ?? process.stderr
  const unit = opts.unit ?? 'items'
  const tty = Boolean(stream.isTTY) && process.env.CI !== 'true'
  const every = opts.everyMs ?? (tty ? 100 : 5000)
  const bytesTotal = opts.bytesTotal
  const started = performance.now()
  let count = 0
  let bytes = 0
  let lastDraw = 0
  let finished = false

  const line = () => {
    const secs = (performance.now() - started) / 1000
    const rate = secs > 0 ? count / secs : 0
    const byBytes = bytesTotal !== undefined && bytesTotal > 0 && bytes > 0
    const left = byBytes ? (bytesTotal - bytes) / (bytes / secs) : rate > 0 ? (total - count) / rate : Infinity
    const pct = total > 0 ? Math.min(1, count / total) : 1
    const sizes = bytesTotal !== undefined ? `  ${formatSize(bytes)}/${formatSize(bytesTotal)}  ${formatSize(secs > 0 ? bytes / secs : 0)}/s` : ''
    const rateText = bytesTotal !== undefined ? `${rate.toFixed(1)} ${unit}/s` : `${rate.toFixed(1)}/s`
    const stats = `${count}/${total} ${unit}  ${rateText}${sizes}  ${Number.isFinite(left) ? `${formatDuration(left)} left` : ''}`
    if (!tty) return `${label}: ${(pct * 100).toFixed(0)}% ${stats}`
    const width = Math.max(10, Math.min(40, (stream.columns ?? 80) - label.length - stats.length - 8))
    const fill = Math.round(pct * width)
    return `${label} [${'#'.repeat(fill)}${'-'.repeat(width - fill)}] ${stats}`
  }

  const draw = (force = false) => {
    const now = performance.now()
    if (!force && now - lastDraw < every) return
    lastDraw = now
    if (tty) stream.write(`\r\x1b[2K${line()}`)
    else stream.write(`${line()}\n`)
  }

  return {
    tick(n = 1, b = 0) {
      count += n
      bytes += b
      draw()
    },
    set(done) {
      count = done
      draw()
    },
    done() {
      if (finished) return
      finished = true
      draw(true)
      if (tty) stream.write('\n')
    },
  }
}
