// The rescoring dot product (adapters/vectors/dot.ts): the WebAssembly version must give the JavaScript loop's
// results bit for bit, so that a row scores the same on every search path.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { createQueryDot, dotJs } from '../../adapters/vectors/dot.ts'
import { mulberry32 as rng } from '../../bench/lib/rng.ts'

/** Values over a wide range of magnitudes and both signs, zeros included: sums where the order of additions shows. */
function vector(rnd: () => number, n: number): Float32Array {
  const v = new Float32Array(n)
  for (let i = 0; i < n; i++) {
    const r = rnd()
    v[i] = r < 0.05 ? 0 : r < 0.1 ? -0 : (rnd() * 2 - 1) * 2 ** Math.floor(rnd() * 40 - 20)
  }
  return v
}

describe('rescoring dot product', () => {
  it('WebAssembly and JavaScript give the reference result bit for bit, at every length and offset', () => {
    const rnd = rng(11)
    const wasmDot = createQueryDot()
    const jsDot = createQueryDot({ wasm: false })
    let compared = 0
    for (const d of [0, 1, 2, 3, 4, 5, 7, 8, 13, 64, 383, 384, 1024, 1536]) {
      const q = vector(rnd, d)
      wasmDot.setQuery(q)
      jsDot.setQuery(q)
      for (let t = 0; t < 40; t++) {
        const offset = Math.floor(rnd() * 5) * d + Math.floor(rnd() * 3)
        const v = vector(rnd, offset + d + 2)
        const want = dotJs(q, v, offset, d)
        assert.ok(Object.is(wasmDot.dot(v, offset), want), `d ${d}, offset ${offset}: ${wasmDot.dot(v, offset)} vs ${want}`)
        assert.ok(Object.is(jsDot.dot(v, offset), want))
        compared++
      }
    }
    assert.equal(compared, 14 * 40)
  })

  it('a new query replaces the last, longer queries grow the memory, and a shorter one after them still reads right', () => {
    const rnd = rng(5)
    const dot = createQueryDot()
    for (const d of [16, 20_000, 9, 70_000, 3]) {
      const q = vector(rnd, d)
      const v = vector(rnd, d)
      dot.setQuery(q)
      assert.ok(Object.is(dot.dot(v, 0), dotJs(q, v, 0, d)), `d ${d}`)
    }
  })
})
