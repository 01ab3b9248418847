// A search's payload reads alone: the ten hits' payloads of one query read out of the payload spill file mapped as
// memory (adapters/vectors/mapped.ts) against the same reads with pread (the baseline), both tables over the same
// records in one process, in turn, queries of random rows (cold pages as a search at 100k chunks meets them).
//
//   npx tsx bench/search/payload-read.ts [--rows=100000] [--queries=20000] [--rounds=5]
//
// Prints p50 and mean per query (ten payloads read and parsed) and the ratio mapped / pread.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { ChunkPayload } from '../../adapters/ports.ts'
import { PayloadTable } from '../../adapters/vectors/payloads.ts'
import { machine, round } from '../lib/machine.ts'
import { mulberry32 } from '../lib/rng.ts'

const arg = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback)
const ROWS = arg('rows', 100_000)
const QUERIES = arg('queries', 20_000)
const ROUNDS = arg('rounds', 5)
const HITS = 10

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

const dir = mkdtempSync(join(tmpdir(), 'quarry-payload-read-'))
const mapped = new PayloadTable(join(dir, 'mapped'))
const pread = new PayloadTable(join(dir, 'pread'), { map: false })
try {
  fill(mapped)
  fill(pread)
  /** µs per query (ten hits' payloads read and parsed), one value per query. */
  const run = (table: PayloadTable, seed: number): number[] => {
    const r = mulberry32(seed)
    const out: number[] = []
    let check = 0
    for (let q = 0; q < QUERIES; q++) {
      const rows = Array.from({ length: HITS }, () => Math.floor(r() * ROWS))
      const t = performance.now()
      for (const row of rows) check += table.hit(row, 1).payload.text.length
      out.push((performance.now() - t) * 1000)
    }
    if (check === 0) throw new Error('no payload read')
    return out
  }
  // Warm-up: JIT, and the mapping made.
  run(mapped, 1)
  run(pread, 1)
  const ratios: number[] = []
  const all = { mapped: [] as number[], pread: [] as number[] }
  for (let round_ = 0; round_ < ROUNDS; round_++) {
    // The same queries for both tables in a round, new ones each round; the order alternates.
    const seed = 100 + round_
    const [a, b] = round_ % 2 === 0 ? [run(mapped, seed), run(pread, seed)] : (([x, y]) => [y, x])([run(pread, seed), run(mapped, seed)])
    all.mapped.push(...a)
    all.pread.push(...b)
    ratios.push(p50(a) / p50(b))
  }
  const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length
  console.log(`machine: ${JSON.stringify(machine())}; ${ROWS} records, ${QUERIES} queries of ${HITS} hits x ${ROUNDS} rounds, mapping ${mapped.mappedBytes} bytes`)
  console.log(`mapped: p50 ${round(p50(all.mapped), 2)} us, mean ${round(mean(all.mapped), 2)} us per query`)
  console.log(`pread:  p50 ${round(p50(all.pread), 2)} us, mean ${round(mean(all.pread), 2)} us per query`)
  console.log(`mapped / pread p50: ${round(p50(all.mapped) / p50(all.pread), 3)}x (rounds ${ratios.map((x) => round(x, 3)).join(' ')})`)
} finally {
  mapped.close()
  pread.close()
  rmSync(dir, { recursive: true, force: true })
}
