// Small durable-file helpers: a rename is only durable once the folder holding it is fsync'd.
import { promises as fs, readSync, writeSync } from 'node:fs'
import { fsyncDir, fsyncFile } from '../durable.ts'

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
