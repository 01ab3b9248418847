// Crash consistency of the embedded engines (issue 42): a few hundred small documents are uploaded to a service that
// is killed with SIGKILL again and again, at random moments and, through test/crash/service-child.ts, in the middle of
// supersedes (every tenth document is a revision of the one before it under another file name and the same title),
// and restarted at once on the same data folder while the killed process is a zombie nobody reaped yet. Expected:
// no restart refused, no document lost (every accepted upload ends indexed or outdated), and search agrees with every
// status: an indexed document is found by its own marker word and whole (all its chunks in the vector store), an
// outdated or failed one is never found. The figures are printed as diagnostics.
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, it } from 'node:test'
import { stringify } from 'yaml'
import { closeAdapters, createAdapters } from '../../adapters/index.ts'
import { resolveSettings } from '../../kernel/config/load.ts'
import { freePort } from '../helpers/ports.ts'
import { waitFor } from '../helpers/wait.ts'
import { md, prose } from '../plugins/docs.suite.ts'

type Json = any

const DOCUMENTS = 300
/** Kills from outside, at random moments (the supersede kills of the child come on top). */
const KILLS = 10
const SUPERSEDE_KILL_CHANCE = 0.5
const UPLOADERS = 3

/**
 * How a process that is not reaped ended: null while it runs, else the code and signal of its zombie's exit status
 * (/proc/<pid>/stat field 52, as waitpid reports it).
 */
function exitStatus(pid: number): { code: number; signal: number } | null {
  let stat: string
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return { code: -1, signal: -1 }
  }
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  if (fields[0] !== 'Z') return null
  const status = Number(fields[49])
  return { code: (status >> 8) & 0xff, signal: status & 0x7f }
}

/** A word no other document holds: letters only, so that every tokenizer keeps it whole. */
const marker = (i: number) => `qzv${[...String(i).padStart(4, '0')].map((d) => 'abcdefghij'[Number(d)]).join('')}xk`

/** Document i: new prose, or (every tenth) the previous document with three sentences and its marker changed. */
function documentText(i: number): { title: string; text: string } {
  const base = (n: number) => prose(`crash-${n}`, 30).split('. ')
  if (i % 10 === 9) {
    const sentences = base(i - 1)
    const replacement = prose(`revision-${i}`, 3).split('. ')
    for (let k = 0; k < 3; k++) sentences[k * 10 + 1] = replacement[k]
    return { title: `Document ${i - 1}`, text: md(`Document ${i - 1}`, `${sentences.join('. ')} Reference ${marker(i)}.`) }
  }
  return { title: `Document ${i}`, text: md(`Document ${i}`, `${base(i).join('. ')} Reference ${marker(i)}.`) }
}

const nameOf = (i: number) => `doc-${String(i).padStart(4, '0')}.md`
const indexOf = (source: string) => Number(/^doc-(\d+)\.md$/.exec(source)?.[1] ?? NaN)

describe('crash loop on the embedded engines', () => {
  it('kill -9 at random points and mid-supersede, restart at once: no refused restart, no lost document, search agrees with every status', { timeout: 600_000 }, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'quarry-crash-loop-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const port = await freePort()
    const base = `http://127.0.0.1:${port}`
    const raw = {
      data_dir: join(dir, 'data'), server: { port, host: '127.0.0.1', shutdown_grace_sec: 5 }, logging: { level: 'WARNING' },
      queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 }, queue_worker: { max_workers: 2 }, embedding: { vector_size: 64 },
    }
    const config = join(dir, 'settings.yaml')
    writeFileSync(config, stringify(raw))

    const figures = { restarts: 0, refused: 0, failedStarts: 0, externalKills: 0, supersedeKills: 0, killedStarting: 0 }
    const refusals: string[] = []
    /** The running service's pid. */
    let pid = 0
    const shells: ChildProcess[] = []
    t.after(() => {
      if (pid > 0 && exitStatus(pid) === null) process.kill(pid, 'SIGKILL')
      for (const sh of shells) sh.kill('SIGKILL')
    })

    /**
     * Starts the service (the killing child, or kernel/main.ts as npm start does) and waits for /health; counts refusals.
     * It runs in the background of a shell that then becomes `sleep`, which never reaps it: killed, the service stays
     * a zombie, as a process whose parent has not waited for it yet (a container's init, a supervisor) does.
     */
    const start = async (entry: string): Promise<void> => {
      for (;;) {
        figures.restarts++
        const sh = spawn('sh', ['-c', `"${process.execPath}" kernel/run.mjs ${entry} --config "${config}" & echo "pid $!"; exec sleep 3600`], {
          stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, QUARRY_CRASH_SUPERSEDE_KILL: String(SUPERSEDE_KILL_CHANCE) },
        })
        shells.push(sh)
        let out = ''
        sh.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d))
        sh.stderr!.setEncoding('utf8').on('data', (d: string) => {
          out += d
          for (const _ of d.matchAll(/^supersede-kill /gm)) figures.supersedeKills++
        })
        const started = await waitFor(async () => Number(/^pid (\d+)$/m.exec(out)?.[1]) || null, 'the shell to start the service')
        const healthy = await waitFor(async () => {
          if (exitStatus(started) !== null) return 'exited'
          return (await fetch(`${base}/health`)).ok ? 'up' : null
        }, 'the service to start', 120_000, 50)
        if (healthy === 'up') {
          pid = started
          return
        }
        if (exitStatus(started)!.signal === 9) {
          // Killed itself in a supersede before it answered /health: start again.
          figures.killedStarting++
          continue
        }
        // Refused: the data folder (or one of its engines) was taken for another process's. Any other failed start is
        // counted apart, and fails the test as well.
        if (/is in use by/.test(out)) figures.refused++
        else figures.failedStarts++
        refusals.push(out.slice(-2000))
        if (refusals.length > 20) throw new Error(`restarts keep failing:\n${refusals.join('\n---\n')}`)
      }
    }

    const request = (path: string, init: RequestInit & { json?: unknown } = {}) =>
      fetch(`${base}${path}`, { ...init, headers: init.json !== undefined ? { 'content-type': 'application/json' } : init.headers, body: init.json !== undefined ? JSON.stringify(init.json) : init.body })

    await start('test/crash/service-child.ts')
    const kb = 'crash-loop'
    assert.equal((await request('/api/kb', { method: 'POST', json: { kb_id: kb } })).status, 201)

    // Uploads, while the service is killed and restarted under them.
    const accepted = new Map<number, string>()
    /** Uploads cut off in flight by a kill (their outcome is unknown), and answers other than 202 (by status). */
    const unknown = new Set<number>()
    const answers: Record<number, number> = {}
    let next = 0
    let uploadsDone = false
    const uploader = async () => {
      for (let i = next++; i < DOCUMENTS; i = next++) {
        const { text } = documentText(i)
        for (;;) {
          const form = new FormData()
          form.append('file', new Blob([text]), nameOf(i))
          try {
            const res = await request(`/api/kb/${kb}/docs/upload`, { method: 'POST', body: form })
            if (res.status === 202) accepted.set(i, ((await res.json()) as Json).doc_id)
            else answers[res.status] = (answers[res.status] ?? 0) + 1
            break
          } catch (err) {
            // Refused before anything was sent (the service is down): send it again. Cut off in flight: the outcome is
            // unknown, and the document is checked like any other the KB lists.
            if ((err as { cause?: { code?: string } }).cause?.code === 'ECONNREFUSED') {
              await sleep(50)
              continue
            }
            unknown.add(i)
            break
          }
        }
        await sleep(20)
      }
    }
    const uploading = Promise.all(Array.from({ length: UPLOADERS }, uploader)).then(() => (uploadsDone = true))

    while (figures.externalKills < KILLS || !uploadsDone) {
      await sleep(300 + Math.random() * 2200)
      if (exitStatus(pid) === null) {
        process.kill(pid, 'SIGKILL')
        figures.externalKills++
      }
      // At once: the killed process may not even be reaped yet.
      await start('test/crash/service-child.ts')
    }
    await uploading

    // The last start is the real service, as npm start runs it; it settles everything queued.
    if (exitStatus(pid) === null) {
      process.kill(pid, 'SIGKILL')
      figures.externalKills++
    }
    await start('kernel/main.ts')
    const counts = await waitFor(async () => {
      const c = ((await (await request(`/api/kb/${kb}/docs/status`)).json()) as Json).doc_counts
      return c.pending + c.running + c.uploading === 0 ? c : null
    }, 'every document to settle', 180_000, 500)

    const docs: Json[] = []
    for (let page = 1; ; page++) {
      const body = (await (await request(`/api/kb/${kb}/docs?page=${page}&page_size=100&sort_by=source&sort_order=asc`)).json()) as Json
      docs.push(...body.items)
      if (docs.length >= body.total || body.items.length === 0) break
    }
    const byId = new Map(docs.map((d) => [d.doc_id, d]))

    // Lost: an accepted upload that did not end indexed or outdated.
    const lost = [...accepted.values()].filter((id) => !['indexed', 'outdated'].includes(byId.get(id)?.status))
    // Search against status, for every document the KB lists (uploads of unknown outcome included).
    const disagreements: string[] = []
    const search = async (query: string, filter?: object) =>
      ((await (await request('/api/search', { method: 'POST', json: { query, kb_ids: [kb], options: { top_k: 10, ...(filter && { filter }) } } })).json()) as Json).results as Json[]
    for (const d of docs) {
      const word = marker(indexOf(d.source))
      if (d.status === 'indexed') {
        if (!(await search(word)).some((r) => r.doc_id === d.doc_id)) disagreements.push(`${d.doc_id} (${d.source}) indexed but not found by its marker`)
      } else if ((await search(word, { doc_ids: [d.doc_id] })).length > 0) {
        disagreements.push(`${d.doc_id} (${d.source}) ${d.status} but searchable`)
      }
    }
    const superseded = docs.filter((d) => d.status === 'outdated' && d.duplicate_of).length

    // Whole: with the service stopped, every document's points against its status and chunk_count, read from the
    // stores themselves (taking the data folder's lock: a clean stop released it).
    process.kill(pid, 'SIGTERM')
    assert.deepEqual(await waitFor(async () => exitStatus(pid), 'the service to stop', 60_000), { code: 0, signal: 0 }, 'the service stopped cleanly')
    const adapters = await createAdapters(resolveSettings(raw, {}).settings)
    try {
      for (const d of docs) {
        const points = (await adapters.vectors.docVectors(kb, d.doc_id)).length
        const want = d.status === 'indexed' ? d.chunk_count : 0
        if (points !== want) disagreements.push(`${d.doc_id} (${d.source}) ${d.status} with ${points} points, chunk_count ${d.chunk_count}`)
      }
    } finally {
      await closeAdapters(adapters)
    }

    t.diagnostic(`documents: ${DOCUMENTS} uploaded, ${accepted.size} accepted, ${unknown.size} cut off in flight, other answers ${JSON.stringify(answers)}, ${docs.length} listed (${JSON.stringify(counts)})`)
    t.diagnostic(`kills: ${figures.externalKills} from outside, ${figures.supersedeKills} mid-supersede (${figures.killedStarting} before /health); ${figures.restarts} starts`)
    t.diagnostic(`refused restarts: ${figures.refused}; other failed starts: ${figures.failedStarts}; disagreements: ${disagreements.length}; lost: ${lost.length}; superseded documents: ${superseded}`)
    assert.equal(figures.refused, 0, `refused restarts:\n${refusals.join('\n---\n')}`)
    assert.equal(figures.failedStarts, 0, `failed starts:\n${refusals.join('\n---\n')}`)
    assert.deepEqual(lost.map((id) => `${id} ${byId.get(id)?.status ?? 'missing'}`), [], 'every accepted upload ends indexed or outdated')
    assert.deepEqual(disagreements, [], 'search agrees with every status')
    // The run did what it is for: documents were superseded, and the service died in the middle of some supersedes.
    assert.ok(superseded > 0, 'revisions superseded older documents')
    assert.ok(figures.supersedeKills > 0, 'kills landed in the middle of supersedes')
  })
})
