// The ingest benchmark's client, in its own process so that the service's main thread does not also run it:
// `tsx bench/lib/upload-client.ts <base-url> <kb_id> <folder> <concurrency>` uploads every file of the folder.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

const [base, kb, dir, conc] = process.argv.slice(2)
const files = readdirSync(dir).sort()
let next = 0
const worker = async () => {
  while (next < files.length) {
    const name = files[next++]
    const form = new FormData()
    form.append('file', new Blob([readFileSync(join(dir, name))]), name)
    const res = await fetch(`${base}/api/kb/${kb}/docs/upload`, { method: 'POST', body: form })
    if (res.status !== 202) {
      process.stderr.write(`upload of ${name} answered ${res.status}: ${await res.text()}\n`)
      process.exit(1)
    }
  }
}
await Promise.all(Array.from({ length: Number(conc) }, worker))
process.stdout.write(`uploaded ${files.length}\n`)
