// What moves hybrid nDCG@10: the same chunks and vectors as the service (bench/orama/data.ts), our embedded
// store searched directly, and the service's in-KB fusion with other alpha, rrf_k and list depths, plus
// sparse encoder and chunking variants. A prototype bench for proposing setting changes, not a gate.
//
//   npx tsx bench/eval/tune.ts [--dataset DIR] [--limit-docs N] [--limit-queries M] [--part fusion,encoder,chunking,hnsw]
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { embedTexts } from '../../adapters/embedders/builtin.ts'
import type { VectorHit, VectorPoint } from '../../adapters/ports.ts'
import { createEmbeddedVectorStore } from '../../adapters/vectors/embedded.ts'
import { chunkDocument, CHUNKING_DEFAULTS } from '../../compute/chunk/index.ts'
import { parseDocument } from '../../compute/parse/index.ts'
import { createSparseEncoder, encodeQuery, type SparseEncoderOptions } from '../../compute/text/sparse.ts'
import { fuseInKb } from '../../plugins/search/fusion.ts'
import { DIMS, prepare, type PreparedChunk, type PreparedData } from '../orama/data.ts'
import { createQuarryEngine } from '../orama/engines.ts'
import { readBeir } from './beir.ts'
import { corpusFiles } from './corpus-files.ts'
import { firstPerDocument, score } from './metrics.ts'

const KB = 'tune'

interface Lists {
  dense: VectorHit[]
  sparse: VectorHit[]
}

async function searchAll(chunks: readonly PreparedChunk[], data: PreparedData, depth: number, sparseOpts?: SparseEncoderOptions): Promise<Map<string, Lists>> {
  const dir = mkdtempSync(join(tmpdir(), 'quarry-tune-'))
  const store = await createEmbeddedVectorStore({ dir, dimensions: DIMS, snapshotIdleMs: 0, snapshotOnClose: false })
  try {
    await store.ensureCollection(KB, DIMS)
    const enc = sparseOpts ? createSparseEncoder(sparseOpts) : null
    for (let i = 0; i < chunks.length; i += 256) {
      await store.upsert(KB, chunks.slice(i, i + 256).map((c, j): VectorPoint => ({
        dense: c.dense,
        sparse: enc ? enc.encodeDocument(c.text) : c.sparse,
        payload: {
          chunk_id: `c${i + j}`, kb_id: KB, doc_id: c.doc, chunk_index: c.index, title: '', source_type: 's3', source: c.doc, doc_type: 'txt',
          page_num: 1, page_label: '1', text: '', start: 0, end: 0, parent_chunk_id: null, updated_at: '',
        },
      })))
    }
    await store.whenIndexed(KB)
    const out = new Map<string, Lists>()
    for (const q of data.queries) {
      const sparse = enc ? enc.encodeQuery(q.text) : encodeQuery(q.text)
      // The fields read later, copied now: a hit's payload is read from the store, which is closed below.
      const own = (hits: VectorHit[]): VectorHit[] => hits.map((h) => ({ id: h.id, score: h.score, payload: { doc_id: h.payload.doc_id, chunk_id: h.payload.chunk_id } as VectorHit['payload'] }))
      const lists = await store.search(KB, { dense: q.dense, sparse, limit: depth })
      out.set(q.id, { dense: own(lists.dense), sparse: own(lists.sparse) })
    }
    return out
  } finally {
    await store.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

const docsOf = (hits: readonly { payload: { doc_id: string } }[], k = 100) => firstPerDocument(hits.slice(0, k).map((h) => h.payload.doc_id))
/** In-KB fusion as the service does it, as the fused hits. */
const fused = (dense: VectorHit[], sparse: VectorHit[], alpha: number, k: number) => fuseInKb(dense, sparse, alpha, k).map((r) => r.hit)

function fusionTable(lists: Map<string, Lists>, data: PreparedData, label: string, depths = [40, 400]) {
  const qrels = data.dataset.qrels
  const ndcg = (f: (l: Lists) => string[]) => score(new Map([...lists].map(([q, l]) => [q, f(l)])), qrels).ndcg_at_10
  console.log(`\n## ${label}`)
  console.log(`sparse only ${ndcg((l) => docsOf(l.sparse)).toFixed(4)}   dense only ${ndcg((l) => docsOf(l.dense)).toFixed(4)}`)
  const alphas = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
  const ks = [1, 3, 5, 10, 20, 60]
  for (const depth of depths) {
    console.log(`\ndepth ${depth} (service: max(4 * top_k, 40)); rows rrf_k, columns alpha`)
    console.log(`| rrf_k | ${alphas.join(' | ')} |`)
    for (const k of ks) {
      const cells = alphas.map((a) => ndcg((l) => docsOf(fused(l.dense.slice(0, depth), l.sparse.slice(0, depth), a, k))).toFixed(4))
      console.log(`| ${k} | ${cells.join(' | ')} |`)
    }
  }
  // Score-based fusion (what Orama and many engines do): min-max normalised scores, weighted.
  const convex = (l: Lists, a: number) => {
    const norm = (hits: VectorHit[]) => {
      const max = hits[0]?.score ?? 1
      const min = hits.at(-1)?.score ?? 0
      return new Map(hits.map((h) => [h.payload.chunk_id, { h, s: max > min ? (h.score - min) / (max - min) : 1 }]))
    }
    const d = norm(l.dense.slice(0, 400))
    const s = norm(l.sparse.slice(0, 400))
    const all = new Map<string, { h: VectorHit; s: number }>()
    for (const [id, x] of d) all.set(id, { h: x.h, s: a * x.s })
    for (const [id, x] of s) {
      const cur = all.get(id)
      if (cur) cur.s += (1 - a) * x.s
      else all.set(id, { h: x.h, s: (1 - a) * x.s })
    }
    return docsOf([...all.values()].sort((x, y) => y.s - x.s).map((x) => x.h))
  }
  console.log(`\nmin-max score fusion, depth 400: ${alphas.map((a) => `alpha ${a}: ${ndcg((l) => convex(l, a)).toFixed(4)}`).join(', ')}`)
  // Does the dense list help where it moves the sparse ranking? Queries whose nDCG@10 fusion raises or lowers against
  // sparse only, and how often a random half of the queries finds fused below the better single list (what a
  // held-back query set may show).
  const perQuery = (f: (l: Lists) => string[]) => new Map([...lists].map(([q, l]) => [q, score(new Map([[q, f(l)]]), new Map([[q, qrels.get(q)!]])).ndcg_at_10]))
  const sparseQ = perQuery((l) => docsOf(l.sparse))
  const denseQ = perQuery((l) => docsOf(l.dense))
  const ids = [...lists.keys()]
  let seed = 1
  const random = () => (seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff) / 0x7fffffff
  const halves = Array.from({ length: 1000 }, () => ids.filter(() => random() < 0.5))
  const mean = (m: Map<string, number>, qs: string[]) => qs.reduce((s, q) => s + m.get(q)!, 0) / Math.max(1, qs.length)
  console.log('\nagainst sparse only, per query (depth 400): alpha, k: better / worse queries; halves of the queries where fused < max(sparse, dense)')
  const variants: [string, (l: Lists) => string[]][] = [[0.02, 3], [0.05, 3], [0.1, 3], [0.2, 3], [0.5, 60]].map(([a, k]) =>
    [`alpha ${a}, k ${k}`, (l: Lists) => docsOf(fused(l.dense, l.sparse, a, k))])
  variants.push(['min-max score fusion, alpha 0.2', (l) => convex(l, 0.2)])
  for (const [label, f] of variants) {
    const fusedQ = perQuery(f)
    const better = ids.filter((q) => fusedQ.get(q)! > sparseQ.get(q)! + 1e-9).length
    const worse = ids.filter((q) => fusedQ.get(q)! < sparseQ.get(q)! - 1e-9).length
    const below = halves.filter((h) => mean(fusedQ, h) < Math.max(mean(sparseQ, h), mean(denseQ, h)) - 1e-9).length
    console.log(`${label}: ${mean(fusedQ, ids).toFixed(4)}, ${better} better / ${worse} worse; below in ${(below / 10).toFixed(1)} % of halves`)
  }
}

/** titleEveryChunk: the document title is put before every chunk but the first (which starts with it) before encoding. */
async function rechunk(dir: string, data: PreparedData, opts: { chunk_size: number; chunk_overlap: number; titleEveryChunk?: boolean }): Promise<PreparedChunk[]> {
  const ds = readBeir(dir, { limitDocs: data.dataset.corpus.length < data.dataset.full.docs ? data.dataset.corpus.length : undefined })
  const { files, idBySource } = corpusFiles(ds.corpus)
  const chunks: PreparedChunk[] = []
  for (const f of files) {
    const parsed = await parseDocument({ bytes: f.bytes.slice(), filename: f.name, policy: 'lenient' })
    const title = parsed.pages[0]?.text.split('\n')[0] ?? ''
    chunkDocument(parsed.pages, { ...CHUNKING_DEFAULTS, chunk_size: opts.chunk_size, chunk_overlap: opts.chunk_overlap }).chunks.forEach((c, index) => {
      const text = opts.titleEveryChunk && c.start > 0 ? `${title}\n\n${c.text}` : c.text
      chunks.push({ doc: idBySource.get(f.name)!, index, text, dense: new Float32Array(0), sparse: createSparseEncoder().encodeDocument(text) })
    })
  }
  const dense = embedTexts(chunks.map((c) => c.text), DIMS)
  chunks.forEach((c, i) => (c.dense = dense.subarray(i * DIMS, (i + 1) * DIMS)))
  return chunks
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { values } = parseArgs({ options: { dataset: { type: 'string' }, 'limit-docs': { type: 'string' }, 'limit-queries': { type: 'string' }, part: { type: 'string' } } })
  const dir = values.dataset ?? join(import.meta.dirname, '..', '..', '..', 'shared', 'datasets', 'scifact')
  const parts = new Set((values.part ?? 'fusion,encoder,chunking').split(','))
  const data = await prepare(dir, { limitDocs: values['limit-docs'] ? Number(values['limit-docs']) : undefined, limitQueries: values['limit-queries'] ? Number(values['limit-queries']) : undefined })
  console.log(`${data.dataset.name}: ${data.dataset.corpus.length} docs, ${data.chunks.length} chunks, ${data.queries.length} queries`)
  if (parts.has('fusion')) fusionTable(await searchAll(data.chunks, data, 400), data, 'default chunks and sparse encoder')
  if (parts.has('hnsw')) {
    // Dense recall of the HNSW graph against an exact scan, at the peer bench's depth (20 chunks) and the eval's (100).
    for (const [label, store] of [['ef 128 (default)', {}], ['ef 256', { expansionSearch: 256 }], ['ef 512', { expansionSearch: 512 }], ['exact scan', { exactBudget: 1 << 30 }]] as const) {
      const e = createQuarryEngine({ store })
      await e.build(data.chunks)
      for (const k of [20, 100]) {
        const runs = new Map<string, string[]>()
        const t = performance.now()
        for (const q of data.queries) runs.set(q.id, firstPerDocument((await e.search('vector', q, k)).map((n) => data.chunks[n].doc)))
        const qps = data.queries.length / ((performance.now() - t) / 1000)
        console.log(`${label}, k ${k}: dense nDCG@10 ${score(runs, data.dataset.qrels).ndcg_at_10.toFixed(4)}, ${qps.toFixed(0)} q/s`)
      }
      await e.close()
    }
  }
  if (parts.has('encoder')) {
    for (const o of [{ avgLen: 150 }, { avgLen: 200 }, { k1: 0.9, b: 0.4 }, { k1: 0.9, b: 0.4, avgLen: 150 }] as SparseEncoderOptions[]) {
      const lists = await searchAll(data.chunks, data, 400, o)
      const qrels = data.dataset.qrels
      const ndcg = (f: (l: Lists) => string[]) => score(new Map([...lists].map(([q, l]) => [q, f(l)])), qrels).ndcg_at_10
      console.log(`\nencoder ${JSON.stringify(o)}: sparse ${ndcg((l) => docsOf(l.sparse)).toFixed(4)}, hybrid a0.5 k60 depth400 ${ndcg((l) => docsOf(fused(l.dense, l.sparse, 0.5, 60))).toFixed(4)}, a0.3 k60 ${ndcg((l) => docsOf(fused(l.dense, l.sparse, 0.3, 60))).toFixed(4)}`)
    }
  }
  if (parts.has('chunking')) {
    for (const c of [{ chunk_size: 1024, chunk_overlap: 128, titleEveryChunk: true }, { chunk_size: 2048, chunk_overlap: 128 }, { chunk_size: 4096, chunk_overlap: 128 }]) {
      const chunks = await rechunk(dir, data, c)
      const lists = await searchAll(chunks, data, 400)
      const qrels = data.dataset.qrels
      const ndcg = (f: (l: Lists) => string[]) => score(new Map([...lists].map(([q, l]) => [q, f(l)])), qrels).ndcg_at_10
      void ndcg
      fusionTable(lists, data, `chunking ${JSON.stringify(c)} (${chunks.length} chunks)`, [400])
    }
  }
}
