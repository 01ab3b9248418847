// Durable-file helpers shared by the embedded drivers (objects, queue, vectors).
import { closeSync, constants, fsync, openSync } from 'node:fs'

/**
 * A rename or a new file is only durable once the folder holding it is fsync'd. Opening and closing a folder
 * are quick system calls, done in place: the fsync alone goes to the thread pool (one hand-off instead of
 * three; on two cores each hand-off is a thread switch, and an ingest makes several per document).
 *
 * Concurrent calls for one folder share fsyncs: a call made while one runs waits for the next, which starts
 * once that one ends (the running one may have begun before the caller's change) and serves every caller
 * that arrived meanwhile. Uploads into one KB all fsync the KB's folder: in the ingest bench 16 % fewer fsyncs,
 * each a journal commit that file creations on the main thread otherwise wait behind (1,000 documents, five
 * runs each way in turn: 85.9 -> 93.1 documents/s median, CPU per document 17.3 -> 16.1 ms).
 */
export function fsyncDir(dir: string): Promise<void> {
  const sync = () => fsyncPath(dir, constants.O_RDONLY)
  const s = dirSyncs.get(dir)
  if (!s) {
    const entry: DirSync = { running: sync() }
    dirSyncs.set(dir, entry)
    const advance = () => {
      if (entry.next) {
        entry.running = entry.next
        entry.next = undefined
        entry.running.then(advance, advance)
      } else dirSyncs.delete(dir)
    }
    entry.running.then(advance, advance)
    return entry.running
  }
  // The running fsync may have started before this caller's change: the next one, shared by every caller
  // that arrives meanwhile, starts after it.
  s.next ??= s.running.then(sync, sync)
  return s.next
}

interface DirSync {
  running: Promise<void>
  next?: Promise<void>
}
const dirSyncs = new Map<string, DirSync>()

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
