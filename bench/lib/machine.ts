// What every benchmark reports about where it ran, and small statistics helpers.
import { readFileSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, totalmem } from 'node:os'

export function machine() {
  return {
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memory_gb: +(totalmem() / 2 ** 30).toFixed(1),
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    load_average: loadavg().map((x) => +x.toFixed(2)),
  }
}

export const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

export const percentile = (xs: readonly number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]
}

export const round = (x: number, digits = 2): number => +x.toFixed(digits)

/** The highest high-water mark a reset has cleared, bytes. */
let highestBeforeReset = 0

/**
 * The kernel's high-water mark of this process's RSS (VmHWM), reset to its RSS now: true on Linux (writing 5 to
 * /proc/self/clear_refs), false where that cannot be done. From then on highWaterBytes() holds every rise, also one
 * that lasts less than a sampling period or happens while the main thread, which samples, is busy (a garbage
 * collection's pause is both).
 */
export function resetHighWater(): boolean {
  highestBeforeReset = Math.max(highestBeforeReset, highWaterBytes() ?? 0)
  try {
    writeFileSync('/proc/self/clear_refs', '5')
    return true
  } catch {
    return false
  }
}

/** This process's RSS high-water mark since it started (exec), bytes, through any resets; null off Linux. */
export function highWaterSinceStart(): number | null {
  const now = highWaterBytes()
  return now === null ? null : Math.max(highestBeforeReset, now)
}

/** This process's RSS high-water mark in bytes (VmHWM: since start, or since resetHighWater()); null off Linux. */
export function highWaterBytes(): number | null {
  try {
    const kb = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1]
    return kb === undefined ? null : Number(kb) * 1024
  } catch {
    return null
  }
}

/**
 * CPU time in a /proc `stat` line (a process's or a thread's), user + system, ms. The name is between the first '('
 * and the last ')' and may hold spaces; utime and stime are the 14th and 15th fields, the 12th and 13th after it, in
 * ticks of 10 ms (USER_HZ is 100 on Linux).
 */
export function cpuMsOfStat(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) * 10
}

/**
 * CPU time another process of this machine has used so far, all its threads, exited ones included (user + system,
 * ms; /proc/<pid>/stat); null off Linux or once the process is gone.
 */
export function processCpuMs(pid: number): number | null {
  try {
    const ms = cpuMsOfStat(readFileSync(`/proc/${pid}/stat`, 'utf8'))
    return Number.isFinite(ms) ? ms : null
  } catch {
    return null
  }
}
