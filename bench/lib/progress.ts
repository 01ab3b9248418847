// Progress of long benchmark steps: a bar with rate and time left on a terminal, plain periodic lines otherwise.
export interface Progress {
  tick(n?: number): void
  set(done: number): void
  done(): void
}

const fmt = (s: number) => (s >= 3600 ? `${(s / 3600).toFixed(1)}h` : s >= 60 ? `${Math.floor(s / 60)}m${String(Math.round(s % 60)).padStart(2, '0')}s` : `${s.toFixed(0)}s`)

export function progress(label: string, total: number, opts: { unit?: string; stream?: NodeJS.WriteStream; everyMs?: number } = {}): Progress {
  const stream = opts.stream ?? process.stderr
  const unit = opts.unit ?? 'items'
  const tty = Boolean(stream.isTTY) && process.env.CI !== 'true'
  const every = opts.everyMs ?? (tty ? 100 : 5000)
  const started = performance.now()
  let count = 0
  let lastDraw = 0
  let finished = false

  const line = () => {
    const secs = (performance.now() - started) / 1000
    const rate = secs > 0 ? count / secs : 0
    const left = rate > 0 ? (total - count) / rate : Infinity
    const pct = total > 0 ? Math.min(1, count / total) : 1
    const stats = `${count}/${total} ${unit}  ${rate.toFixed(1)}/s  ${Number.isFinite(left) ? `${fmt(left)} left` : ''}`
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
    tick(n = 1) {
      count += n
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
