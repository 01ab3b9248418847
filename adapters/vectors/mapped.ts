// Read-only views of the collections' scratch spill files as memory (mmap, called through koffi as adapters/lock.ts
// calls flock), so that a search reads a hit's payload record, or a spilled f32 row it rescores, without a system
// call. A pread of a 1.5 KB record from the page cache took 4 us on a 2-core AMD EPYC VM, a copy out of memory 0.6
// us; a hybrid search reads ten payloads (the search bench's profile under load: 8.4 % of the service's time,
// `readAllSync` under `toResult`), and a similarity search rescores 2k rows, one 4 KB read each.
// Linux only; elsewhere, or when the mapping fails, the files are read as before.
//
// Memory: pages read through a mapping count in the process's RSS, where pread's stay in the page cache only. After
// every RELEASE_AFTER_BYTES read through the process's mappings, their pages are dropped from the process (madvise
// DONTNEED: the page cache keeps them, and the next read maps them again without touching the disk), so that RSS
// holds at most that much more than before, however many collections are searched. One release of every mapping
// took 1-3 ms (bench/search/spill-read.ts, AMD EPYC VM); released every 8 MB, that cost more than the reads saved.
//
// The rules that keep a mapping safe: only bytes already written are read through it (a spill record is
// written before any row points at it, and spill files only grow while open), nothing outside this module
// keeps a view into it (readers get strings or copies), and it is unmapped before its file is closed and
// removed, after which no read reaches it (the owner checks that it is still open first).
import { constants as buffers } from 'node:buffer'
import { createRequire } from 'node:module'

interface Libc {
  mmap: (addr: null, length: number, prot: number, flags: number, fd: number, offset: number) => unknown
  munmap: (addr: unknown, length: number) => number
  madvise: (addr: unknown, length: number, advice: number) => number
  view: (ptr: unknown, length: number) => ArrayBuffer
  address: (ptr: unknown) => bigint
}

// Linux's values (the same on x86-64 and arm64).
const PROT_READ = 1
const MAP_SHARED = 1
/** No read-around on a fault: a search touches a record's page or two, not the 64 KB around them. */
const MADV_RANDOM = 1
/** Drops the mapping's pages from the process (a shared file mapping: the page cache keeps them). */
const MADV_DONTNEED = 4
const MAP_FAILED = 0xffffffffffffffffn
/** Bytes read through the process's mappings between two releases of their pages (see above). */
const RELEASE_AFTER_BYTES = 64 << 20

/** The mappings alive in this process, the bytes read through them since their pages were last released, and how often they were. */
const live = new Set<FileMapping>()
let readSinceRelease = 0
let releaseCount = 0

function counted(n: number): void {
  readSinceRelease += n
  if (readSinceRelease < RELEASE_AFTER_BYTES) return
  readSinceRelease = 0
  releaseCount++
  for (const m of live) m.release()
}

/** How often the mappings' pages were released from the process so far (tests). */
export const mappingReleases = (): number => releaseCount

let libc: Libc | null | undefined

function load(): Libc | null {
  if (libc !== undefined) return libc
  libc = null
  if (process.platform !== 'linux') return null
  try {
    const koffi = createRequire(import.meta.url)('koffi') as {
      load(lib: string): { func(decl: string): (...args: unknown[]) => unknown }
      view(ptr: unknown, length: number): ArrayBuffer
      address(ptr: unknown): bigint
    }
    const lib = koffi.load('libc.so.6')
    libc = {
      mmap: lib.func('void *mmap(void *addr, size_t length, int prot, int flags, int fd, int64_t offset)') as Libc['mmap'],
      munmap: lib.func('int munmap(void *addr, size_t length)') as Libc['munmap'],
      madvise: lib.func('int madvise(void *addr, size_t length, int advice)') as Libc['madvise'],
      view: (ptr, length) => koffi.view(ptr, length),
      address: (ptr) => (typeof ptr === 'bigint' ? ptr : koffi.address(ptr)),
    }
  } catch {
    // No koffi build or no glibc (musl names its library otherwise): the files are read with pread.
  }
  return libc
}

/** A read-only shared mapping of the first `length` bytes of an open file (which may be shorter: see the rules above). */
export class FileMapping {
  private constructor(
    private readonly c: Libc,
    private ptr: unknown,
    readonly length: number,
    private bytes: Buffer | null,
  ) {
    live.add(this)
  }

  /** Drops the pages read so far from the process (see above). */
  release(): void {
    if (this.bytes !== null) this.c.madvise(this.ptr, this.length, MADV_DONTNEED)
  }

  /** Maps `length` bytes of `fd` (opened for reading); null where mapping is not available or fails. */
  static map(fd: number, length: number): FileMapping | null {
    const c = load()
    if (c === null || length <= 0) return null
    let ptr: unknown
    try {
      ptr = c.mmap(null, length, PROT_READ, MAP_SHARED, fd, 0)
      const at = c.address(ptr)
      if (at === MAP_FAILED || at === 0n) return null
      c.madvise(ptr, length, MADV_RANDOM)
      return new FileMapping(c, ptr, length, Buffer.from(c.view(ptr, length)))
    } catch {
      return null
    }
  }

  /** The bytes from..to as UTF-8 text (a string of its own: nothing of the mapping is kept). */
  text(from: number, to: number): string {
    if (this.bytes === null || to > this.length) throw new Error(`file mapping: bytes ${from}..${to} are not mapped`)
    counted(to - from)
    return this.bytes.toString('utf8', from, to)
  }

  /** A copy of the bytes from..to. */
  copy(from: number, to: number): Buffer {
    if (this.bytes === null || to > this.length) throw new Error(`file mapping: bytes ${from}..${to} are not mapped`)
    counted(to - from)
    return Buffer.from(this.bytes.subarray(from, to))
  }

  /** Copies into.length bytes from `from` into `into`. */
  copyInto(from: number, into: Uint8Array): void {
    const to = from + into.length
    if (this.bytes === null || to > this.length) throw new Error(`file mapping: bytes ${from}..${to} are not mapped`)
    counted(into.length)
    into.set(this.bytes.subarray(from, to))
  }

  unmap(): void {
    if (this.bytes === null) return
    this.bytes = null
    live.delete(this)
    this.c.munmap(this.ptr, this.length)
    this.ptr = null
  }
}

/** The spill file's first mapping (address space only: pages come in as they are read); each next one doubles it. */
const FIRST_MAPPING = 16 << 20
/** The longest Buffer (a mapping is one): past it, the file is read with pread. */
const BUFFER_MAX = buffers.MAX_LENGTH

/**
 * A spill file's mapping, made on its first read and grown (doubled) when a read goes past it. Its owner asks for
 * bytes it has written only, checks that the file is still open first, and closes this before the file.
 */
export class SpillMapping {
  private mapping: FileMapping | null = null

  /** `enabled: false`: never mapped (tests compare the two ways). */
  constructor(private enabled = true) {}

  /** The file `fd` mapped up to at least `end`; null where it cannot be (then it is read with pread). */
  covering(fd: number, end: number): FileMapping | null {
    if (this.mapping !== null && end <= this.mapping.length) return this.mapping
    if (!this.enabled) return null
    const length = Math.max(end, Math.min(Math.max(FIRST_MAPPING, 2 * (this.mapping?.length ?? 0)), BUFFER_MAX))
    this.mapping?.unmap()
    this.mapping = FileMapping.map(fd, length)
    // Refused once (no koffi, no address space): not asked again on every read.
    if (this.mapping === null) this.enabled = false
    return this.mapping
  }

  /** Bytes of address space mapped (0: none). */
  get length(): number {
    return this.mapping?.length ?? 0
  }

  close(): void {
    this.mapping?.unmap()
    this.mapping = null
  }
}
