// Bulk upload with the `quarry` CLI against what a user's shell script does: the same small files sent by a
// plain curl loop, one `curl -F file=@...` process per file, one after another. Both talk to the same
// service, started in-process on the embedded default, each into a KB of its own; the figure is files
// accepted (202) per second. The service's queue worker is off, so that indexing in the background takes no
// CPU from either side: this measures getting files into the service, which is the CLI's job (the ingest
// benchmark measures indexing). Also reported: a re-run of the CLI over the same files, which sends nothing
// (every etag is already in the KB), i.e. the cost of the skip check.
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createApp } from '../kernel/app.ts'
import { resolveSettings } from '../kernel/config/load.ts'
import { createLogger } from '../kernel/log.ts'
import { defaultPlugins } from '../kernel/plugins.ts'
import { createRng, text, vocabulary } from './lib/corpus.ts'
import { machine, round } from './lib/machine.ts'

export interface CliBenchOptions {
  quick?: boolean
  /** Files per side (default 2,000). */
  files?: number
  /** The CLI's --concurrency (default 4, the CLI's own default: what a user gets). */
  concurrency?: number
}

const TARGET = 3

/** Small md and txt files, 0.5-4 KB, each with its own words (identical files would be skipped). */
function writeCorpus(dir: string, count: number, seed: number): number {
  const rnd = createRng(seed)
  const vocab = vocabulary(20_000, seed)
  let bytes = 0
  mkdirSync(dir, { recursive: true })
  for (let i = 0; i < count; i++) {
    const body = `# Note ${i}\n\n${text(rnd, vocab, 500 + Math.floor(rnd() * 3500))}\n`
    writeFileSync(join(dir, `note-${String(i).padStart(5, '0')}.${i % 2 ? 'txt' : 'md'}`), body)
    bytes += Buffer.byteLength(body)
  }
  return bytes
}

function exec(cmd: string, args: string[], cwd: string): Promise<{ code: number; stdout: string; stderr: string; seconds: number }> {
  const started = performance.now()
  const child = spawn(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, CI: 'true' } })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d))
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
  return new Promise((resolve) => child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr, seconds: (performance.now() - started) / 1000 })))
}

/** The shell loop a user would write; prints one status code per file. */
const curlLoop = (url: string, kb: string, dir: string) =>
  exec('bash', ['-c', `for f in "$1"/*; do curl -s -o /dev/null -w '%{http_code}\\n' -F "file=@$f" "$2/api/kb/$3/docs/upload"; done`, 'curl-loop', dir, url, kb], dir)

const cli = (url: string, kb: string, dir: string, concurrency: number, state: string) =>
  exec(process.execPath, [join(process.cwd(), 'bin/quarry.mjs'), 'ingest', dir, '--kb', kb, '--url', url, '--concurrency', String(concurrency), '--state', state], dir)

export async function run(opts: CliBenchOptions = {}) {
  const count = opts.files ?? 2000
  const concurrency = opts.concurrency ?? 4
  const work = mkdtempSync(join(tmpdir(), 'quarry-cli-bench-'))
  const { settings } = resolveSettings({
    data_dir: join(work, 'data'),
    logging: { level: 'ERROR' },
    queue_worker: { enabled: false },
  })
  const app = await createApp({ settings, plugins: defaultPlugins(), log: createLogger('SILENT') })
  try {
    const url = `http://127.0.0.1:${await app.listen(0, '127.0.0.1')}`
    const createKb = async (kb: string) => {
      const res = await fetch(`${url}/api/kb`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ kb_id: kb }) })
      if (res.status !== 201) throw new Error(`creating KB ${kb} answered ${res.status}`)
    }
    const bytes = writeCorpus(join(work, 'files'), count, 11)
    // Warm-up on a few files of their own: the service's first uploads, the CLI's module cache, curl's binary.
    writeCorpus(join(work, 'warm'), 20, 12)
    for (const kb of ['warm-curl', 'warm-cli', 'curl', 'cli']) await createKb(kb)
    await curlLoop(url, 'warm-curl', join(work, 'warm'))
    await cli(url, 'warm-cli', join(work, 'warm'), concurrency, join(work, 'warm.state'))

    process.stderr.write(`curl loop: ${count} files...\n`)
    const curl = await curlLoop(url, 'curl', join(work, 'files'))
    const curlAccepted = curl.stdout.split('\n').filter((l) => l === '202').length
    if (curlAccepted !== count) throw new Error(`the curl loop got ${curlAccepted} of ${count} files accepted: ${curl.stdout.slice(0, 200)}`)
    process.stderr.write(`quarry ingest: ${count} files...\n`)
    const ours = await cli(url, 'cli', join(work, 'files'), concurrency, join(work, 'cli.state'))
    if (ours.code !== 0) throw new Error(`quarry ingest exited ${ours.code}: ${ours.stderr.slice(-500)}`)
    const rerun = await cli(url, 'cli', join(work, 'files'), concurrency, join(work, 'cli.state'))
    if (rerun.code !== 0 || !new RegExp(`skipped[^\\n]*\\s${count}\\s`).test(rerun.stdout)) throw new Error(`the re-run did not skip every file:\n${rerun.stdout}`)

    const rate = count / ours.seconds
    const curlRate = count / curl.seconds
    return {
      name: 'cli',
      machine: machine(),
      sizes: { files: count, megabytes: round(bytes / 2 ** 20), file_size: '0.5-4 KB, md and txt', cli_concurrency: concurrency, indexing: 'off (queue worker disabled)' },
      target: `at least ${TARGET}x the curl loop`,
      results: {
        cli: { seconds: round(ours.seconds), files_per_s: round(rate, 1), mb_per_s: round(bytes / 2 ** 20 / ours.seconds) },
        curl_loop: { seconds: round(curl.seconds), files_per_s: round(curlRate, 1), mb_per_s: round(bytes / 2 ** 20 / curl.seconds) },
        ratio: round(rate / curlRate),
        rerun_all_skipped: { seconds: round(rerun.seconds), files_per_s: round(count / rerun.seconds, 1) },
      },
    }
  } finally {
    await app.close()
    rmSync(work, { recursive: true, force: true })
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const n = process.argv.find((a) => a.startsWith('--files='))
  const result = await run({ quick: !process.argv.includes('--full'), files: n ? Number(n.split('=')[1]) : undefined })
  console.log(JSON.stringify(result, null, 2))
}
