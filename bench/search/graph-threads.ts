// Whether the embedded store's HNSW graph may be built with more than one thread (EmbeddedVectorStoreOptions
// .indexThreads): the same clustered points inserted with each thread count, in the store's slices, then every
// point searched for with its own vector in the graph alone (rank-only, k = 11). A point that is not among its own
// 11 nearest is unreachable. Prints, per thread count and run, the unreachable points, the graph's insertion rate
// and its CPU per point. Run it again when usearch changes: one thread is the default because two lost points.
//
//   npx tsx bench/search/graph-threads.ts [--points=20000] [--dims=256] [--threads=1,2] [--runs=2]
import { createRequire } from 'node:module'
import { DenseIndex, type Usearch } from '../../adapters/vectors/dense-index.ts'
import { GRAPH_DEFAULTS } from '../../adapters/vectors/embedded.ts'
import { mulberry32 } from '../lib/rng.ts'
import { machine } from '../lib/machine.ts'

const argv = process.argv.slice(2)
const arg = (name: string, dflt: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? dflt
const points = Number(arg('points', '20000'))
const dims = Number(arg('dims', '256'))
const runs = Number(arg('runs', '2'))
const threadCounts = arg('threads', '1,2').split(',').map(Number)
const K = 11

// 200 centres and points scattered around them: closer to text embeddings than uniform noise, and as hard for the
// graph's links.
const rnd = mulberry32(7)
const centres = Array.from({ length: 200 }, () => Float32Array.from({ length: dims }, () => rnd() - 0.5))
const rows = Array.from({ length: points }, () => {
  const c = centres[Math.floor(rnd() * centres.length)]
  return Float32Array.from({ length: dims }, (_, i) => c[i] + (rnd() - 0.5) * 0.6)
})
const usearch = createRequire(import.meta.url)('usearch') as Usearch

const m = machine()
console.log(`machine: ${m.cpu} x${m.cores}; ${points} points of ${dims} dimensions, i8 graph, connectivity ${GRAPH_DEFAULTS.connectivity}, expansion ${GRAPH_DEFAULTS.expansionAdd}`)
for (let run = 0; run < runs; run++) {
  for (const threads of threadCounts) {
    const index = new DenseIndex(usearch, {
      ...GRAPH_DEFAULTS, dimensions: dims, quantization: 'i8',
      exactBudget: 0, filterScanBudget: 0, filterGraphCost: 3, indexThreads: threads,
    })
    rows.forEach((v, r) => index.set(r, v))
    // Slices run here, one after another, not on the index's timer.
    index.stop()
    const cpu0 = process.cpuUsage()
    const started = performance.now()
    while (index.pendingCount > 0 && index.failure === undefined) index.indexSlice()
    const ms = performance.now() - started
    const cpu = process.cpuUsage(cpu0)
    if (index.failure !== undefined) throw new Error(`graph insertion failed with ${threads} threads: ${String(index.failure)}`)
    let unreachable = 0
    for (let r = 0; r < points; r++) if (!index.search(rows[r], K, 1, undefined, true).rows.includes(r)) unreachable++
    console.log(`run ${run + 1}, ${threads} thread(s): ${unreachable} of ${points} unreachable; ${(points / ms * 1000).toFixed(0)} points/s, CPU ${((cpu.user + cpu.system) / 1000 / points).toFixed(3)} ms per point`)
    index.close()
  }
}
