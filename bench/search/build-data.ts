// The search benchmark's data, written straight into the embedded vector store (ingesting 100k chunks through
// the upload pipeline would take longer than the benchmark): generated documents cut into 400-800 character
// chunks at sentence ends, built-in dense vectors and sparse vectors as the pipeline computes them, upserted
// into KB `one` (every chunk) and into `s0`..`s<n-1>` (the same chunks, whole documents dealt round-robin).
//
// Building the HNSW graphs is most of the time (about 2 ms a point at 1024 dimensions on one thread), so two
// child processes build at once, each in a store folder of its own (the store serves one process per folder):
// one builds `one`, the other the split KBs. Each closes its store, which snapshots; the KB folders are then
// moved under <dataDir>/vectors, where the service opens them without replaying a log. The metadata gets a KB row
// and an `indexed` row per document (registerSearchDocuments), as uploads would have left: the service deletes at
// start the points of a document that has no row (plugins/docs/reconcile.ts). A document's copy in a split KB is a
// document of its own there (doc_id `<kb>-<doc_id>`), since a document belongs to one KB.
import { fork } from 'node:child_process'
import { existsSync, promises as fs } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { Adapters, ChunkPayload, VectorPoint } from '../../adapters/ports.ts'
import { embedTexts } from '../../adapters/embedders/builtin.ts'
import { createEmbeddedVectorStore } from '../../adapters/vectors/embedded.ts'
import { encodeDocument } from '../../compute/text/sparse.ts'
import { createRng, text, vocabulary } from '../lib/corpus.ts'
import { progress } from '../lib/progress.ts'

export interface SearchDataOptions {
  /** The service's data_dir; vectors go to <dataDir>/vectors. */
  dataDir: string
  chunks: number
  dimensions: number
  /** KBs the chunks are spread over besides `one`: s0..s<splits-1>. */
  splits: number
  seed?: number
  /** Queries to draw from the chunks' own words (at most one per chunk). */
  queries?: number
}

/** Bumped when the layout changes: a kept folder of another format is built again. */
const FORMAT = 2

export interface SearchData {
  format: number
  chunks: number
  documents: number
  dimensions: number
  seed: number
  kbs: { one: string; split: string[] }
  /** Chunks per split KB. */
  split_sizes: number[]
  mean_chunk_chars: number
  queries: string[]
  /** Per builder process: generating texts + vectors, upserting, waiting for the graph, closing (snapshot). */
  build_ms: { one: PartTimes; split: PartTimes; total: number }
}

interface PartTimes {
  generate_and_encode: number
  upsert: number
  graph_wait: number
  close_and_snapshot: number
}

interface PartRequest {
  dir: string
  part: 'one' | 'split'
  chunks: number
  dimensions: number
  splits: number
  seed: number
  queries: number
}

interface PartResult {
  documents: number
  split_sizes: number[]
  mean_chunk_chars: number
  queries: string[]
  times: PartTimes
}

type ChildMessage = { type: 'progress'; done: number } | { type: 'result'; result: PartResult } | { type: 'error'; message: string }

const MANIFEST = 'search-bench.json'
const BATCH = 512
const FUNCTION_WORDS = new Set('the of and to in a is that for it as was with be by on not he this are or his from at which but have an they you were her'.split(' '))

export const splitKbIds = (splits: number): string[] => Array.from({ length: splits }, (_, i) => `s${i}`)

const wantedQueries = (opts: SearchDataOptions) => Math.min(opts.queries ?? 1000, opts.chunks)

/** A build left in `dataDir` by an earlier run with the same sizes, or null. */
export async function readSearchData(opts: SearchDataOptions): Promise<SearchData | null> {
  const file = join(opts.dataDir, MANIFEST)
  if (!existsSync(file)) return null
  const data = JSON.parse(await fs.readFile(file, 'utf8')) as SearchData
  const same = data.format === FORMAT && data.chunks === opts.chunks && data.dimensions === opts.dimensions && data.seed === (opts.seed ?? 7) &&
    data.kbs.split.length === opts.splits && data.queries.length === wantedQueries(opts)
  return same ? data : null
}

/** Sentences of one generated document grouped into chunks of 400-800 characters. */
function documentChunks(rnd: () => number, vocab: readonly string[], count: number): string[] {
  const body = text(rnd, vocab, count * 600)
  const sentences = body.replace(/\n\n/g, ' ').split(/(?<=\.) /)
  const out: string[] = []
  let cur = ''
  let target = 400 + Math.floor(rnd() * 400)
  for (const s of sentences) {
    cur = cur === '' ? s : `${cur} ${s}`
    if (cur.length >= target) {
      out.push(cur)
      cur = ''
      target = 400 + Math.floor(rnd() * 400)
    }
  }
  if (cur.length >= 200 || out.length === 0) out.push(cur)
  return out
}

/** A question in the corpus's words: 2-5 content words of one chunk, sometimes one unrelated word. */
function queryFrom(rnd: () => number, chunk: string, vocab: readonly string[]): string {
  const words = chunk.toLowerCase().replace(/[^a-z\s]/g, ' ').split(/\s+/).filter((w) => w.length > 2 && !FUNCTION_WORDS.has(w))
  const n = 2 + Math.floor(rnd() * 4)
  const picked: string[] = []
  for (let i = 0; i < n && words.length > 0; i++) picked.push(words[Math.floor(rnd() * words.length)])
  if (rnd() < 0.3) picked.push(vocab[Math.floor(rnd() * vocab.length)])
  return picked.join(' ')
}

interface GeneratedChunk {
  /** Index of the split KB its document goes to. */
  split: number
  payload: Omit<ChunkPayload, 'kb_id'>
}

/** The same chunks for the same seed, in batches of whole documents (a document's chunks share a split KB, as an upload's do). */
export function* generateChunks(total: number, splits: number, seed: number): Generator<GeneratedChunk[]> {
  const rnd = createRng(seed)
  const vocab = vocabulary(20_000, seed)
  let made = 0
  let docs = 0
  while (made < total) {
    const batch: GeneratedChunk[] = []
    while (batch.length < BATCH && made + batch.length < total) {
      const docId = Array.from({ length: 4 }, () => Math.floor(rnd() * 0x10000).toString(16).padStart(4, '0')).join('')
      const split = docs % splits
      docs++
      const texts = documentChunks(rnd, vocab, 5 + Math.floor(rnd() * 16)).slice(0, total - made - batch.length)
      let offset = 0
      texts.forEach((t, i) => {
        batch.push({
          split,
          payload: {
            chunk_id: `${docId}-${i}`, doc_id: docId, chunk_index: i, title: `Document ${docs} ${vocab[docs % vocab.length]}`,
            source_type: 's3', source: `doc-${String(docs).padStart(6, '0')}.md`, doc_type: 'md', page_num: 1, page_label: '1',
            text: t, start: offset, end: offset + t.length, parent_chunk_id: null, updated_at: '2025-01-01T00:00:00.000Z',
          },
        })
        offset += t.length + 1
      })
    }
    made += batch.length
    yield batch
  }
}

/** One builder process: `one` or the split KBs, in a store folder of its own. Progress counts upserts and graph insertions (2 per point). */
async function buildPart(req: PartRequest, onProgress: (done: number) => void): Promise<PartResult> {
  const dims = req.dimensions
  const split = splitKbIds(req.splits)
  const kbs = req.part === 'one' ? ['one'] : split
  const store = await createEmbeddedVectorStore({ dir: req.dir, dimensions: dims })
  const vocab = vocabulary(20_000, req.seed)
  const qrnd = createRng(req.seed + 1)
  const queries: string[] = []
  const queryEvery = Math.max(1, Math.floor(req.chunks / req.queries))
  const splitSizes = split.map(() => 0)
  const times: PartTimes = { generate_and_encode: 0, upsert: 0, graph_wait: 0, close_and_snapshot: 0 }
  let made = 0
  let chars = 0
  let documents = 0
  const inGraph = async () => {
    let n = 0
    for (const kb of kbs) n += (await store.stats(kb))?.inGraph ?? 0
    return n
  }
  try {
    for (const kb of kbs) await store.ensureCollection(kb, dims)
    for (const batch of generateChunks(req.chunks, req.splits, req.seed)) {
      const t0 = performance.now()
      const texts = batch.map((b) => b.payload.text)
      const dense = embedTexts(texts, dims)
      const sparse = texts.map((t) => encodeDocument(t))
      for (let i = 0; i < batch.length; i++) {
        chars += texts[i].length
        if (batch[i].payload.chunk_index === 0) documents++
        if ((made + i) % queryEvery === 0 && queries.length < req.queries) queries.push(queryFrom(qrnd, texts[i], vocab))
      }
      const t1 = performance.now()
      times.generate_and_encode += t1 - t0
      const point = (i: number, kbId: string): VectorPoint => {
        const p = batch[i].payload
        const ids = kbId === 'one' ? {} : { doc_id: `${kbId}-${p.doc_id}`, chunk_id: `${kbId}-${p.chunk_id}` }
        return { dense: dense.subarray(i * dims, (i + 1) * dims), sparse: sparse[i], payload: { ...p, ...ids, kb_id: kbId } }
      }
      const perSplit = split.map(() => [] as VectorPoint[])
      batch.forEach((b, i) => perSplit[b.split].push(point(i, split[b.split])))
      perSplit.forEach((points, k) => (splitSizes[k] += points.length))
      if (req.part === 'one') await store.upsert('one', batch.map((_, i) => point(i, 'one')))
      else await Promise.all(perSplit.map((points, k) => store.upsert(split[k], points)))
      times.upsert += performance.now() - t1
      made += batch.length
      onProgress(made + (await inGraph()))
    }
    // Graph building runs in slices on this thread; waiting for it here keeps it out of the search figures.
    const tg = performance.now()
    const timer = setInterval(() => void inGraph().then((n) => onProgress(made + n)), 1000)
    await store.whenIndexed()
    clearInterval(timer)
    onProgress(2 * made)
    times.graph_wait = performance.now() - tg
    const tc = performance.now()
    await store.close()
    times.close_and_snapshot = performance.now() - tc
  } catch (err) {
    await store.close().catch(() => {})
    throw err
  }
  for (const k of Object.keys(times) as (keyof PartTimes)[]) times[k] = Math.round(times[k])
  return { documents, split_sizes: splitSizes, mean_chunk_chars: Math.round(chars / Math.max(1, made)), queries, times }
}

function runPart(req: PartRequest, onProgress: (done: number) => void): Promise<PartResult> {
  const child = fork(fileURLToPath(import.meta.url), ['--search-data-part'], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  return new Promise((resolve, reject) => {
    let result: PartResult | undefined
    let error: string | undefined
    child.on('message', (m: ChildMessage) => {
      if (m.type === 'progress') onProgress(m.done)
      else if (m.type === 'result') result = m.result
      else error = m.message
    })
    child.once('error', reject)
    child.once('exit', (code) => {
      if (result !== undefined && code === 0) resolve(result)
      else reject(new Error(`search data builder (${req.part}) failed (exit ${code})${error ? `: ${error}` : ''}`))
    })
    child.send(req)
  })
}

/** Builds the vectors of every benchmark KB under <dataDir>/vectors (the folder is emptied first). */
export async function buildSearchData(opts: SearchDataOptions): Promise<SearchData> {
  const seed = opts.seed ?? 7
  const started = performance.now()
  await fs.rm(opts.dataDir, { recursive: true, force: true })
  await fs.mkdir(opts.dataDir, { recursive: true })
  const base = { chunks: opts.chunks, dimensions: opts.dimensions, splits: opts.splits, seed, queries: wantedQueries(opts) }
  const bar = progress('search data (upserts + graph insertions, 2 builder processes)', 4 * opts.chunks, { unit: 'ops' })
  const done = { one: 0, split: 0 }
  const [one, split] = await Promise.all((['one', 'split'] as const).map((part) =>
    runPart({ ...base, part, dir: join(opts.dataDir, `build-${part}`) }, (n) => {
      done[part] = n
      bar.set(done.one + done.split)
    })))
  bar.done()
  const vectors = join(opts.dataDir, 'vectors')
  await fs.mkdir(vectors)
  const splitIds = splitKbIds(opts.splits)
  for (const [part, kbs] of [['one', ['one']], ['split', splitIds]] as const) {
    for (const kb of kbs) await fs.rename(join(opts.dataDir, `build-${part}`, kb), join(vectors, kb))
    await fs.rm(join(opts.dataDir, `build-${part}`), { recursive: true, force: true })
  }
  const data: SearchData = {
    format: FORMAT, chunks: opts.chunks, documents: one.documents, dimensions: opts.dimensions, seed, kbs: { one: 'one', split: splitIds },
    split_sizes: split.split_sizes, mean_chunk_chars: one.mean_chunk_chars, queries: one.queries,
    build_ms: { one: one.times, split: split.times, total: Math.round(performance.now() - started) },
  }
  await fs.writeFile(join(opts.dataDir, MANIFEST), JSON.stringify(data))
  return data
}

/** A KB row per benchmark KB and an `indexed` row per document of its points, unless there already (a kept folder). */
export async function registerSearchDocuments(adapters: Pick<Adapters, 'sql' | 'vectors'>, data: Pick<SearchData, 'kbs'>): Promise<void> {
  const { sql, vectors } = adapters
  for (const kb of [data.kbs.one, ...data.kbs.split]) {
    await sql.query('INSERT INTO knowledge_bases (kb_id) VALUES ($1) ON CONFLICT (kb_id) DO NOTHING', [kb])
    const counts = await vectors.docChunkCounts(kb)
    await sql.query(
      `INSERT INTO documents (doc_id, kb_id, source, title, status, doc_type, chunk_count)
       SELECT d, $1, d || '.md', d, 'indexed', 'md', c FROM unnest($2::text[], $3::int[]) AS t(d, c) ON CONFLICT (doc_id) DO NOTHING`,
      [kb, [...counts.keys()], [...counts.values()]],
    )
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href && process.argv.includes('--search-data-part')) {
  process.once('message', (req: PartRequest) => {
    let last = 0
    const send = (m: ChildMessage) => new Promise<void>((resolve) => process.send!(m, () => resolve()))
    buildPart(req, (done) => {
      const now = performance.now()
      if (now - last < 250) return
      last = now
      void send({ type: 'progress', done })
    })
      .then((result) => send({ type: 'result', result }))
      .then(() => process.exit(0))
      .catch(async (err: unknown) => {
        await send({ type: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) })
        process.exit(1)
      })
  })
}
