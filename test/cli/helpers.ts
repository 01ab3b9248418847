// The CLI under test runs as a child process (pipes: not a terminal) against the service started in-process,
// through a loopback proxy that counts the uploads the service accepted and can answer 429/503 itself or hold
// uploads back, so that a test can interrupt the CLI at a known point.
import { spawn, type ChildProcess } from 'node:child_process'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { randomBytes } from 'node:crypto'
import assert from 'node:assert/strict'
import { startApp, uniqueId, type StartOptions } from '../helpers/app.ts'
import { waitFor } from '../helpers/wait.ts'

const BIN = fileURLToPath(new URL('../../bin/quarry.mjs', import.meta.url))

export interface CliRun {
  child: ChildProcess
  stdout(): string
  stderr(): string
  /** Resolves with the exit code (null when killed by a signal) once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>
}

export function startCli(args: readonly string[], opts: { cwd: string; env?: Record<string, string> }): CliRun {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: opts.cwd,
    // A private state folder per test; CI unset so that the output is what a user's pipe gets.
    env: { ...process.env, XDG_STATE_HOME: join(opts.cwd, '.state'), QUARRY_URL: '', CI: '', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d))
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal, stdout: out, stderr: err })))
  return { child, stdout: () => out, stderr: () => err, exited }
}

export const runCli = (args: readonly string[], opts: { cwd: string; env?: Record<string, string> }) => startCli(args, opts).exited

/** A temporary folder removed by t.after. */
export function tempDir(t: { after(fn: () => unknown): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'quarry-cli-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** Writes `files` (relative path to content) under dir. */
export function writeFiles(dir: string, files: Record<string, string | Buffer>): void {
  for (const [rel, content] of Object.entries(files)) {
    const p = join(dir, rel)
    mkdirSync(dirname(p), { recursive: true })
    writeFileSync(p, content)
  }
}

/** Distinct prose per file, so that near-duplicate detection keeps every one. */
export function markdownFiles(prefix: string, n: number): Record<string, string> {
  const out: Record<string, string> = {}
  for (let i = 0; i < n; i++) {
    const words = Array.from({ length: 40 }, () => randomBytes(4).toString('hex')).join(' ')
    out[`${prefix}${String(i).padStart(3, '0')}.md`] = `# Note ${i}\n\nThis note ${i} records ${words}.\n`
  }
  return out
}

export interface Proxy {
  url: string
  /** Sources of the uploads the service answered 202 to, in order. */
  accepted: string[]
  /** Upload requests received, answered or not. */
  uploadRequests(): number
  /** The Authorization header of every request received, in order (undefined when absent). */
  authorizations: (string | undefined)[]
  /**
   * Answers the next `n` upload requests with `status` itself, without forwarding them. Status 0 drops the
   * connection instead; -1 forwards the upload, then drops the connection (the upload landed, the client never hears).
   */
  failUploads(n: number, status: number, headers?: Record<string, string>): void
  /** Once `n` uploads were accepted, holds every further upload (unforwarded) until release(). */
  holdAfter(n: number): void
  held(): number
  /** Forwards the held uploads (whether or not their client is still there) and stops holding. */
  release(): void
}

export async function startProxy(t: { after(fn: () => unknown): void }, upstream: string): Promise<Proxy> {
  const accepted: string[] = []
  const faults: { status: number; headers: Record<string, string> }[] = []
  const authorizations: (string | undefined)[] = []
  let uploads = 0
  let holdAt = Infinity
  let waiting: (() => void)[] = []

  const forward = async (req: IncomingMessage, body: Buffer, res: ServerResponse) => {
    const headers = new Headers()
    for (const [k, v] of Object.entries(req.headers)) {
      if (typeof v === 'string' && !['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive'].includes(k)) headers.set(k, v)
    }
    const answer = await fetch(upstream + req.url, { method: req.method, headers, body: body.length > 0 ? body : undefined })
    const text = await answer.text()
    if (answer.status === 202 && /\/docs\/upload$/.test(req.url ?? '')) accepted.push((JSON.parse(text) as { source: string }).source)
    // The client may be gone (killed while held): the upload has landed all the same, which is the point.
    if (!res.destroyed) res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' }).end(text)
  }

  const server = createServer((req, res) => {
    authorizations.push(req.headers.authorization)
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      const isUpload = req.method === 'POST' && /\/docs\/upload$/.test(req.url ?? '')
      void (async () => {
        if (isUpload) {
          uploads++
          const fault = faults.shift()
          if (fault?.status === 0) {
            req.socket.destroy()
            return
          }
          if (fault?.status === -1) {
            req.socket.destroy()
            await forward(req, body, res)
            return
          }
          if (fault) {
            res.writeHead(fault.status, { 'content-type': 'application/json', ...fault.headers }).end(JSON.stringify({ detail: `proxy says ${fault.status}` }))
            return
          }
          if (accepted.length >= holdAt) await new Promise<void>((resolve) => waiting.push(resolve))
        }
        await forward(req, body, res)
      })().catch((err: Error) => {
        if (!res.headersSent && !res.destroyed) res.writeHead(500).end(JSON.stringify({ detail: `proxy: ${err.message}` }))
      })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise<void>((resolve) => {
    for (const w of waiting) w()
    server.closeAllConnections()
    server.close(() => resolve())
  }))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    accepted,
    uploadRequests: () => uploads,
    authorizations,
    failUploads(n, status, headers = {}) {
      for (let i = 0; i < n; i++) faults.push({ status, headers })
    },
    holdAfter(n) {
      holdAt = n
    },
    held: () => waiting.length,
    release() {
      holdAt = Infinity
      const w = waiting
      waiting = []
      for (const resolve of w) resolve()
    },
  }
}

/** Waits until the proxy holds at least one upload: the CLI is then mid-run, with uploads in flight. */
export const waitForHeld = (proxy: Proxy) => waitFor(async () => proxy.held() > 0, 'an upload held by the proxy', 60_000)

/** The KB's documents as the service lists them. */
export async function listDocs(url: string, kb: string): Promise<{ source: string; status: string; doc_id: string; last_error: string | null }[]> {
  const docs = []
  for (let page = 1; ; page++) {
    const body = (await (await fetch(`${url}/api/kb/${kb}/docs?page=${page}&page_size=100`)).json()) as { items: any[]; total: number }
    docs.push(...body.items)
    if (page * 100 >= body.total) return docs
  }
}

export const duplicates = (list: readonly string[]): string[] => list.filter((x, i) => list.indexOf(x) !== i)

/** The service in-process with one fresh KB, the proxy in front of it and a working folder with `files`. */
export async function setUpIngest(t: Parameters<typeof startApp>[0], opts: StartOptions, files: Record<string, string | Buffer>) {
  const svc = await startApp(t, opts)
  const kb = uniqueId()
  const res = await svc.request('/api/kb', { method: 'POST', json: { kb_id: kb } })
  assert.equal(res.status, 201)
  const proxy = await startProxy(t, svc.url)
  const dir = tempDir(t)
  writeFiles(dir, files)
  return { svc, kb, proxy, dir }
}
