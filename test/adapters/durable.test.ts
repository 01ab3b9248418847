import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fsyncDir } from '../../adapters/durable.ts'

describe('durable: folder fsyncs', () => {
  it('shares one follow-up fsync among the callers that arrive while one runs', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'quarry-durable-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const order: string[] = []
    writeFileSync(join(dir, 'a'), 'a')
    const first = fsyncDir(dir)
    // Changes made while the first fsync may already be running: their callers wait for a later one.
    writeFileSync(join(dir, 'b'), 'b')
    const second = fsyncDir(dir)
    const third = fsyncDir(dir)
    assert.notEqual(second, first)
    assert.equal(third, second)
    await Promise.all([first.then(() => order.push('first')), second.then(() => order.push('second'))])
    assert.deepEqual(order, ['first', 'second'])
    // Once both ended, a new call starts a fsync of its own.
    const later = fsyncDir(dir)
    assert.notEqual(later, second)
    await later
  })

  it('fails every waiting caller when the folder is missing, and tries again on the next call', async (t) => {
    const base = mkdtempSync(join(tmpdir(), 'quarry-durable-'))
    t.after(() => rmSync(base, { recursive: true, force: true }))
    const dir = join(base, 'not-yet')
    const calls = [fsyncDir(dir), fsyncDir(dir), fsyncDir(dir)]
    for (const c of calls) await assert.rejects(c, { code: 'ENOENT' })
    mkdirSync(dir)
    await fsyncDir(dir)
  })
})
