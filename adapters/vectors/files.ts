// Small durable-file helpers: a rename is only durable once the folder holding it is fsync'd.
import { promises as fs, readSync, writeSync } from 'node:fs'
import { fsyncDir, fsyncFile, isAlive } from '../durable.ts'

export { fsyncDir, fsyncFile }

/** Writes all of `bytes` at `position` of an open file (writeSync may write less than asked). */
export function writeAllSync(fd: number, bytes: Uint8Array, position: number): void {
  for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done, bytes.length - done, position + done)
}

/** Fills `into` from `position` of an open file; `what` names the file when it ends first. */
export function readAllSync(fd: number, into: Uint8Array, position: number, what: string): void {
  for (let done = 0; done < into.length; ) {
    const n = readSync(fd, into, done, into.length - done, position + done)
    if (n === 0) throw new Error(`${what} ends before byte ${position + into.length}`)
    done += n
  }
}

/** Writes through a temporary file, fsyncs it, renames it over path and fsyncs the folder. */
export async function writeFileAtomic(dir: string, path: string, data: string | Uint8Array): Promise<void> {
  const tmp = `${path}.tmp`
  const fh = await fs.open(tmp, 'w')
  try {
    await fh.writeFile(data)
    await fh.sync()
  } finally {
    await fh.close()
  }
  await fs.rename(tmp, path)
  await fsyncDir(dir)
}

export async function exists(path: string): Promise<boolean> {
  try {
    await fs.access(path)
    return true
  } catch {
    return false
  }
}

/** Start time of a process in clock ticks since boot (Linux), so a recycled pid is not taken for the old owner. */
async function processStart(pid: number): Promise<string | null> {
  try {
    const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8')
    // Field 22; the command name (field 2) may hold spaces but ends at the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null
  } catch {
    return null
  }
}


/**
 * Takes <dir>/LOCK for this process, or returns the pid that holds it. A lock left by a process that
 * died (kill -9, crash) is taken over.
 */
export async function acquireDirLock(dir: string): Promise<{ release(): Promise<void> } | { heldBy: number }> {
  const path = `${dir}/LOCK`
  const mine = JSON.stringify({ pid: process.pid, start: await processStart(process.pid) })
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      await fs.writeFile(path, mine, { flag: 'wx' })
      return { release: () => fs.rm(path, { force: true }) }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
    let holder: { pid?: number; start?: string | null } = {}
    try {
      holder = JSON.parse(await fs.readFile(path, 'utf8')) as typeof holder
    } catch {
      // Unreadable or half-written: whoever wrote it did not finish, so it is not a live lock.
    }
    const pid = holder.pid
    if (typeof pid === 'number' && pid !== process.pid && isAlive(pid)) {
      const start = await processStart(pid)
      if (start === null || holder.start == null || start === holder.start) return { heldBy: pid }
    }
    await fs.rm(path, { force: true })
  }
  throw new Error(`could not take ${path}`)
}
