import { test } from 'node:test'
import assert from 'node:assert/strict'
import { embedText } from '../../adapters/embedders/builtin.ts'
import { arrayFinder, textBreaks, textFinder } from '../../compute/chunk/breaks.ts'
import { checkChunkingOptions, chunkDocument, chunkSemantic, CHUNKING_DEFAULTS, type ChunkDocumentOptions } from '../../compute/chunk/index.ts'
import { splitRanges } from '../../compute/chunk/ranges.ts'
import { percentile } from '../../compute/chunk/semantic.ts'
import chunkTask from '../../compute/tasks/chunk.task.ts'
import type { Chunk, ChunkedDocument, PageText } from '../../compute/types.ts'
import { mulberry32 as rng } from '../../bench/lib/rng.ts'

const opts = (o: Partial<ChunkDocumentOptions> = {}): ChunkDocumentOptions => ({ ...CHUNKING_DEFAULTS, ...o })
const page = (text: string, n = 1, label = String(n)): PageText => ({ page_num: n, page_label: label, text })


const EN = 'search index vector chunk document quarry model query answer retrieval engine page text'.split(' ')
const KO = ['검색', '문서', '서비스', '데이터', '사용자', '결과', '모델', '질문', '답변', '지식']
const KO_END = ['한다.', '했다.', '있어요.', '인가요?', '입니다.']

/** English and Korean sentences in paragraphs, deterministic. */
function prose(seed: number, paragraphs: number): string {
  const r = rng(seed)
  const pick = <T>(a: readonly T[]) => a[Math.floor(r() * a.length)]
  const paras: string[] = []
  for (let p = 0; p < paragraphs; p++) {
    const sentences: string[] = []
    const korean = p % 2 === 1
    for (let s = 0, n = 2 + Math.floor(r() * 5); s < n; s++) {
      const words = Array.from({ length: 5 + Math.floor(r() * 10) }, () => (korean ? pick(KO) + pick(['은', '를', '에서', '']) : pick(EN)))
      sentences.push(korean ? `${words.join(' ')} ${pick(KO)}${pick(KO_END)}` : `${words.join(' ').replace(/^./, (c) => c.toUpperCase())}.`)
    }
    paras.push(sentences.join(' '))
  }
  return paras.join('\n\n')
}

/** The page a document offset falls in, computed from the page texts. */
function pageOf(pages: PageText[], offset: number): PageText {
  let start = 0
  for (let i = 0; i < pages.length; i++) {
    const next = start + pages[i].text.length + 2
    if (offset < next || i === pages.length - 1) return pages[i]
    start = next
  }
  throw new Error('no pages')
}

/** End offset of `page`'s text in the document text. */
function pageEnd(pages: PageText[], page: PageText): number {
  let end = 0
  for (const p of pages) {
    end += p.text.length
    if (p === page) return end
    end += 2
  }
  throw new Error('page not in the document')
}

/** Invariants every strategy keeps. */
function checkChunks(pages: PageText[], chunks: Chunk[], maxLen: number, minLen: number, code = false): void {
  const doc = pages.map((p) => p.text).join('\n\n')
  chunks.forEach((c, i) => {
    assert.ok(c.end <= pageEnd(pages, pageOf(pages, c.start)), `chunk ${i} spans two pages`)
    assert.equal(c.text, doc.slice(c.start, c.end), `chunk ${i}: text === docText.slice(start, end)`)
    assert.ok(c.text.length <= maxLen, `chunk ${i}: ${c.text.length} > ${maxLen}`)
    assert.ok(c.text.length >= minLen && c.text.length > 0, `chunk ${i}: ${c.text.length} < ${minLen}`)
    assert.equal(c.text, code ? c.text.trimEnd() : c.text.trim(), `chunk ${i} is trimmed`)
    const p = pageOf(pages, c.start)
    assert.equal(c.page_num, p.page_num)
    assert.equal(c.page_label, p.page_label)
  })
}

function checkOverlaps(chunks: Chunk[], overlap: number): void {
  for (let i = 1; i < chunks.length; i++) {
    const [a, b] = [chunks[i - 1], chunks[i]]
    assert.ok(b.start > a.start, 'chunks advance')
    assert.ok(a.end - b.start <= overlap, `overlap ${a.end - b.start} > ${overlap}`)
  }
}

/** Every non-whitespace character of the document is in some chunk. */
function checkCoverage(doc: string, chunks: Chunk[]): void {
  const covered = new Uint8Array(doc.length)
  for (const c of chunks) covered.fill(1, c.start, c.end)
  for (let i = 0; i < doc.length; i++) if (!/\s/.test(doc[i])) assert.equal(covered[i], 1, `offset ${i} (${JSON.stringify(doc.slice(i, i + 20))}) not covered`)
}

test('recursive: invariants, overlap bound and full coverage on English + Korean pages', () => {
  const pages = [page(prose(1, 12), 1, 'i'), page(prose(2, 9), 2, 'ii'), page(prose(3, 15), 3, '3')]
  for (const [size, overlap] of [[1024, 128], [256, 38], [64, 9]] as const) {
    const { chunks, parents } = chunkDocument(pages, opts({ chunk_size: size, chunk_overlap: overlap, min_chunk_chars: 0 }))
    assert.equal(parents.length, 0)
    assert.ok(chunks.length > 1)
    chunks.forEach((c, i) => { assert.equal(c.index, i); assert.equal(c.level, 0); assert.equal(c.parent, null) })
    checkChunks(pages, chunks, size, 1)
    checkOverlaps(chunks, overlap)
    checkCoverage(pages.map((p) => p.text).join('\n\n'), chunks)
    assert.ok(new Set(chunks.map((c) => c.page_label)).size === 3, 'chunks on every page')
  }
})

test('recursive: chunks end at sentence ends (English and Korean) when a sentence fits', () => {
  const text = prose(7, 30)
  const { chunks } = chunkDocument([page(text)], opts({ chunk_size: 300, chunk_overlap: 0, min_chunk_chars: 0 }))
  for (const c of chunks) assert.match(c.text, /[.?]$/, `ends mid-sentence: ...${c.text.slice(-30)}`)
  assert.ok(chunks.some((c) => /(다|요)\.$|가요\?$/.test(c.text)), 'some chunk ends with a Korean sentence ending')
})

test('recursive: paragraphs that fit are never split, and are merged greedily', () => {
  const paras = Array.from({ length: 20 }, (_, i) => `Paragraph ${i} ` + 'word '.repeat(40 + ((i * 7) % 30)).trim() + '.')
  const text = paras.join('\n\n')
  const { chunks } = chunkDocument([page(text)], opts({ chunk_size: 1024, chunk_overlap: 0, min_chunk_chars: 0 }))
  for (const c of chunks) {
    assert.ok(c.text.startsWith('Paragraph '), 'starts at a paragraph')
    assert.ok(c.text.endsWith('.'), 'ends at a paragraph end')
  }
  // greedy: no two neighbours would have fitted together
  for (let i = 1; i < chunks.length; i++) assert.ok(chunks[i].end - chunks[i - 1].start > 1024)
})

test('recursive: empty, blank and too-short texts give no chunk; min_chunk_chars is the floor', () => {
  assert.equal(chunkDocument([], opts()).chunks.length, 0)
  assert.equal(chunkDocument([page('')], opts()).chunks.length, 0)
  assert.equal(chunkDocument([page(' \n\n \t ')], opts()).chunks.length, 0)
  assert.equal(chunkDocument([page('too short')], opts({ min_chunk_chars: 30 })).chunks.length, 0)
  const text = '  twenty-seven characters!!  '
  assert.equal(chunkDocument([page(text)], opts({ min_chunk_chars: 26 })).chunks.length, 0)
  const ok = chunkDocument([page(text)], opts({ min_chunk_chars: 25 }))
  assert.equal(ok.chunks.length, 1)
  assert.equal(ok.chunks[0].text, 'twenty-seven characters!!')
  assert.equal(ok.chunks[0].start, 2)
  assert.equal(ok.chunks[0].end, 27)
})

test('recursive: a single word longer than chunk_size is cut at characters', () => {
  const word = 'x'.repeat(500)
  const text = `short start ${word} short end`
  for (const overlap of [0, 9]) {
    const { chunks } = chunkDocument([page(text)], opts({ chunk_size: 64, chunk_overlap: overlap, min_chunk_chars: 0 }))
    checkChunks([page(text)], chunks, 64, 1)
    checkCoverage(text, chunks)
    checkOverlaps(chunks, overlap)
    if (overlap === 0) assert.equal(chunks.map((c) => c.text).join('').replace(/\s/g, ''), text.replace(/\s/g, ''))
  }
  // astral characters are not cut in half
  const emoji = '😀'.repeat(100)
  const { chunks } = chunkDocument([page(emoji)], opts({ chunk_size: 65, chunk_overlap: 0, min_chunk_chars: 0 }))
  assert.equal(chunks.map((c) => c.text).join(''), emoji)
  for (const c of chunks) assert.ok(!/[\ud800-\udbff]$/.test(c.text))
})

test('recursive: overlap 0 gives disjoint chunks separated by whitespace only', () => {
  const text = prose(11, 10)
  const { chunks } = chunkDocument([page(text)], opts({ chunk_size: 200, chunk_overlap: 0, min_chunk_chars: 0 }))
  for (let i = 1; i < chunks.length; i++) {
    assert.ok(chunks[i].start >= chunks[i - 1].end)
    assert.match(text.slice(chunks[i - 1].end, chunks[i].start), /^\s+$/)
  }
})

test('recursive: overlap is word-aligned and repeats the end of the previous chunk', () => {
  const text = prose(5, 4).replace(/\n\n/g, ' ')
  const { chunks } = chunkDocument([page(text)], opts({ chunk_size: 256, chunk_overlap: 38, min_chunk_chars: 0 }))
  let overlapped = 0
  for (let i = 1; i < chunks.length; i++) {
    const [a, b] = [chunks[i - 1], chunks[i]]
    if (b.start < a.end) {
      overlapped++
      assert.ok(a.text.endsWith(text.slice(b.start, a.end)))
      assert.match(text[b.start - 1], /\s/, 'starts after a space')
    }
  }
  assert.ok(overlapped > 0)
})

test('recursive: CRLF line ends are handled like LF', () => {
  const lf = prose(21, 8)
  const crlf = lf.replace(/\n/g, '\r\n')
  const a = chunkDocument([page(lf)], opts({ chunk_size: 300, chunk_overlap: 0, min_chunk_chars: 0 })).chunks
  const b = chunkDocument([page(crlf)], opts({ chunk_size: 300, chunk_overlap: 0, min_chunk_chars: 0 })).chunks
  checkChunks([page(crlf)], b, 300, 1)
  assert.deepEqual(b.map((c) => c.text.replace(/\r\n/g, '\n')), a.map((c) => c.text))
  for (const c of b) assert.ok(!c.text.endsWith('\r'))
  // lone CR (old Mac files) takes the precomputed path and keeps the invariants
  const cr = lf.replace(/\n/g, '\r')
  const d = chunkDocument([page(cr)], opts({ chunk_size: 300, chunk_overlap: 30, min_chunk_chars: 0 })).chunks
  checkChunks([page(cr)], d, 300, 1)
  checkCoverage(cr, d)
})

test('the window-by-window break finder agrees with the precomputed break levels', () => {
  const r = rng(99)
  const pieces = ['word', 'Dr.', 'end.', 'why?', 'yes!', 'a,', 'b;', 'c:', '하지만', '했다.', '(note.)', '"quote."', '끝。다음', '東京、大阪', 'e.g.', '😀', 'x'.repeat(70)]
  const seps = [' ', ' ', ' ', '  ', '\n', '\n\n', '\r\n', '\r\n\r\n', ' \n \n ', '\t']
  for (let round = 0; round < 40; round++) {
    let text = ''
    for (let i = 0, n = 50 + Math.floor(r() * 300); i < n; i++) text += pieces[Math.floor(r() * pieces.length)] + seps[Math.floor(r() * seps.length)]
    if (round % 3 === 0) text = '  ' + text
    const lazy = textFinder(text)
    const full = arrayFinder(textBreaks(text))
    for (const [size, overlap, min] of [[64, 9, 0], [100, 15, 10], [300, 40, 30], [64, 0, 0]]) {
      const o = { size, overlap, minChars: min }
      assert.deepEqual(splitRanges(text, lazy, 0, text.length, o), splitRanges(text, full, 0, text.length, o), `round ${round} size ${size}`)
    }
  }
})

test('hierarchical: every level kept, children inside their parent, leaves alone overlap', () => {
  const pages = [page(prose(31, 20), 1), page(prose(32, 14), 2)]
  const doc = pages.map((p) => p.text).join('\n\n')
  for (const sizes of [[512, 128], [2048, 512, 128], [1024, 256, 64]]) {
    const overlap = Math.floor(sizes[sizes.length - 1] * 0.15)
    const min = 20
    const res: ChunkedDocument = chunkDocument(pages, opts({ strategy: 'hierarchical', chunk_size: sizes, chunk_overlap: overlap, min_chunk_chars: min }))
    const depth = sizes.length
    // a page's remainder shorter than min joins the chunk before it: at most min - 1 characters over the size
    checkChunks(pages, res.chunks, sizes[depth - 1] + min - 1, min)
    res.parents.forEach((p, i) => {
      assert.equal(p.index, i)
      assert.ok(p.level < depth - 1)
      assert.ok(p.text.length <= sizes[p.level] + min - 1)
      assert.equal(p.text, doc.slice(p.start, p.end))
      if (p.level === 0) assert.equal(p.parent, null)
      else {
        const up = res.parents[p.parent!]
        assert.equal(up.level, p.level - 1)
        assert.ok(up.start <= p.start && p.end <= up.end, 'parent covers child')
      }
    })
    const childCount = new Map<number, number>()
    res.chunks.forEach((c) => {
      assert.equal(c.level, depth - 1)
      const up = res.parents[c.parent!]
      assert.equal(up.level, depth - 2)
      assert.ok(up.start <= c.start && c.end <= up.end, 'leaf inside its parent')
      childCount.set(c.parent!, (childCount.get(c.parent!) ?? 0) + 1)
    })
    // every parent has at least one leaf below it
    const hasLeaf = new Set<number>()
    for (const c of res.chunks) for (let p: number | null = c.parent; p !== null; p = res.parents[p].parent) hasLeaf.add(p)
    assert.equal(hasLeaf.size, res.parents.length)
    // parents of one level never overlap; leaves overlap only under the same parent
    for (let i = 1; i < res.parents.length; i++) {
      const [a, b] = [res.parents[i - 1], res.parents[i]]
      if (a.level === b.level) assert.ok(b.start >= a.end)
    }
    for (let i = 1; i < res.chunks.length; i++) {
      const [a, b] = [res.chunks[i - 1], res.chunks[i]]
      if (a.parent !== b.parent) assert.ok(b.start >= a.end)
      else assert.ok(a.end - b.start <= overlap)
    }
    checkCoverage(doc, res.parents.filter((p) => p.level === 0))
  }
})

test('hierarchical: short leaves are dropped and not counted as children', () => {
  const text = 'Tiny.\n\n' + 'A longer paragraph that makes one real leaf chunk here.'
  const res = chunkDocument([page(text)], opts({ strategy: 'hierarchical', chunk_size: [128, 64], chunk_overlap: 0, min_chunk_chars: 30 }))
  assert.ok(res.chunks.every((c) => c.text.length >= 30))
  assert.ok(!res.chunks.some((c) => c.text === 'Tiny.'))
  const none = chunkDocument([page('Tiny.')], opts({ strategy: 'hierarchical', chunk_size: [128, 64], chunk_overlap: 0, min_chunk_chars: 30 }))
  assert.deepEqual(none, { chunks: [], parents: [] })
})

test('percentile interpolates linearly between ranks', () => {
  assert.ok(Math.abs(percentile([1, 2, 3, 4], 80) - 3.4) < 1e-12)
  assert.equal(percentile([5], 80), 5)
  assert.equal(percentile([3, 1, 2], 50), 2)
  assert.equal(percentile([0, 10], 100), 10)
})

test('semantic: breakpoints where the topic changes, with an embedding of topic words', async () => {
  const sports = ['The team won the football match.', 'The striker scored two goals.', 'Fans cheered in the stadium.']
  const cooking = ['Bake the bread in a hot oven.', 'Knead the dough for ten minutes.', 'Add salt and flour to the bowl.']
  const text = [...sports, ...cooking, ...sports.map((s) => s.replace('The', 'Then the'))].join(' ')
  const topic = (t: string) => Float32Array.from([(t.match(/team|striker|stadium|football|goal|fans/gi) ?? []).length, (t.match(/bake|bread|dough|salt|flour|oven/gi) ?? []).length])
  const calls: number[] = []
  const embed = async (texts: string[]) => { calls.push(texts.length); return texts.map(topic) }
  const res = await chunkSemantic([page(text)], opts({ strategy: 'semantic', chunk_size: 1024, semantic_threshold: 0.8, min_chunk_chars: 10 }), embed, { batchSize: 4 })
  assert.deepEqual(calls, [4, 4, 2], 'embedded in batches: 9 groups of 2 and the first sentence alone')
  checkChunks([page(text)], res.chunks, 1024, 10)
  assert.equal(res.chunks.length, 3)
  assert.ok(res.chunks[1].text.startsWith('Bake') && res.chunks[1].text.endsWith('bowl.'))
})

test('semantic: groups never exceed chunk_size and work with the builtin embedder', async () => {
  const text = prose(41, 12)
  const embed = async (texts: string[]) => texts.map((t) => embedText(t, 256))
  for (const size of [128, 400]) {
    const res = await chunkSemantic([page(text, 1), page(prose(42, 3), 2)], opts({ strategy: 'semantic', chunk_size: size, semantic_threshold: 0.5, min_chunk_chars: 0 }), embed)
    checkChunks([page(text, 1), page(prose(42, 3), 2)], res.chunks, size, 1)
    checkCoverage([text, prose(42, 3)].join('\n\n'), res.chunks)
  }
  const empty = await chunkSemantic([page('')], opts({ strategy: 'semantic' }), embed)
  assert.equal(empty.chunks.length, 0)
  const single = await chunkSemantic([page('One sentence only, long enough to keep.')], opts({ strategy: 'semantic' }), async () => { throw new Error('not called for one sentence') })
  assert.equal(single.chunks.length, 1)
})

/** Three pages that all fit in one chunk: one Roman-numbered label range, prose that differs per page. */
const shortPages = (): PageText[] => [
  page('Preface. Glaciers carve valleys over thousands of years, slowly.', 1, 'i'),
  page('Orchards need pruning in late winter before the buds open.', 2, 'ii'),
  page('The violin has four strings tuned in perfect fifths.\n\nA bow of horsehair sets them ringing.', 3, 'iii'),
]

test('pages: every strategy splits each page on its own, so a chunk is cited on the page its text is on', async () => {
  const pages = shortPages()
  const expectPerPage = (chunks: Chunk[], what: string) => {
    assert.deepEqual(chunks.map((c) => [c.page_num, c.page_label]), [[1, 'i'], [2, 'ii'], [3, 'iii']], what)
    assert.deepEqual(chunks.map((c) => c.text), pages.map((p) => p.text), what)
    checkChunks(pages, chunks, 1024, 1, what === 'code')
  }
  expectPerPage(chunkDocument(pages, opts({ chunk_size: 1024, chunk_overlap: 128 })).chunks, 'recursive')
  expectPerPage(chunkDocument(pages, opts({ kind: 'code', language: 'txt' })).chunks, 'code')
  const embed = async (texts: string[]) => texts.map(() => Float32Array.from([1, 0]))
  expectPerPage((await chunkSemantic(pages, opts({ strategy: 'semantic', chunk_size: 1024 }), embed)).chunks, 'semantic')
  const h = chunkDocument(pages, opts({ strategy: 'hierarchical', chunk_size: [1024, 512], chunk_overlap: 0 }))
  expectPerPage(h.chunks, 'hierarchical leaves')
  assert.deepEqual(h.parents.map((p) => [p.page_num, p.text]), pages.map((p) => [p.page_num, p.text]), 'one parent per page')
  assert.deepEqual(h.chunks.map((c) => c.parent), [0, 1, 2])
})

test('pages: overlap and parents stop at the page end on long pages', () => {
  const pages = [page(prose(61, 10), 1), page(prose(62, 10), 2), page(prose(63, 10), 3)]
  const doc = pages.map((p) => p.text).join('\n\n')
  const { chunks } = chunkDocument(pages, opts({ chunk_size: 256, chunk_overlap: 38, min_chunk_chars: 0 }))
  checkChunks(pages, chunks, 256, 1)
  checkCoverage(doc, chunks)
  // the first chunk of each page starts at the page's first character: no overlap carried over from the page before
  for (const p of pages) assert.equal(chunks.find((c) => c.page_num === p.page_num)!.start, doc.indexOf(p.text))
  const h = chunkDocument(pages, opts({ strategy: 'hierarchical', chunk_size: [2048, 512, 128], chunk_overlap: 19, min_chunk_chars: 0 }))
  checkChunks(pages, h.parents, 2048, 1)
  checkChunks(pages, h.chunks, 128, 1)
  assert.ok(h.parents.filter((p) => p.level === 0).length >= 3, 'at least one top-level parent per page')
})

test('pages: the semantic strategy cuts at every page end and embeds nothing across one', async () => {
  const sentence = (n: number) => `The team won the football match number ${n}.`
  const pages = [page(`${sentence(1)} ${sentence(2)}`, 1), page(`${sentence(3)} ${sentence(4)} ${sentence(5)}`, 2)]
  const seen: string[] = []
  const embed = async (texts: string[]) => { seen.push(...texts); return texts.map(() => Float32Array.from([1, 0])) }
  const res = await chunkSemantic(pages, opts({ strategy: 'semantic', chunk_size: 1024, min_chunk_chars: 0 }), embed)
  assert.deepEqual(res.chunks.map((c) => [c.page_num, c.text]), [[1, pages[0].text], [2, pages[1].text]], 'one topic, still one chunk per page')
  for (const w of seen) assert.ok(pages.some((p) => p.text.includes(w)), `a window spans two pages: ${w}`)
  // pages of one sentence each: every boundary is a page end, nothing to embed
  const single = await chunkSemantic([page(sentence(1), 1), page(sentence(2), 2)], opts({ strategy: 'semantic', min_chunk_chars: 0 }), async () => { throw new Error('not called') })
  assert.deepEqual(single.chunks.map((c) => c.page_num), [1, 2])
})

test('pages: a page shorter than min_chunk_chars is its own chunk, and a short page remainder joins the chunk before it', async () => {
  // slides of a few words: before, every page was dropped and the document failed with "no chunk"
  const slides = [page('Q3 revenue up 4%', 1), page('Churn flat', 2), page('Hiring paused', 3)]
  const expectSlides = (chunks: Chunk[], what: string) =>
    assert.deepEqual(chunks.map((c) => [c.page_num, c.text]), slides.map((p) => [p.page_num, p.text]), what)
  expectSlides(chunkDocument(slides, opts({ min_chunk_chars: 30 })).chunks, 'recursive')
  expectSlides(chunkDocument(slides, opts({ kind: 'code', language: 'txt', min_chunk_chars: 30 })).chunks, 'code')
  const h = chunkDocument(slides, opts({ strategy: 'hierarchical', chunk_size: [1024, 256], chunk_overlap: 0, min_chunk_chars: 30 }))
  expectSlides(h.chunks, 'hierarchical leaves')
  assert.deepEqual(h.parents.map((p) => p.page_num), [1, 2, 3], 'each short page keeps its parent')
  const embed = async (texts: string[]) => texts.map(() => Float32Array.from([1, 0]))
  expectSlides((await chunkSemantic(slides, opts({ strategy: 'semantic', min_chunk_chars: 30 }), embed)).chunks, 'semantic')

  // a page whose last piece is shorter than min_chunk_chars: the piece is in the page's last chunk, not lost
  const pages = [page(prose(71, 6), 1), page(prose(72, 6), 2)]
  const doc = pages.map((p) => p.text).join('\n\n')
  for (const size of [64, 128, 200]) {
    const { chunks } = chunkDocument(pages, opts({ chunk_size: size, chunk_overlap: 0, min_chunk_chars: 40 }))
    checkCoverage(doc, chunks)
    checkChunks(pages, chunks, size + 39, 1)
  }
  // one page: min_chunk_chars is the floor as before (a text shorter than that gives no chunk)
  assert.deepEqual(chunkDocument([page('Figure 3.')], opts({ min_chunk_chars: 30 })).chunks, [])
})

test('semantic strategy is refused off the main thread', async () => {
  assert.throws(() => chunkDocument([page('x')], opts({ strategy: 'semantic' })), /main thread/)
  const res = await chunkTask({ pages: [page('x')], options: opts({ strategy: 'semantic' }) })
  assert.equal(res.ok, false)
  if (!res.ok) assert.equal(res.code, 'CHUNKING_NEEDS_EMBEDDER')
})

test('chunk task: chunks pages, reports invalid options as data', async () => {
  const pages = [page(prose(51, 5))]
  const res = await chunkTask({ pages, options: opts({ chunk_size: 256, chunk_overlap: 30 }) })
  assert.ok(res.ok)
  if (res.ok) assert.deepEqual(res.value, chunkDocument(pages, opts({ chunk_size: 256, chunk_overlap: 30 })))
  const bad = await chunkTask({ pages, options: opts({ chunk_size: 10 }) })
  assert.equal(bad.ok, false)
  if (!bad.ok) {
    assert.equal(bad.code, 'CHUNKING_OPTIONS_INVALID')
    assert.match(bad.message, /chunk_size must be an integer from 64 to 8192, got 10/)
  }
})

test('checkChunkingOptions: one precise message per problem', () => {
  assert.deepEqual(checkChunkingOptions(CHUNKING_DEFAULTS), [])
  assert.deepEqual(checkChunkingOptions({ ...CHUNKING_DEFAULTS, strategy: 'hierarchical', chunk_size: [2048, 512, 128], chunk_overlap: 19 }), [])
  const one = (o: object) => checkChunkingOptions({ ...CHUNKING_DEFAULTS, ...o })
  assert.deepEqual(one({ chunk_size: 63 }), ['chunk_size must be an integer from 64 to 8192, got 63'])
  assert.deepEqual(one({ chunk_size: 8193 }), ['chunk_size must be an integer from 64 to 8192, got 8193'])
  assert.deepEqual(one({ chunk_size: 100.5 }), ['chunk_size must be an integer from 64 to 8192, got 100.5'])
  assert.match(one({ chunk_size: [512, 128] })[0], /single integer for strategy 'recursive'/)
  assert.match(one({ strategy: 'hierarchical', chunk_size: 512 })[0], /list of at least 2 sizes/)
  assert.deepEqual(one({ strategy: 'hierarchical', chunk_size: [512] }), ["chunk_size must list at least 2 sizes for strategy 'hierarchical', got 1"])
  assert.deepEqual(one({ strategy: 'hierarchical', chunk_size: [512, 512], chunk_overlap: 0 }), ['chunk_size must be strictly descending: chunk_size[1] = 512 is not below chunk_size[0] = 512'])
  assert.deepEqual(one({ strategy: 'hierarchical', chunk_size: [128, 512], chunk_overlap: 0 }), ['chunk_size must be strictly descending: chunk_size[1] = 512 is not below chunk_size[0] = 128'])
  assert.deepEqual(one({ strategy: 'hierarchical', chunk_size: [512, 32], chunk_overlap: 0 }), ['chunk_size[1] must be an integer from 64 to 8192, got 32'])
  // 15% of the smallest size: 128 -> 19 allowed, 20 rejected
  assert.deepEqual(one({ strategy: 'hierarchical', chunk_size: [512, 128], chunk_overlap: 20 }), ['chunk_overlap 20 is above 15% of the smallest chunk_size 128 (at most 19)'])
  assert.deepEqual(one({ chunk_size: 1024, chunk_overlap: 154 }), ['chunk_overlap 154 is above 15% of the smallest chunk_size 1024 (at most 153)'])
  assert.deepEqual(one({ chunk_size: 1024, chunk_overlap: 153 }), [])
  assert.deepEqual(one({ chunk_overlap: -1 }), ['chunk_overlap must be an integer of at least 0, got -1'])
  assert.deepEqual(one({ strategy: 'fancy' }), ['strategy must be \'recursive\', \'semantic\' or \'hierarchical\', got "fancy"'])
  assert.deepEqual(one({ min_chunk_chars: -5 }), ['min_chunk_chars must be an integer of at least 0, got -5'])
  assert.deepEqual(one({ semantic_threshold: 1.5 }), ['semantic_threshold must be a number from 0 to 1, got 1.5'])
  assert.deepEqual(one({ code_max_chars: 10 }), ['code_max_chars must be an integer from 64 to 32768, got 10'])
  // several problems, several messages
  assert.equal(one({ chunk_size: 10, chunk_overlap: -1, semantic_threshold: 2 }).length, 3)
})
