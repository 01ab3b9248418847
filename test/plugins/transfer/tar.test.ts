// The KB archive's building blocks: the streaming tar writer and reader (checked against GNU tar both ways), the
// entry watcher the CLI resumes downloads with, and the points encoding.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import type { VectorPoint } from '../../../adapters/ports.ts'
import { decodePoints, encodePoints, samePoints } from '../../../plugins/transfer/points.ts'
import { entryHeader, readTar, scanTarFile, tarStream, TarWatcher, type TarSource } from '../../../plugins/transfer/tar.ts'
import { payload } from '../../adapters/vectors.contract.ts'

const tmp = (t: { after(fn: () => void): void }) => {
  const dir = mkdtempSync(join(tmpdir(), 'quarry-tar-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

async function collect(stream: AsyncIterable<Buffer | Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = []
  for await (const c of stream) parts.push(Buffer.from(c))
  return Buffer.concat(parts)
}

const LONG = `docs/${'x'.repeat(120)}/record.json`

function sources(big: Buffer): TarSource[] {
  return [
    { name: 'quarry-kb.json', size: 13, body: Buffer.from('{"hello":"k"}') },
    { name: 'docs/empty', size: 0, body: Buffer.alloc(0) },
    {
      name: 'docs/big/file', size: big.length,
      body: async function* () {
        // Uneven chunks, none aligned on a block.
        for (let at = 0; at < big.length; at += 70_001) yield big.subarray(at, at + 70_001)
      },
    },
    { name: LONG, size: 3, body: Buffer.from('abc') },
  ]
}

describe('tar', () => {
  it('writes archives GNU tar reads, and reads them back entry by entry', async (t) => {
    const dir = tmp(t)
    const big = randomBytes(1_000_003)
    const file = join(dir, 'a.tar')
    writeFileSync(file, await collect(tarStream((async function* () { yield* sources(big) })())))
    assert.equal(readFileSync(file).length % 512, 0)
    assert.deepEqual(execFileSync('tar', ['-tf', file], { encoding: 'utf8' }).trim().split('\n'), ['quarry-kb.json', 'docs/empty', 'docs/big/file', LONG])
    const out = join(dir, 'out')
    mkdirSync(out)
    execFileSync('tar', ['-xf', file, '-C', out])
    assert.ok(readFileSync(join(out, 'docs/big/file')).equals(big), 'GNU tar extracts the streamed body intact')
    assert.equal(readFileSync(join(out, LONG), 'utf8'), 'abc', 'a name past 100 bytes travels in a pax header')

    const seen: { name: string; body: Buffer }[] = []
    const ends: [string, number][] = []
    for await (const e of readTar(Readable(file), { onEntryEnd: (name, offset) => ends.push([name, offset]) })) {
      seen.push({ name: e.name, body: e.name === 'docs/empty' ? Buffer.alloc(0) : await e.buffer(2_000_000) })
    }
    assert.deepEqual(seen.map((s) => s.name), ['quarry-kb.json', 'docs/empty', 'docs/big/file', LONG])
    assert.ok(seen[2].body.equals(big))
    assert.equal(seen[3].body.toString(), 'abc')
    // Entry ends agree with the scan of the file and with the watcher fed arbitrary slices.
    const scan = scanTarFile(file)
    assert.equal(scan.ended, true)
    assert.deepEqual(scan.entries.map((e) => [e.name, e.end]), ends)
    const bytes = readFileSync(file)
    const watched: [string, number, number][] = []
    let kept: Buffer | undefined
    const w = new TarWatcher((e) => {
      watched.push([e.name, e.start, e.end])
      if (e.name === 'quarry-kb.json') kept = e.body
    }, (name) => name === 'quarry-kb.json')
    for (let at = 0; at < bytes.length;) {
      const n = 1 + Math.floor(Math.random() * 1500)
      w.push(bytes.subarray(at, at + n))
      at += n
    }
    assert.deepEqual(watched, scan.entries.map((e) => [e.name, e.start, e.end]))
    assert.equal(kept?.toString(), '{"hello":"k"}')
    assert.equal(w.ended, true)
  })

  it('reads what GNU tar writes in pax format, long names and directories included', async (t) => {
    const dir = tmp(t)
    const src = join(dir, 'src')
    const long = `${'n'.repeat(150)}.txt`
    mkdirSync(join(src, 'sub'), { recursive: true })
    writeFileSync(join(src, 'sub', long), 'long name')
    writeFileSync(join(src, 'a.txt'), 'A')
    const file = join(dir, 'g.tar')
    execFileSync('tar', ['--format=pax', '-cf', file, '-C', src, 'a.txt', 'sub'])
    const got: Record<string, string> = {}
    for await (const e of readTar(Readable(file))) got[e.name] = (await e.buffer(100)).toString()
    assert.deepEqual(got, { 'a.txt': 'A', [`sub/${long}`]: 'long name' })
  })

  it('refuses an archive cut short, inside an entry or between two, and a damaged header', async () => {
    const whole = await collect(tarStream((async function* () { yield* sources(randomBytes(5000)) })()))
    const drain = async (bytes: Buffer) => {
      for await (const e of readTar([bytes])) await e.buffer(1 << 20)
    }
    await assert.rejects(drain(whole.subarray(0, 2000)), /cut short/)
    // At an entry boundary, without the end marker: still cut short.
    await assert.rejects(drain(whole.subarray(0, 1024)), /without its end marker/)
    const bad = Buffer.from(whole)
    bad[10] ^= 0xff
    await assert.rejects(drain(bad), /checksum/)
    await assert.rejects(collect(tarStream((async function* () { yield { name: 'x', size: 10, body: Buffer.from('short') } })())), /body of 5 bytes, 10 declared/)
    // A partial file keeps its whole entries only.
    const scan = (bytes: Buffer) => {
      const dir = mkdtempSync(join(tmpdir(), 'quarry-tar-'))
      try {
        writeFileSync(join(dir, 'p'), bytes)
        return scanTarFile(join(dir, 'p'))
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }
    const partial = scan(whole.subarray(0, 3000))
    assert.deepEqual(partial.entries.map((e) => e.name), ['quarry-kb.json', 'docs/empty'])
    assert.equal(partial.ended, false)
  })

  it('carries a size of 8 GiB and more in a pax header', async () => {
    const size = 8 * 1024 ** 3 + 5
    const header = entryHeader('docs/huge/file', size)
    for await (const e of readTar([header])) {
      assert.equal(e.name, 'docs/huge/file')
      assert.equal(e.size, size)
      break
    }
  })
})

describe('points encoding', () => {
  const points: VectorPoint[] = [
    { dense: Float32Array.from([0.1, -0.2, 0.3]), sparse: { indices: Uint32Array.from([4_000_000_000, 7]), values: Float32Array.from([1.5, 0.25]) }, payload: payload('kb', 'd', 0, { parent_chunk_id: 'd-p0-0' }) },
    { dense: Float32Array.from([1, 0, 0]), sparse: { indices: new Uint32Array(0), values: new Float32Array(0) }, payload: payload('kb', 'd', 1, { text: 'ünïcødé 한국어' }) },
  ]

  it('round-trips dense, sparse and payload exactly, and its bytes do not depend on key order', () => {
    const bin = encodePoints(points)
    const back = decodePoints(bin)
    assert.deepEqual(back.map((p) => [Array.from(p.dense), Array.from(p.sparse.indices), Array.from(p.sparse.values), p.payload]),
      points.map((p) => [Array.from(p.dense), Array.from(p.sparse.indices), Array.from(p.sparse.values), p.payload]))
    const shuffled = points.map((p) => ({ ...p, payload: Object.fromEntries(Object.entries(p.payload).reverse()) as typeof p.payload }))
    assert.ok(encodePoints(shuffled).equals(bin))
    assert.throws(() => decodePoints(bin.subarray(0, bin.length - 3)), /cut short/)
    assert.throws(() => decodePoints(Buffer.from('nope nope nope')), /magic/)
  })

  it('tells what a store changed: a dense component, a weight, a payload field, a missing chunk', () => {
    const copy = () => decodePoints(encodePoints(points))
    assert.equal(samePoints(points, copy().reverse()), null)
    const a = copy()
    a[0].dense[1] += 1e-3
    assert.match(samePoints(points, a)!, /dense component 1/)
    const b = copy()
    b[0].sparse.values[0] = 2
    assert.match(samePoints(points, b)!, /sparse/)
    const c = copy()
    c[1].payload.text = 'changed'
    assert.match(samePoints(points, c)!, /payload/)
    assert.match(samePoints(points, copy().slice(1))!, /1 points read back, 2 written/)
  })
})

function Readable(path: string): AsyncIterable<Buffer> {
  return (async function* () {
    const data = readFileSync(path)
    // Odd slices: the reader must not depend on how bytes arrive.
    for (let at = 0; at < data.length; at += 777) yield data.subarray(at, at + 777)
  })()
}
