// The ingest benchmark's client, in its own process so that the service's main thread does not also run it:
// `tsx bench/lib/upload-client.ts <base-url> <kb_id> <folder> <concurrency>` uploads every file of the folder.
// It reads the files, prints `ready`, and starts when a line arrives on stdin: the benchmark's clock starts
// then, so that it times the uploads and not this process's start. Last, it prints one JSON line: the uploads answered
// 202 and the CPU this process spent on them (ms, user + system), which it took from the cores the service runs on.
// startUploadClient runs it so from another process.
//
// A load generator, like wrk beside the kernel bench: it shares the service's cores, so it does as little as a client
// can. Each upload is what fetch sends for a FormData holding the file as an untyped Blob (multipart/form-data, one
// part `file` with its file name, typed application/octet-stream), its body made while the files are read, before the
// clock starts, and sent over keep-alive connections with node:http. fetch with a FormData per file, as before, cost
// 1.41-1.64 ms of CPU per document here (AMD EPYC, 2 cores), this 0.38-0.42.
import { spawn } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { Agent, request } from 'node:http'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

/** As long as fetch waits for an answer before giving up. */
const ANSWER_TIMEOUT_MS = 300_000

/** One upload's request body and its content type: a single part `file`, as FormData encodes it. */
export function multipartUpload(name: string, bytes: Uint8Array, boundary = `----quarry-bench-${process.pid}-${Date.now().toString(36)}`): { body: Buffer; contentType: string } {
  // FormData escapes '"', CR and LF in a file name as %22, %0D and %0A (the HTML standard's multipart encoding).
  const filename = name.replace(/"/g, '%22').replace(/\r/g, '%0D').replace(/\n/g, '%0A')
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`)
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`)
  return { body: Buffer.concat([head, bytes, tail]), contentType: `multipart/form-data; boundary=${boundary}` }
}

/** Sends one upload; resolves with the status and body text. */
function post(agent: Agent, url: URL, upload: { body: Buffer; contentType: string }): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent, method: 'POST', headers: { 'content-type': upload.contentType, 'content-length': upload.body.length } }, (res) => {
      const parts: Buffer[] = []
      res.on('data', (d: Buffer) => parts.push(d))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString() }))
      res.on('error', reject)
    })
    req.setTimeout(ANSWER_TIMEOUT_MS, () => req.destroy(new Error(`no answer to an upload within ${ANSWER_TIMEOUT_MS / 1000} s`)))
    req.on('error', reject)
    req.end(upload.body)
  })
}

async function main(): Promise<void> {
  const [base, kb, dir, conc] = process.argv.slice(2)
  const concurrency = Number(conc)
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    process.stderr.write(`concurrency must be an integer >= 1, got ${JSON.stringify(conc)}\n`)
    process.exit(2)
  }
  const uploads = readdirSync(dir).sort().map((name) => ({ name, ...multipartUpload(name, readFileSync(join(dir, name))) }))
  const url = new URL(`${base}/api/kb/${kb}/docs/upload`)
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency })
  process.stdout.write('ready\n')
  await new Promise<void>((resolve) => process.stdin.once('data', () => resolve()))
  process.stdin.pause()
  const cpu0 = process.cpuUsage()
  let next = 0
  let uploaded = 0
  const worker = async () => {
    while (next < uploads.length) {
      const upload = uploads[next++]
      const res = await post(agent, url, upload)
      if (res.status !== 202) {
        process.stderr.write(`upload of ${upload.name} answered ${res.status}: ${res.text}\n`)
        process.exit(1)
      }
      uploaded++
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  const cpu = process.cpuUsage(cpu0)
  agent.destroy()
  process.stdout.write(`${JSON.stringify({ uploaded, cpu_ms: (cpu.user + cpu.system) / 1000 })}\n`)
}

export interface UploadClient {
  /** Starts the uploads: the client has read its files. */
  go(): void
  /** The client's exit code once it has ended, null while it runs. */
  readonly code: number | null
  /** Its last line once it has ended with 0 and its output is read; rejects with its exit code (and stderr when piped) otherwise. */
  result(): Promise<{ uploaded: number; cpu_ms: number }>
  /** Ends it, where it is (a run given up). */
  kill(): void
}

/**
 * Starts the client as the ingest bench runs it (a process of its own) and resolves once it is ready: its files read,
 * waiting for go(). stderr 'pipe' keeps the client's stderr for the errors instead of passing it through.
 */
export async function startUploadClient(base: string, kb: string, dir: string, concurrency: number, stderr: 'inherit' | 'pipe' = 'inherit'): Promise<UploadClient> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), base, kb, dir, String(concurrency)], { stdio: ['pipe', 'pipe', stderr] })
  let out = ''
  let err = ''
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (err += d))
  const said = () => (err.trim() === '' ? '' : `: ${err.trim()}`)
  // 'close', not 'exit': the process's output may still be arriving when it exits.
  let code: number | null = null
  const closed = new Promise<number>((resolve) => child.once('close', (c) => resolve((code = c ?? 1))))
  await new Promise<void>((resolve, reject) => {
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d
      if (out.startsWith('ready\n')) resolve()
    })
    void closed.then((c) => reject(new Error(`the upload client exited (code ${c}) before it was ready${said()}`)))
  })
  return {
    go: () => child.stdin!.end('go\n'),
    kill: () => void child.kill(),
    get code() {
      return code
    },
    result: async () => {
      const c = await closed
      if (c !== 0) throw new Error(`the upload client failed (exit ${c})${said()}`)
      return JSON.parse(out.trim().split('\n').at(-1)!) as { uploaded: number; cpu_ms: number }
    },
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main()
