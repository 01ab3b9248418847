// Read-only views of the collections' scratch spill files as memory (mmap, called through koffi as adapters/lock.ts
// calls flock), so that a search reads a hit's payload record without a system call. A pread of a 1.5 KB record
// from the page cache took 4 us on a 2-core AMD EPYC VM, a copy out of memory 0.6 us; a hybrid search reads ten
// (the search bench's profile under load: 8.4 % of the service's time, `readAllSync` under `toResult`).
// Linux only; elsewhere, or when the mapping fails, the files are read as before.
//
// The rules that keep a mapping safe: only bytes already written are read through it (a spill record is
// written before any row points at it, and spill files only grow while open), nothing outside this module
// keeps a view into it (readers get strings or copies), and it is unmapped before its file is closed and
// removed, after which no read reaches it (the owner checks that it is still open first).
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
const MAP_FAILED = 0xffffffffffffffffn

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
  ) {}

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
    return this.bytes.toString('utf8', from, to)
  }

  /** A copy of the bytes from..to. */
  copy(from: number, to: number): Buffer {
    if (this.bytes === null || to > this.length) throw new Error(`file mapping: bytes ${from}..${to} are not mapped`)
    return Buffer.from(this.bytes.subarray(from, to))
  }

  unmap(): void {
    if (this.bytes === null) return
    this.bytes = null
    this.c.munmap(this.ptr, this.length)
    this.ptr = null
  }
}
