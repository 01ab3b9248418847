// The ingest benchmark's client, in its own process so that the service's main thread does not also run it:
// `tsx bench/lib/upload-client.ts <base-url> <kb_id> <folder> <concurrency>` uploads every file of the folder.
// It reads the files, prints `ready`, and starts when a line arrives on stdin: the benchmark's clock starts
// then, so that it times the uploads and not this process's start. Last, it prints one JSON line: the uploads and the
// CPU this process spent on them (ms, user + system), which it took from the cores the service runs on.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

const [base, kb, dir, conc] = process.argv.slice(2)
const files = readdirSync(dir).sort().map((name) => ({ name, bytes: readFileSync(join(dir, name)) }))
process.stdout.write('ready\n')
await new Promise<void>((resolve) => process.stdin.once('data', () => resolve()))
process.stdin.pause()
const cpu0 = process.cpuUsage()
let next = 0
const worker = async () => {
  while (next < files.length) {
    const { name, bytes } = files[next++]
    const form = new FormData()
    form.append('file', new Blob([bytes]), name)
    const res = await fetch(`${base}/api/kb/${kb}/docs/upload`, { method: 'POST', body: form })
    if (res.status !== 202) {
      process.stderr.write(`upload of ${name} answered ${res.status}: ${await res.text()}\n`)
      process.exit(1)
    }
  }
}
await Promise.all(Array.from({ length: Number(conc) }, worker))
const cpu = process.cpuUsage(cpu0)
process.stdout.write(`${JSON.stringify({ uploaded: files.length, cpu_ms: (cpu.user + cpu.system) / 1000 })}\n`)
