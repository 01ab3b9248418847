// Memory of one engine's index, measured in a process of its own (so neither engine's garbage or freed
// pages show in the other's figure): prepare the chunks, collect garbage, read memory, build, collect
// again, read again, with the prepared input alive throughout. The difference is what the engine added;
// what it shares with the input by reference (Orama keeps the chunk text strings it was given; our store
// copies text and vectors) is not in it. Prints one JSON line.
//
//   node --expose-gc --import tsx bench/orama/memory-probe.ts <dataset> <engine> [limitDocs] [limitQueries]
import { pathToFileURL } from 'node:url'
import { prepare } from './data.ts'
import { createOramaEngine, createQuarryEngine, type Engine } from './engines.ts'

export type ProbeEngine = 'quarry' | 'orama' | 'orama-tuned'

export interface MemoryFigures {
  engine: ProbeEngine
  chunks: number
  /** Differences after minus before the build, in MiB, after a full garbage collection each time. */
  heap_used_mib: number
  /** ArrayBuffers and other memory V8 knows outside its heap (typed arrays). */
  external_mib: number
  /** Resident set: includes native allocations (usearch's graph) that V8 does not see. */
  rss_mib: number
  build_seconds: number
}

export function engineFor(name: ProbeEngine): Engine {
  if (name === 'quarry') return createQuarryEngine()
  return createOramaEngine({ tuned: name === 'orama-tuned' })
}

async function settle(): Promise<NodeJS.MemoryUsage> {
  const gc = (globalThis as { gc?: () => void }).gc
  if (!gc) throw new Error('run with --expose-gc')
  for (let i = 0; i < 3; i++) {
    gc()
    await new Promise((r) => setTimeout(r, 20))
  }
  return process.memoryUsage()
}

const MIB = 2 ** 20

export async function probe(dataset: string, name: ProbeEngine, limitDocs?: number, limitQueries?: number): Promise<MemoryFigures> {
  const data = await prepare(dataset, { limitDocs, limitQueries })
  const chunks = data.chunks.length
  const engine = engineFor(name)
  const before = await settle()
  const t = performance.now()
  await engine.build(data.chunks)
  const build = (performance.now() - t) / 1000
  const after = await settle()
  // Keeps the input reachable until after the reading (see above).
  if (data.chunks.length !== chunks) throw new Error('unreachable')
  const out: MemoryFigures = {
    engine: name,
    chunks,
    heap_used_mib: +((after.heapUsed - before.heapUsed) / MIB).toFixed(1),
    external_mib: +((after.external - before.external) / MIB).toFixed(1),
    rss_mib: +((after.rss - before.rss) / MIB).toFixed(1),
    build_seconds: +build.toFixed(2),
  }
  await engine.close()
  return out
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [dataset, name, docs, queries] = process.argv.slice(2)
  const r = await probe(dataset, name as ProbeEngine, docs ? Number(docs) : undefined, queries ? Number(queries) : undefined)
  process.stdout.write(`${JSON.stringify(r)}\n`)
}
