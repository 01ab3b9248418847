// The payload spill file read as memory (adapters/vectors/mapped.ts): a hit's payload read through the mapping is the
// record written, across the file growing past the first mapping, with multi-byte text, equal to what pread gives;
// a hit read after the table closed is refused (503), not a read of unmapped memory.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import type { ChunkPayload } from '../../adapters/ports.ts'
import { PayloadTable } from '../../adapters/vectors/payloads.ts'

const dir = mkdtempSync(join(tmpdir(), 'quarry-payload-map-'))
after(() => rmSync(dir, { recursive: true, force: true }))

const payload = (row: number): ChunkPayload => ({
  chunk_id: `c${row}`, kb_id: 'kb', doc_id: `d${Math.floor(row / 10)}`, chunk_index: row % 10, title: `제목 ${row} — título`,
  source_type: 'file', source: `s${row}.md`, doc_type: 'md', page_num: row % 5, page_label: String(row % 5),
  // 1.2-2.4 KB of text, multi-byte characters at both ends so that an offset off by one breaks the JSON or the text.
  text: `é${row}:` + 'lorem ipsum 한국어 '.repeat(60 + (row % 60)) + `:${row}ü`,
  start: 0, end: 10, parent_chunk_id: null, updated_at: '2026-01-01T00:00:00Z',
})

/** A table with `rows` rows written and spilled in batches of `batch`, as the dense index spills its segments. */
function filled(name: string, rows: number, map: boolean, batch = 4096): PayloadTable {
  const t = new PayloadTable(join(dir, name), { map })
  for (let from = 0; from < rows; from += batch) {
    const to = Math.min(rows, from + batch)
    for (let row = from; row < to; row++) t.set(row, payload(row))
    t.spillRows(to)
  }
  return t
}

describe('payload spill file read as memory', () => {
  it('reads back every record written, the same as pread does, as the file grows past the first mapping', { skip: process.platform !== 'linux' && 'mapping is Linux only' }, () => {
    const mapped = new PayloadTable(join(dir, 'grow'))
    const plain = filled('plain', 14_000, false)
    try {
      // First batch spilled and read: the first mapping (16 MB) covers it.
      for (let row = 0; row < 4096; row++) mapped.set(row, payload(row))
      mapped.spillRows(4096)
      assert.equal(mapped.mappedBytes, 0, 'nothing mapped before a read')
      assert.deepEqual(mapped.hit(17, 1).payload, payload(17))
      assert.equal(mapped.mappedBytes, 16 << 20)
      // The file grows past 16 MB (14,000 records of about 2-3.5 KB): a record beyond the mapping grows it.
      for (let from = 4096; from < 14_000; from += 4096) {
        const to = Math.min(14_000, from + 4096)
        for (let row = from; row < to; row++) mapped.set(row, payload(row))
        mapped.spillRows(to)
      }
      assert.equal(mapped.onDisk, 14_000)
      assert.deepEqual(mapped.hit(13_999, 1).payload, payload(13_999))
      assert.ok(mapped.mappedBytes >= 32 << 20, `mapped ${mapped.mappedBytes}`)
      for (let row = 0; row < 14_000; row += 7) {
        const want = payload(row)
        assert.deepEqual(mapped.hit(row, 1).payload, want)
        assert.deepEqual(plain.hit(row, 1).payload, want)
        assert.deepEqual(mapped.readRecord(0, 64), plain.readRecord(0, 64))
      }
      assert.equal(plain.mappedBytes, 0, 'map: false reads with pread only')
    } finally {
      mapped.close()
      plain.close()
    }
  })

  it('refuses a hit read after the table closed (503), mapped or not', () => {
    for (const map of [true, false]) {
      const t = filled(`closed-${map}`, 100, map)
      const early = t.hit(5, 1)
      assert.deepEqual(early.payload, payload(5))
      const late = t.hit(6, 1)
      t.close()
      assert.equal(t.mappedBytes, 0)
      assert.throws(() => late.payload, (err: Error & { status?: number }) => err.status === 503 && /closed/.test(err.message))
      // A payload read before the close stays readable (it was parsed then).
      assert.deepEqual(early.payload, payload(5))
    }
  })
})
