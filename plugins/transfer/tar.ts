// A streaming tar writer and reader (POSIX ustar, with pax extended headers for what ustar cannot hold: a name
// past 100 bytes, a size of 8 GiB or more). Neither ever holds more than one 512-byte block plus the chunk in
// flight: an entry's body streams through, so an archive of any size passes in constant memory. Only regular
// files are written; the reader skips directories and other types, and refuses what would make a file unreadable
// (a bad header checksum, a body cut short, no end marker).
import { openSync, readSync, closeSync, fstatSync } from 'node:fs'
import { Readable } from 'node:stream'

export const BLOCK = 512
/** ustar's size field: 11 octal digits. */
const USTAR_MAX_SIZE = 8 ** 11 - 1
const NAME_MAX = 100

/** An entry to write: its name, its exact size, and its body (bytes, or chunks adding up to size). */
export interface TarSource {
  name: string
  size: number
  body: Uint8Array | (() => AsyncIterable<Uint8Array>)
  /** Seconds since the epoch; default now. */
  mtime?: number
}

export class TarError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'TarError'
  }
}

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, '0') + '\0'
}

function paxRecord(key: string, value: string): Buffer {
  // "<length> <key>=<value>\n", where the length counts its own digits.
  const rest = Buffer.byteLength(` ${key}=${value}\n`)
  let len = rest + String(rest).length
  while (rest + String(len).length !== len) len = rest + String(len).length
  return Buffer.from(`${len} ${key}=${value}\n`)
}

function headerBlock(name: string, size: number, type: string, mtime: number): Buffer {
  const h = Buffer.alloc(BLOCK)
  h.write(name, 0, NAME_MAX, 'utf8')
  h.write(octal(0o644, 8), 100, 'ascii')
  h.write(octal(0, 8), 108, 'ascii')
  h.write(octal(0, 8), 116, 'ascii')
  h.write(octal(Math.min(size, USTAR_MAX_SIZE), 12), 124, 'ascii')
  h.write(octal(Math.floor(mtime), 12), 136, 'ascii')
  h.write('        ', 148, 'ascii')
  h.write(type, 156, 'ascii')
  h.write('ustar\0', 257, 'ascii')
  h.write('00', 263, 'ascii')
  let sum = 0
  for (const b of h) sum += b
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii')
  return h
}

/** The header blocks of one entry: a pax header first when ustar cannot hold its name or size. */
export function entryHeader(name: string, size: number, mtime = Date.now() / 1000): Buffer {
  const records: Buffer[] = []
  const nameBytes = Buffer.byteLength(name)
  if (nameBytes > NAME_MAX) records.push(paxRecord('path', name))
  if (size > USTAR_MAX_SIZE) records.push(paxRecord('size', String(size)))
  const main = headerBlock(nameBytes > NAME_MAX ? Buffer.from(name).subarray(0, NAME_MAX).toString('utf8').replace(/\uFFFD+$/, '') : name, size, '0', mtime)
  if (records.length === 0) return main
  const pax = Buffer.concat(records)
  return Buffer.concat([headerBlock('PaxHeader', pax.length, 'x', mtime), pax, Buffer.alloc(padding(pax.length)), main])
}

export const padding = (size: number): number => (BLOCK - (size % BLOCK)) % BLOCK

/** The end-of-archive marker: two zero blocks. */
export const END_MARKER = Buffer.alloc(2 * BLOCK)

/**
 * Tar bytes of the entries, as a pull stream: the next entry (and the next chunk of its body) is asked for only
 * when the consumer reads, so a slow reader slows the source instead of filling memory. A body that does not add
 * up to its declared size fails the stream. `end: false` leaves out the end marker (a resumed export's parts are
 * concatenated; only the last one ends the archive).
 */
export function tarStream(entries: AsyncIterable<TarSource>, opts: { end?: boolean } = {}): Readable {
  async function* bytes(): AsyncGenerator<Uint8Array> {
    for await (const e of entries) {
      yield entryHeader(e.name, e.size, e.mtime)
      let n = 0
      if (e.body instanceof Uint8Array) {
        n = e.body.length
        if (n > 0) yield e.body
      } else {
        for await (const chunk of e.body()) {
          n += chunk.length
          if (n > e.size) throw new TarError(`tar entry ${e.name}: body longer than its declared ${e.size} bytes`)
          if (chunk.length > 0) yield chunk
        }
      }
      if (n !== e.size) throw new TarError(`tar entry ${e.name}: body of ${n} bytes, ${e.size} declared`)
      const pad = padding(e.size)
      if (pad > 0) yield Buffer.alloc(pad)
    }
    if (opts.end !== false) yield END_MARKER
  }
  return Readable.from(bytes(), { objectMode: false, highWaterMark: 64 * 1024 })
}

/** One entry being read: its body must be read (or skipped) before the next entry is asked for. */
export interface TarEntry {
  name: string
  size: number
  /** The body's chunks, exactly `size` bytes; readable once. */
  chunks(): AsyncIterable<Buffer>
  /** The whole body, refused past `limit` bytes (small entries: manifests, records). */
  buffer(limit: number): Promise<Buffer>
}

function parseOctal(block: Buffer, at: number, len: number): number {
  // GNU base-256 for big values: the first byte's high bit set.
  if (block[at] & 0x80) {
    let v = 0
    for (let i = at + 1; i < at + len; i++) v = v * 256 + block[i]
    return v
  }
  const text = block.toString('ascii', at, at + len).replace(/\0.*$/s, '').trim()
  if (text === '') return 0
  if (!/^[0-7]+$/.test(text)) throw new TarError(`tar header: '${text}' is not an octal number`)
  return parseInt(text, 8)
}

function isZero(block: Buffer): boolean {
  for (const b of block) if (b !== 0) return false
  return true
}

function checkHeader(block: Buffer): void {
  const stored = parseOctal(block, 148, 8)
  let sum = 0
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : block[i]
  if (sum !== stored) throw new TarError('tar header checksum does not match: not a tar archive, or a damaged one')
}

function headerName(block: Buffer): string {
  const name = block.toString('utf8', 0, NAME_MAX).replace(/\0.*$/s, '')
  const magic = block.toString('ascii', 257, 262)
  const prefix = magic === 'ustar' ? block.toString('utf8', 345, 500).replace(/\0.*$/s, '') : ''
  return prefix ? `${prefix}/${name}` : name
}

function parsePax(body: Buffer): Record<string, string> {
  const out: Record<string, string> = {}
  let at = 0
  while (at < body.length) {
    const space = body.indexOf(0x20, at)
    if (space < 0) break
    const len = Number(body.toString('ascii', at, space))
    if (!Number.isInteger(len) || len <= 0 || at + len > body.length) throw new TarError('tar: malformed pax header')
    const record = body.toString('utf8', space + 1, at + len - 1)
    const eq = record.indexOf('=')
    if (eq > 0) out[record.slice(0, eq)] = record.slice(eq + 1)
    at += len
  }
  return out
}

type ByteSource = AsyncIterable<Buffer | Uint8Array | string> | Iterable<Buffer | Uint8Array | string>

/** Reads exact byte counts from a stream of chunks, holding at most one chunk. */
class ByteReader {
  private chunk: Buffer = Buffer.alloc(0)
  private it: AsyncIterator<Buffer | Uint8Array | string> | Iterator<Buffer | Uint8Array | string>
  private done = false
  /** Bytes handed out so far (the offset of the next byte in the stream). */
  offset = 0

  constructor(source: ByteSource) {
    this.it = Symbol.asyncIterator in source ? source[Symbol.asyncIterator]() : source[Symbol.iterator]()
  }

  private async fill(): Promise<boolean> {
    while (this.chunk.length === 0) {
      if (this.done) return false
      const next = await this.it.next()
      if (next.done) {
        this.done = true
        return false
      }
      const v = next.value
      this.chunk = typeof v === 'string' ? Buffer.from(v) : Buffer.isBuffer(v) ? v : Buffer.from(v.buffer, v.byteOffset, v.byteLength)
    }
    return true
  }

  /** Exactly n bytes, or null at a clean end of stream (no byte read); throws when the stream ends inside. */
  async exact(n: number): Promise<Buffer | null> {
    if (!(await this.fill())) return null
    if (this.chunk.length >= n) {
      const out = this.chunk.subarray(0, n)
      this.chunk = this.chunk.subarray(n)
      this.offset += n
      return out
    }
    const parts: Buffer[] = []
    let got = 0
    while (got < n) {
      if (!(await this.fill())) throw new TarError(`tar archive cut short: ${n - got} more bytes expected at offset ${this.offset}`)
      const take = Math.min(n - got, this.chunk.length)
      parts.push(this.chunk.subarray(0, take))
      this.chunk = this.chunk.subarray(take)
      got += take
      this.offset += take
    }
    return Buffer.concat(parts, n)
  }

  /** n bytes as they arrive (chunks), failing when the stream ends first. */
  async *take(n: number, name: string): AsyncGenerator<Buffer> {
    let left = n
    while (left > 0) {
      if (!(await this.fill())) throw new TarError(`tar archive cut short inside ${name}: ${left} of ${n} bytes missing`)
      const take = Math.min(left, this.chunk.length)
      const out = this.chunk.subarray(0, take)
      this.chunk = this.chunk.subarray(take)
      left -= take
      this.offset += take
      yield out
    }
  }

  async skip(n: number, name: string): Promise<void> {
    for await (const _ of this.take(n, name)) { /* drained */ }
  }
}

/**
 * The entries of a tar stream, one at a time. The archive must end with its end marker (a zero block): a stream
 * that stops at an entry boundary without one is an archive cut short, and fails like one cut inside an entry.
 * `onEntryEnd` is told each regular entry's end offset (the byte after its padding).
 */
export async function* readTar(source: ByteSource, opts: { onEntryEnd?: (name: string, offset: number) => void } = {}): AsyncGenerator<TarEntry> {
  const r = new ByteReader(source)
  let pax: Record<string, string> = {}
  for (;;) {
    const block = await r.exact(BLOCK)
    if (block === null) throw new TarError('tar archive cut short: it ends without its end marker')
    if (isZero(block)) return
    checkHeader(block)
    const type = String.fromCharCode(block[156] || 48)
    let size = parseOctal(block, 124, 12)
    if (type === 'x' || type === 'g') {
      const body = (await r.exact(size)) ?? Buffer.alloc(0)
      if (body.length !== size) throw new TarError('tar archive cut short inside a pax header')
      await r.skip(padding(size), 'a pax header')
      if (type === 'x') pax = parsePax(Buffer.from(body))
      continue
    }
    const name = pax.path ?? headerName(block)
    if (pax.size !== undefined) size = Number(pax.size)
    pax = {}
    if (type !== '0' && type !== '\0' && type !== '7') {
      await r.skip(size + padding(size), name)
      continue
    }
    let consumed = false
    const entry: TarEntry = {
      name,
      size,
      chunks() {
        if (consumed) throw new TarError(`tar entry ${name} was read already`)
        consumed = true
        return r.take(size, name)
      },
      async buffer(limit) {
        if (size > limit) throw new TarError(`tar entry ${name} holds ${size} bytes, more than the ${limit} expected`)
        const parts: Buffer[] = []
        for await (const c of entry.chunks()) parts.push(c)
        return Buffer.concat(parts, size)
      },
    }
    yield entry
    if (!consumed) {
      consumed = true
      await r.skip(size, name)
    }
    await r.skip(padding(size), name)
    opts.onEntryEnd?.(name, r.offset)
  }
}

/** A regular entry of a tar file on disk, located without reading its body. */
export interface TarFileEntry {
  name: string
  size: number
  /** Offset of its first header block (a pax header's, when it has one). */
  start: number
  /** Offset of the entry's body. */
  dataOffset: number
  /** Offset of the byte after the entry's padding (where the next header starts). */
  end: number
}

/**
 * The complete entries at the start of a tar file (a partial download included): headers are read, bodies
 * skipped. Stops at the end marker, at the end of the file, or at the first entry the file does not hold whole.
 * `ended` says whether the end marker was reached.
 */
export function scanTarFile(path: string): { entries: TarFileEntry[]; ended: boolean; read(e: TarFileEntry): Buffer } {
  const fd = openSync(path, 'r')
  try {
    const fileSize = fstatSync(fd).size
    const entries: TarFileEntry[] = []
    const block = Buffer.alloc(BLOCK)
    let at = 0
    let pax: Record<string, string> = {}
    let ended = false
    let start = 0
    while (at + BLOCK <= fileSize) {
      readSync(fd, block, 0, BLOCK, at)
      if (isZero(block)) {
        ended = true
        break
      }
      try {
        checkHeader(block)
      } catch {
        break
      }
      const type = String.fromCharCode(block[156] || 48)
      let size = parseOctal(block, 124, 12)
      const dataOffset = at + BLOCK
      if (type === 'x' || type === 'g') {
        const end = dataOffset + size + padding(size)
        if (end > fileSize) break
        const body = Buffer.alloc(size)
        readSync(fd, body, 0, size, dataOffset)
        if (type === 'x') pax = parsePax(body)
        at = end
        continue
      }
      const name = pax.path ?? headerName(block)
      if (pax.size !== undefined) size = Number(pax.size)
      const bodyEnd = dataOffset + size + padding(size)
      if (bodyEnd > fileSize) break
      pax = {}
      if (type === '0' || type === '\0' || type === '7') entries.push({ name, size, start, dataOffset, end: bodyEnd })
      at = bodyEnd
      start = at
    }
    return {
      entries,
      ended,
      read(e) {
        const fd2 = openSync(path, 'r')
        try {
          const buf = Buffer.alloc(e.size)
          readSync(fd2, buf, 0, e.size, e.dataOffset)
          return buf
        } finally {
          closeSync(fd2)
        }
      },
    }
  } finally {
    closeSync(fd)
  }
}

/** An entry seen by a TarWatcher once its last byte (padding included) has passed. */
export interface WatchedEntry {
  name: string
  size: number
  /** Offset of its first header block (a pax header's, when it has one). */
  start: number
  /** Offset of the byte after its padding. */
  end: number
  /** The body, for the entries the watcher was asked to keep. */
  body?: Buffer
}

/**
 * Follows a tar stream's entry boundaries as its bytes pass by (to a file, say), without holding more than a header
 * and the bodies it is asked to keep: tells each entry once it has passed whole, and whether the end marker has.
 */
export class TarWatcher {
  /** Bytes seen. */
  offset = 0
  ended = false
  private mode: 'header' | 'pax' | 'body' = 'header'
  private header = Buffer.alloc(BLOCK)
  private have = 0
  private remaining = 0
  private entry: WatchedEntry | null = null
  private kept: Buffer[] | null = null
  private pax: Record<string, string> = {}
  private paxBody: Buffer[] = []
  private entryStart = 0

  constructor(
    private readonly onEntry: (e: WatchedEntry) => void,
    private readonly keep: (name: string, size: number) => boolean = () => false,
    /** Where the stream starts in the file (a resumed download appends to what was kept). */
    start = 0,
  ) {
    this.offset = start
    this.entryStart = start
  }

  push(chunk: Buffer): void {
    let at = 0
    while (at < chunk.length && !this.ended) {
      if (this.mode === 'header') {
        const take = Math.min(BLOCK - this.have, chunk.length - at)
        chunk.copy(this.header, this.have, at, at + take)
        this.have += take
        at += take
        this.offset += take
        if (this.have < BLOCK) break
        this.have = 0
        this.onHeader()
      } else {
        const take = Math.min(this.remaining, chunk.length - at)
        const part = chunk.subarray(at, at + take)
        if (this.mode === 'pax') this.paxBody.push(Buffer.from(part))
        else if (this.kept && this.entry) {
          const keptLen = this.kept.reduce((n, b) => n + b.length, 0)
          const want = this.entry.size - keptLen
          if (want > 0) this.kept.push(Buffer.from(part.subarray(0, Math.min(want, part.length))))
        }
        this.remaining -= take
        at += take
        this.offset += take
        if (this.remaining === 0) this.finishPart()
      }
    }
  }

  private onHeader(): void {
    if (isZero(this.header)) {
      this.ended = true
      return
    }
    checkHeader(this.header)
    const type = String.fromCharCode(this.header[156] || 48)
    let size = parseOctal(this.header, 124, 12)
    if (type === 'x' || type === 'g') {
      this.mode = 'pax'
      this.paxBody = []
      this.remaining = size + padding(size)
      this.entry = null
      if (this.remaining === 0) this.finishPart()
      return
    }
    const name = this.pax.path ?? headerName(this.header)
    if (this.pax.size !== undefined) size = Number(this.pax.size)
    this.pax = {}
    const regular = type === '0' || type === '\0' || type === '7'
    this.entry = regular ? { name, size, start: this.entryStart, end: this.offset + size + padding(size) } : null
    this.kept = this.entry && this.keep(name, size) ? [] : null
    this.mode = 'body'
    this.remaining = size + padding(size)
    if (this.remaining === 0) this.finishPart()
  }

  private finishPart(): void {
    if (this.mode === 'pax') {
      const body = Buffer.concat(this.paxBody)
      this.pax = parsePax(body.subarray(0, body.length))
      this.mode = 'header'
      return
    }
    const e = this.entry
    this.mode = 'header'
    this.entry = null
    if (e) {
      if (this.kept) e.body = Buffer.concat(this.kept)
      this.kept = null
      this.onEntry(e)
    }
    this.entryStart = this.offset
  }
}
