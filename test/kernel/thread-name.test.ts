// The service's worker threads carry names the OS shows (kernel/thread-name.mjs): the compute pool's workers and
// the PGlite thread, each started for real here. The ingest bench splits CPU per document by those names.
import assert from 'node:assert/strict'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { createPgliteSql } from '../../adapters/metadata/pglite.ts'
import { threadShares } from '../../bench/ingest.bench.ts'
import { createComputePool, type ComputePool } from '../../compute/pool.ts'

const linux = process.platform === 'linux'

/** This process's threads by name: how many carry each. */
function threadNames(): Map<string, number> {
  const out = new Map<string, number>()
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const name = readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim()
      out.set(name, (out.get(name) ?? 0) + 1)
    } catch {
      // The thread ended meanwhile.
    }
  }
  return out
}

describe('thread names', { skip: linux ? false : 'thread names are read from /proc (Linux)' }, () => {
  let pool: ComputePool
  let dir: string
  let sql: Awaited<ReturnType<typeof createPgliteSql>>
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'quarry-thread-name-'))
    pool = createComputePool({ maxThreads: 2, minThreads: 2, taskTimeoutMs: 30_000 })
    sql = await createPgliteSql({ dir })
  })
  after(async () => {
    await pool.close()
    await sql.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('names each compute worker quarry-compute and the PGlite thread quarry-metadata; the main thread keeps its name', async () => {
    // Two tasks at once: both workers are up and have run their start-up.
    await Promise.all([pool.run('selftest', { mode: 'sleep', ms: 50 }), pool.run('selftest', { mode: 'sleep', ms: 50 })])
    assert.deepEqual((await sql.query<{ one: number }>('SELECT 1 AS one')).map((r) => r.one), [1])
    const names = threadNames()
    assert.equal(names.get('quarry-compute'), 2, JSON.stringify([...names]))
    assert.equal(names.get('quarry-metadata'), 1, JSON.stringify([...names]))
    assert.equal(readFileSync('/proc/thread-self/comm', 'utf8').trim(), 'node')
  })
})

describe('threadShares (the ingest bench)', () => {
  it('splits CPU per document by role: main, each compute worker, metadata, the rest busiest first', () => {
    const t = (ms: number, name: string) => ({ ms, name })
    const before = new Map([[10, t(100, 'node')], [11, t(50, 'quarry-compute')], [12, t(0, 'quarry-compute')], [13, t(20, 'quarry-metadata')], [14, t(5, 'node')], [15, t(7, 'node')]])
    // Thread 16 started during the run (no reading before); thread 15 did nothing.
    const after = new Map([[10, t(700, 'node')], [11, t(450, 'quarry-compute')], [12, t(200, 'quarry-compute')], [13, t(220, 'quarry-metadata')], [14, t(105, 'node')], [15, t(7, 'node')], [16, t(300, 'node')]])
    const s = threadShares(before, after, 100, 10)
    assert.equal(s.main, 6)
    assert.deepEqual(s.compute, [4, 2])
    assert.equal(s.metadata, 2)
    assert.deepEqual(s.other, [3, 1])
    assert.deepEqual(s.others, [4, 3, 2, 2, 1])
    // No schedstat in the readings: no wait figures.
    assert.equal(s.waiting, null)
  })

  it('splits the time runnable but waiting for a core the same way, per document', () => {
    const t = (ms: number, name: string, waitMs: number) => ({ ms, name, waitMs })
    const before = new Map([[10, t(100, 'node', 40)], [11, t(50, 'quarry-compute', 10)], [12, t(0, 'quarry-compute', 0)], [13, t(20, 'quarry-metadata', 5)], [14, t(5, 'node', 1)]])
    // Thread 15 started during the run: all its wait is the run's.
    const after = new Map([[10, t(700, 'node', 240)], [11, t(450, 'quarry-compute', 310)], [12, t(200, 'quarry-compute', 100)], [13, t(220, 'quarry-metadata', 55)], [14, t(105, 'node', 51)], [15, t(300, 'node', 150)]])
    const s = threadShares(before, after, 100, 10)
    assert.deepEqual(s.waiting, { main: 2, compute: 4, metadata: 0.5, other: 2 })
    assert.equal(s.main, 6)
  })
})
