// The kernel bench's readings: wrk's output, and the CPU time a server process used (bench/lib/machine.ts).
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { describe, it } from 'node:test'
import { parseWrk } from '../../bench/kernel.bench.ts'
import { cpuMsOfStat, processCpuMs } from '../../bench/lib/machine.ts'

const WRK_OUT = `Running 3s test @ http://127.0.0.1:18434/ping
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   689.42us  123.45us   5.12ms   91.23%
    Req/Sec    92.80k     3.10k   97.00k    80.00%
  Latency Distribution
     50%  671.00us
     75%  702.00us
     90%  760.00us
     99%    1.21ms
  278412 requests in 3.00s, 42.48MB read
Requests/sec:  92802.33
Transfer/sec:     14.16MB
`

describe('kernel bench readings', () => {
  it("reads wrk's requests answered, req/s and p99", () => {
    assert.deepEqual(parseWrk(WRK_OUT), { rps: 92802.33, p99ms: 1.21, requests: 278412 })
    assert.equal(parseWrk(WRK_OUT.replace('1.21ms', '850.00us')).p99ms, 0.85)
  })

  it('refuses an output without the count of requests', () => {
    assert.throws(() => parseWrk(WRK_OUT.replace(/\d+ requests in/, 'requests in')), /cannot read wrk output/)
  })

  it("reads another process's CPU time, all its threads, as that process counts it", { skip: process.platform !== 'linux' && 'reads /proc' }, async () => {
    // The child's worker thread does a fixed amount of work and exits; the child then reports its own CPU time
    // (all threads, exited ones too) and waits.
    const child = spawn(process.execPath, ['-e', `
      const { Worker } = require('node:worker_threads')
      const work = 'let x = 0; for (let i = 0; i < 4e8; i++) x = (x + i) | 0; require("node:worker_threads").parentPort.postMessage(x)'
      const w = new Worker(work, { eval: true })
      w.on('message', () => {})
      w.once('exit', () => {
        const u = process.cpuUsage()
        process.stdout.write(String((u.user + u.system) / 1000) + '\\n')
      })
      process.stdin.resume()
    `], { stdio: ['pipe', 'pipe', 'inherit'] })
    try {
      const [line] = await once(child.stdout!, 'data') as [Buffer]
      const own = Number(line.toString())
      const read = processCpuMs(child.pid!)
      assert.ok(read !== null)
      // The two clocks agree to a few ticks of 10 ms...
      assert.ok(Math.abs(read - own) <= 40, `read ${read} ms, the child's own count ${own} ms`)
      // ...and the exited worker's time is in both: the main thread alone used much less.
      const mainMs = cpuMsOfStat(readFileSync(`/proc/${child.pid}/task/${child.pid}/stat`, 'utf8'))
      assert.ok(read - mainMs > 50, `read ${read} ms, the main thread ${mainMs} ms`)
    } finally {
      child.kill()
      await once(child, 'exit')
    }
    assert.equal(processCpuMs(child.pid!), null)
  })
})
