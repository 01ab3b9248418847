// Durable-file helpers shared by the embedded drivers (objects, queue, vectors).
import { constants, promises as fs } from 'node:fs'

/** A rename or a new file is only durable once the folder holding it is fsync'd. */
export async function fsyncDir(dir: string): Promise<void> {
  const fh = await fs.open(dir, constants.O_RDONLY)
  try {
    await fh.sync()
  } finally {
    await fh.close()
  }
}

export async function fsyncFile(path: string): Promise<void> {
  const fh = await fs.open(path, 'r+')
  try {
    await fh.sync()
  } finally {
    await fh.close()
  }
}

/** Whether a process holding a lock file is still alive (EPERM: alive, owned by someone else). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}
