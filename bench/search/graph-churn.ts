// Recall of the dense graph after deletes and re-adds (adapters/vectors/dense-index.ts, GRAPH_REBUILD_SHARE). Each
// round adds --per vectors and removes --drop of the live ones at random; after every round --queries random queries'
// top 5 are compared with an exact scan of the live vectors. Side by side in one run, on the same vectors:
//   - usearch alone, churned: removes and adds as they come (usearch hands a removed node's slot to the next add);
//   - usearch alone, fresh: a graph built from the surviving vectors only, after the last round;
//   - DenseIndex as the store runs it (rebuilt once churn reaches GRAPH_REBUILD_SHARE), and with rebuilds off.
// No timing is gated: the time each DenseIndex spent building graphs is printed for context.
//
//   npx tsx bench/search/graph-churn.ts [--dims=8] [--per=400] [--drop=0.6] [--rounds=6] [--ef=256] [--queries=2000]
//       [--trials=10] [--quantization=f32]
import { createRequire } from 'node:module'
import { DenseIndex, type Quantization } from '../../adapters/vectors/dense-index.ts'
import { cosineDistance } from '../../compute/chunk/semantic.ts'
import { mulberry32 as rng } from '../lib/rng.ts'
import { machine } from '../lib/machine.ts'

const arg = (name: string, dflt: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? dflt)
const dims = arg('dims', 8)
const per = arg('per', 400)
const drop = arg('drop', 0.6)
const rounds = arg('rounds', 6)
const ef = arg('ef', 256)
const queries = arg('queries', 2000)
const trials = arg('trials', 10)
const quantization = (process.argv.find((a) => a.startsWith('--quantization='))?.split('=')[1] ?? 'f32') as Quantization

const require = createRequire(import.meta.url)
const usearch = require('usearch') as typeof import('usearch')

const dense = (rebuildShare?: number) => new DenseIndex(usearch.default ?? usearch, {
  dimensions: dims, quantization, connectivity: 16, expansionAdd: 64, expansionSearch: ef, exactBudget: 0,
  filterScanBudget: 0, filterGraphCost: 3, indexThreads: 1, indexSliceMs: 8, rebuildShare,
})
const plain = () => new usearch.Index({ dimensions: dims, metric: 'cos' as never, quantization: quantization as never, connectivity: 16, expansion_add: 64, expansion_search: ef, multi: false })

type Case = { missed: number; asked: number; buildMs: number; rebuilds: number }
const cases: Record<string, Case> = {}
const count = (name: string, missed: number, asked: number) => {
  const c = (cases[name] ??= { missed: 0, asked: 0, buildMs: 0, rebuilds: 0 })
  c.missed += missed
  c.asked += asked
}

for (let trial = 0; trial < trials; trial++) {
  const r = rng(1 + trial)
  const live = new Map<number, Float32Array>()
  const free: number[] = []
  let nextRow = 0
  const churned = plain()
  const rebuilt = dense()
  const kept = dense(Infinity)
  const built = { rebuilt: 0, kept: 0 }
  const drain = (name: 'rebuilt' | 'kept', index: DenseIndex) => {
    const t0 = performance.now()
    while (index.pendingCount > 0 || index.graphRebuilding) index.indexSlice()
    built[name] += performance.now() - t0
  }
  const missedOf = (v: Float32Array, found: Iterable<number>) => {
    const truth = [...live].map(([row, x]) => ({ row, d: cosineDistance(v, x) })).sort((a, b) => a.d - b.d).slice(0, 5)
    const got = new Set(found)
    return truth.filter((t) => !got.has(t.row)).length
  }
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < per; i++) {
      const v = Float32Array.from({ length: dims }, () => r() * 2 - 1)
      const row = free.length > 0 ? free.pop()! : nextRow++
      live.set(row, v)
      churned.add(BigInt(row), v)
      rebuilt.set(row, v)
      kept.set(row, v)
    }
    drain('rebuilt', rebuilt)
    drain('kept', kept)
    for (const row of [...live.keys()]) {
      if (r() >= drop) continue
      live.delete(row)
      free.push(row)
      churned.remove(BigInt(row))
      rebuilt.remove(row)
      kept.remove(row)
    }
    drain('rebuilt', rebuilt)
    drain('kept', kept)
    const q = rng(10_000 * (trial + 1) + round)
    for (let i = 0; i < queries / rounds; i++) {
      const v = Float32Array.from({ length: dims }, () => q() * 2 - 1)
      const m = churned.search(v, Math.min(ef, live.size), 0)
      count('usearch churned', missedOf(v, [...m.keys].map(Number).slice(0, 5)), 5)
      count('DenseIndex, rebuilt at the share', missedOf(v, rebuilt.search(v, 5).rows), 5)
      count('DenseIndex, never rebuilt', missedOf(v, kept.search(v, 5).rows), 5)
    }
  }
  const fresh = plain()
  for (const [row, v] of live) fresh.add(BigInt(row), v)
  const q = rng(99_999 + trial)
  for (let i = 0; i < queries / rounds; i++) {
    const v = Float32Array.from({ length: dims }, () => q() * 2 - 1)
    const m = fresh.search(v, Math.min(ef, live.size), 0)
    count('usearch fresh (last round only)', missedOf(v, [...m.keys].map(Number).slice(0, 5)), 5)
    const m2 = churned.search(v, Math.min(ef, live.size), 0)
    count('usearch churned (last round only)', missedOf(v, [...m2.keys].map(Number).slice(0, 5)), 5)
  }
  cases['DenseIndex, rebuilt at the share'].buildMs += built.rebuilt
  cases['DenseIndex, rebuilt at the share'].rebuilds += rebuilt.graphRebuilds
  cases['DenseIndex, never rebuilt'].buildMs += built.kept
  rebuilt.stop()
  kept.stop()
}

const m = machine()
console.log(`graph churn: ${dims} dims, ${per} a round, ${drop * 100} % dropped a round, ${rounds} rounds, ef ${ef}, ${quantization}, ${trials} trials; ${m.cpu}, ${m.cores} cores`)
for (const [name, c] of Object.entries(cases)) {
  const extra = c.buildMs > 0 ? `, graph building ${(c.buildMs / 1000).toFixed(2)} s${c.rebuilds > 0 ? `, ${c.rebuilds} rebuilds` : ''}` : ''
  console.log(`  ${name.padEnd(36)} recall@5 ${(1 - c.missed / c.asked).toFixed(5)} (${c.missed} of ${c.asked} missed)${extra}`)
}
