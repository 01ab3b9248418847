// Folder locks held by the operating system: flock(LOCK_EX | LOCK_NB) on an open file, called through koffi (as
// kernel/allocator.ts calls malloc_trim). The kernel releases the lock when the process ends however it ends
// (kill -9 included: its descriptors are closed as it exits, before it is even reaped), so a restart right after
// a crash takes it at once; no pid is ever compared, so a pid seen from another PID namespace or reused by a
// restarted container does not matter. flock locks belong to an open file description: a second open of the same
// file conflicts, in another process or in this one, and on the same host across PID namespaces and containers
// that share the folder.
//
// The file is never removed (removing a locked file would let a second process lock a new file of the same name).
// What it holds (pid, host, start time of the holder) is only for the message of a process that is refused.
import { closeSync, constants, ftruncateSync, mkdirSync, openSync, readFileSync, writeSync } from 'node:fs'
import { createRequire } from 'node:module'
import { hostname } from 'node:os'
import { join, resolve } from 'node:path'

const LOCK_EX = 2
const LOCK_NB = 4
const LOCK_UN = 8
/** EWOULDBLOCK (= EAGAIN) on Linux; 35 on macOS and the BSDs. */
const WOULD_BLOCK = new Set([11, 35])
const EINTR = 4

/**
 * How long a taker waits for a held lock before it refuses. A process killed with SIGKILL keeps its descriptors
 * until the kernel has torn it down (its memory first, then its files): a restart that follows the kill at once may
 * find the lock still held for that moment. A live holder is refused after this wait.
 */
export const LOCK_WAIT_MS = 2000
const RETRY_MS = 25

type Flock = (fd: number, op: number) => number
interface Koffi {
  load(lib: string): { func(decl: string): Flock }
  errno(): number
}

let flockFn: { flock: Flock; errno: () => number } | null | undefined

/** flock from the C library, or null where koffi or the library cannot be loaded (then no lock is taken). */
function flock(): { flock: Flock; errno: () => number } | null {
  if (flockFn !== undefined) return flockFn
  flockFn = null
  let koffi: Koffi
  try {
    koffi = createRequire(import.meta.url)('koffi') as Koffi
  } catch {
    return null
  }
  const libs = process.platform === 'darwin' ? ['libSystem.B.dylib'] : process.platform === 'linux'
    ? ['libc.so.6', `libc.musl-${process.arch === 'arm64' ? 'aarch64' : 'x86_64'}.so.1`]
    : ['libc.so.7', 'libc.so']
  for (const lib of libs) {
    try {
      flockFn = { flock: koffi.load(lib).func('int flock(int, int)'), errno: () => koffi.errno() }
      break
    } catch {
      // the next name
    }
  }
  return flockFn
}

export class FolderLockedError extends Error {
  readonly code = 'DATA_DIR_LOCKED'
  constructor(message: string, readonly holder: LockHolder | null) {
    super(message)
    this.name = 'FolderLockedError'
  }
}

/** What the holder wrote into the lock file. */
export interface LockHolder {
  pid: number
  host: string
  started: string
}

export interface FolderLock {
  /** The lock file. */
  readonly path: string
  /** false where the platform gives no flock (koffi or the C library missing): nothing is locked. */
  readonly held: boolean
  /** Unlocks and closes the file; the file stays. Idempotent. */
  release(): void
}

export interface LockOptions {
  /** The lock file's name inside dir. */
  file: string
  /**
   * The refusal's message, given the folder, the lock file and what its holder wrote (null when unreadable). It
   * should say what holds the folder and what to do.
   */
  refusal: (dir: string, path: string, holder: LockHolder | null) => string
  /** Default LOCK_WAIT_MS. */
  waitMs?: number
}

/** The holder as a phrase for a message: `pid 123 on host h, since <time>`. */
export function describeHolder(holder: LockHolder | null): string {
  if (holder === null) return 'a process that has not said which'
  return `pid ${holder.pid} on host ${holder.host}, since ${holder.started}`
}

/**
 * Takes an exclusive lock on <dir>/<file> (creating both when missing) and holds it until release() or the end of
 * the process. Throws FolderLockedError when another open of the file (another process, or another lock in this
 * one) still holds it after waitMs.
 */
export async function lockFolder(dir: string, opts: LockOptions): Promise<FolderLock> {
  const folder = resolve(dir)
  mkdirSync(folder, { recursive: true })
  const path = join(folder, opts.file)
  const f = flock()
  if (f === null) return { path, held: false, release() {} }
  // Node opens with O_CLOEXEC: a child process never inherits the lock.
  const fd = openSync(path, constants.O_RDWR | constants.O_CREAT, 0o644)
  const deadline = Date.now() + (opts.waitMs ?? LOCK_WAIT_MS)
  for (;;) {
    if (f.flock(fd, LOCK_EX | LOCK_NB) === 0) break
    const errno = f.errno()
    if (errno === EINTR) continue
    if (!WOULD_BLOCK.has(errno) || Date.now() >= deadline) {
      const holder = WOULD_BLOCK.has(errno) ? readHolder(path) : null
      closeSync(fd)
      if (!WOULD_BLOCK.has(errno)) throw new Error(`Cannot lock ${path}: flock failed with errno ${errno}`)
      throw new FolderLockedError(opts.refusal(folder, path, holder), holder)
    }
    await new Promise((r) => setTimeout(r, RETRY_MS))
  }
  try {
    const info = Buffer.from(`${JSON.stringify({ pid: process.pid, host: hostname(), started: new Date().toISOString() } satisfies LockHolder)}\n`)
    ftruncateSync(fd, 0)
    writeSync(fd, info, 0, info.length, 0)
  } catch {
    // The holder's note is for messages only; the lock is what counts.
  }
  let open = true
  return {
    path,
    held: true,
    release() {
      if (!open) return
      open = false
      f.flock(fd, LOCK_UN)
      closeSync(fd)
    },
  }
}

function readHolder(path: string): LockHolder | null {
  try {
    const h = JSON.parse(readFileSync(path, 'utf8')) as Partial<LockHolder>
    return typeof h.pid === 'number' ? { pid: h.pid, host: String(h.host ?? '?'), started: String(h.started ?? '?') } : null
  } catch {
    return null
  }
}

/** Whether this platform gives the OS lock (tests). */
export const osLockAvailable = (): boolean => flock() !== null
