// A document's vector points as archive bytes (points.bin): every chunk's dense vector, sparse vector and payload,
// exactly as the store holds them, so an import with the same embedding model answers searches exactly as the
// source did without computing anything. Little-endian:
//
//   "QPTS" u32 version (1) u32 count
//   per point: u32 dims, f32[dims] dense, u32 nnz, u32[nnz] sparse indices, f32[nnz] sparse values,
//              u32 n, n bytes of the payload as JSON (keys in ChunkPayload's order: the bytes of equal payloads are equal)
import { endianness } from 'node:os'
import type { ChunkPayload, VectorPoint } from '../../adapters/ports.ts'

/** On a little-endian host typed arrays are copied as bytes instead of one number at a time. */
const LE = endianness() === 'LE'

const bytesOf = (a: Float32Array | Uint32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength)

const MAGIC = 0x53545051 // "QPTS" read as a little-endian u32
const VERSION = 1

/** ChunkPayload's keys in a fixed order. */
export const PAYLOAD_KEYS = [
  'chunk_id', 'kb_id', 'doc_id', 'chunk_index', 'title', 'source_type', 'source', 'doc_type', 'page_num', 'page_label', 'text', 'start',
  'end', 'parent_chunk_id', 'updated_at',
] as const satisfies readonly (keyof ChunkPayload)[]

/** The payload as JSON with its keys in a fixed order (a store may hand the keys back in another). */
export function canonicalPayload(p: ChunkPayload): string {
  const rec = p as unknown as Record<string, unknown>
  const out: Record<string, unknown> = {}
  for (const k of PAYLOAD_KEYS) out[k] = rec[k] ?? null
  for (const k of Object.keys(rec).sort()) if (!(k in out)) out[k] = rec[k]
  return JSON.stringify(out)
}

export function encodePoints(points: readonly VectorPoint[]): Buffer {
  const payloads = points.map((p) => Buffer.from(canonicalPayload(p.payload), 'utf8'))
  let size = 12
  points.forEach((p, i) => {
    size += 4 + 4 * p.dense.length + 4 + 8 * p.sparse.indices.length + 4 + payloads[i].length
  })
  const buf = Buffer.alloc(size)
  let at = 0
  const u32 = (v: number) => {
    buf.writeUInt32LE(v, at)
    at += 4
  }
  u32(MAGIC)
  u32(VERSION)
  u32(points.length)
  points.forEach((p, i) => {
    u32(p.dense.length)
    const n = p.sparse.indices.length
    if (LE) {
      at += bytesOf(p.dense).copy(buf, at)
      u32(n)
      at += bytesOf(p.sparse.indices).copy(buf, at)
      at += bytesOf(p.sparse.values).copy(buf, at)
    } else {
      for (const v of p.dense) {
        buf.writeFloatLE(v, at)
        at += 4
      }
      u32(n)
      for (let k = 0; k < n; k++) u32(p.sparse.indices[k])
      for (let k = 0; k < n; k++) {
        buf.writeFloatLE(p.sparse.values[k], at)
        at += 4
      }
    }
    u32(payloads[i].length)
    payloads[i].copy(buf, at)
    at += payloads[i].length
  })
  return buf
}

export class PointsFormatError extends Error {}

export function decodePoints(buf: Buffer): VectorPoint[] {
  let at = 0
  const need = (n: number) => {
    if (at + n > buf.length) throw new PointsFormatError(`points entry cut short at byte ${at} of ${buf.length}`)
  }
  const u32 = () => {
    need(4)
    const v = buf.readUInt32LE(at)
    at += 4
    return v
  }
  if (u32() !== MAGIC) throw new PointsFormatError('not a points entry (bad magic)')
  const version = u32()
  if (version !== VERSION) throw new PointsFormatError(`points entry version ${version}; this version reads ${VERSION}`)
  const count = u32()
  const out: VectorPoint[] = []
  for (let i = 0; i < count; i++) {
    const dims = u32()
    need(4 * dims)
    const dense = new Float32Array(dims)
    if (LE) at += buf.copy(bytesOf(dense), 0, at, at + 4 * dims)
    else for (let k = 0; k < dims; k++, at += 4) dense[k] = buf.readFloatLE(at)
    const n = u32()
    need(8 * n)
    const indices = new Uint32Array(n)
    const values = new Float32Array(n)
    if (LE) {
      at += buf.copy(bytesOf(indices), 0, at, at + 4 * n)
      at += buf.copy(bytesOf(values), 0, at, at + 4 * n)
    } else {
      for (let k = 0; k < n; k++, at += 4) indices[k] = buf.readUInt32LE(at)
      for (let k = 0; k < n; k++, at += 4) values[k] = buf.readFloatLE(at)
    }
    const len = u32()
    need(len)
    let payload: ChunkPayload
    try {
      payload = JSON.parse(buf.toString('utf8', at, at + len)) as ChunkPayload
    } catch {
      throw new PointsFormatError(`point ${i}: payload is not JSON`)
    }
    at += len
    out.push({ dense, sparse: { indices, values }, payload })
  }
  if (at !== buf.length) throw new PointsFormatError(`points entry has ${buf.length - at} bytes after its ${count} points`)
  return out
}

/**
 * Whether the store holds what was written: same chunk ids, payloads, sparse vectors, and dense vectors within
 * 1e-6 per component (a store may normalise a cosine vector again, changing its last bits). The first difference
 * as text, or null.
 */
export function samePoints(written: readonly VectorPoint[], read: readonly VectorPoint[]): string | null {
  if (written.length !== read.length) return `${read.length} points read back, ${written.length} written`
  const byId = new Map(read.map((p) => [p.payload.chunk_id, p]))
  for (const w of written) {
    const r = byId.get(w.payload.chunk_id)
    if (!r) return `chunk ${w.payload.chunk_id} missing when read back`
    if (r.dense.length !== w.dense.length) return `chunk ${w.payload.chunk_id}: ${r.dense.length} dimensions read back, ${w.dense.length} written`
    for (let k = 0; k < w.dense.length; k++) {
      if (Math.abs(r.dense[k] - w.dense[k]) > 1e-6) return `chunk ${w.payload.chunk_id}: dense component ${k} is ${r.dense[k]}, ${w.dense[k]} written`
    }
    if (!sameSparse(w, r)) return `chunk ${w.payload.chunk_id}: sparse vector differs when read back`
    if (canonicalPayload(r.payload) !== canonicalPayload(w.payload)) return `chunk ${w.payload.chunk_id}: payload differs when read back`
  }
  return null
}

function sameSparse(a: VectorPoint, b: VectorPoint): boolean {
  // Order-insensitive: a store may keep the terms sorted.
  const m = new Map<number, number>()
  for (let k = 0; k < a.sparse.indices.length; k++) m.set(a.sparse.indices[k], a.sparse.values[k])
  if (m.size !== b.sparse.indices.length) return false
  for (let k = 0; k < b.sparse.indices.length; k++) {
    const v = m.get(b.sparse.indices[k])
    if (v === undefined || Math.abs(v - b.sparse.values[k]) > 1e-6) return false
  }
  return true
}
