// `quarry export`, `quarry import` and `quarry migrate` (issue 39): moving knowledge bases between deployments.
//
// export: GET /api/kb/{kb}/export into FILE.partial, renamed to FILE once the archive's end has arrived. The tar's
// entry boundaries are followed as the bytes pass (TarWatcher), so an interruption (a dropped connection, Ctrl-C,
// kill -9) leaves a file that the next run cuts back to its last whole document and completes with
// ?after=<that doc_id>&manifest=false. A dropped connection is resumed at once, --retries times.
//
// import: the file is checked whole first (manifest, end), then sent as the request body, read from disk as it goes.
// When the service says an import of this archive into the KB stopped part-way (GET /api/kb/{kb}/import), only the
// manifest and the documents after the last one it holds are sent.
//
// migrate: runs here, on the stores both settings files name (plugins/transfer/migrate.ts), the service stopped.
import { existsSync } from 'node:fs'
import { open, rename, truncate } from 'node:fs/promises'
import { Readable } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Manifest } from '../plugins/transfer/archive.ts'
import { END_NAME, MANIFEST_NAME, parseDocEntry } from '../plugins/transfer/archive.ts'
import type { ImportReport } from '../plugins/transfer/import.ts'
import type { MigrateResult } from '../plugins/transfer/migrate.ts'
import { scanTarFile, TarWatcher, type TarFileEntry } from '../plugins/transfer/tar.ts'
import { ApiError, isConnectionFailure, seg, type Client } from './client.ts'
import { formatSize, progress, type Progress } from './progress.ts'
import { table } from './table.ts'

type Out = NodeJS.WritableStream
type Err = NodeJS.WritableStream & { isTTY?: boolean; columns?: number }

export const EXIT_INTERRUPTED = 130

class Interrupted extends Error {}

/** Stops at Ctrl-C / SIGTERM: the run ends where it is, and the next one resumes. */
function interruptible(err: Err): { signal: AbortSignal; release(): void } {
  const ac = new AbortController()
  const stop = () => {
    if (ac.signal.aborted) process.exit(EXIT_INTERRUPTED)
    err.write('\nquarry: stopping; run the same command again to resume\n')
    ac.abort(new Interrupted('interrupted'))
  }
  process.on('SIGINT', stop)
  process.on('SIGTERM', stop)
  return {
    signal: ac.signal,
    release() {
      process.off('SIGINT', stop)
      process.off('SIGTERM', stop)
    },
  }
}

const isSums = (name: string) => parseDocEntry(name)?.part === 'sums.json'

export interface ExportOptions {
  client: Client
  kb: string
  out: string
  /** Resumptions after a dropped connection, before giving up (the next run still resumes). */
  retries: number
  stdout?: Out
  stderr?: Err
}

/** Where a partial download stands: the offset to keep, the doc_id to go on after, what it holds. */
function resumePoint(partial: string): { keep: number; after: string | null; manifest: Manifest | null; documents: number } {
  const scan = scanTarFile(partial)
  const first = scan.entries[0]
  if (!first || first.name !== MANIFEST_NAME) return { keep: 0, after: null, manifest: null, documents: 0 }
  let manifest: Manifest
  try {
    manifest = JSON.parse(scan.read(first).toString('utf8')) as Manifest
  } catch {
    return { keep: 0, after: null, manifest: null, documents: 0 }
  }
  const sums = scan.entries.filter((e) => isSums(e.name))
  const last = sums[sums.length - 1]
  return { keep: last ? last.end : first.end, after: last ? parseDocEntry(last.name)!.docId : null, manifest, documents: sums.length }
}

export async function exportCommand(o: ExportOptions): Promise<number> {
  const out = o.stdout ?? process.stdout
  const err = o.stderr ?? process.stderr
  if (existsSync(o.out)) throw new Error(`${o.out} exists: remove it or choose another --out`)
  const partial = `${o.out}.partial`
  const path = `/api/kb/${seg(o.kb)}/export`
  const stop = interruptible(err)
  const shown: { bar: Progress | null } = { bar: null }
  try {
    for (let attempt = 0; ; attempt++) {
      const at = existsSync(partial) ? resumePoint(partial) : { keep: 0, after: null, manifest: null, documents: 0 }
      await truncate(partial, at.keep).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== 'ENOENT') throw e
      })
      if (at.keep > 0 && attempt === 0) err.write(`quarry: resuming ${partial}: ${at.documents} document(s) saved${at.after ? `, going on after ${at.after}` : ''}\n`)
      let manifest = at.manifest
      let documents = at.documents
      let ended = false
      let endSeen = false
      const query = at.keep === 0 ? '' : `?manifest=false${at.after ? `&after=${at.after}` : ''}`
      const res = await o.client.request('GET', `${path}${query}`)
      const file = await open(partial, 'a')
      const startBar = (m: Manifest) => {
        shown.bar ??= progress('exporting', m.counts.documents, { unit: 'documents', bytesTotal: m.counts.bytes, stream: err })
        shown.bar.set(documents)
      }
      if (manifest) startBar(manifest)
      const watcher = new TarWatcher((e) => {
        if (e.name === MANIFEST_NAME && e.body) {
          manifest = JSON.parse(e.body.toString('utf8')) as Manifest
          startBar(manifest)
        } else if (isSums(e.name)) {
          documents++
          shown.bar?.tick(1, 0)
        } else if (e.name === END_NAME) {
          endSeen = true
        } else if (parseDocEntry(e.name)?.part === 'file') {
          shown.bar?.tick(0, e.size)
        }
      }, (name) => name === MANIFEST_NAME, at.keep)
      try {
        for await (const chunk of Readable.fromWeb(res.body as never, { signal: stop.signal })) {
          const b = chunk as Buffer
          watcher.push(b)
          await file.write(b)
        }
        ended = watcher.ended && endSeen
      } catch (e) {
        if (stop.signal.aborted) throw new Interrupted('interrupted')
        if (attempt >= o.retries) throw new Error(`the download stopped (${(e as Error).message}) after ${documents} document(s); run the same command again to resume`)
        err.write(`\nquarry: the download stopped (${(e as Error).message}); resuming\n`)
      } finally {
        await file.sync().catch(() => {})
        await file.close()
      }
      if (ended) {
        await rename(partial, o.out)
        shown.bar?.done()
        const m = manifest as Manifest | null
        out.write(`Exported '${o.kb}': ${documents} document(s), ${formatSize(watcher.offset)} to ${o.out}${m ? ` (archive ${m.archive_id}, embedding ${m.embedding.model})` : ''}.\n`)
        return 0
      }
      if (stop.signal.aborted) throw new Interrupted('interrupted')
      if (attempt >= o.retries) throw new Error(`the archive arrived without its end after ${documents} document(s); run the same command again to resume`)
      await sleep(Math.min(5000, 250 * 2 ** attempt))
    }
  } catch (e) {
    if (e instanceof Interrupted) {
      out.write(`Interrupted: ${partial} keeps what arrived. Run the same command again to resume.\n`)
      return EXIT_INTERRUPTED
    }
    throw e
  } finally {
    stop.release()
  }
}

export interface ImportOptions {
  client: Client
  file: string
  kb?: string
  wait: boolean
  pollMs: number
  json: boolean
  stdout?: Out
  stderr?: Err
}

interface ImportState {
  state: 'none' | 'running' | 'done'
  archive_id: string | null
  documents: number
  last_doc_id: string | null
  report: ImportReport | null
}

/** The archive checked whole, its manifest, and the byte ranges to send (all of it, or what an earlier run did not). */
function readArchive(file: string): { manifest: Manifest; entries: TarFileEntry[]; size: number } {
  let scan
  try {
    scan = scanTarFile(file)
  } catch (e) {
    throw new Error(`cannot read ${file}: ${(e as Error).message}`)
  }
  const first = scan.entries[0]
  if (!first || first.name !== MANIFEST_NAME) throw new Error(`${file} is not a Quarry KB archive (its first entry is not ${MANIFEST_NAME})`)
  const last = scan.entries[scan.entries.length - 1]
  if (!scan.ended || last.name !== END_NAME) {
    throw new Error(`${file} is not a whole archive: it ends after ${scan.entries.filter((e) => isSums(e.name)).length} document(s) without its end (an interrupted export: run quarry export again to finish it)`)
  }
  let manifest: Manifest
  try {
    manifest = JSON.parse(scan.read(first).toString('utf8')) as Manifest
  } catch {
    throw new Error(`${file}: ${MANIFEST_NAME} is not JSON`)
  }
  return { manifest, entries: scan.entries, size: last.end + 1024 }
}

/** A file's byte ranges as one stream, counting what has gone out. */
async function* ranges(file: string, parts: [number, number][], sent: (n: number) => void): AsyncGenerator<Buffer> {
  const fh = await open(file, 'r')
  try {
    for (const [from, to] of parts) {
      let at = from
      while (at < to) {
        const buf = Buffer.allocUnsafe(Math.min(1 << 20, to - at))
        const { bytesRead } = await fh.read(buf, 0, buf.length, at)
        if (bytesRead === 0) throw new Error(`${file} is shorter than it was when checked`)
        at += bytesRead
        sent(bytesRead)
        yield buf.subarray(0, bytesRead)
      }
    }
  } finally {
    await fh.close()
  }
}

function printReport(r: ImportReport, out: Out): void {
  const v = r.verification
  const what = r.status === 'already_imported' ? 'was imported before' : r.status === 'resumed' ? 'import resumed and finished' : 'imported'
  out.write(`Knowledge base '${r.kb_id}' ${what} from '${r.source_kb_id}': ${r.documents.total} document(s) (${r.documents.written} written now, ${r.documents.skipped} there already).\n`)
  out.write(r.vectors === 'reused'
    ? `Vectors: reused (${r.embedding.here}).\n`
    : `Vectors: the archive's model ${r.embedding.archive} is not this service's ${r.embedding.here}: ${r.queued} document(s) queued to be embedded again.\n`)
  for (const c of r.connectors.filter((x) => x.secrets_to_enter.length > 0)) {
    out.write(`Connector '${c.name}' (${c.connector_id}) is paused: enter ${c.secrets_to_enter.join(', ')} (secrets are never exported), then resume it.\n`)
  }
  for (const w of r.warnings) out.write(`Warning: ${w}\n`)
  const rows: (string | number)[][] = [
    ['counts', v.counts.ok ? 'ok' : 'DIFFERENT', `documents ${v.counts.documents.actual}/${v.counts.documents.expected}${v.counts.points ? `, points ${v.counts.points.actual}/${v.counts.points.expected}` : ''}${v.counts.note ? ` (${v.counts.note})` : ''}`],
    ['checksums', v.checksums.ok ? 'ok' : 'FAILED', `${v.checksums.documents} document(s), ${v.checksums.files} file(s) read back, ${v.checksums.points} point(s) read back`],
    ['searches', v.searches.skipped ? 'skipped' : v.searches.ok ? 'ok' : 'DIFFERENT', v.searches.skipped ?? `${v.searches.matched}/${v.searches.checked} sample top-10 lists (dense and sparse) are the source's`],
  ]
  out.write(`${table(['verification', 'result', 'detail'], rows)}\n`)
  for (const m of v.searches.mismatches) out.write(`  ${m.list} "${m.query}": expected ${m.expected.slice(0, 3).join(', ')}…, got ${m.got.slice(0, 3).join(', ')}…\n`)
}

export async function importCommand(o: ImportOptions): Promise<number> {
  const out = o.stdout ?? process.stdout
  const err = o.stderr ?? process.stderr
  const { manifest, entries, size } = readArchive(o.file)
  const kb = o.kb ?? manifest.kb.kb_id
  let state: ImportState | null = null
  try {
    state = await o.client.json<ImportState>('GET', `/api/kb/${seg(kb)}/import`)
  } catch (e) {
    if (!(e instanceof ApiError) || (e.status !== 404 && e.status !== 403)) throw e
  }
  let report: ImportReport
  if (state?.state === 'done' && state.archive_id === manifest.archive_id && state.report) {
    report = { ...state.report, status: 'already_imported' }
  } else {
    // Resuming: the manifest, then the documents after the last one the service holds (the archive is in doc_id order).
    let parts: [number, number][] = [[0, size]]
    if (state?.state === 'running' && state.archive_id === manifest.archive_id && state.last_doc_id !== null) {
      const next = entries.find((e) => e.name === END_NAME || (parseDocEntry(e.name)?.part === 'record.json' && parseDocEntry(e.name)!.docId > state!.last_doc_id!))!
      parts = [[0, entries[0].end], [next.start, size]]
      err.write(`quarry: resuming the import into '${kb}': ${state.documents} document(s) there already\n`)
    }
    const total = parts.reduce((n, [a, b]) => n + b - a, 0)
    const bar = progress('importing', manifest.counts.documents, { unit: 'documents', bytesTotal: total, stream: err })
    let sent = 0
    const inParts = (e: TarFileEntry) => parts.some(([a, b]) => e.start >= a && e.end <= b)
    const sums = entries.filter((e) => isSums(e.name))
    const sending = sums.filter(inParts)
    const before = sums.length - sending.length
    let passed = 0
    bar.set(before)
    // The file offset `sent` bytes into the parts.
    const offsetOf = (n: number) => {
      for (const [a, b] of parts) {
        if (n <= b - a) return a + n
        n -= b - a
      }
      return parts[parts.length - 1][1]
    }
    const onSent = (n: number) => {
      sent += n
      // Documents whose last byte has gone out: an estimate of the service's progress (it reads as we send).
      const offset = offsetOf(sent)
      const was = passed
      while (passed < sending.length && sending[passed].end <= offset) passed++
      bar.tick(passed - was, n)
    }
    const stop = interruptible(err)
    try {
      const kbQuery = o.kb ? `?kb_id=${encodeURIComponent(o.kb)}` : ''
      const res = await o.client.request('POST', `/api/kb/import${kbQuery}`, () => {
        sent = 0
        passed = 0
        return Readable.toWeb(Readable.from(ranges(o.file, parts, onSent), { signal: stop.signal })) as never
      }, { 'content-type': 'application/x-tar' })
      report = (await res.json()) as ImportReport
      bar.set(manifest.counts.documents)
      bar.done()
    } catch (e) {
      if (stop.signal.aborted) {
        out.write('Interrupted: the documents the service received whole are imported. Run the same command again to resume.\n')
        return EXIT_INTERRUPTED
      }
      if (isConnectionFailure(e)) throw new Error(`${(e as Error).message}; run the same command again to resume`)
      throw e
    } finally {
      stop.release()
    }
  }
  let failedAfterWait = 0
  if (o.wait && report.queued > 0) {
    const s = manifest.counts.by_status
    const failedBefore = (s.failed ?? 0) + (s.uploading ?? 0) + (s.fetching ?? 0)
    failedAfterWait = await followIndexing(o.client, kb, report.queued, failedBefore, o.pollMs, err)
  }
  if (o.json) out.write(`${JSON.stringify(report, null, 2)}\n`)
  else printReport(report, out)
  if (failedAfterWait > 0) out.write(`${failedAfterWait} queued document(s) failed to index: see quarry status --kb ${kb}.\n`)
  return report.verification.ok && failedAfterWait === 0 ? 0 : 1
}

/**
 * --wait: polls the KB's counts until nothing is pending or running; how many documents failed beyond those the
 * archive held failed already.
 */
async function followIndexing(client: Client, kb: string, queued: number, failedBefore: number, pollMs: number, err: Err): Promise<number> {
  type Counts = { doc_counts: Record<string, number> }
  const path = `/api/kb/${seg(kb)}/docs/status`
  const bar = progress('indexing', queued, { unit: 'documents', stream: err })
  for (;;) {
    const c = (await client.json<Counts>('GET', path)).doc_counts
    const left = c.pending + c.running
    bar.set(Math.max(0, queued - left))
    if (left === 0) {
      bar.done()
      return Math.max(0, c.failed - failedBefore)
    }
    await sleep(pollMs)
  }
}

export interface MigrateCommandOptions {
  from: string
  to: string
  kbs?: string[]
  dryRun: boolean
  json: boolean
  env: NodeJS.ProcessEnv
  stdout?: Out
  stderr?: Err
}

export async function migrateCommand(o: MigrateCommandOptions): Promise<number> {
  const out = o.stdout ?? process.stdout
  const err = o.stderr ?? process.stderr
  const { loadSettings } = await import('../kernel/config/load.ts')
  const { createLogger } = await import('../kernel/log.ts')
  const { migrateDeployment } = await import('../plugins/transfer/migrate.ts')
  // data_dir and the port come from each file: the variables that override them would point both at one place.
  const env = { ...o.env, DATA_DIR: undefined, PORT: undefined }
  const from = loadSettings({ argv: ['--config', o.from], env }).settings
  const to = loadSettings({ argv: ['--config', o.to], env }).settings
  const log = createLogger('WARNING', process.stderr)
  const shown: { bar: Progress | null } = { bar: null }
  const result: MigrateResult = await migrateDeployment(from, to, {
    kbIds: o.kbs, dryRun: o.dryRun, log,
    onKbStart: (p) => {
      shown.bar = progress(`migrating ${p.kb_id}`, p.documents, { unit: 'documents', bytesTotal: p.bytes, stream: err })
      if (p.copied > 0) shown.bar.set(p.copied)
    },
    onDocument: (_kb, e) => shown.bar?.tick(e.written ? 1 : 0, e.bytes),
    onKbDone: () => {
      shown.bar?.done()
      shown.bar = null
    },
  })
  if (o.json) {
    out.write(`${JSON.stringify(result, null, 2)}\n`)
    return result.ok ? 0 : 1
  }
  out.write(`From: ${result.from}\nTo:   ${result.to}\n`)
  if (result.dry_run) {
    const rows = result.plan.map((p) => [p.kb_id, p.documents, p.points, formatSize(p.bytes),
      p.target === 'absent' ? 'to copy' : p.target === 'partial' ? `to finish (${p.copied} there)` : p.target === 'copied' ? 'copied already' : 'EXISTS there (not from this source)'])
    out.write(`${rows.length > 0 ? table(['kb_id', 'documents', 'points', 'files', 'plan'], rows) : 'No knowledge base to migrate.'}\n`)
    out.write('Dry run: nothing was copied.\n')
    return result.ok ? 0 : 1
  }
  const rows = result.kbs.map((k) => {
    const v = k.report?.verification
    const verified = k.outcome === 'failed' ? k.error ?? 'failed' : !v ? '-' : v.ok ? 'ok'
      : [!v.counts.ok && 'counts differ', !v.checksums.ok && 'checksums', !v.searches.ok && `${v.searches.checked - v.searches.matched} search(es) differ`].filter(Boolean).join(', ')
    return [k.kb_id, k.outcome.replace('_', ' '), k.written, k.already_there, verified]
  })
  out.write(`${rows.length > 0 ? table(['kb_id', 'outcome', 'written', 'already there', 'verification'], rows) : 'No knowledge base to migrate.'}\n`)
  if (result.deployment.user_profiles + result.deployment.system_config > 0) {
    out.write(`Also copied: ${result.deployment.user_profiles} user profile(s), ${result.deployment.system_config} runtime setting(s).\n`)
  }
  out.write(result.ok ? 'Migration complete and verified. Start the service on the target settings.\n' : 'Migration incomplete or not verified: see above; running it again goes on where it stopped.\n')
  return result.ok ? 0 : 1
}
