// Write-ahead log of one collection. A record is [u32 body length][u32 crc32 of body][body], little
// endian; the body starts with a type byte. Reading stops at the first record that is short or fails
// its checksum: that is the torn tail a kill -9 in the middle of a write leaves, and it was never
// acknowledged, so it is dropped (the caller truncates the file there before appending again).
//
// Bodies:
//   upsert  [u8 1][3 pad][u32 count][u32 dims] then per point:
//           [u32 payload bytes][payload JSON][pad to 4][f32 x dims][u32 nnz][u32 x nnz indices][f32 x nnz values]
//   delete  [u8 2][3 pad][u32 bytes][doc_id utf8]
import { promises as fs } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { crc32 } from 'node:zlib'
import type { ChunkPayload, SparseVector, VectorPoint } from '../ports.ts'

export const RECORD_UPSERT = 1
export const RECORD_DELETE_DOC = 2

const HEADER = 8
const pad4 = (n: number) => (n + 3) & ~3

export interface DecodedPoint {
  payload: ChunkPayload
  dense: Float32Array
  sparse: SparseVector
}

export type WalRecord =
  | { type: typeof RECORD_UPSERT; points: DecodedPoint[] }
  | { type: typeof RECORD_DELETE_DOC; docId: string }

const bytesOf = (a: Float32Array | Uint32Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength)

/**
 * A record to be written: its size, and how to write it at an offset of a buffer (every byte of it, so that a reused
 * buffer leaves nothing of its last contents in the file). The log is written from one buffer per fsync group
 * (Collection.flushGroup) instead of a buffer per record joined by a copy.
 */
export interface WalRecordWriter {
  readonly size: number
  write(buf: Buffer, at: number): void
}

/** The header (body length, crc32 of the body) of the record written at `at`, `size` bytes long with it. */
function frameAt(buf: Buffer, at: number, size: number): void {
  buf.writeUInt32LE(size - HEADER, at)
  buf.writeUInt32LE(crc32(buf.subarray(at + HEADER, at + size)), at + 4)
}

/**
 * An upsert record; the points must already be validated (dims, sparse lengths). The payloads are turned into JSON
 * now and the arrays read when it is written: the caller must not change them before then.
 */
export function upsertRecord(points: readonly VectorPoint[], dims: number): WalRecordWriter {
  const payloads = points.map((p) => JSON.stringify(p.payload))
  const lengths = payloads.map((json) => Buffer.byteLength(json, 'utf8'))
  let size = HEADER + 12
  for (let i = 0; i < points.length; i++) size += 4 + pad4(lengths[i]) + dims * 4 + 4 + points[i].sparse.indices.length * 8
  return {
    size,
    write(buf, at) {
      let off = at + HEADER
      buf.writeUInt32LE(RECORD_UPSERT, off)
      buf.writeUInt32LE(points.length, off + 4)
      buf.writeUInt32LE(dims, off + 8)
      off += 12
      for (let i = 0; i < points.length; i++) {
        const p = points[i]
        const len = lengths[i]
        buf.writeUInt32LE(len, off)
        buf.write(payloads[i], off + 4, len, 'utf8')
        buf.fill(0, off + 4 + len, off + 4 + pad4(len))
        off += 4 + pad4(len)
        buf.set(bytesOf(p.dense), off)
        off += dims * 4
        const nnz = p.sparse.indices.length
        buf.writeUInt32LE(nnz, off)
        off += 4
        buf.set(bytesOf(p.sparse.indices), off)
        off += nnz * 4
        buf.set(bytesOf(p.sparse.values), off)
        off += nnz * 4
      }
      frameAt(buf, at, size)
    },
  }
}

export function deleteDocRecord(docId: string): WalRecordWriter {
  const len = Buffer.byteLength(docId, 'utf8')
  const size = HEADER + 8 + len
  return {
    size,
    write(buf, at) {
      buf.writeUInt32LE(RECORD_DELETE_DOC, at + HEADER)
      buf.writeUInt32LE(len, at + HEADER + 4)
      buf.write(docId, at + HEADER + 8, len, 'utf8')
      frameAt(buf, at, size)
    },
  }
}

/** Typed-array copies, so they are aligned and do not pin the file buffer. */
const f32At = (buf: Buffer, off: number, n: number) => new Float32Array(buf.buffer.slice(buf.byteOffset + off, buf.byteOffset + off + n * 4))
const u32At = (buf: Buffer, off: number, n: number) => new Uint32Array(buf.buffer.slice(buf.byteOffset + off, buf.byteOffset + off + n * 4))

function decodeBody(body: Buffer): WalRecord {
  const type = body.readUInt8(0)
  if (type === RECORD_DELETE_DOC) {
    const len = body.readUInt32LE(4)
    return { type, docId: body.toString('utf8', 8, 8 + len) }
  }
  if (type !== RECORD_UPSERT) throw new Error(`unknown WAL record type ${type}`)
  const count = body.readUInt32LE(4)
  const dims = body.readUInt32LE(8)
  let off = 12
  const points: DecodedPoint[] = []
  for (let i = 0; i < count; i++) {
    const jsonLen = body.readUInt32LE(off)
    const payload = JSON.parse(body.toString('utf8', off + 4, off + 4 + jsonLen)) as ChunkPayload
    off += 4 + pad4(jsonLen)
    const dense = f32At(body, off, dims)
    off += dims * 4
    const nnz = body.readUInt32LE(off)
    off += 4
    const indices = u32At(body, off, nnz)
    off += nnz * 4
    const values = f32At(body, off, nnz)
    off += nnz * 4
    points.push({ payload, dense, sparse: { indices, values } })
  }
  return { type, points }
}

/**
 * The records of a log file's content, in order, up to the first torn or corrupt one. `validBytes` is
 * where that one starts (the whole length when every record is intact).
 */
export function readRecords(buf: Buffer): { records: WalRecord[]; validBytes: number; torn: boolean } {
  const records: WalRecord[] = []
  let off = 0
  while (off < buf.length) {
    if (buf.length - off < HEADER) break
    const len = buf.readUInt32LE(off)
    const sum = buf.readUInt32LE(off + 4)
    if (len < 4 || buf.length - off - HEADER < len) break
    const body = buf.subarray(off + HEADER, off + HEADER + len)
    if (crc32(body) !== sum) break
    let record: WalRecord
    try {
      record = decodeBody(body)
    } catch {
      break
    }
    records.push(record)
    off += HEADER + len
  }
  return { records, validBytes: off, torn: off < buf.length }
}

/** One log segment opened for appending. */
export class WalFile {
  readonly path: string
  size: number
  private readonly fh: FileHandle

  private constructor(path: string, fh: FileHandle, size: number) {
    this.path = path
    this.fh = fh
    this.size = size
  }

  static async open(path: string): Promise<WalFile> {
    const fh = await fs.open(path, 'a')
    const { size } = await fh.stat()
    return new WalFile(path, fh, size)
  }

  /** Set when a failed append could not be cut back: appending after a partial record would hide later ones. */
  private broken: unknown

  /** Appends and flushes to disk (fdatasync); on failure cuts the file back so no partial record stays. */
  async append(data: Buffer): Promise<void> {
    if (this.broken !== undefined) throw new Error('the log is unusable after a failed write; restart to recover', { cause: this.broken })
    const before = this.size
    try {
      let written = 0
      while (written < data.length) {
        const { bytesWritten } = await this.fh.write(data, written, data.length - written)
        written += bytesWritten
      }
      await this.fh.datasync()
      this.size = before + data.length
    } catch (err) {
      await this.fh.truncate(before).catch((truncateErr: unknown) => {
        this.broken = truncateErr
      })
      throw err
    }
  }

  async close(): Promise<void> {
    await this.fh.close()
  }
}
