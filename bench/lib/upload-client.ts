// The ingest benchmark's client, in its own process so that the service's main thread does not also run it:
// `tsx bench/lib/upload-client.ts <base-url> <kb_id> <folder> <concurrency>` uploads every file of the folder.
// It reads the files, prints `ready`, and starts when a line arrives on stdin: the benchmark's clock starts
// then, so that it times the uploads and not this process's start. Last, it prints one JSON line: the uploads and the
// CPU this process spent on them (ms, user + system), which it took from the cores the service runs on.
//
// A load generator, like wrk beside the kernel bench: it shares the service's cores, so it does as little as a client
// can. Each upload is the request a browser or `curl -F file=@name` sends (multipart/form-data, one part `file` with
// its file name), its body made while the files are read, before the clock starts, and sent over keep-alive
// connections with node:http. fetch with a FormData per file, as before, cost 1.3-1.6 ms of CPU per document here.
import { readdirSync, readFileSync } from 'node:fs'
import { Agent, request } from 'node:http'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

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
    const req = request({
      agent, host: url.hostname, port: url.port, path: url.pathname, method: 'POST',
      headers: { 'content-type': upload.contentType, 'content-length': upload.body.length },
    }, (res) => {
      const parts: Buffer[] = []
      res.on('data', (d: Buffer) => parts.push(d))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString() }))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(upload.body)
  })
}

async function main(): Promise<void> {
  const [base, kb, dir, conc] = process.argv.slice(2)
  const concurrency = Number(conc)
  const uploads = readdirSync(dir).sort().map((name) => ({ name, ...multipartUpload(name, readFileSync(join(dir, name))) }))
  const url = new URL(`${base}/api/kb/${kb}/docs/upload`)
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency })
  process.stdout.write('ready\n')
  await new Promise<void>((resolve) => process.stdin.once('data', () => resolve()))
  process.stdin.pause()
  const cpu0 = process.cpuUsage()
  let next = 0
  const worker = async () => {
    while (next < uploads.length) {
      const upload = uploads[next++]
      const res = await post(agent, url, upload)
      if (res.status !== 202) {
        process.stderr.write(`upload of ${upload.name} answered ${res.status}: ${res.text}\n`)
        process.exit(1)
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  const cpu = process.cpuUsage(cpu0)
  agent.destroy()
  process.stdout.write(`${JSON.stringify({ uploaded: uploads.length, cpu_ms: (cpu.user + cpu.system) / 1000 })}\n`)
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main()
