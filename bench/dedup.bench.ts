// Dedup signature throughput (SimHash-64 over distinct character 3-grams + MinHash-128 over word 3-shingles) against
// a straightforward reference written here: n-gram and shingle strings in a Map and a Set, a 64-bit n-gram
// hash from two string hashes, and one string hash call per shingle per permutation.
//
//   npx tsx bench/dedup.bench.ts            2 M characters in 20 k-character documents, 7 rounds
//   npx tsx bench/dedup.bench.ts --quick    0.5 M characters, 5 rounds
import os from 'node:os'
import { pathToFileURL } from 'node:url'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { dedupSignatures } from '../compute/dedup/index.ts'
import { generateProse } from './chunk.bench.ts'

function fnv1a(s: string, seed: number): number {
  let h = (0x811c9dc5 ^ seed) >>> 0
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193)
  return h >>> 0
}

/**
 * SimHash over the distinct n-grams, as ours; `counts` weights each n-gram by its count instead (the weighting
 * before issue 12, which the dedup quality bench measures as its baseline).
 */
export function referenceSimhash(text: string, n: number, counts = false): string {
  const norm = text.normalize('NFKC').toLowerCase().replace(/\s+/g, ' ').trim()
  const chars = Array.from(norm)
  const grams = new Map<string, number>()
  for (let i = 0; i + n <= chars.length; i++) {
    const g = chars.slice(i, i + n).join('')
    grams.set(g, (grams.get(g) ?? 0) + 1)
  }
  const acc = new Array<number>(64).fill(0)
  for (const [g, count] of grams) {
    const c = counts ? count : 1
    const hi = fnv1a(g, 0)
    const lo = fnv1a(g, 0x9e3779b9)
    for (let b = 0; b < 32; b++) {
      acc[b] += (hi >>> (31 - b)) & 1 ? c : -c
      acc[32 + b] += (lo >>> (31 - b)) & 1 ? c : -c
    }
  }
  let hex = ''
  for (let nib = 0; nib < 16; nib++) {
    let v = 0
    for (let b = 0; b < 4; b++) v = (v << 1) | (acc[nib * 4 + b] > 0 ? 1 : 0)
    hex += v.toString(16)
  }
  return hex
}

export function referenceMinhash(text: string, permutations: number, k: number): Uint32Array {
  const words = text.normalize('NFKC').toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean)
  const shingles = new Set<string>()
  for (let i = 0; i + k <= words.length; i++) shingles.add(words.slice(i, i + k).join(' '))
  const sig = new Uint32Array(permutations).fill(0xffffffff)
  for (const s of shingles) {
    for (let p = 0; p < permutations; p++) {
      const h = fnv1a(s, Math.imul(p + 1, 0x9e3779b9))
      if (h < sig[p]) sig[p] = h
    }
  }
  return sig
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

/** A full collection before each timed pass: the reference's garbage (strings by the million) is not billed to ours. */
function collector(): () => void {
  setFlagsFromString('--expose-gc')
  return runInNewContext('gc') as () => void
}

export async function run(opts: { quick: boolean; chars?: number; rounds?: number }): Promise<Record<string, unknown>> {
  const total = opts.chars ?? (opts.quick ? 500_000 : 2_000_000)
  const docChars = 20_000
  const rounds = opts.rounds ?? (opts.quick ? 5 : 7)
  const corpus = generateProse(total, 7)
  const docs: string[] = []
  for (let i = 0; i < corpus.length; i += docChars) docs.push(corpus.slice(i, i + docChars))
  const mb = Buffer.byteLength(corpus, 'utf8') / 1e6

  const ours = () => { let x = 0; for (const d of docs) x ^= dedupSignatures(d).minhash[0]; return x }
  const reference = () => { let x = 0; for (const d of docs) { referenceSimhash(d, 3); x ^= referenceMinhash(d, 128, 3)[0] } return x }
  // warm-up: whole passes of each, so that the rounds time optimised code, not the JIT compiling it (a pass of
  // ours is tens of milliseconds, about what compiling takes); a round of ours repeats its pass to last about
  // as long as one of the reference (0.3 s at least), so one scheduler hiccup on a busy machine weighs as little
  const t0 = performance.now()
  ours()
  ours()
  const reps = Math.max(1, Math.ceil(300 / Math.max(1, (performance.now() - t0) / 2)))
  reference()
  const tOurs: number[] = []
  const tRef: number[] = []
  // CPU time beside wall time: on a machine shared with other work, wall time also counts the time this
  // process waited for a core, CPU time much less (both are reported; the ratio uses wall time)
  const cOurs: number[] = []
  const cpuMs = (from: NodeJS.CpuUsage) => {
    const u = process.cpuUsage(from)
    return (u.user + u.system) / 1000
  }
  const gc = collector()
  for (let r = 0; r < rounds; r++) {
    gc()
    let t = performance.now()
    const c = process.cpuUsage()
    for (let k = 0; k < reps; k++) ours()
    tOurs.push((performance.now() - t) / reps)
    cOurs.push(cpuMs(c) / reps)
    gc()
    t = performance.now()
    reference()
    tRef.push(performance.now() - t)
  }
  const oursMBs = mb / (median(tOurs) / 1000)
  const refMBs = mb / (median(tRef) / 1000)
  const result = {
    machine: { cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.cpus().length, node: process.version },
    corpus: { chars: corpus.length, mb: Number(mb.toFixed(2)), docs: docs.length, docChars },
    rounds,
    quarry: { cpuMbPerSec: Number((mb / (median(cOurs) / 1000)).toFixed(2)), mbPerSec: Number(oursMBs.toFixed(2)), medianMs: Number(median(tOurs).toFixed(1)), minMBs: Number((mb / (Math.max(...tOurs) / 1000)).toFixed(2)), maxMBs: Number((mb / (Math.min(...tOurs) / 1000)).toFixed(2)) },
    reference: { mbPerSec: Number(refMBs.toFixed(2)), medianMs: Number(median(tRef).toFixed(1)), minMBs: Number((mb / (Math.max(...tRef) / 1000)).toFixed(2)), maxMBs: Number((mb / (Math.min(...tRef) / 1000)).toFixed(2)) },
    ratio: Number((oursMBs / refMBs).toFixed(1)),
    /** issue 17 */
    target_mb_per_sec: 50,
  }
  console.log(`machine: ${result.machine.cpu}, ${result.machine.cores} cores, Node ${result.machine.node}`)
  console.log(`corpus: ${docs.length} documents of ${docChars} chars, ${mb.toFixed(2)} MB UTF-8 (English + Korean), ${rounds} rounds (median)`)
  console.log(`quarry SimHash-64 + MinHash-128:    ${oursMBs.toFixed(2)} MB/s (rounds ${result.quarry.minMBs}-${result.quarry.maxMBs}; target >= 50; per CPU second ${result.quarry.cpuMbPerSec})`)
  console.log(`reference (strings, hash per perm): ${refMBs.toFixed(2)} MB/s (rounds ${result.reference.minMBs}-${result.reference.maxMBs})`)
  console.log(`ratio: ${result.ratio}x`)
  return result
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await run({ quick: process.argv.includes('--quick') })
}
