import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { prepare } from '../../bench/orama/data.ts'
import { createOramaEngine, createQuarryEngine, SEARCH_MODES } from '../../bench/orama/engines.ts'

test('peer comparison: both engines index the same chunks and find the document a query is about', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'quarry-peer-test-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  mkdirSync(join(dir, 'qrels'))
  const long = 'Glaciers carve valleys as the ice moves slowly downhill under its own weight. '.repeat(30)
  const corpus = [
    { _id: 'glacier', title: 'Glaciers', text: long },
    { _id: 'comet', title: 'Comets', text: 'A comet nucleus of ice and dust grows a tail near the sun.' },
    { _id: 'violin', title: 'Violins', text: 'The violin has four strings tuned in fifths and is played with a bow.' },
  ]
  writeFileSync(join(dir, 'corpus.jsonl'), corpus.map((d) => JSON.stringify(d)).join('\n'))
  writeFileSync(join(dir, 'queries.jsonl'), [{ _id: 'q1', text: 'violin strings played with a bow' }, { _id: 'q2', text: 'comet tail near the sun' }].map((q) => JSON.stringify(q)).join('\n'))
  writeFileSync(join(dir, 'qrels', 'test.tsv'), 'query-id\tcorpus-id\tscore\nq1\tviolin\t1\nq2\tcomet\t1\n')

  const data = await prepare(dir)
  // The long document is split by the default chunker (1024 characters), the short ones are one chunk each.
  assert.ok(data.chunks.filter((c) => c.doc === 'glacier').length >= 2)
  assert.equal(data.chunks.filter((c) => c.doc === 'violin').length, 1)
  assert.equal(data.chunks[0].dense.length, 1024)

  for (const engine of [createQuarryEngine(), createOramaEngine(), createOramaEngine({ tuned: true })]) {
    t.after(() => engine.close())
    await engine.build(data.chunks)
    for (const mode of SEARCH_MODES) {
      for (const [qi, want] of [[0, 'violin'], [1, 'comet']] as const) {
        const hits = await engine.search(mode, data.queries[qi], 5)
        assert.ok(hits.length > 0, `${engine.name} ${mode}: no result`)
        assert.equal(data.chunks[hits[0]].doc, want, `${engine.name} ${mode} ${data.queries[qi].text}`)
      }
    }
  }
})
