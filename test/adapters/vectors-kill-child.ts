// Child process of the kill -9 case in vectors.test.ts: upserts deterministic batches into an embedded
// store, a few at a time, and prints "acked <n>" once batch n's upsert resolved. The parent kills it with
// SIGKILL and checks that every printed batch survived.
import { pathToFileURL } from 'node:url'
import type { VectorPoint } from '../../adapters/ports.ts'
import { createEmbeddedVectorStore } from '../../adapters/vectors/embedded.ts'
import { point } from './vectors.contract.ts'

export const KILL_DIMS = 32
const PER_BATCH = 20

/** Batch n, the same in the child and the parent. */
export function killBatch(n: number): VectorPoint[] {
  let s = (n + 1) * 2654435761
  const r = () => {
    s = (Math.imul(s ^ (s >>> 13), 1597334677) + 0x9e3779b9) >>> 0
    return s / 4294967296
  }
  return Array.from({ length: PER_BATCH }, (_, i) =>
    point('kb-kill', `batch${n}`, i, Array.from({ length: KILL_DIMS }, () => r() * 2 - 1), [
      [n % 97, 1],
      [1000 + i, 0.5 + r()],
    ]),
  )
}

async function main(dir: string): Promise<void> {
  // Small snapshot threshold: the kill also lands during snapshots, not only during log appends.
  const store = await createEmbeddedVectorStore({ dir, dimensions: KILL_DIMS, snapshotMinBytes: 64 * 1024, snapshotIdleMs: 0 })
  await store.ensureCollection('kb-kill', KILL_DIMS)
  let next = 0
  const inFlight = new Set<Promise<void>>()
  for (;;) {
    while (inFlight.size < 4) {
      const n = next++
      const p: Promise<void> = store.upsert('kb-kill', killBatch(n)).then(() => {
        process.stdout.write(`acked ${n}\n`)
        inFlight.delete(p)
      })
      inFlight.add(p)
    }
    await Promise.race(inFlight)
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv[2]).catch((err: unknown) => {
    console.error(err)
    process.exit(1)
  })
}
