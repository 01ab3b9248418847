// Page-exact citations through HTTP (issue 12, part 2): a paged document is split page by page, so a search
// result's page_num / page_label name the page its text is on, for every chunking strategy that runs in the
// worker and through auto-merge. On either driver set (page fields live in the vector payloads and, for
// parents, in the metadata store).
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, type StartOptions, type StartedApp } from '../helpers/app.ts'
import { makeDocx } from '../fixtures/make-docx.ts'
import { makePdf } from '../fixtures/make-pdf.ts'
import { newKb, settle, upload } from './docs.suite.ts'
import { search } from './search.suite.ts'

type Json = any

const fast = { queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 } }

/** Three short pages on unrelated subjects: together far below one chunk of the default size. */
const PAGES = [
  ['Glacier survey', '', 'Glaciers carve deep valleys as the ice creeps downhill.', 'Moraines mark where the ice once stopped.'],
  ['Orchard care', '', 'Prune the apple trees in late winter before buds open.', 'Thin the young fruit so the rest grows large.'],
  ['Violin making', '', 'The violin has four strings tuned in perfect fifths.', 'A bow strung with horsehair and rosin sets them ringing.'],
]
// i, ii, then A-1: labels that differ from the page numbers, as a report with a preface has them
const LABELS = [{ startIndex: 0, style: 'r' as const }, { startIndex: 2, style: 'D' as const, prefix: 'A-', start: 1 }]
const QUERIES = [
  { query: 'glacier moraines ice valleys', page_num: 1, page_label: 'i', word: 'Moraines' },
  { query: 'prune apple trees fruit', page_num: 2, page_label: 'ii', word: 'apple' },
  { query: 'violin strings horsehair bow', page_num: 3, page_label: 'A-1', word: 'horsehair' },
]

async function indexed(svc: StartedApp, kb: string, name: string, bytes: Uint8Array): Promise<Json> {
  const res = await upload(svc, kb, name, bytes)
  assert.equal(res.status, 202, await res.clone().text())
  const doc = await settle(svc, kb, ((await res.json()) as Json).doc_id)
  assert.equal(doc.status, 'indexed', doc.last_error)
  return doc
}

/** The best result of each query is on that query's page, and holds no text of another page. */
async function expectCitations(svc: StartedApp, kb: string, queries: typeof QUERIES, mode = 'hybrid'): Promise<Json[]> {
  const tops: Json[] = []
  for (const q of queries) {
    const { status, body } = await search(svc, { query: q.query, kb_ids: [kb], options: { top_k: 5, mode } })
    assert.equal(status, 200)
    const top = body.results[0]
    assert.ok(top, `no result for '${q.query}'`)
    assert.match(top.text, new RegExp(q.word), `'${q.query}' finds its page first`)
    assert.deepEqual([top.page_num, top.page_label], [q.page_num, q.page_label], `'${q.query}' is cited on page ${q.page_num}`)
    for (const other of queries) if (other !== q) assert.doesNotMatch(top.text, new RegExp(other.word), 'no text of another page')
    tops.push(top)
  }
  return tops
}

export function citationsSuite(label: string, opts: StartOptions): void {
  const start = (t: Parameters<typeof startApp>[0]) => startApp(t, { ...opts, settings: { ...fast, ...opts.settings } })

  it(`${label}: a PDF whose pages fit in one chunk is cited on the page the text is on, with its label`, async (t) => {
    const svc = await start(t)
    const kb = await newKb(svc)
    const doc = await indexed(svc, kb, 'field-notes.pdf', await makePdf({ title: 'Field notes', pages: PAGES, pageLabels: LABELS }))
    assert.equal(doc.chunk_count, 3, 'one chunk per page')
    await expectCitations(svc, kb, QUERIES)
    await expectCitations(svc, kb, QUERIES, 'similarity')
  })

  it(`${label}: hierarchical chunks and auto-merge keep a merged parent on its page`, async (t) => {
    const svc = await start(t)
    const kb = await newKb(svc, {
      'chunking.strategy': 'hierarchical', 'chunking.chunk_size': [1024, 64], 'chunking.chunk_overlap': 0, 'chunking.min_chunk_chars': 10,
      'retrieval.auto_merge.enabled': true, 'retrieval.auto_merge.merge_threshold': 0.3,
    })
    const doc = await indexed(svc, kb, 'field-notes.pdf', await makePdf({ title: 'Field notes', pages: PAGES, pageLabels: LABELS }))
    const parents = await svc.app.adapters.sql.query<Json>('SELECT page_num, page_label, text FROM parent_chunks WHERE doc_id = $1 ORDER BY page_num', [doc.doc_id])
    assert.deepEqual(parents.map((p: Json) => [p.page_num, p.page_label]), [[1, 'i'], [2, 'ii'], [3, 'A-1']], 'one parent per page')
    const { body } = await search(svc, { query: 'violin strings tuned fifths bow horsehair rosin ringing', kb_ids: [kb], options: { top_k: 10, mode: 'similarity' } })
    const merged = body.results.filter((r: Json) => r.merged)
    assert.ok(merged.length >= 1, JSON.stringify(body.results.map((r: Json) => [r.chunk_id, r.merged, r.page_num])))
    const violin = merged.find((r: Json) => /horsehair/.test(r.text))
    assert.ok(violin, 'the violin page merged')
    assert.deepEqual([violin.page_num, violin.page_label], [3, 'A-1'])
    assert.doesNotMatch(violin.text, /Glacier|Orchard/, 'the merged parent holds page 3 only')
  })

  it(`${label}: a docx saved by Word is cited on Word's pages; a docx never laid out is one page`, async (t) => {
    const svc = await start(t)
    const pages = PAGES.map((lines) => lines.filter(Boolean))
    const words = QUERIES.map((q) => ({ ...q, page_label: String(q.page_num) }))
    for (const pageBreaks of ['rendered', 'both'] as const) {
      const kb = await newKb(svc)
      const doc = await indexed(svc, kb, 'field-notes.docx', await makeDocx({ pages, pageBreaks }))
      assert.equal(doc.chunk_count, 3, `${pageBreaks}: one chunk per page`)
      await expectCitations(svc, kb, words)
    }
    // explicit page breaks alone say nothing of where pages overflowed: no page number is made up
    const kb = await newKb(svc)
    const doc = await indexed(svc, kb, 'generated.docx', await makeDocx({ pages, pageBreaks: 'hard' }))
    assert.equal(doc.chunk_count, 1)
    const { body } = await search(svc, { query: 'violin strings horsehair bow', kb_ids: [kb] })
    assert.deepEqual([body.results[0].page_num, body.results[0].page_label], [1, '1'])
  })
}
