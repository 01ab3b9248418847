// Servers a test owns, so that it may stop, kill and restart them without touching the machine's shared ones: a
// PostgreSQL cluster made by initdb in a temporary folder (with the machine's binaries, so pgvector when installed),
// a redis-server, and s3rver in a child process. Each listens on a free 127.0.0.1 port that stays the same across
// restarts, so clients reconnect to where they were.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { freePort } from './ports.ts'
import { waitFor } from './wait.ts'

export interface OwnedServer {
  readonly port: number
  /** Stops the server; `mode` 'kill' is SIGKILL (PostgreSQL: immediate shutdown, a crash for its data). */
  stop(mode?: 'clean' | 'kill'): Promise<void>
  start(): Promise<void>
  /** Stops and removes its folder. */
  close(): Promise<void>
}

/** The newest PostgreSQL's binaries on this machine (Debian: /usr/lib/postgresql/<version>/bin). */
export function postgresBin(): string | undefined {
  const root = '/usr/lib/postgresql'
  if (!existsSync(root)) return undefined
  const version = readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a))[0]
  return version ? join(root, version, 'bin') : undefined
}

/** PostgreSQL refuses to run as root: as root, its commands run as the `postgres` user (which owns the folder). */
const asRoot = process.getuid?.() === 0

function pgCommand(bin: string, tool: string, args: string[]): void {
  const file = join(bin, tool)
  if (asRoot) execFileSync('runuser', ['-u', 'postgres', '--', file, ...args], { stdio: 'pipe' })
  else execFileSync(file, args, { stdio: 'pipe' })
}

export interface OwnedPostgres extends OwnedServer {
  /** postgres://postgres@127.0.0.1:<port>/<database> */
  url(database?: string): string
  createDatabase(name: string): Promise<void>
}

export async function startOwnedPostgres(): Promise<OwnedPostgres> {
  const bin = postgresBin()
  if (!bin) throw new Error('no PostgreSQL binaries under /usr/lib/postgresql')
  const dir = mkdtempSync(join(tmpdir(), 'quarry-own-pg-'))
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString())
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString())
    chownSync(dir, uid, gid)
  }
  const data = join(dir, 'data')
  const port = await freePort()
  pgCommand(bin, 'initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync'])
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=300 -c shared_buffers=64MB`
  const url = (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`
  const server: OwnedPostgres = {
    port,
    url,
    async start() {
      pgCommand(bin, 'pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-o', options, '-w', '-t', '60', 'start'])
    },
    async stop(mode = 'clean') {
      pgCommand(bin, 'pg_ctl', ['-D', data, '-m', mode === 'kill' ? 'immediate' : 'fast', '-w', '-t', '60', 'stop'])
    },
    async createDatabase(name) {
      const sql = postgres(url(), { max: 1, onnotice: () => {} })
      try {
        await sql.unsafe(`CREATE DATABASE ${name}`)
      } finally {
        await sql.end()
      }
    },
    async close() {
      try {
        await server.stop('kill')
      } catch {
        // not running
      }
      rmSync(dir, { recursive: true, force: true })
    },
  }
  await server.start()
  return server
}

/** A child process that is started again with the same command (redis-server, s3rver). */
function ownedChild(port: number, dir: string, spawnIt: () => ChildProcess, ready: () => Promise<boolean>, what: string): OwnedServer {
  let child: ChildProcess | null = null
  let output = ''
  const server: OwnedServer = {
    port,
    async start() {
      output = ''
      const c = spawnIt()
      child = c
      c.stdout?.setEncoding('utf8').on('data', (d: string) => (output = (output + d).slice(-4000)))
      c.stderr?.setEncoding('utf8').on('data', (d: string) => (output = (output + d).slice(-4000)))
      await waitFor(async () => {
        if (c.exitCode !== null || c.signalCode !== null) throw new Error(`${what} exited: ${output}`)
        return ready()
      }, `${what} on port ${port} to answer`, 30_000, 50)
    },
    async stop(mode = 'clean') {
      const c = child
      child = null
      if (!c || c.exitCode !== null || c.signalCode !== null) return
      const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()))
      c.kill(mode === 'kill' ? 'SIGKILL' : 'SIGTERM')
      await exited
    },
    async close() {
      await server.stop('kill')
      rmSync(dir, { recursive: true, force: true })
    },
  }
  return server
}

/** Whether something accepts connections on 127.0.0.1:port and answers `probe` as expected. */
async function answers(port: number, probe: string, expect: RegExp): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1')
    let got = ''
    const done = (ok: boolean) => {
      s.destroy()
      resolve(ok)
    }
    s.setTimeout(1000, () => done(false))
    s.on('error', () => done(false))
    s.on('connect', () => s.write(probe))
    s.on('data', (d) => {
      got += d.toString()
      if (expect.test(got)) done(true)
    })
  })
}

/**
 * A redis-server of the test's own. `persist` false keeps nothing on disk (as this machine's and CI's Redis run): a
 * restart loses every key, queue included. True: an append-only file synced every second.
 */
export async function startOwnedRedis(opts: { persist?: boolean } = {}): Promise<OwnedServer & { url: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'quarry-own-redis-'))
  const port = await freePort()
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', ...(opts.persist ? ['--appendonly', 'yes', '--appendfsync', 'everysec'] : ['--appendonly', 'no'])]
  const server = ownedChild(port, dir, () => spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] }), () => answers(port, 'PING\r\n', /\+PONG/), 'redis-server')
  await server.start()
  return Object.assign(server, { url: `redis://127.0.0.1:${port}` })
}

/** s3rver in a child process (test/helpers/s3rver-child.ts): its objects stay in its folder across restarts. */
export async function startOwnedS3(bucket: string): Promise<OwnedServer & { endpoint: string; accessKey: string; secretKey: string; bucket: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'quarry-own-s3-'))
  const port = await freePort()
  const child = join(import.meta.dirname, 's3rver-child.ts')
  const server = ownedChild(port, dir, () => spawn(process.execPath, ['--openssl-legacy-provider', '--import', 'tsx', child, String(port), dir, bucket], { stdio: ['ignore', 'pipe', 'pipe'] }),
    () => answers(port, 'GET / HTTP/1.0\r\n\r\n', /^HTTP\/1\.[01] \d{3}/), 's3rver')
  await server.start()
  // s3rver answers before it has created its buckets.
  await sleep(100)
  return Object.assign(server, { endpoint: `http://127.0.0.1:${port}`, accessKey: 'S3RVER', secretKey: 'S3RVER', bucket })
}
