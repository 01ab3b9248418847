// The peer comparison's shared input: a BEIR corpus chunked once exactly as the ingest pipeline does it
// (the same .txt file the evaluation uploads, parsed by the txt parser, chunked with the default settings),
// each chunk's built-in dense vector and sparse vector, and the judged queries with their dense vectors.
// Both engines index these very chunks and vectors, so only the engines differ.
import { embedTexts } from '../../adapters/embedders/builtin.ts'
import { contextHeader, encodingText } from '../../compute/chunk/context.ts'
import { chunkDocument, CHUNKING_DEFAULTS } from '../../compute/chunk/index.ts'
import { parseDocument } from '../../compute/parse/index.ts'
import { encodeDocument, type SparseVector } from '../../compute/text/sparse.ts'
import { readBeir, type BeirDataset } from '../eval/beir.ts'
import { corpusFiles } from '../eval/corpus-files.ts'

export const DIMS = 1024

export interface PreparedChunk {
  /** Corpus id of the chunk's document. */
  doc: string
  index: number
  text: string
  dense: Float32Array
  sparse: SparseVector
}

export interface PreparedQuery {
  id: string
  text: string
  dense: Float32Array
}

export interface PreparedData {
  dataset: BeirDataset
  chunks: PreparedChunk[]
  queries: PreparedQuery[]
  seconds: { chunk: number; embed: number }
}

export async function prepare(dir: string, opts: { limitDocs?: number; limitQueries?: number } = {}): Promise<PreparedData> {
  const dataset = readBeir(dir, opts)
  const { files, idBySource } = corpusFiles(dataset.corpus)
  const chunks: PreparedChunk[] = []
  let t = performance.now()
  for (const f of files) {
    const parsed = await parseDocument({ bytes: f.bytes.slice(), filename: f.name, policy: 'lenient' })
    const { chunks: cs } = chunkDocument(parsed.pages, { ...CHUNKING_DEFAULTS })
    const header = contextHeader(parsed.pages[0]?.text ?? '', parsed.title)
    const doc = idBySource.get(f.name)!
    // The text both engines index: what the service encodes (the title before every later chunk).
    cs.forEach((c, index) => chunks.push({ doc, index, text: encodingText(c.text, c.start, header), dense: new Float32Array(0), sparse: { indices: new Uint32Array(0), values: new Float32Array(0) } }))
  }
  const chunkSeconds = (performance.now() - t) / 1000
  t = performance.now()
  const dense = embedTexts(chunks.map((c) => c.text), DIMS)
  chunks.forEach((c, i) => {
    c.dense = dense.subarray(i * DIMS, (i + 1) * DIMS)
    c.sparse = encodeDocument(c.text)
  })
  const qdense = embedTexts(dataset.queries.map((q) => q.text), DIMS)
  // Each query vector in its own buffer, as the embedder hands them to the search service (usearch 2.26's
  // exactSearch reads a query view from the start of its buffer, ignoring byteOffset).
  const queries = dataset.queries.map((q, i) => ({ id: q.id, text: q.text, dense: qdense.slice(i * DIMS, (i + 1) * DIMS) }))
  return { dataset, chunks, queries, seconds: { chunk: chunkSeconds, embed: (performance.now() - t) / 1000 } }
}
