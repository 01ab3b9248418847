// The ingest bench's probe of what creating a file costs in the service's data folder (bench/ingest.bench.ts
// fileCreateProbe): it times real files, keeps them through the measured run and removes only its own.
import assert from 'node:assert/strict'
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileCreateProbe } from '../../bench/ingest.bench.ts'

describe('fileCreateProbe (the ingest bench)', () => {
  it('creates its files in a folder of its own under dir (made if missing), keeps them until remove(), and times them', (t) => {
    const root = mkdtempSync(join(tmpdir(), 'quarry-create-probe-'))
    t.after(() => rmSync(root, { recursive: true, force: true }))
    const dir = join(root, 'objects', 'tmp')
    const probe = fileCreateProbe(dir, 40)
    assert.ok(Number.isFinite(probe.us) && probe.us > 0, `µs per file: ${probe.us}`)
    const [folder, ...rest] = readdirSync(dir)
    assert.equal(rest.length, 0, 'one folder of its own')
    assert.match(folder, /^create-probe-/)
    assert.equal(readdirSync(join(dir, folder)).length, 40, 'every file it timed is there until remove()')
    // A neighbour (the object store's own temporary file) is not touched.
    writeFileSync(join(dir, 'upload.tmp'), 'x')
    const second = fileCreateProbe(dir, 16)
    assert.equal(readdirSync(dir).length, 3, 'a second probe gets a folder of its own')
    probe.remove()
    second.remove()
    assert.deepEqual(readdirSync(dir), ['upload.tmp'])
  })

  it('fails where its folder cannot be made, and leaves nothing behind', (t) => {
    const root = mkdtempSync(join(tmpdir(), 'quarry-create-probe-'))
    t.after(() => rmSync(root, { recursive: true, force: true }))
    writeFileSync(join(root, 'file'), 'x')
    assert.throws(() => fileCreateProbe(join(root, 'file', 'tmp')), /ENOTDIR|EEXIST/)
    assert.deepEqual(readdirSync(root), ['file'])
  })
})
