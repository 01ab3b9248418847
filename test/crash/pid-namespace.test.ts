// Two services on one data folder from two PID namespaces (issue 42): each is pid 1 in its own namespace, so a lock
// that compares pids sees the other's pid as its own or as dead, and both served. The data folder's lock is held by
// the operating system (adapters/lock.ts), which namespaces do not divide: the second refuses to start, saying what
// holds the folder, and starts once the first is killed. `unshare --pid` needs root (CI runs as root).
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it, type TestContext } from 'node:test'
import { stringify } from 'yaml'
import { seedPglite } from '../helpers/app.ts'
import { freePort } from '../helpers/ports.ts'
import { waitFor } from '../helpers/wait.ts'

const isRoot = process.getuid?.() === 0

interface Started {
  child: ChildProcess
  output(): string
  exited: Promise<{ code: number | null; signal: string | null }>
}

/** `npm start`'s command in a new PID namespace (pid 1 there); killing unshare kills the service (--kill-child). */
function startInNamespace(t: TestContext, dataDir: string, port: number): Started {
  const config = join(dataDir, '..', `settings-${port}.yaml`)
  writeFileSync(config, stringify({ data_dir: dataDir, server: { port, host: '127.0.0.1' }, logging: { level: 'INFO' }, embedding: { vector_size: 64 } }))
  const child = spawn('unshare', ['--pid', '--fork', '--kill-child', process.execPath, 'kernel/run.mjs', 'kernel/main.ts', '--config', config], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  t.after(() => child.kill('SIGKILL'))
  let out = ''
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d))
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d))
  const exited = new Promise<{ code: number | null; signal: string | null }>((r) => child.once('exit', (code, signal) => r({ code, signal })))
  return { child, output: () => out, exited }
}

const healthy = (port: number) => waitFor(async () => (await fetch(`http://127.0.0.1:${port}/health`)).ok, `the service on port ${port} to start`, 120_000, 100)

describe('one data folder, two PID namespaces', { skip: isRoot ? false : 'unshare --pid --fork needs root (CI runs as root)' }, () => {
  it('the second service refuses to start while the first holds the folder, and starts once the first is killed', { timeout: 300_000 }, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'quarry-pidns-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const dataDir = join(dir, 'data')
    await seedPglite(dataDir)
    const [portA, portB] = [await freePort(), await freePort()]

    const a = startInNamespace(t, dataDir, portA)
    await healthy(portA)
    // What the holder wrote into the lock file: its pid as it sees it.
    assert.equal(JSON.parse(readFileSync(join(dataDir, '.lock'), 'utf8')).pid, 1, 'the first service is pid 1 of its namespace')

    const b = startInNamespace(t, dataDir, portB)
    let bGone = false
    void b.exited.then(() => (bGone = true))
    const outcome = await waitFor(async () => (bGone ? 'exited' : (await fetch(`http://127.0.0.1:${portB}/health`).then((r) => r.ok, () => false)) ? 'served' : null), 'the second service to exit or serve', 120_000, 100)
    assert.equal(outcome, 'exited', 'the second service started and served on the same data folder')
    const refused = await b.exited
    assert.equal(refused.code, 1, b.output())
    assert.match(b.output(), /Data folder \S+ is in use by another Quarry process \(pid 1 on host [^,]+, since [^;]+; a process in another PID namespace or container shows another pid\)/)
    // The refused one is pid 1 of its own namespace too: to a lock comparing pids, the holder's pid was its own.
    // The first one still owns its stores and serves.
    const kb = await fetch(`http://127.0.0.1:${portA}/api/kb`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ kb_id: 'ns-kb' }) })
    assert.equal(kb.status, 201)

    a.child.kill('SIGKILL')
    await a.exited
    const c = startInNamespace(t, dataDir, portB)
    await healthy(portB)
    assert.equal((await fetch(`http://127.0.0.1:${portB}/api/kb/ns-kb`)).status, 200, 'the KB the first service made is there')
  })
})
