// The ingest bench's peak RSS (bench/ingest.bench.ts RssPeak) is the kernel's high-water mark over its window, reset
// when the window starts (bench/lib/machine.ts): a rise that is gone before anyone samples still counts.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { describe, it } from 'node:test'

const onLinux = process.platform === 'linux'

describe('resetHighWater and highWaterBytes (bench/lib/machine.ts)', () => {
  it('hold a rise of RSS that is gone again, and forget it once reset (but not since the start)', { skip: !onLinux && 'Linux only' }, (t) => {
    // In a process of its own: 128 MB touched and given back (a buffer that large is a mapping of its own), with no
    // sample of RSS taken while it lived.
    const machine = new URL('../../bench/lib/machine.ts', import.meta.url).href
    const script = `
      import { highWaterBytes, highWaterSinceStart, resetHighWater } from ${JSON.stringify(machine)}
      const reset = resetHighWater()
      const base = process.memoryUsage.rss()
      let big = Buffer.alloc(128 * 2 ** 20, 1)
      big = null
      globalThis.gc()
      // V8 may free the buffer's memory on a thread of its own: up to 2 s for it to go.
      for (let i = 0; i < 40 && process.memoryUsage.rss() >= base + 64 * 2 ** 20; i++) await new Promise((r) => setTimeout(r, 50))
      const after = process.memoryUsage.rss()
      const held = highWaterBytes()
      const resetAgain = resetHighWater()
      const forgotten = highWaterBytes()
      const sinceStart = highWaterSinceStart()
      process.stdout.write(JSON.stringify({ reset, resetAgain, base, after, held, forgotten, sinceStart }))
    `
    const r = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' })
    assert.equal(r.status, 0, r.stderr)
    const { reset, resetAgain, base, after, held, forgotten, sinceStart } = JSON.parse(r.stdout) as Record<string, number | boolean>
    const mb = (x: unknown) => `${((x as number) / 2 ** 20).toFixed(1)} MB`
    // A kernel without clear_refs' type 5 (before Linux 4.0, or a sandbox such as gVisor): nothing to test.
    if (reset === false) return t.skip('/proc/self/clear_refs cannot reset the high-water mark here')
    assert.equal(resetAgain, true)
    assert.ok((after as number) < (base as number) + 64 * 2 ** 20, `the buffer was given back: ${mb(base)} -> ${mb(after)}`)
    assert.ok((held as number) >= (base as number) + 120 * 2 ** 20, `high-water ${mb(held)} over ${mb(base)} at the reset`)
    assert.ok((forgotten as number) < (base as number) + 64 * 2 ** 20, `after a reset ${mb(forgotten)}, the buffer's rise forgotten`)
    assert.ok((sinceStart as number) >= (held as number), `since the start ${mb(sinceStart)}, the rise ${mb(held)} kept through the reset`)
  })
})
