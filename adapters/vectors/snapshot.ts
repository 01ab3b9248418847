// Snapshot of one collection's points, in a binary file laid out so that loading is a handful of large
// reads and almost no per-point work: the dense section is the arena itself (rows 0..rowsEnd, dead rows
// included) and is read straight into the new arena's segments; the sparse posting lists are stored built; payloads
// stay JSON bytes until a search returns them. Every section carries a crc32. The HNSW graph is saved
// beside it by usearch.
//
// Layout (little endian): a 512-byte header, then 8-aligned sections:
//   rows u32[count] | inGraph u8[count] | norms f32[count] | dense f32[rowsEnd*dims]
//   | sparseOffsets u32[count+1] | sparseIndices u32[nnz] | sparseValues f32[nnz]
//   | terms u32[T] | postingOffsets u32[T+1] | postingRows u32[P] | postingWeights f32[P]
//   | idBlob (chunk_id, doc_id of each point, utf8) | idOffsets f64[2*count+1] | chunkIndex i32[count]
//   | payloadBlob (JSON documents back to back) | payloadOffsets f64[count+1]
import { promises as fs } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { crc32 } from 'node:zlib'
import type { ChunkPayload } from '../ports.ts'
import { decodeRows, type PostingsCapture, type PostingsData, type SparseRowsCapture, type SparseRowsData } from './sparse-index.ts'
import { PayloadRef } from './payloads.ts'

const MAGIC = 0x4e535651 // 'QVSN'
const VERSION = 2
const HEADER_BYTES = 512
const SECTIONS = [
  'rows', 'inGraph', 'norms', 'dense', 'sparseOffsets', 'sparseIndices', 'sparseValues',
  'terms', 'postingOffsets', 'postingRows', 'postingWeights', 'idBlob', 'idOffsets', 'chunkIndex', 'payloadBlob', 'payloadOffsets',
] as const
type SectionName = (typeof SECTIONS)[number]
const align8 = (n: number) => Math.ceil(n / 8) * 8

/** What a snapshot holds, captured synchronously; the referenced arrays must not change while it is written. */
export interface SnapshotCapture {
  dims: number
  rowsEnd: number
  /** Live rows, ascending; the per-point arrays below follow this order. */
  rows: Int32Array
  inGraph: Uint8Array
  norms: Float32Array
  /** Bytes of arena rows 0..rowsEnd, in order (the arena's segments, or chunks of them read from its spill file). */
  dense: Iterable<Uint8Array> | AsyncIterable<Uint8Array>
  sparse: SparseRowsCapture
  postings: PostingsCapture
  chunkIds: string[]
  docIds: string[]
  chunkIndex: Int32Array
  /** A payload object, the JSON bytes it was restored from, or its record in the payload spill file. */
  payloads: (ChunkPayload | Uint8Array | PayloadRef)[]
  /** Reads `into.length` bytes of the payload spill file from `at` into `into` (needed when payloads holds a PayloadRef). */
  readPayloads?: (at: number, into: Uint8Array) => void
}

export interface SnapshotData {
  dims: number
  rowsEnd: number
  rows: Uint32Array
  inGraph: Uint8Array
  norms: Float32Array
  sparse: SparseRowsData
  postings: PostingsData
  chunkIds: string[]
  docIds: string[]
  chunkIndex: Int32Array
  payloadBlob: Buffer
  payloadOffsets: Float64Array
}

const view = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength)

async function writeAll(fh: FileHandle, data: Uint8Array, position: number): Promise<void> {
  let done = 0
  while (done < data.length) {
    const { bytesWritten } = await fh.write(data, done, data.length - done, position + done)
    done += bytesWritten
  }
}

async function readAll(fh: FileHandle, into: Uint8Array, position: number): Promise<void> {
  let done = 0
  while (done < into.length) {
    const { bytesRead } = await fh.read(into, done, into.length - done, position + done)
    if (bytesRead === 0) throw new Error('snapshot file is shorter than its header says')
    done += bytesRead
  }
}

/** Longest stretch the posting count holds the event loop before it yields, ms. */
const PACK_SLICE_MS = 4
/** Entries per chunk of a streamed section (256 KB of u32 or f32). */
const STREAM_ENTRIES = 1 << 16

/**
 * Posting entries of rows live at capture, term by term: the kept terms and their offsets, counted first, then
 * the entries themselves as chunks of up to STREAM_ENTRIES (rows(), weights()), so a snapshot never holds a copy
 * of all the postings (7M entries, 56 MB, at 70k chunks). Each chunk is one array refilled: a chunk is valid until
 * the next is asked for (see writeSnapshot). The count runs in slices of `sliceMs`, yielding to the
 * event loop between them: in one piece packing held the loop 37 ms at 11.7k chunks and 129 ms at 36k (2.3M
 * entries) in the middle of a bulk ingest. Safe to interleave: a capture's posting arrays are not changed below
 * their captured lengths while a snapshot is written (appends go past them, compaction waits). When every row
 * up to rowsEnd is live (no delete since the last compaction), each list is taken whole.
 */
export async function postingSections(c: Pick<SnapshotCapture, 'rows' | 'rowsEnd' | 'postings'>, sliceMs = PACK_SLICE_MS): Promise<{ terms: Uint32Array; offsets: Uint32Array; rows: () => Iterable<Uint8Array>; weights: () => Iterable<Uint8Array> }> {
  let live: Uint8Array | null = null
  if (c.rows.length !== c.rowsEnd) {
    live = new Uint8Array(c.rowsEnd)
    for (let i = 0; i < c.rows.length; i++) live[c.rows[i]] = 1
  }
  const p = c.postings
  const terms = new Uint32Array(p.terms.length)
  const offsets = new Uint32Array(p.terms.length + 1)
  /** Index in p of each kept term. */
  const from = new Uint32Array(p.terms.length)
  let kept = 0
  let w = 0
  /** A list's rows, decoded (grown to the longest list). */
  let rows: Uint32Array = new Uint32Array(256)
  const rowsOf = (t: number): Uint32Array => (rows = decodeRows(p.bytes[t], p.lens[t], rows))
  let sliceStart = performance.now()
  for (let t = 0; t < p.terms.length; t++) {
    if ((t & 63) === 0 && performance.now() - sliceStart >= sliceMs) {
      await new Promise((resolve) => setImmediate(resolve))
      sliceStart = performance.now()
    }
    const len = p.lens[t]
    let n = len
    if (live !== null) {
      n = 0
      const pr = rowsOf(t)
      for (let j = 0; j < len; j++) {
        const row = pr[j]
        if (row < c.rowsEnd && live[row] === 1) n++
      }
    }
    if (n > 0) {
      w += n
      terms[kept] = p.terms[t]
      from[kept] = t
      offsets[++kept] = w
    }
  }
  function* entries(pick: 'rows' | 'weights'): Iterable<Uint8Array> {
    const out = pick === 'rows' ? new Uint32Array(STREAM_ENTRIES) : new Float32Array(STREAM_ENTRIES)
    let o = 0
    for (let k = 0; k < kept; k++) {
      const t = from[k]
      const len = p.lens[t]
      // The rows are decoded for the rows section, and for the weights' when dead rows are left out.
      const pr = pick === 'rows' || live !== null ? rowsOf(t) : null
      const src = pick === 'rows' ? pr! : p.weights[t]
      for (let j = 0; j < len; j++) {
        if (live !== null) {
          const row = pr![j]
          if (!(row < c.rowsEnd && live[row] === 1)) continue
        }
        out[o++] = src[j]
        if (o === out.length) {
          yield view(out)
          o = 0
        }
      }
    }
    if (o > 0) yield view(out.subarray(0, o))
  }
  return { terms: terms.subarray(0, kept), offsets: offsets.subarray(0, kept + 1), rows: () => entries('rows'), weights: () => entries('weights') }
}

/**
 * One of a capture's per-point sparse arrays (`indices` or `values`) back to back, in chunks of about STREAM_ENTRIES,
 * each in the same array refilled (valid until the next is asked for).
 */
function* sparseSection(c: SnapshotCapture, offsets: Uint32Array, field: 'indices' | 'values'): Iterable<Uint8Array> {
  const count = c.rows.length
  let room = field === 'indices' ? new Uint32Array(STREAM_ENTRIES) : new Float32Array(STREAM_ENTRIES)
  for (let i = 0; i < count; ) {
    let j = i + 1
    while (j < count && offsets[j + 1] - offsets[i] <= STREAM_ENTRIES) j++
    // A single point past STREAM_ENTRIES entries is a chunk of its own, in a larger array.
    if (offsets[j] - offsets[i] > room.length) room = field === 'indices' ? new Uint32Array(offsets[j] - offsets[i]) : new Float32Array(offsets[j] - offsets[i])
    const out = room.subarray(0, offsets[j] - offsets[i])
    const { block, start, len } = c.sparse
    const blocks = c.sparse[field]
    for (let k = i; k < j; ) {
      const b = block[k]
      const from = start[k]
      const inMemory = blocks[b]
      if (inMemory !== null) {
        out.set(inMemory.subarray(from, from + len[k]), offsets[k] - offsets[i])
        k++
        continue
      }
      // A spilled block: the run of rows that follow one another in it, in one read.
      let end = k + 1
      while (end < j && block[end] === b && start[end] === start[end - 1] + len[end - 1]) end++
      c.sparse.read(b, field, from, out.subarray(offsets[k] - offsets[i], offsets[end] - offsets[i]))
      k = end
    }
    yield view(out)
    i = j
  }
}

/** Bytes of the buffer the id and payload sections are gathered in before each write (tests give smaller ones). */
const CHUNK_BYTES = 1 << 20

/**
 * Writes the snapshot to path and fsyncs it; returns its size in bytes. A section built here or read from a spill file
 * streams through one buffer refilled (a part is written before the next is asked for); arrays already in memory go
 * as views. Built as fresh arrays, the parts came to about the whole snapshot's size (202 MB at 30k chunks of 1,024
 * dimensions), garbage that stayed allocated until a full collection: in a bulk ingest the service's ArrayBuffers
 * rose by up to 70 MB while a snapshot was written.
 */
export async function writeSnapshot(path: string, c: SnapshotCapture, opts: { chunkBytes?: number } = {}): Promise<number> {
  const chunkBytes = opts.chunkBytes ?? CHUNK_BYTES
  const count = c.rows.length
  const fh = await fs.open(path, 'w')
  try {
    const table = new Map<SectionName, { offset: number; length: number; crc: number }>()
    let pos = HEADER_BYTES
    const put = async (name: SectionName, parts: Iterable<Uint8Array> | AsyncIterable<Uint8Array>) => {
      const offset = pos
      let crc = 0
      for await (const part of parts) {
        crc = crc32(part, crc)
        await writeAll(fh, part, pos)
        pos += part.length
      }
      table.set(name, { offset, length: pos - offset, crc })
      pos = align8(pos)
    }
    const rows = new Uint32Array(count)
    const norms = new Float32Array(count)
    const offsets = new Uint32Array(count + 1)
    let nnz = 0
    for (let i = 0; i < count; i++) {
      rows[i] = c.rows[i]
      norms[i] = c.norms[c.rows[i]]
      nnz += c.sparse.len[i]
      offsets[i + 1] = nnz
    }
    await put('rows', [view(rows)])
    await put('inGraph', [c.inGraph.subarray(0, count)])
    await put('norms', [view(norms)])
    await put('dense', c.dense)
    await put('sparseOffsets', [view(offsets)])
    await put('sparseIndices', sparseSection(c, offsets, 'indices'))
    await put('sparseValues', sparseSection(c, offsets, 'values'))
    const postings = await postingSections(c)
    await put('terms', [view(postings.terms)])
    await put('postingOffsets', [view(postings.offsets)])
    await put('postingRows', postings.rows())
    await put('postingWeights', postings.weights())

    const idOffsets = new Float64Array(2 * count + 1)
    const ids = function* () {
      let out = Buffer.allocUnsafe(chunkBytes)
      let o = 0
      let at = 0
      for (let k = 0; k < 2 * count; k++) {
        const id = (k & 1) === 0 ? c.chunkIds[k >>> 1] : c.docIds[k >>> 1]
        const n = Buffer.byteLength(id, 'utf8')
        idOffsets[k] = at
        at += n
        if (o + n > out.length) {
          if (o > 0) yield out.subarray(0, o)
          o = 0
          // An id longer than the buffer (never one the service makes): a larger one from here on, as for payloads.
          if (n > out.length) out = Buffer.allocUnsafe(n)
        }
        o += out.write(id, o, n, 'utf8')
      }
      idOffsets[2 * count] = at
      if (o > 0) yield out.subarray(0, o)
    }
    await put('idBlob', ids())
    await put('idOffsets', [view(idOffsets)])
    await put('chunkIndex', [view(c.chunkIndex)])

    const payloadOffsets = new Float64Array(count + 1)
    const blobs = function* () {
      let out = Buffer.allocUnsafe(chunkBytes)
      let o = 0
      let at = 0
      // The run of spill-file records that follow one another there and in `out`, read in one go: it starts at runAt in
      // the file and at runFrom in out, and ends at o (-1: no run).
      let runAt = -1
      let runFrom = 0
      const flush = () => {
        if (runAt >= 0) c.readPayloads!(runAt, out.subarray(runFrom, o))
        runAt = -1
      }
      for (let j = 0; j < count; j++) {
        const p = c.payloads[j]
        // Bytes restored from the previous snapshot and records of the spill file are copied as they are, never parsed.
        const json = p instanceof Uint8Array || p instanceof PayloadRef ? null : JSON.stringify(p)
        const n = json === null ? (p as Uint8Array | PayloadRef).length : Buffer.byteLength(json, 'utf8')
        payloadOffsets[j] = at
        at += n
        if (o + n > out.length) {
          flush()
          if (o > 0) yield out.subarray(0, o)
          o = 0
          // A payload larger than the buffer: a larger one from here on.
          if (n > out.length) out = Buffer.allocUnsafe(n)
        }
        if (p instanceof PayloadRef) {
          if (runAt < 0 || runAt + (o - runFrom) !== p.at) {
            flush()
            runAt = p.at
            runFrom = o
          }
        } else {
          flush()
          if (json === null) out.set(p as Uint8Array, o)
          else out.write(json, o, n, 'utf8')
        }
        o += n
      }
      flush()
      payloadOffsets[count] = at
      if (o > 0) yield out.subarray(0, o)
    }
    await put('payloadBlob', blobs())
    await put('payloadOffsets', [view(payloadOffsets)])

    const header = Buffer.alloc(HEADER_BYTES)
    header.writeUInt32LE(MAGIC, 0)
    header.writeUInt32LE(VERSION, 4)
    header.writeUInt32LE(c.dims, 8)
    header.writeUInt32LE(count, 12)
    header.writeUInt32LE(c.rowsEnd, 16)
    let h = 32
    for (const name of SECTIONS) {
      const s = table.get(name)!
      header.writeDoubleLE(s.offset, h)
      header.writeDoubleLE(s.length, h + 8)
      header.writeUInt32LE(s.crc, h + 16)
      h += 24
    }
    header.writeUInt32LE(crc32(header.subarray(0, h)), h)
    await writeAll(fh, header, 0)
    await fh.sync()
    return pos
  } finally {
    await fh.close()
  }
}

/**
 * Reads a snapshot. The dense section goes straight into the byte ranges that `arenaFor(rowsEnd)` returns, in
 * order (the caller's arena); everything else into fresh arrays. Throws on a bad magic, version or checksum.
 */
export async function readSnapshot(path: string, dims: number, arenaFor: (rowsEnd: number) => Uint8Array[]): Promise<SnapshotData> {
  const fh = await fs.open(path, 'r')
  try {
    const header = Buffer.alloc(HEADER_BYTES)
    await readAll(fh, header, 0)
    if (header.readUInt32LE(0) !== MAGIC) throw new Error(`${path} is not a vector snapshot`)
    if (header.readUInt32LE(4) !== VERSION) throw new Error(`${path} has snapshot version ${header.readUInt32LE(4)}, expected ${VERSION}`)
    const fileDims = header.readUInt32LE(8)
    if (fileDims !== dims) throw new Error(`${path} holds ${fileDims}-dimensional vectors, expected ${dims}`)
    const count = header.readUInt32LE(12)
    const rowsEnd = header.readUInt32LE(16)
    const table = new Map<SectionName, { offset: number; length: number; crc: number }>()
    let h = 32
    for (const name of SECTIONS) {
      table.set(name, { offset: header.readDoubleLE(h), length: header.readDoubleLE(h + 8), crc: header.readUInt32LE(h + 16) })
      h += 24
    }
    if (crc32(header.subarray(0, h)) !== header.readUInt32LE(h)) throw new Error(`${path}: header checksum mismatch`)
    const section = async (name: SectionName, into?: Uint8Array[]): Promise<ArrayBuffer> => {
      const s = table.get(name)!
      const parts = into ?? [new Uint8Array(s.length)]
      const length = parts.reduce((n, p) => n + p.length, 0)
      if (length !== s.length) throw new Error(`${path}: section ${name} has ${s.length} bytes, expected ${length}`)
      let crc = 0
      let at = s.offset
      for (const part of parts) {
        await readAll(fh, part, at)
        crc = crc32(part, crc)
        at += part.length
      }
      if (crc !== s.crc) throw new Error(`${path}: section ${name} checksum mismatch`)
      return (parts[0]?.buffer ?? new ArrayBuffer(0)) as ArrayBuffer
    }
    const rows = new Uint32Array(await section('rows'))
    const inGraph = new Uint8Array(await section('inGraph'))
    const norms = new Float32Array(await section('norms'))
    await section('dense', arenaFor(rowsEnd))
    const offsets = new Uint32Array(await section('sparseOffsets'))
    const indices = new Uint32Array(await section('sparseIndices'))
    const values = new Float32Array(await section('sparseValues'))
    const postings: PostingsData = {
      terms: new Uint32Array(await section('terms')),
      offsets: new Uint32Array(await section('postingOffsets')),
      rows: new Uint32Array(await section('postingRows')),
      weights: new Float32Array(await section('postingWeights')),
    }
    const idBlob = Buffer.from(await section('idBlob'))
    const idOffsets = new Float64Array(await section('idOffsets'))
    const chunkIndex = new Int32Array(await section('chunkIndex'))
    const payloadBlob = Buffer.from(await section('payloadBlob'))
    const payloadOffsets = new Float64Array(await section('payloadOffsets'))
    if (rows.length !== count || offsets.length !== count + 1 || idOffsets.length !== 2 * count + 1 || payloadOffsets.length !== count + 1) {
      throw new Error(`${path}: section sizes do not match the point count ${count}`)
    }
    const chunkIds: string[] = new Array(count)
    const docIds: string[] = new Array(count)
    let lastDoc = ''
    for (let i = 0; i < count; i++) {
      chunkIds[i] = idBlob.toString('utf8', idOffsets[2 * i], idOffsets[2 * i + 1])
      const doc = idBlob.toString('utf8', idOffsets[2 * i + 1], idOffsets[2 * i + 2])
      // Chunks of one document are mostly neighbours: share one string instead of one per chunk.
      docIds[i] = doc === lastDoc ? lastDoc : (lastDoc = doc)
    }
    if (offsets[count] !== indices.length || values.length !== indices.length) throw new Error(`${path}: sparse sections do not match their offsets`)
    return { dims, rowsEnd, rows, inGraph, norms, sparse: { offsets, indices, values }, postings, chunkIds, docIds, chunkIndex, payloadBlob, payloadOffsets }
  } finally {
    await fh.close()
  }
}
