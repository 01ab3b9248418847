// The evaluation talks to Quarry only through its public HTTP API, so the whole pipeline (upload, parse,
// chunk, embed, index, search) is what gets measured: a running service (`--url`) or one started here.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export interface QuarryClient {
  base: string
  headers: Record<string, string>
}

export interface UploadFile {
  name: string
  bytes: Uint8Array
}

export interface DocCounts {
  [status: string]: number
}

export interface SearchHit {
  doc_id: string
  source: string
  chunk_id: string
  score: number
}

async function call<T>(c: QuarryClient, method: string, path: string, body?: unknown, ok: number[] = [200]): Promise<T> {
  const init: RequestInit = { method, headers: { ...c.headers } }
  if (body instanceof FormData) init.body = body
  else if (body !== undefined) {
    init.body = JSON.stringify(body)
    ;(init.headers as Record<string, string>)['content-type'] = 'application/json'
  }
  let res: Response | undefined
  for (let attempt = 0; ; attempt++) {
    res = await fetch(`${c.base}${path}`, init)
    // A busy service may shed load with 503 (queue full): wait and retry rather than lose a document.
    if (res.status !== 503 || attempt >= 20 || body instanceof FormData) break
    await res.arrayBuffer()
    await new Promise((r) => setTimeout(r, 250 * (attempt + 1)))
  }
  const text = await res.text()
  if (!ok.includes(res.status)) throw new Error(`${method} ${path} answered ${res.status}: ${text.slice(0, 500)}`)
  return (text ? JSON.parse(text) : {}) as T
}

export const createKb = (c: QuarryClient, kbId: string) =>
  call(c, 'POST', '/api/kb', { kb_id: kbId, kb_name: kbId, description: 'retrieval evaluation (bench/eval.ts)' }, [201])

export const deleteKb = (c: QuarryClient, kbId: string) => call(c, 'DELETE', `/api/kb/${kbId}`, undefined, [200, 202, 204, 404])

export const putOverrides = (c: QuarryClient, kbId: string, overrides: Record<string, unknown>) =>
  call(c, 'PUT', `/api/kb/${kbId}/settings/overrides`, { overrides })

export const kbSettings = (c: QuarryClient, kbId: string) => call<Record<string, Record<string, unknown>>>(c, 'GET', `/api/kb/${kbId}/settings`)

export async function docCounts(c: QuarryClient, kbId: string): Promise<DocCounts> {
  return (await call<{ doc_counts: DocCounts }>(c, 'GET', `/api/kb/${kbId}/docs/status`)).doc_counts
}

/** The embedding model recorded on the KB's indexed documents. */
export async function embeddingModel(c: QuarryClient, kbId: string): Promise<string> {
  const page = await call<{ items: { embedding_model?: string | null }[] }>(c, 'GET', `/api/kb/${kbId}/docs?status=indexed&page_size=1`)
  return page.items[0]?.embedding_model ?? 'unknown'
}

export interface UploadOptions {
  /** Files per batch request. */
  batchSize?: number
  /** Batch requests in flight. */
  concurrency?: number
  onProgress?: (uploaded: number) => void
}

/** Uploads through the batch endpoint; returns the files the service refused, with its reason. */
export async function uploadAll(c: QuarryClient, kbId: string, files: readonly UploadFile[], opts: UploadOptions = {}): Promise<{ name: string; error: string }[]> {
  const size = opts.batchSize ?? 50
  const batches: UploadFile[][] = []
  for (let i = 0; i < files.length; i += size) batches.push(files.slice(i, i + size))
  let next = 0
  let uploaded = 0
  const refused: { name: string; error: string }[] = []
  const worker = async () => {
    while (next < batches.length) {
      const batch = batches[next++]
      const form = new FormData()
      for (const f of batch) form.append('files', new Blob([f.bytes]), f.name)
      const res = await call<{ results: { status?: string; title?: string; error?: string }[] }>(c, 'POST', `/api/kb/${kbId}/docs/upload/batch`, form, [202, 422])
      // Results come back in form order; a refused entry carries its title (the file name less extension).
      res.results.forEach((r, i) => {
        if (r.status === 'error') refused.push({ name: batch[i]?.name ?? String(r.title), error: String(r.error) })
      })
      uploaded += batch.length
      opts.onProgress?.(uploaded)
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, opts.concurrency ?? 2) }, worker))
  return refused
}

/** Polls the KB's counts until `total` documents have settled (indexed, failed or outdated). */
export async function waitSettled(c: QuarryClient, kbId: string, total: number, opts: { timeoutMs?: number; onProgress?: (settled: number) => void } = {}): Promise<DocCounts> {
  const deadline = Date.now() + (opts.timeoutMs ?? 3_600_000)
  for (;;) {
    const counts = await docCounts(c, kbId)
    const settled = (counts.indexed ?? 0) + (counts.failed ?? 0) + (counts.outdated ?? 0)
    opts.onProgress?.(settled)
    if (settled >= total) return counts
    if (Date.now() > deadline) throw new Error(`only ${settled} of ${total} documents settled in time: ${JSON.stringify(counts)}`)
    await new Promise((r) => setTimeout(r, 500))
  }
}

/** Failed documents with their reasons (for the report). */
export async function failedDocs(c: QuarryClient, kbId: string): Promise<{ source: string; last_error: string | null }[]> {
  const page = await call<{ items: { source: string; last_error: string | null }[] }>(c, 'GET', `/api/kb/${kbId}/docs?status=failed&page_size=100`)
  return page.items.map((d) => ({ source: d.source, last_error: d.last_error }))
}

export async function search(c: QuarryClient, kbIds: string | readonly string[], query: string, options: Record<string, unknown>): Promise<SearchHit[]> {
  const body = { query, kb_ids: typeof kbIds === 'string' ? [kbIds] : kbIds, options }
  return (await call<{ results: SearchHit[] }>(c, 'POST', '/api/search', body)).results
}

export interface InProcessService {
  client: QuarryClient
  dataDir: string
  close(): Promise<void>
}

/**
 * Quarry with its default plugins on the embedded engines, in a fresh data folder (removed on close unless
 * `dataDir` was given), listening on an ephemeral loopback port. `settings` are merged over the defaults.
 */
export async function startInProcess(opts: { dataDir?: string; settings?: Record<string, unknown> } = {}): Promise<InProcessService> {
  const { createApp } = await import('../../kernel/app.ts')
  const { resolveSettings } = await import('../../kernel/config/load.ts')
  const { createLogger } = await import('../../kernel/log.ts')
  const { defaultPlugins } = await import('../../kernel/plugins.ts')
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'quarry-eval-'))
  const { settings } = resolveSettings({ data_dir: dataDir, logging: { level: 'ERROR' }, ...opts.settings })
  const app = await createApp({ settings, plugins: defaultPlugins(), log: createLogger('ERROR') })
  let port: number
  try {
    port = await app.listen(0, '127.0.0.1')
  } catch (err) {
    await app.close()
    throw err
  }
  return {
    client: { base: `http://127.0.0.1:${port}`, headers: {} },
    dataDir,
    async close() {
      await app.close()
      if (!opts.dataDir) rmSync(dataDir, { recursive: true, force: true })
    },
  }
}
