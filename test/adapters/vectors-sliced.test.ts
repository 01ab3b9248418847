// The embedded store's docVectors reads a document's rows in slices with a turn of the event loop between them
// (dedup stage 3 on a multi-megabyte candidate, issue 36): the same vectors, in chunk order, as views of one matrix.
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { packRows } from '../../compute/dedup/chunks.ts'
import { createEmbeddedVectorStore } from '../../adapters/vectors/embedded.ts'
import { DIMS, point } from './vectors.contract.ts'
import { mulberry32 } from '../../bench/lib/rng.ts'

describe('embedded docVectors in slices', () => {
  it('answers every chunk in order from memory and the spill file, as views of one matrix, across many slices', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'quarry-sliced-'))
    // segments of 16 rows: full ones go to the spill file, so most rows are read from disk
    const store = await createEmbeddedVectorStore({ dir, dimensions: DIMS, exactBudget: 0, quantization: 'f32', segmentRows: 16, snapshotIdleMs: 0 })
    t.after(async () => {
      await store.close()
      await rm(dir, { recursive: true, force: true })
    })
    const r = mulberry32(3)
    const vec = () => Array.from({ length: DIMS }, () => r() - 0.5)
    const kb = 'kb'
    await store.ensureCollection(kb, DIMS)
    const written: number[][] = []
    // 700 chunks of one document, written out of order and interleaved with another document's
    const order = Array.from({ length: 700 }, (_, i) => i).sort(() => r() - 0.5)
    for (const i of order) written[i] = vec()
    for (let k = 0; k < order.length; k += 50) {
      await store.upsert(kb, order.slice(k, k + 50).flatMap((i) => [point(kb, 'big', i, written[i]), point(kb, 'other', i, vec())]))
    }
    let turns = 0
    const ticker = setInterval(() => turns++, 0)
    const got = await store.docVectors(kb, 'big')
    clearInterval(ticker)
    assert.equal(got.length, 700)
    for (let i = 0; i < 700; i++) assert.deepEqual([...got[i]], [...Float32Array.from(written[i])], `chunk ${i}`)
    assert.ok(turns >= 1, 'the event loop turned while the rows were read')
    const packed = packRows(got, true)
    assert.equal(packed.flat.buffer, got[0].buffer, 'back to back: handed on without a copy')
    assert.deepEqual(await store.docVectors(kb, 'none'), [])
  })
})
