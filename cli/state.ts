// Resume state of an ingest job: one JSON line per file the service accepted, appended as each upload
// finishes, so that a run stopped by Ctrl-C, a crash or kill -9 loses at most the uploads in flight (and
// those are found again by their etag in the KB's document list).
//
// Where: $XDG_STATE_HOME/quarry/ (default ~/.local/state/quarry/), one file per job, named by a hash of the
// service URL, the KB and the inputs as given (resolved against the working directory); `--state FILE`
// chooses another. Why there: it is per user and survives a reboot (unlike /tmp), and it is never inside the
// folder being ingested, which may be read-only or would otherwise match the job's own glob.
//
// What it buys over the etag check alone: a resumed run neither reads nor hashes the files already sent, and
// its summary and --wait cover the whole job, the files uploaded before the interruption included. The KB's
// document list stays the judge: a recorded document that is no longer there is uploaded again.
import { createHash } from 'node:crypto'
import { appendFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join, resolve } from 'node:path'

export interface UploadRecord {
  path: string
  size: number
  mtimeMs: number
  etag: string
  doc_id: string
}

export interface JobState {
  readonly file: string
  /** Uploads recorded by earlier runs of this job, by absolute path. */
  readonly previous: ReadonlyMap<string, UploadRecord>
  record(r: UploadRecord): void
  /** The job ran to its end: a later run with the same inputs is a new job. */
  finish(): void
}

export interface JobKey {
  url: string
  kb: string
  inputs: readonly string[]
  cwd: string
}

export function defaultStateFile(key: JobKey, env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_STATE_HOME || join(homedir(), '.local', 'state')
  const id = createHash('sha256')
    .update(JSON.stringify([key.url, key.kb, key.inputs.map((i) => resolve(key.cwd, i)).sort()]))
    .digest('hex')
    .slice(0, 16)
  return join(base, 'quarry', `ingest-${key.kb.replace(/[^A-Za-z0-9_-]/g, '_')}-${id}.jsonl`)
}

export function openJobState(file: string): JobState {
  const previous = new Map<string, UploadRecord>()
  let text = ''
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`cannot read the state file ${file}: ${(err as Error).message}`)
  }
  for (const line of text.split('\n')) {
    if (!line) continue
    try {
      const r = JSON.parse(line) as UploadRecord
      if (typeof r.path === 'string' && typeof r.doc_id === 'string' && typeof r.etag === 'string') previous.set(r.path, r)
    } catch {
      // A line cut short by kill -9: that upload is found again through the document list.
    }
  }
  mkdirSync(dirname(file), { recursive: true })
  // Start the next record on a line of its own after a torn one.
  if (text && !text.endsWith('\n')) appendFileSync(file, '\n')
  return {
    file,
    previous,
    record(r) {
      // Synchronous and unbuffered: the line is in the OS's hands before the next upload starts, so a
      // crash right after cannot lose it.
      appendFileSync(file, `${JSON.stringify(r)}\n`)
    },
    finish() {
      rmSync(file, { force: true })
    },
  }
}
