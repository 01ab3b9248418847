// Durable-file helpers shared by the embedded drivers (objects, queue, vectors).
import { closeSync, constants, fsync, openSync } from 'node:fs'

/**
 * A rename or a new file is only durable once the folder holding it is fsync'd. Opening and closing a folder
 * are quick system calls, done in place: the fsync alone goes to the thread pool (one hand-off instead of
 * three; on two cores each hand-off is a thread switch, and an ingest makes several per document).
 */
export function fsyncDir(dir: string): Promise<void> {
  return fsyncPath(dir, constants.O_RDONLY)
}

export function fsyncFile(path: string): Promise<void> {
  return fsyncPath(path, constants.O_RDWR)
}

function fsyncPath(path: string, flags: number): Promise<void> {
  let fd: number
  try {
    fd = openSync(path, flags)
  } catch (err) {
    return Promise.reject(err)
  }
  return new Promise((resolve, reject) => {
    fsync(fd, (err) => {
      try {
        closeSync(fd)
      } catch {
        // The fsync's answer is what counts; a failed close leaks nothing (the descriptor is released).
      }
      if (err) reject(err)
      else resolve()
    })
  })
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
