import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { firstPerDocument, mrrAt, ndcgAt, recallAt, score } from '../../bench/eval/metrics.ts'
import { readBeir } from '../../bench/eval/beir.ts'
import { corpusFiles } from '../../bench/eval/corpus-files.ts'
import { runEval, targetsFor, type ModeResult } from '../../bench/eval/run.ts'
import { parseCli } from '../../bench/eval.ts'

const close = (actual: number, expected: number, what: string) => assert.ok(Math.abs(actual - expected) < 1e-6, `${what}: ${actual} != ${expected}`)
const rel = (o: Record<string, number>) => new Map(Object.entries(o))

test('nDCG@10 with binary judgements: one of two relevant documents at rank 2', () => {
  // DCG = 1/log2(3); IDCG = 1 + 1/log2(3)
  close(ndcgAt(['a', 'b', 'c'], rel({ b: 1, d: 1 }), 10), 0.63092975 / 1.63092975, 'nDCG')
})

test('nDCG@10 with graded judgements uses linear gain', () => {
  // ranked b (1), a (2): DCG = 1 + 2/log2(3) = 2.2618595; ideal a, b: 2 + 1/log2(3) = 2.6309298
  close(ndcgAt(['b', 'a'], rel({ a: 2, b: 1 }), 10), 2.2618595 / 2.6309298, 'nDCG')
  close(ndcgAt(['a', 'b'], rel({ a: 2, b: 1 }), 10), 1, 'ideal order')
})

test('metrics cut at their depth', () => {
  const ranked = [...Array.from({ length: 10 }, (_, i) => `x${i}`), 'hit']
  const r = rel({ hit: 1 })
  assert.equal(ndcgAt(ranked, r, 10), 0)
  assert.equal(mrrAt(ranked, r, 10), 0)
  assert.equal(recallAt(ranked, r, 100), 1)
  assert.equal(recallAt(ranked, r, 10), 0)
  close(ndcgAt(ranked, r, 11), 1 / Math.log2(12), 'nDCG@11')
})

test('recall@100 and MRR@10 by hand', () => {
  const r = rel({ a: 1, b: 1, c: 1, z: 0 })
  close(recallAt(['z', 'q', 'b', 'a'], r, 100), 2 / 3, 'recall')
  close(mrrAt(['z', 'q', 'b', 'a'], r, 10), 1 / 3, 'MRR')
  assert.equal(mrrAt([], r, 10), 0)
})

test('firstPerDocument keeps each document at its best rank', () => {
  assert.deepEqual(firstPerDocument(['x', 'y', 'x', 'z', 'y']), ['x', 'y', 'z'])
})

test('score averages over judged queries; a query without a run counts 0, one without a positive judgement is skipped', () => {
  const qrels = new Map([
    ['q1', rel({ a: 1 })],
    ['q2', rel({ b: 1 })],
    ['q3', rel({ c: 0 })],
  ])
  const s = score(new Map([['q1', ['a']], ['q3', ['c']]]), qrels)
  assert.equal(s.queries, 2)
  close(s.ndcg_at_10, 0.5, 'nDCG')
  close(s.recall_at_100, 0.5, 'recall')
  close(s.mrr_at_10, 0.5, 'MRR')
})

function writeBeir(dir: string, corpus: { _id: string; title: string; text: string }[], queries: { _id: string; text: string }[], qrels: [string, string, number][]) {
  mkdirSync(join(dir, 'qrels'), { recursive: true })
  writeFileSync(join(dir, 'corpus.jsonl'), corpus.map((d) => JSON.stringify(d)).join('\n') + '\n')
  writeFileSync(join(dir, 'queries.jsonl'), queries.map((q) => JSON.stringify(q)).join('\n') + '\n')
  writeFileSync(join(dir, 'qrels', 'test.tsv'), ['query-id\tcorpus-id\tscore', ...qrels.map((r) => r.join('\t'))].join('\n') + '\n')
}

test('BEIR reader: judged queries only, header skipped, limits keep the relevant documents', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'quarry-beir-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  writeBeir(
    dir,
    [
      { _id: 'd1', title: 'One', text: 'first' },
      { _id: 'd2', title: '', text: 'second' },
      { _id: 'd 3 / x', title: 'Three', text: 'third' },
      { _id: 'd4', title: 'Four', text: 'fourth' },
    ],
    [
      { _id: 'q1', text: 'about three' },
      { _id: 'q2', text: 'not judged' },
      { _id: 'q3', text: 'judged not relevant only' },
      { _id: 'q4', text: 'about four' },
    ],
    [['q1', 'd 3 / x', 1], ['q3', 'd1', 0], ['q4', 'd4', 2]],
  )
  const all = readBeir(dir)
  assert.equal(all.name, dir.split('/').pop())
  assert.deepEqual(all.queries.map((q) => q.id), ['q1', 'q4'])
  assert.equal(all.corpus.length, 4)
  assert.deepEqual(all.corpus[2], { id: 'd 3 / x', title: 'Three', text: 'third' })
  assert.equal(all.qrels.get('q4')?.get('d4'), 2)
  assert.deepEqual(all.full, { docs: 4, queries: 2 })

  const small = readBeir(dir, { limitQueries: 1, limitDocs: 2 })
  assert.deepEqual(small.queries.map((q) => q.id), ['q1'])
  assert.deepEqual([...small.qrels.keys()], ['q1'])
  // The relevant document first, then others in corpus order; corpus order is kept.
  assert.deepEqual(small.corpus.map((d) => d.id), ['d1', 'd 3 / x'])

  const files = corpusFiles(all.corpus)
  assert.equal(files.idBySource.get(files.files[2].name), 'd 3 / x')
  assert.equal(new TextDecoder().decode(files.files[2].bytes), 'Three\n\nthird')
  assert.equal(new TextDecoder().decode(files.files[1].bytes), 'second')
  const md = corpusFiles(all.corpus, 'md')
  assert.match(md.files[2].name, /\.md$/)
  assert.equal(md.idBySource.get(md.files[2].name), 'd 3 / x')
  assert.equal(new TextDecoder().decode(md.files[2].bytes), '# Three\n\nthird')
})

test('BEIR reader names a missing file', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'quarry-beir-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  assert.throws(() => readBeir(dir), /corpus\.jsonl is missing/)
})

test('targets: SciFact hybrid against BM25 0.665, autorag-ko hybrid against sparse-only', () => {
  const m = (mode: ModeResult['mode'], ndcg: number): ModeResult => ({ mode, options: {}, ndcg_at_10: ndcg, recall_at_100: 0, mrr_at_10: 0, queries: 1, mean_latency_ms: 0 })
  assert.equal(targetsFor('scifact', [m('hybrid', 0.66)])[0].met, false)
  assert.equal(targetsFor('scifact', [m('hybrid', 0.67)])[0].met, true)
  assert.equal(targetsFor('autorag-ko', [m('sparse', 0.8), m('hybrid', 0.79)])[0].met, false)
  assert.deepEqual(targetsFor('other', [m('hybrid', 0.1)]), [])
})

test('command line: limits, modes and in-process settings', () => {
  const o = parseCli(['--dataset', '/d', '--limit-docs', '5', '--limit-queries', '3', '--modes', 'sparse,hybrid', '--alpha', '0.3', '--set', 'retrieval.hybrid.rrf_k=20'])
  assert.equal(o.limitDocs, 5)
  assert.equal(o.limitQueries, 3)
  assert.deepEqual(o.modes, ['sparse', 'hybrid'])
  assert.equal(o.alpha, 0.3)
  assert.deepEqual(o.settings, { retrieval: { hybrid: { rrf_k: 20 } } })
  assert.equal(o.dedup, false)
  assert.throws(() => parseCli([]), /--dataset/)
  assert.throws(() => parseCli(['--dataset', '/d', '--modes', 'bm25']), /unknown mode/)
  assert.throws(() => parseCli(['--dataset', '/d', '--top-k', '500']), /at most 100/)
  assert.equal(parseCli(['--dataset', '/d', '--split', '10']).split, 10)
  assert.throws(() => parseCli(['--dataset', '/d', '--split', '0']), /--split must be a positive integer/)
})

test('end to end: 5 documents and 3 queries through an in-process service', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'quarry-eval-e2e-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  writeBeir(
    dir,
    [
      { _id: 'volcano', title: 'Volcanic eruptions', text: 'Magma rises through the crust and erupts as lava from a volcano, with ash clouds.' },
      { _id: 'bees', title: 'Honey bees', text: 'A honey bee colony has a queen, drones and worker bees that collect pollen and nectar.' },
      { _id: 'chess', title: 'Chess openings', text: 'The Sicilian defence and the French defence answer the king pawn opening in chess.' },
      { _id: 'bread', title: 'Sourdough bread', text: 'Sourdough starter ferments flour and water with wild yeast before the bread is baked.' },
      { _id: 'tides', title: 'Ocean tides', text: 'The gravity of the moon and the sun raises the ocean tides twice a day on the coast.' },
    ],
    [
      { _id: 'q-lava', text: 'lava from a volcano' },
      { _id: 'q-queen', text: 'queen bee of a honey bee colony' },
      { _id: 'q-yeast', text: 'wild yeast sourdough starter' },
    ],
    [['q-lava', 'volcano', 1], ['q-queen', 'bees', 1], ['q-yeast', 'bread', 1]],
  )
  const lines: string[] = []
  const r = await runEval({ dataset: dir, log: (l) => lines.push(l), settings: { embedding: { vector_size: 256 } } })
  assert.equal(r.ingest.counts.indexed, 5)
  assert.equal(r.ingest.unreachable_judged, 0)
  assert.equal(r.settings.dedup_enabled, false)
  assert.deepEqual(r.modes.map((m) => m.mode), ['sparse', 'dense', 'hybrid', 'similarity'])
  for (const m of r.modes) {
    assert.equal(m.queries, 3, m.mode)
    // Each query shares distinctive words with its one relevant document only.
    assert.equal(m.mrr_at_10, 1, `${m.mode} MRR@10`)
    assert.equal(m.ndcg_at_10, 1, `${m.mode} nDCG@10`)
    assert.equal(m.recall_at_100, 1, `${m.mode} recall@100`)
  }
  assert.deepEqual(r.modes.find((m) => m.mode === 'sparse')?.options.hybrid, { alpha: 0 })
  assert.ok(lines.some((l) => l.startsWith('ingested 5 documents')))

  // The same corpus spread over two KBs searched together: entries 1, 3, 5 in one, 2 and 4 in the other.
  const split: string[] = []
  const r2 = await runEval({ dataset: dir, split: 2, kbId: 'evsplit', modes: ['hybrid'], log: (l) => split.push(l), settings: { embedding: { vector_size: 256 } } })
  assert.equal(r2.ingest.counts.indexed, 5)
  assert.equal(r2.settings.kbs, 2)
  assert.deepEqual(split.filter((l) => l.startsWith('ingested')).map((l) => l.split(' ').slice(0, 5).join(' ')).sort(), ['ingested 2 documents into evsplit-2', 'ingested 3 documents into evsplit-1'])
  // Each relevant document is its KB's first, and fused ahead of the other KB's first.
  assert.deepEqual(r2.modes.map((m) => [m.mode, m.queries, m.mrr_at_10, m.ndcg_at_10]), [['hybrid', 3, 1, 1]])
})
