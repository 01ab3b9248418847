// A search's reads of the spill files alone, out of the files mapped as memory (adapters/vectors/mapped.ts) against
// the same reads with pread (the baseline), both ways over the same bytes in one process, in turn, random rows:
// - payloads: the ten hits' payloads of one query, read and parsed (PayloadTable, 100k records of 1-1.5 KB);
// - dense rows: the 20 spilled f32 rows (4 KB each, 1,024 dimensions) a similarity search of top 10 rescores
//   (rescoredRows(10) = 20), out of a 100k-row spill file as DenseIndex reads it.
//
//   npx tsx bench/search/spill-read.ts [--rows=100000] [--queries=20000] [--rounds=5]
//
// Prints p50 and mean per query for each and the ratio mapped / pread.
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { ChunkPayload } from '../../adapters/ports.ts'
import { readAllSync, writeAllSync } from '../../adapters/vectors/files.ts'
import { mappingReleases, SpillMapping } from '../../adapters/vectors/mapped.ts'
import { PayloadTable } from '../../adapters/vectors/payloads.ts'
import { machine, round } from '../lib/machine.ts'
import { mulberry32 } from '../lib/rng.ts'

const arg = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback)
const ROWS = arg('rows', 100_000)
const QUERIES = arg('queries', 20_000)
const ROUNDS = arg('rounds', 5)
const HITS = 10
const RESCORED = 20
const ROW_BYTES = 1024 * 4

const words = 'retrieval index vector search chunk document knowledge base query answer 검색 문서 지식'.split(' ')
function payload(row: number, r: () => number): ChunkPayload {
  let text = ''
  while (text.length < 900 + r() * 600) text += words[Math.floor(r() * words.length)] + ' '
  return {
    chunk_id: `c${row}`, kb_id: 'bench', doc_id: `d${Math.floor(row / 14)}`, chunk_index: row % 14, title: `Document ${Math.floor(row / 14)}`,
    source_type: 'file', source: `docs/d${Math.floor(row / 14)}.md`, doc_type: 'md', page_num: 1, page_label: '1', text,
    start: 0, end: text.length, parent_chunk_id: null, updated_at: '2026-11-30T00:00:00Z',
  }
}

function fill(table: PayloadTable): void {
  const r = mulberry32(7)
  for (let from = 0; from < ROWS; from += 4096) {
    const to = Math.min(ROWS, from + 4096)
    for (let row = from; row < to; row++) table.set(row, payload(row, r))
    table.spillRows(to)
  }
}

const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const mean = (xs: number[]) => xs.reduce((sum, x) => sum + x, 0) / xs.length

/** Runs `a` and `b` over the same queries each round, in alternating order; prints both and the p50 ratio. */
function compare(what: string, a: (seed: number) => number[], b: (seed: number) => number[]): void {
  a(1)
  b(1)
  const ratios: number[] = []
  const all = { a: [] as number[], b: [] as number[] }
  for (let r = 0; r < ROUNDS; r++) {
    const seed = 100 + r
    let x: number[]
    let y: number[]
    if (r % 2 === 0) {
      x = a(seed)
      y = b(seed)
    } else {
      y = b(seed)
      x = a(seed)
    }
    all.a.push(...x)
    all.b.push(...y)
    ratios.push(p50(x) / p50(y))
  }
  console.log(`${what}: mapped p50 ${round(p50(all.a), 2)} us (mean ${round(mean(all.a), 2)}), pread p50 ${round(p50(all.b), 2)} us (mean ${round(mean(all.b), 2)}) per query: ` +
    `mapped / pread ${round(p50(all.a) / p50(all.b), 3)}x (rounds ${ratios.map((x) => round(x, 3)).join(' ')})`)
}

/** us per query of `rows` random row numbers below ROWS, `read` called for each. */
function timed(seed: number, rows: number, read: (row: number) => number): number[] {
  const r = mulberry32(seed)
  const out: number[] = []
  let check = 0
  for (let q = 0; q < QUERIES; q++) {
    const picked = Array.from({ length: rows }, () => Math.floor(r() * ROWS))
    const t = performance.now()
    for (const row of picked) check += read(row)
    out.push((performance.now() - t) * 1000)
  }
  if (check === 0) throw new Error('nothing read')
  return out
}

const dir = mkdtempSync(join(tmpdir(), 'quarry-spill-read-'))
const mapped = new PayloadTable(join(dir, 'mapped'))
const pread = new PayloadTable(join(dir, 'pread'), { map: false })
const denseFd = openSync(join(dir, 'dense.f32'), 'w+')
const denseMap = new SpillMapping()
try {
  fill(mapped)
  fill(pread)
  const r = mulberry32(9)
  const seg = new Float32Array(4096 * 1024)
  for (let first = 0; first < ROWS; first += 4096) {
    for (let i = 0; i < seg.length; i++) seg[i] = r() * 2 - 1
    writeAllSync(denseFd, new Uint8Array(seg.buffer, 0, Math.min(4096, ROWS - first) * ROW_BYTES), first * ROW_BYTES)
  }
  console.log(`machine: ${JSON.stringify(machine())}; ${ROWS} rows, ${QUERIES} queries x ${ROUNDS} rounds`)
  compare(`payloads, ${HITS} hits read and parsed`,
    (seed) => timed(seed, HITS, (row) => mapped.hit(row, 1).payload.text.length),
    (seed) => timed(seed, HITS, (row) => pread.hit(row, 1).payload.text.length))
  const into = new Float32Array(1024)
  const bytes = new Uint8Array(into.buffer)
  compare(`dense rows, ${RESCORED} spilled f32 rows read`,
    (seed) => timed(seed, RESCORED, (row) => {
      denseMap.covering(denseFd, (row + 1) * ROW_BYTES)!.copyInto(row * ROW_BYTES, bytes)
      return into[0] === 0 ? 1 : 2
    }),
    (seed) => timed(seed, RESCORED, (row) => {
      readAllSync(denseFd, bytes, row * ROW_BYTES, 'dense spill file')
      return into[0] === 0 ? 1 : 2
    }))
  console.log(`mapped: payloads ${mapped.mappedBytes} bytes, dense rows ${denseMap.length} bytes; pages released ${mappingReleases()} times (every 64 MB read)`)
} finally {
  mapped.close()
  pread.close()
  denseMap.close()
  closeSync(denseFd)
  rmSync(dir, { recursive: true, force: true })
}
