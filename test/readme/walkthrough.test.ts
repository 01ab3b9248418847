// The README's walkthrough, run as written against the service `npm start` starts (issue 38): the shell blocks marked
// `<!-- readme-test: scratch -->` run in an empty folder, those marked `repo` in the repository's folder (the
// `npx quarry` lines need it), each under `set -euo pipefail`, with localhost:8000 turned into the test's port
// (and QUARRY_URL naming it for the CLI, whose default is that address). Every command must succeed: a curl
// command fails on an HTTP error unless it prints the status itself (`-w`), whose documented output then says
// which. Each command's documented output (the `# ` lines right after it) must match what it printed.
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it, type TestContext } from 'node:test'
import { freePort } from '../helpers/ports.ts'
import { waitFor } from '../helpers/wait.ts'
import { fences, ROOT, steps, unmatched, type Fence, type Step } from './markdown.ts'

const README = readFileSync(join(ROOT, 'README.md'), 'utf8')
const BLOCKS = fences(README).filter((f) => f.marker !== undefined)

interface Run {
  code: number | null
  signal: NodeJS.Signals | null
  /** Output of each step, in order; as many as the steps that finished. */
  outputs: string[]
  /** What came after the last finished step: the output of the one that failed, if one did. */
  rest: string
  stderr: string
}

/** Runs the steps in one bash, a marker line after each, so that each step's output can be told apart. */
function runSteps(list: readonly Step[], opts: { cwd: string; port: number; env: Record<string, string>; timeoutMs: number }): Promise<Run> {
  const mark = `@@readme-step-${randomBytes(6).toString('hex')}@@`
  const script = [
    'set -euo pipefail',
    // An HTTP error fails the command, as a newcomer would see it fail; a command that prints the status is left
    // to its documented output.
    `curl() { case " $* " in *" -w "*) command curl "$@" ;; *) command curl --fail-with-body "$@" ;; esac; }`,
    ...list.flatMap((s) => [s.command.replaceAll('localhost:8000', `localhost:${opts.port}`), `printf '\\n${mark}\\n'`]),
  ].join('\n')
  const child = spawn('bash', ['-c', script], { cwd: opts.cwd, env: { ...process.env, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d))
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d))
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs)
  return new Promise((resolve) => child.on('close', (code, signal) => {
    clearTimeout(timer)
    const parts = out.split(`\n${mark}\n`)
    resolve({ code, signal, outputs: parts.slice(0, -1), rest: parts.at(-1) ?? '', stderr: err })
  }))
}

/** `npm start` in the repository, on `port`, with its data in `dataDir`; stopped (its process group) when the test ends. */
async function startService(t: TestContext, dir: string, port: number): Promise<{ log(): string }> {
  // Settings of their own (none: the defaults), so that a developer's ./settings.yaml does not change what runs.
  const settings = join(dir, 'settings.yaml')
  writeFileSync(settings, '{}\n')
  const child: ChildProcess = spawn('npm', ['start'], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), DATA_DIR: join(dir, 'data'), SETTINGS_PATH: settings },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  })
  let log = ''
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (log += d))
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (log += d))
  let exited = false
  const gone = new Promise<void>((r) => child.on('exit', () => ((exited = true), r())))
  t.after(async () => {
    if (exited) return
    try {
      process.kill(-child.pid!, 'SIGTERM')
    } catch {}
    const hard = setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL')
      } catch {}
    }, 30_000)
    await gone
    clearTimeout(hard)
  })
  await waitFor(async () => {
    if (exited) throw new Error(`npm start exited:\n${log}`)
    return (await fetch(`http://127.0.0.1:${port}/health`)).ok
  }, 'npm start to answer /health', 180_000, 200).catch((e: Error) => {
    throw new Error(`${e.message}\n${log.slice(-4000)}`)
  })
  return { log: () => log }
}

function checkRun(block: Fence, list: readonly Step[], run: Run, log: string): void {
  for (const [i, s] of list.entries()) {
    const output = run.outputs[i]
    if (output === undefined) {
      assert.fail(`README.md line ${s.line}: \`${s.command}\` failed (bash exit ${run.code ?? run.signal}).\n` +
        `Its output:\n${run.rest.slice(-3000)}\nstderr:\n${run.stderr.slice(-3000)}\nservice log:\n${log.slice(-3000)}`)
    }
    const missing = unmatched(s.expected, output)
    assert.equal(missing, null, `README.md line ${s.line}: \`${s.command}\` printed\n${output}\nwhich does not match the documented line\n# ${missing}`)
  }
  assert.equal(run.code, 0, `the ${block.marker} block (README.md line ${block.line}) exited ${run.code ?? run.signal}\n${run.stderr}`)
}

describe('README walkthrough against npm start', () => {
  it('marks a walkthrough block in a scratch folder and one in the repository, with documented outputs', () => {
    assert.deepEqual(BLOCKS.map((b) => [b.lang, b.marker]), [['sh', 'scratch'], ['sh', 'repo']])
    const documented = BLOCKS.flatMap((b) => steps(b)).filter((s) => s.expected.length > 0)
    assert.ok(documented.length >= 15, `only ${documented.length} commands with a documented output`)
  })

  it('every command runs as written and prints what the README says', { timeout: 600_000 }, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'quarry-readme-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const port = await freePort()
    const service = await startService(t, dir, port)
    const scratch = join(dir, 'scratch')
    mkdirSync(scratch)
    const env = { QUARRY_URL: `http://localhost:${port}`, XDG_STATE_HOME: join(dir, 'state'), CI: '' }
    for (const block of BLOCKS) {
      const list = steps(block)
      const run = await runSteps(list, { cwd: block.marker === 'repo' ? ROOT : scratch, port, env, timeoutMs: 240_000 })
      checkRun(block, list, run, service.log())
    }
  })
})
