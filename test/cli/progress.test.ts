// The CLI's progress display: a bar redrawn in place on a terminal, plain lines otherwise.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { formatSize, progress } from '../../cli/progress.ts'

function sink(isTTY: boolean) {
  const writes: string[] = []
  return { writes, stream: { isTTY, columns: 160, write: (s: string) => writes.push(s) > 0 } as unknown as NodeJS.WriteStream }
}

describe('cli progress', () => {
  it('draws a bar with files/s, bytes/s and time left on a terminal, in place', () => {
    const { writes, stream } = sink(true)
    const saved = process.env.CI
    delete process.env.CI
    try {
      const bar = progress('uploading', 4, { unit: 'files', bytesTotal: 4096, stream, everyMs: 0 })
      bar.tick(1, 1024)
      bar.done()
    } finally {
      if (saved !== undefined) process.env.CI = saved
    }
    assert.match(writes[0], /^\r\x1b\[2Kuploading \[#+-+\] 1\/4 files {2}[\d.]+ files\/s {2}1\.0 KiB\/4\.0 KiB {2}[\d.]+ (B|KiB|MiB)\/s {2}\d+(\.\d+)?(s|m\d\ds|h) left$/)
    assert.equal(writes.at(-1), '\n', 'the finished bar keeps its line')
  })

  it('writes whole lines, without control characters, when not on a terminal', () => {
    const { writes, stream } = sink(false)
    const bar = progress('indexing', 2, { unit: 'documents', stream, everyMs: 0 })
    bar.set(1)
    bar.set(2)
    bar.done()
    assert.equal(writes.length, 3)
    assert.match(writes[0], /^indexing: 50% 1\/2 documents {2}[\d.]+\/s {2}\S+ left\n$/)
    assert.match(writes[2], /^indexing: 100% 2\/2 documents/)
    assert.ok(writes.every((w) => !/[\r\x1b]/.test(w)))
  })

  it('formats sizes in binary units', () => {
    assert.equal(formatSize(0), '0 B')
    assert.equal(formatSize(1023.6), '1.0 KiB')
    assert.equal(formatSize(1536), '1.5 KiB')
    assert.equal(formatSize(5 * 2 ** 30), '5.0 GiB')
  })
})
