// `quarry ingest`: uploads files to a knowledge base of a running service through its public API, skipping
// what the KB already holds, resumable, with a summary of what happened to every file.
import { openAsBlob } from 'node:fs'
import { relative } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { isActive } from '../plugins/docs/states.ts'
import { ApiError, isConnectionFailure, seg, type Client } from './client.ts'
import { expandInputs, fileEtag, nameClashes, type InputFile } from './files.ts'
import { formatSize, progress } from './progress.ts'
import { openJobState, type JobState } from './state.ts'
import { cut, table } from './table.ts'

export interface IngestOptions {
  client: Client
  kb: string
  inputs: readonly string[]
  concurrency: number
  wait: boolean
  stateFile: string
  /** Pause between two status polls of --wait. */
  pollMs?: number
  cwd?: string
  out?: NodeJS.WritableStream
  err?: NodeJS.WritableStream & { isTTY?: boolean; columns?: number }
}

type Result = 'uploaded' | 'indexed' | 'outdated' | 'skipped' | 'failed' | 'indexing'

interface Outcome {
  file: InputFile
  result: Result
  reason?: string
  doc_id?: string
  /** The failure is the service's or the connection's, not the file's: no later upload can succeed either. */
  fatal?: boolean
}

interface DocInfo {
  doc_id: string
  source: string
  etag: string | null
  status: string
  last_error?: string | null
  duplicate_of?: string | null
}

/** States in which the KB holds a document's content: it is (or is about to be) indexed, or kept as a duplicate. */
const HOLDING = new Set(['pending', 'fetching', 'running', 'indexed', 'outdated'])
const PAGE = 100
/** Statuses --wait polls by list; `uploading` is a row mid-upload, which the service settles itself. */
const IN_PROGRESS = ['uploading', 'pending', 'fetching', 'running'] as const

export const EXIT_INTERRUPTED = 130

export async function ingest(o: IngestOptions): Promise<number> {
  const out = o.out ?? process.stdout
  const err = o.err ?? process.stderr
  const cwd = o.cwd ?? process.cwd()
  const { client, kb } = o
  const kbPath = `/api/kb/${seg(kb)}`

  const { files, unmatched } = await expandInputs(o.inputs, cwd)
  for (const u of unmatched) err.write(`quarry: no file matches ${JSON.stringify(u)}\n`)
  if (files.length === 0) {
    err.write('quarry: nothing to ingest\n')
    return 1
  }
  await client.json('GET', kbPath)
  const state = openJobState(o.stateFile)
  const held = await listHeld(client, kbPath)
  const clashes = nameClashes(files)
  const shown = (f: InputFile) => relative(cwd, f.path) || f.path

  let stopping = false
  let fatal: string | undefined
  const onSignal = () => {
    if (stopping) process.exit(EXIT_INTERRUPTED)
    stopping = true
    err.write(`\nquarry: stopping after the uploads in flight (state in ${state.file}); press Ctrl-C again to quit at once\n`)
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)

  const outcomes = new Map<string, Outcome>()
  try {
    const bytesTotal = files.reduce((s, f) => s + f.size, 0)
    const bar = progress('uploading', files.length, { unit: 'files', bytesTotal, stream: err })
    const one = (f: InputFile) => ingestOne(f, { client, kbPath, state, held, clash: clashes.get(f.path), shown })
    let next = 0
    const worker = async () => {
      while (!stopping && next < files.length) {
        const f = files[next++]
        const outcome = await one(f)
        if (outcome.fatal) {
          // Not this file's fault: leave it to the resumed run, as if it had not been attempted.
          fatal ??= outcome.reason
          stopping = true
          continue
        }
        outcomes.set(f.path, outcome)
        bar.tick(1, f.size)
      }
    }
    await Promise.all(Array.from({ length: Math.min(o.concurrency, files.length) }, worker))
    bar.done()

    if (o.wait && !stopping) {
      await followIndexing(client, kbPath, [...outcomes.values()], o.pollMs ?? 1000, () => stopping, err).catch((e: Error) => {
        // The uploads are done and recorded: report them rather than lose the summary to a polling failure.
        err.write(`\nquarry: stopped following the indexing: ${e.message}\n`)
      })
    }
  } finally {
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
  }

  const list = files.map((f) => outcomes.get(f.path)).filter((x): x is Outcome => x !== undefined)
  out.write(`${summary(list, files.length - list.length, o.wait, shown)}\n`)
  if (stopping) {
    const why = fatal ? `Stopped: ${fatal}.` : 'Interrupted:'
    out.write(`\n${why} ${files.length - list.length} file(s) not attempted. Run the same command again to resume (state: ${state.file}).\n`)
    return fatal ? 1 : EXIT_INTERRUPTED
  }
  state.finish()
  return list.some((x) => x.result === 'failed') ? 1 : 0
}

interface Held {
  bySource: Map<string, DocInfo>
  byEtag: Map<string, DocInfo>
  byId: Map<string, DocInfo>
}

async function listPages(client: Client, kbPath: string, query: string): Promise<DocInfo[]> {
  const docs: DocInfo[] = []
  for (let page = 1; ; page++) {
    const body = await client.json<{ items: DocInfo[]; total: number }>('GET', `${kbPath}/docs?page=${page}&page_size=${PAGE}&sort_by=created_at&sort_order=asc${query}`)
    docs.push(...body.items)
    if (body.items.length < PAGE || page * PAGE >= body.total) return docs
  }
}

/** The KB's documents whose content it holds, by name, by etag and by id. */
async function listHeld(client: Client, kbPath: string): Promise<Held> {
  const held: Held = { bySource: new Map(), byEtag: new Map(), byId: new Map() }
  for (const d of await listPages(client, kbPath, '')) {
    if (!HOLDING.has(d.status)) continue
    held.bySource.set(d.source, d)
    held.byId.set(d.doc_id, d)
    if (d.etag && !held.byEtag.has(d.etag)) held.byEtag.set(d.etag, d)
  }
  return held
}

interface OneContext {
  client: Client
  kbPath: string
  state: JobState
  held: Held
  clash: InputFile | undefined
  shown: (f: InputFile) => string
}

async function ingestOne(f: InputFile, c: OneContext): Promise<Outcome> {
  if (c.clash) {
    return { file: f, result: 'failed', reason: `same file name as ${c.shown(c.clash)}: the service names documents by file name, so it would replace that one` }
  }
  const earlier = c.state.previous.get(f.path)
  if (earlier && earlier.size === f.size && earlier.mtimeMs === f.mtimeMs && c.held.byId.get(earlier.doc_id)?.etag === earlier.etag) {
    return { file: f, result: 'uploaded', doc_id: earlier.doc_id }
  }
  let etag: string
  try {
    etag = await fileEtag(f.path)
  } catch (e) {
    return { file: f, result: 'failed', reason: `cannot read the file: ${(e as Error).message}` }
  }
  const same = c.held.bySource.get(f.name)
  if (same?.etag === etag) return { file: f, result: 'skipped', reason: 'unchanged', doc_id: same.doc_id }
  // Content held under another name counts only for a new name: a changed file must replace its old content.
  const twin = same ? undefined : c.held.byEtag.get(etag)
  if (twin) return { file: f, result: 'skipped', reason: `same content as ${twin.source}`, doc_id: twin.doc_id }

  const accepted = (doc_id: string, serverEtag: string): Outcome => {
    c.state.record({ path: f.path, size: f.size, mtimeMs: f.mtimeMs, etag: serverEtag, doc_id })
    return { file: f, result: 'uploaded', doc_id }
  }
  try {
    const blob = await openAsBlob(f.path)
    const res = await c.client.request('POST', `${c.kbPath}/docs/upload`, () => {
      const form = new FormData()
      form.append('file', blob, f.name)
      return form
    })
    const body = (await res.json()) as { doc_id: string; etag: string }
    return accepted(body.doc_id, body.etag)
  } catch (e) {
    if (e instanceof ApiError && e.status === 409) {
      // An attempt of ours that the client lost (a reset connection, then a retry) may have landed: the
      // document is then ours and being indexed, not in someone else's way.
      const doc = await findBySource(c.client, c.kbPath, f.name).catch(() => undefined)
      if (doc?.etag === etag && HOLDING.has(doc.status)) return accepted(doc.doc_id, etag)
    }
    if (!(e instanceof ApiError)) return { file: f, result: 'failed', reason: (e as Error).message, fatal: isConnectionFailure(e) }
    // A refused token refuses every file alike.
    return { file: f, result: 'failed', reason: e.detail, fatal: e.status === 401 }
  }
}

async function findBySource(client: Client, kbPath: string, source: string): Promise<DocInfo | undefined> {
  const docs = await listPages(client, kbPath, `&search=${encodeURIComponent(source)}`)
  return docs.find((d) => d.source === source)
}

/**
 * --wait: the documents still in progress come from the KB's list filtered by status (a few pages, however
 * large the KB); a document that left those lists is read once, for its final status and reason.
 */
async function followIndexing(client: Client, kbPath: string, outcomes: Outcome[], pollMs: number, stopped: () => boolean, err: NonNullable<IngestOptions['err']>): Promise<void> {
  const waiting = new Map(outcomes.filter((x) => x.result === 'uploaded' && x.doc_id).map((x) => [x.doc_id!, x]))
  for (const x of waiting.values()) x.result = 'indexing'
  const bar = progress('indexing', waiting.size, { unit: 'documents', stream: err })
  const total = waiting.size
  while (waiting.size > 0 && !stopped()) {
    const active = new Set<string>()
    for (const status of IN_PROGRESS) for (const d of await listPages(client, kbPath, `&status=${status}`)) active.add(d.doc_id)
    const settled = [...waiting.keys()].filter((id) => !active.has(id))
    await eachLimit(settled, 8, async (id) => {
      const x = waiting.get(id)!
      let doc: DocInfo
      try {
        doc = await client.json<DocInfo>('GET', `${kbPath}/docs/${seg(id)}/status`)
      } catch (e) {
        if (!(e instanceof ApiError && e.status === 404)) throw e
        Object.assign(x, { result: 'failed', reason: 'the document was removed while it was being indexed' })
        waiting.delete(id)
        return
      }
      if (isActive(doc.status) && doc.status !== 'deleting') return
      if (doc.status === 'indexed') x.result = 'indexed'
      else if (doc.status === 'outdated') Object.assign(x, { result: 'outdated', reason: doc.duplicate_of ? `identical to ${doc.duplicate_of}` : 'superseded' })
      else Object.assign(x, { result: 'failed', reason: doc.last_error || `document ${doc.status}` })
      waiting.delete(id)
    })
    bar.set(total - waiting.size)
    if (waiting.size > 0 && !stopped()) await sleep(pollMs)
  }
  bar.done()
}

async function eachLimit<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  const worker = async () => {
    while (next < items.length) await fn(items[next++])
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
}

const LABELS: Record<Result, string> = {
  indexed: 'indexed',
  uploaded: 'uploaded (queued for indexing)',
  indexing: 'still indexing',
  outdated: 'outdated (duplicate of an indexed document)',
  skipped: 'skipped (already in the KB)',
  failed: 'failed',
}

function summary(list: readonly Outcome[], notAttempted: number, wait: boolean, shown: (f: InputFile) => string): string {
  const order: Result[] = wait ? ['indexed', 'indexing', 'outdated', 'uploaded', 'skipped', 'failed'] : ['uploaded', 'skipped', 'failed']
  const rows: (string | number)[][] = []
  for (const r of order) {
    const of = list.filter((x) => x.result === r)
    if (of.length > 0 || r === 'failed' || r === order[0] || r === 'skipped') rows.push([LABELS[r], of.length, formatSize(of.reduce((s, x) => s + x.file.size, 0))])
  }
  if (notAttempted > 0) rows.push(['not attempted', notAttempted, ''])
  let text = table(['result', 'files', 'size'], rows)
  // Failures need action; a file skipped for content held under another name may surprise: both are listed.
  const notable = list.filter((x) => x.result === 'failed' || x.result === 'outdated' || (x.result === 'skipped' && x.reason !== 'unchanged'))
  if (notable.length > 0) text += `\n\n${table(['file', 'result', 'reason'], notable.map((x) => [shown(x.file), x.result, cut(x.reason ?? '', 300)]))}`
  return text
}
