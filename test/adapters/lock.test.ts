// The folder lock held by the operating system (adapters/lock.ts): a second taker is refused with what the holder
// wrote, in this process or another; the kernel releases the lock of a process killed with SIGKILL at once, even
// while that process is a zombie nobody reaped (a pid check, as the PID-file locks made, still sees it alive).
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it, type TestContext } from 'node:test'
import { FolderLockedError, lockFolder, osLockAvailable } from '../../adapters/lock.ts'
import { waitFor } from '../helpers/wait.ts'

const CHILD = new URL('./lock-child.ts', import.meta.url).pathname
const refusal = (dir: string) => `${dir} is locked`

function tempDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'quarry-lock-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** Starts `command` (a shell line) and resolves with the pid the lock child prints once it holds the lock. */
async function holder(t: TestContext, command: string): Promise<{ sh: ChildProcess; pid: number }> {
  const sh = spawn('sh', ['-c', command], { stdio: ['ignore', 'pipe', 'inherit'] })
  t.after(() => sh.kill('SIGKILL'))
  let out = ''
  sh.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d))
  const pid = await waitFor(async () => Number(/^locked (\d+)$/m.exec(out)?.[1]) || null, 'the child to take the lock', 30_000)
  return { sh, pid }
}

const processState = (pid: number): string | null => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)
  } catch {
    return null
  }
}

describe('folder lock (flock)', { skip: osLockAvailable() ? false : 'no flock through koffi on this platform' }, () => {
  it('refuses a second lock of the folder in the same process, naming the holder, until the first is released', async (t) => {
    const dir = tempDir(t)
    const first = await lockFolder(dir, { file: '.lock', refusal })
    assert.equal(first.held, true)
    await assert.rejects(lockFolder(dir, { file: '.lock', refusal, waitMs: 100 }), (err: unknown) => {
      assert.ok(err instanceof FolderLockedError)
      assert.equal(err.message, `${dir} is locked`)
      assert.equal(err.holder?.pid, process.pid)
      return true
    })
    // Another file of the same folder is another lock.
    const other = await lockFolder(dir, { file: 'other.lock', refusal, waitMs: 0 })
    other.release()
    first.release()
    first.release()
    const again = await lockFolder(dir, { file: '.lock', refusal, waitMs: 0 })
    again.release()
  })

  it('is released by the kernel when its process is killed with SIGKILL, before anyone reaps it', async (t) => {
    const dir = tempDir(t)
    // The lock child runs in the background of a shell that then becomes `sleep`, which never reaps it: killed, it
    // stays a zombie for as long as the sleep runs.
    const { pid } = await holder(t, `${process.execPath} --import tsx ${CHILD} ${dir} .lock & exec sleep 120`)
    await assert.rejects(lockFolder(dir, { file: '.lock', refusal, waitMs: 100 }), (err: unknown) => {
      assert.ok(err instanceof FolderLockedError)
      assert.equal(err.holder?.pid, pid, 'the holder wrote its pid')
      return true
    })
    process.kill(pid, 'SIGKILL')
    await waitFor(async () => processState(pid) === 'Z', `process ${pid} to become a zombie`)
    // A PID-file lock asks whether the pid is alive: a zombie answers yes.
    assert.doesNotThrow(() => process.kill(pid, 0))
    // The leader shows as a zombie while its other threads (V8's, libuv's) are still exiting, and the descriptors go
    // with the last of them: the default wait covers that moment.
    const lock = await lockFolder(dir, { file: '.lock', refusal })
    assert.equal(lock.held, true)
    assert.equal(JSON.parse(readFileSync(lock.path, 'utf8')).pid, process.pid, 'the new holder replaced the note')
    lock.release()
  })

  it('waits for a holder that is going away instead of refusing at once', async (t) => {
    const dir = tempDir(t)
    const { sh } = await holder(t, `exec ${process.execPath} --import tsx ${CHILD} ${dir} .lock`)
    // Killed while the taker waits: the taker gets the lock within its wait.
    const taking = lockFolder(dir, { file: '.lock', refusal, waitMs: 20_000 })
    setTimeout(() => sh.kill('SIGKILL'), 200)
    const lock = await taking
    assert.equal(lock.held, true)
    lock.release()
  })
})
