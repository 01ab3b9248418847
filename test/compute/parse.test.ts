// The parsers as pure functions, in this thread (parse-pool.test.ts runs them through the pool).
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { AppError } from '../../kernel/errors.ts'
import { lazy, parseDocument } from '../../compute/parse/index.ts'
import type { ParseDocumentInput } from '../../compute/parse/index.ts'
import { InThreadPort, pageTextFromItems, pdfPort } from '../../compute/parse/pdf.ts'
import { markPages, splitPages } from '../../compute/parse/docx.ts'
import type { HtmlExtractionPolicy, ParsedDocument } from '../../compute/types.ts'
import { CID_FONTS, makeCidPdf, makePdf, proseLines } from '../fixtures/make-pdf.ts'
import { makeDocx, makeEncryptedDocxLike, makeLyingZipBomb, makePlainZip, makeZipBomb } from '../fixtures/make-docx.ts'
import { encodeEucKr, encodeLatin1, encodeUtf16, utf8 } from '../fixtures/make-text.ts'
import { articlePage, markdownSample, rstSample } from '../fixtures/make-pages.ts'

const HWP_DIR = '/work/shared/fixtures/hwp'
const hwpFixture = (name: string) => new Uint8Array(readFileSync(`${HWP_DIR}/${name}`))

const parse = (filename: string, bytes: Uint8Array, extra: Partial<ParseDocumentInput> = {}) =>
  parseDocument({ bytes, filename, policy: 'balanced', ...extra })

const text = (d: ParsedDocument) => d.pages.map((p) => p.text).join('\n\n')
const lines = (d: ParsedDocument) => text(d).split('\n')

async function rejectsWith(p: Promise<unknown>, code: string, message: RegExp) {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof AppError, `expected AppError, got ${String(err)}`)
    assert.equal(err.code, code, `code of: ${err.message}`)
    assert.match(err.message, message)
    assert.equal(err.status, 422)
    return true
  })
}

describe('pdf', () => {
  it('keeps real page numbers, /PageLabels labels, the metadata title and the lines', async () => {
    const bytes = await makePdf({
      title: 'Annual Report',
      pages: [['Preface line one', 'Preface line two'], ['Contents'], ['Chapter one starts here', 'and goes on'], ['Chapter one ends']],
      pageLabels: [
        { startIndex: 0, style: 'r' },
        { startIndex: 2, style: 'D', prefix: 'A-', start: 1 },
      ],
    })
    const doc = await parse('report.pdf', bytes)
    assert.equal(doc.doc_type, 'pdf')
    assert.equal(doc.title, 'Annual Report')
    assert.deepEqual(doc.pages.map((p) => p.page_num), [1, 2, 3, 4])
    assert.deepEqual(doc.pages.map((p) => p.page_label), ['i', 'ii', 'A-1', 'A-2'])
    assert.equal(doc.pages[0].text, 'Preface line one\nPreface line two')
    assert.equal(doc.pages[2].text, 'Chapter one starts here\nand goes on')
    assert.ok(bytes.byteLength > 0, 'the caller keeps its bytes')
  })

  it('labels pages with their number when the PDF has no labels, and takes the first line as title', async () => {
    const doc = await parse('scan-01.pdf', await makePdf({ pages: [['', 'First words of the file'], ['two']] }))
    assert.deepEqual(doc.pages.map((p) => p.page_label), ['1', '2'])
    assert.equal(doc.title, 'First words of the file')
  })

  it('rebuilds lines from text items: same baseline joins, hasEOL and baseline moves break, wide gaps make paragraphs', () => {
    const item = (str: string, x: number, y: number, width: number, hasEOL = false) => ({ str, transform: [10, 0, 0, 10, x, y], width, height: 10, hasEOL })
    const t = pageTextFromItems([
      item('Hello', 50, 700, 25),
      item('world', 80, 700, 25, true),
      item('next', 50, 688, 20),
      item('line', 50, 676, 20),
      { type: 'beginMarkedContent' },
      item('far below', 50, 600, 40),
    ])
    assert.equal(t, 'Hello world\nnext\nline\n\nfar below')
  })

  it('reads Korean and Japanese set in CJK fonts the PDF names but does not embed (Adobe\'s predefined CMaps)', async () => {
    const korean = await parse('k.pdf', await makeCidPdf(CID_FONTS.korean, [['한국어 문서입니다', '둘째 줄: 검색 색인'], ['다음 쪽']]))
    assert.deepEqual(korean.pages.map((p) => p.text), ['한국어 문서입니다\n둘째 줄: 검색 색인', '다음 쪽'])
    assert.equal(korean.title, '한국어 문서입니다')
    const japanese = await parse('j.pdf', await makeCidPdf(CID_FONTS.japanese, [['日本語の文書です']]))
    assert.equal(japanese.pages[0].text, '日本語の文書です')
  })

  it('refuses a PDF without text as probably scanned', async () => {
    await rejectsWith(parse('blank.pdf', await makePdf({ pages: [[], []] })), 'PARSE_NO_CONTENT', /no extractable text/)
  })

  it('reports corrupt, truncated, encrypted and mislabelled files clearly', async () => {
    const good = await makePdf({ pages: [['alpha'], ['beta'], ['gamma']] })
    await rejectsWith(parse('x.pdf', utf8('%PDF-1.7\n1 0 obj garbage\n%%EOF\n')), 'PARSE_CORRUPT', /^corrupt PDF: invalid PDF structure$/)
    await rejectsWith(parse('x.pdf', good.slice(0, Math.floor(good.length * 0.6))), 'PARSE_TRUNCATED', /^truncated PDF: .*%%EOF/)
    await rejectsWith(parse('x.pdf', await makePdf({ pages: [['secret']], encrypted: true })), 'PARSE_ENCRYPTED', /^encrypted PDF is not supported/)
    await rejectsWith(parse('x.pdf', utf8('just some text')), 'PARSE_CORRUPT', /not a PDF file/)
    await rejectsWith(parse('x.pdf', new Uint8Array(0)), 'PARSE_EMPTY', /^file is empty$/)
  })
  it('parses many documents at once on the thread\'s one pdf.js worker, each with its own text, and lets go of each when done', async () => {
    const port = await pdfPort()
    const idle = port.listenerCount
    const docs = Array.from({ length: 12 }, (_, d) => Array.from({ length: 3 }, (_, p) => proseLines(d * 3 + p, 30)))
    const encrypted = await makePdf({ pages: [['secret']], encrypted: true })
    const results = await Promise.allSettled([
      ...(await Promise.all(docs.map((pages, d) => makePdf({ title: `Doc ${d}`, pages })))).map((b, d) => parse(`d${d}.pdf`, b)),
      parse('locked.pdf', encrypted),
      parse('bad.pdf', utf8('%PDF-1.7\n1 0 obj garbage\n%%EOF\n')),
    ])
    for (const [d, pages] of docs.entries()) {
      const r = results[d]
      assert.equal(r.status, 'fulfilled', `doc ${d}`)
      const doc = (r as PromiseFulfilledResult<ParsedDocument>).value
      assert.equal(doc.title, `Doc ${d}`)
      assert.deepEqual(doc.pages.map((p) => p.text), pages.map((lines) => lines.join('\n')))
    }
    assert.deepEqual(results.slice(docs.length).map((r) => r.status), ['rejected', 'rejected'])
    assert.ok(idle >= 2, `the worker's own listeners: ${idle}`)
    assert.equal(port.listenerCount, idle, 'every document, parsed or refused, removed its listeners')
  })

  it('starts a new pdf.js worker when the shared one holds listeners that documents left behind', async () => {
    const old = await pdfPort()
    const strays = Array.from({ length: 2 * 256 + 1 }, () => () => undefined)
    for (const l of strays) old.addEventListener('message', l)
    try {
      const doc = await parse('a.pdf', await makePdf({ pages: [['still parsed on the full port']] }))
      assert.equal(doc.pages[0].text, 'still parsed on the full port')
      const fresh = await pdfPort()
      assert.notEqual(fresh, old, 'the next document gets a new worker')
      assert.equal((await parse('b.pdf', await makePdf({ pages: [['on the new one']] }))).pages[0].text, 'on the new one')
      assert.ok(fresh.listenerCount <= 2 + 2, `${fresh.listenerCount} listeners on the new port`)
    } finally {
      for (const l of strays) old.removeEventListener('message', l)
    }
  })

  it('hands messages over a microtask later, in order, uncopied but for a stream chunk\'s own fields; an aborted signal removes its listener', async () => {
    const port = new InThreadPort()
    const seen: [string, unknown][] = []
    const ac = new AbortController()
    const message = { items: [1, 2] }
    const chunk = { items: [{ str: 'a' }], styles: {} }
    const streamed = { stream: 4, chunk }
    port.addEventListener('message', ({ data }) => seen.push(['a', data]))
    port.addEventListener('message', ({ data }) => seen.push(['b', data]), { signal: ac.signal })
    port.postMessage(message)
    port.postMessage(streamed)
    const firstItems = chunk.items
    chunk.items = [] // what pdf.js does after sending a text chunk
    assert.equal(seen.length, 0, 'not delivered synchronously')
    await Promise.resolve()
    await Promise.resolve()
    assert.deepEqual(seen.map(([who]) => who), ['a', 'b', 'a', 'b'])
    assert.equal(seen[0][1], message, 'the same object, not a copy')
    assert.equal(seen[1][1], message)
    const got = seen[2][1] as typeof streamed
    assert.notEqual(got.chunk, chunk, 'the chunk is copied one level')
    assert.equal(got.chunk.items, firstItems, 'with the fields it had when sent')
    assert.equal(got.chunk.styles, chunk.styles)
    ac.abort()
    assert.equal(port.listenerCount, 1)
    port.addEventListener('message', () => seen.push(['never', null]), { signal: ac.signal })
    assert.equal(port.listenerCount, 1, 'an already aborted signal adds nothing')
    port.terminate()
    port.postMessage('after terminate')
    await Promise.resolve()
    assert.equal(seen.length, 4)
    assert.equal(port.listenerCount, 0)
  })
})

describe('docx', () => {
  it('keeps headings, lists and tables as readable lines, title from docProps/core.xml', async () => {
    const bytes = await makeDocx({
      title: 'Quarterly Plan',
      heading: 'Goals',
      paragraphs: ['We ship the parser.', 'Then the chunker.'],
      bullets: ['fast', 'robust'],
      numbered: ['design', 'build'],
      table: [['Name', 'Owner'], ['parse', 'Kim']],
    })
    const doc = await parse('plan.docx', bytes)
    assert.equal(doc.doc_type, 'docx')
    assert.equal(doc.title, 'Quarterly Plan')
    assert.equal(doc.pages.length, 1)
    const l = lines(doc)
    assert.equal(l[0], 'Goals')
    assert.equal(l[1], '', 'the heading is a line of its own')
    for (const expected of ['We ship the parser.', '- fast', '- robust', '1. design', '2. build', 'Name | Owner', 'parse | Kim']) {
      assert.ok(l.includes(expected), `missing line '${expected}' in:\n${text(doc)}`)
    }
  })

  it('falls back to the first heading for the title', async () => {
    const doc = await parse('untitled.docx', await makeDocx({ heading: 'Release Notes', paragraphs: ['body'] }))
    assert.equal(doc.title, 'Release Notes')
  })

  it('splits the text at the pages Word recorded when it last saved the file (a hard break and its mark count once)', async () => {
    const pages = [['Glaciers carve valleys.', 'Moraines remain.'], ['Prune apple trees in winter.'], ['The violin has four strings.']]
    for (const pageBreaks of ['rendered', 'both'] as const) {
      const doc = await parse('notes.docx', await makeDocx({ heading: 'Field notes', image: true, numbered: ['first', 'second'], pages, pageBreaks }))
      assert.deepEqual(doc.pages.map((p) => [p.page_num, p.page_label]), [[1, '1'], [2, '2'], [3, '3']], pageBreaks)
      assert.equal(doc.pages[0].text, 'Field notes\n\n1. first\n2. second\n\nGlaciers carve valleys.\n\nMoraines remain.', pageBreaks)
      assert.equal(doc.pages[1].text, 'Prune apple trees in winter.')
      assert.equal(doc.pages[2].text, 'The violin has four strings.')
      assert.equal(doc.title, 'Field notes')
    }
  })

  it('keeps a docx that was never laid out as one page: hard breaks alone do not say where pages end', async () => {
    const pages = [['Glaciers carve valleys.'], ['Prune apple trees in winter.'], ['The violin has four strings.']]
    const doc = await parse('generated.docx', await makeDocx({ pages, pageBreaks: 'hard' }))
    assert.deepEqual(doc.pages.map((p) => p.page_num), [1])
    assert.equal(doc.pages[0].text, pages.flat().join('\n\n'))
  })

  it('page marks: only with a rendered break, never over text that holds the mark character; runs of marks are one page start', () => {
    assert.equal(markPages('<w:r><w:br w:type="page"/><w:t>x</w:t></w:r>'), null, 'hard breaks alone')
    assert.equal(markPages('<w:r><w:lastRenderedPageBreak/><w:t>\uE000</w:t></w:r>'), null, 'the mark is already text')
    assert.equal(markPages('<w:r><w:t>a</w:t><w:br w:clear="all" w:type="page"/></w:r><w:r><w:lastRenderedPageBreak/><w:t>b</w:t></w:r>'),
      '<w:r><w:t>a</w:t><w:t>\uE000</w:t></w:r><w:r><w:t>\uE000</w:t><w:t>b</w:t></w:r>')
    assert.deepEqual(splitPages('\uE000one\n\n\uE000 \n\uE000two\uE000').map((p) => [p.page_num, p.text]), [[1, ''], [2, 'one'], [3, 'two'], [4, '']],
      'an empty first page stays page 1; marks with only blanks between are one start')
  })

  it('refuses a zip bomb from its directory before mammoth opens it', async () => {
    await rejectsWith(parse('bomb.docx', makeZipBomb(25)), 'PARSE_TOO_LARGE', /^docx rejected as a zip bomb: it expands to more than 25 MB \(limit 20 MB/)
  })

  it('refuses a zip bomb whose directory lies, by counting what it inflates', async () => {
    await rejectsWith(parse('liar.docx', makeLyingZipBomb(25)), 'PARSE_TOO_LARGE', /zip bomb.*limit 20 MB/)
  })

  it('reports encrypted, non-Word and non-zip files clearly', async () => {
    await rejectsWith(parse('locked.docx', makeEncryptedDocxLike()), 'PARSE_ENCRYPTED', /^encrypted docx is not supported/)
    await rejectsWith(parse('other.docx', makePlainZip()), 'PARSE_CORRUPT', /no word\/document\.xml/)
    await rejectsWith(parse('text.docx', utf8('not a zip at all')), 'PARSE_CORRUPT', /^corrupt docx: not a zip archive$/)
    const good = await makeDocx({ paragraphs: ['x'] })
    await rejectsWith(parse('cut.docx', good.slice(0, good.length - 100)), 'PARSE_CORRUPT', /^corrupt docx/)
  })
})

describe('hwp and hwpx (real files)', () => {
  for (const ext of ['hwp', 'hwpx'] as const) {
    it(`${ext}: text, title and doc_type of example.${ext}`, async () => {
      const doc = await parse(`example.${ext}`, hwpFixture(`example.${ext}`))
      assert.equal(doc.doc_type, ext)
      assert.equal(doc.title, '◆ 삼강오륜')
      assert.deepEqual(doc.pages.map((p) => [p.page_num, p.page_label]), [[1, '1']])
      const l = lines(doc)
      assert.ok(l.includes('삼강오륜 은 현재까지도 이어져 일상생활에 깊이 뿌리내린 윤리 도덕이랍니다.'), text(doc))
      assert.ok(l.includes('군위신강: 임금과 신하 사이에 마땅히 지켜야 할 도리'))
      assert.ok(l.includes('붕우유신: 친구 사이에는 믿음이 있어야 함'))
    })

    it(`${ext}: bullets and numbered paragraphs of lists.${ext} become list lines`, async () => {
      const doc = await parse(`lists.${ext}`, hwpFixture(`lists.${ext}`))
      const l = lines(doc).filter((s) => s.trim())
      const start = l.indexOf('글머리표')
      assert.ok(start >= 0, text(doc))
      assert.deepEqual(l.slice(start + 1, start + 4).map((s) => s.trim()), ['- 1', '- 2', '- 3'])
      assert.ok(l.some((s) => /^\s*\d+\. 3-2-1$/.test(s)), 'a numbered paragraph keeps a number marker')
    })

    it(`${ext}: header and footer text of headerfooter.${ext} are kept`, async () => {
      const t = text(await parse(`headerfooter.${ext}`, hwpFixture(`headerfooter.${ext}`)))
      assert.match(t, /첫 페이지/)
      assert.match(t, /이것은 머리말입니다/)
      assert.match(t, /이것은 꼬리말입니다/)
    })

    it(`${ext}: an encrypted document is refused as such`, async () => {
      await rejectsWith(parse(`password-12345.${ext}`, hwpFixture(`password-12345.${ext}`)), 'PARSE_ENCRYPTED', new RegExp(`^encrypted ${ext.toUpperCase()} document is not supported`))
    })

    it(`${ext}: table.${ext} holds only empty cells and is reported as empty`, async () => {
      await rejectsWith(parse(`table.${ext}`, hwpFixture(`table.${ext}`)), 'PARSE_NO_CONTENT', /contains no text/)
    })
  }

  for (const ext of ['hwp', 'hwpx'] as const) {
    it(`${ext}: one page even with a page break and two sections (the file records no layout to read pages from)`, async () => {
      const doc = await parse(`lists.${ext}`, hwpFixture(`lists.${ext}`))
      assert.deepEqual(doc.pages.map((p) => [p.page_num, p.page_label]), [[1, '1']])
    })
  }

  it('hwp: a truncated or foreign file is reported as corrupt', async () => {
    const example = hwpFixture('example.hwp')
    await rejectsWith(parse('cut.hwp', example.slice(0, 5000)), 'PARSE_CORRUPT', /^corrupt HWP: /)
    await rejectsWith(parse('fake.hwp', utf8('plain text, not hwp')), 'PARSE_CORRUPT', /not an HWP 5 document/)
  })

  it('hwp: an HWPX file named .hwp is read as HWPX', async () => {
    const doc = await parse('misnamed.hwp', hwpFixture('example.hwpx'))
    assert.equal(doc.doc_type, 'hwpx')
    assert.match(text(doc), /군위신강/)
  })
})

describe('html', () => {
  const page = articlePage()
  const byPolicy = async (policy: HtmlExtractionPolicy) => text(await parse('post.html', utf8(page), { policy }))

  it('extracts the article, drops scripts, navigation and footer, title from og:title', async () => {
    const doc = await parse('post.html', utf8(page))
    assert.equal(doc.doc_type, 'html')
    assert.equal(doc.title, 'Chunking, explained')
    const t = text(doc)
    assert.match(t, /The main article text explains retrieval pipelines/)
    assert.doesNotMatch(t, /var tracker/)
    assert.doesNotMatch(t, /Copyright 2024/)
    assert.doesNotMatch(t, /HomeMenu|Home \| About/)
    const l = t.split('\n')
    assert.ok(l.includes('Details'), 'a heading is a line of its own')
    assert.ok(l.includes('- Point one about parsing'))
    assert.ok(l.includes('k | v') && l.includes('a | 1'))
  })

  it('policy: lenient keeps strictly more than balanced, which keeps strictly more than strict', async () => {
    const strict = await byPolicy('strict')
    const balanced = await byPolicy('balanced')
    const lenient = await byPolicy('lenient')
    assert.ok(strict.length < balanced.length && balanced.length < lenient.length, `${strict.length} < ${balanced.length} < ${lenient.length}`)
    // strict drops the link-dense "See also" block that balanced keeps...
    assert.doesNotMatch(strict, /Related article one/)
    assert.match(balanced, /Related article one/)
    // ...and only lenient keeps the sidebar and the comments.
    for (const t of [strict, balanced]) assert.doesNotMatch(t, /popular posts|I disagree/i)
    assert.match(lenient, /The sidebar lists popular posts/)
    assert.match(lenient, /I disagree with the dedup threshold choice\./)
    for (const t of [strict, balanced, lenient]) assert.match(t, /Another paragraph about chunking strategies/)
  })

  it('reports a page without main content, under every policy', async () => {
    const empty = '<html><head><title>Nothing</title><script>var a = 1</script></head><body><nav><a href="/">Home</a></nav><footer>© site</footer></body></html>'
    for (const policy of ['strict', 'balanced', 'lenient'] as const) {
      await rejectsWith(parse('empty.html', utf8(empty), { policy }), 'PARSE_NO_CONTENT', /^no main content found in HTML$/)
    }
  })

  it('keeps block boundaries on a short page and takes the title from <title>, then <h1>', async () => {
    const doc = await parse('a.htm', utf8('<html><head><title> Short  page </title></head><body><div>first block</div><div>second<br>line</div><p>para</p></body></html>'), { policy: 'lenient' })
    assert.equal(doc.title, 'Short page')
    assert.deepEqual(lines(doc).filter(Boolean), ['first block', 'second', 'line', 'para'])
    const h1 = await parse('b.html', utf8('<html><body><h1>Only H1</h1><p>text under it</p></body></html>'), { policy: 'lenient' })
    assert.equal(h1.title, 'Only H1')
  })

  it('decodes a declared legacy charset (EUC-KR, windows-1252)', async () => {
    const kr = new Uint8Array([...utf8('<html><head><meta charset="euc-kr"><title>t</title></head><body><p>'), ...encodeEucKr('한국어 본문입니다'), ...utf8('</p></body></html>')])
    assert.match(text(await parse('kr.html', kr, { policy: 'lenient' })), /한국어 본문입니다/)
    const fr = new Uint8Array([...utf8('<html><head><meta http-equiv="Content-Type" content="text/html; charset=windows-1252"></head><body><p>'), ...encodeLatin1('café crème'), ...utf8('</p></body></html>')])
    assert.match(text(await parse('fr.html', fr, { policy: 'lenient' })), /café crème/)
  })
})

describe('markdown, rst, txt', () => {
  it('md: headings and list items on their own lines, inline syntax removed, code kept', async () => {
    const doc = await parse('guide.md', utf8(markdownSample))
    assert.equal(doc.doc_type, 'md')
    assert.equal(doc.title, 'The Guide to Quarry')
    const l = lines(doc)
    for (const expected of [
      'The Guide to Quarry',
      'Some text with a link and alt text and code *x* and snake_case_word.',
      'Setext Heading',
      '- item one',
      '- item two',
      '  - nested ref',
      '1. first',
      '2. second',
      'Col A | Col B',
      'a1 | b1',
      'const x = **not bold**',
      'quoted text',
    ]) {
      assert.ok(l.includes(expected), `missing line '${expected}' in:\n${text(doc)}`)
    }
    assert.doesNotMatch(text(doc), /http:\/\/|\[r\]|layout: post|\|---/)
  })

  it('md: front-matter title wins, file name when there is no heading', async () => {
    assert.equal((await parse('a.md', utf8('---\ntitle: "Front Title"\n---\n# Heading\n\ntext'))).title, 'Front Title')
    assert.equal((await parse('notes-2024.md', utf8('just text\n'))).title, 'notes-2024')
  })

  it('rst: section titles, lists, tables and directive content as text, markup dropped', async () => {
    const doc = await parse('doc.rst', utf8(rstSample))
    assert.equal(doc.doc_type, 'rst')
    assert.equal(doc.title, 'Doc Title')
    const l = lines(doc)
    for (const expected of [
      'Doc Title',
      'Intro paragraph with bold, em, literal, a link, Label and word.',
      'Section One',
      '- bullet a',
      'Note: This is a note.',
      'More note text.',
      'Warning: Careful here.',
      'def f(x):',
      '    return x * 2',
      'Example:',
      'literal block',
      '  indented',
      'A picture',
      'A | B',
      '1 | 2',
      'Name | Value',
      'x | 1',
      'Things',
      'Name | Qty',
      'apple | 3',
      'Author: Someone',
    ]) {
      assert.ok(l.includes(expected), `missing line '${expected}' in:\n${text(doc)}`)
    }
    assert.doesNotMatch(text(doc), /\.\. |::|:depth:|this is a comment|_target|=====|\+---/)
  })

  it('txt: text as written, title from the file name', async () => {
    const doc = await parse('readme.txt', utf8('Line one\r\nLine two\r\n\r\n\r\n\r\nLast\u0007 line  \n'))
    assert.deepEqual(doc, { title: 'readme', doc_type: 'txt', pages: [{ page_num: 1, page_label: '1', text: 'Line one\nLine two\n\nLast line' }] })
  })
})

describe('text encodings', () => {
  const korean = '한국어 문서입니다. 검색 품질을 높입니다.'

  it('reads UTF-8 with BOM, UTF-16 LE/BE with BOM, and UTF-16LE without BOM', async () => {
    for (const bytes of [
      new Uint8Array([0xef, 0xbb, 0xbf, ...utf8(korean)]),
      encodeUtf16(korean, 'le', true),
      encodeUtf16(korean, 'be', true),
      encodeUtf16(`ASCII heavy text, then ${korean}`, 'le', false),
    ]) {
      assert.match(text(await parse('k.txt', bytes)), /한국어 문서입니다\. 검색 품질을 높입니다\./)
    }
  })

  it('reads EUC-KR, and CP949 extension syllables', async () => {
    assert.equal(text(await parse('k.txt', encodeEucKr(korean))), korean)
    // CP949 0x8C63 is '똠' (U+B620), a syllable outside KS X 1001.
    const cp949 = new Uint8Array([...encodeEucKr('이름: '), 0x8c, 0x63, ...encodeEucKr(' 입니다')])
    assert.equal(text(await parse('k.md', cp949)), '이름: 똠 입니다')
  })

  it('refuses binary, empty and unexpected encodings with specific messages', async () => {
    await rejectsWith(parse('image.txt', new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, 0, 1])), 'PARSE_NOT_TEXT', /^file is not text/)
    await rejectsWith(parse('e.txt', new Uint8Array(0)), 'PARSE_EMPTY', /^file is empty$/)
    await rejectsWith(parse('ws.md', utf8('  \n\t\n')), 'PARSE_EMPTY', /^file is empty/)
    await rejectsWith(parse('latin.txt', encodeLatin1('Garçon, un café crème très chaud, il fait très beau à côté')), 'PARSE_ENCODING', /^unsupported text encoding/)
  })
})

describe('dispatch', () => {
  it('uses the content type, then the magic bytes, when the extension says nothing', async () => {
    assert.equal((await parse('README', utf8('# Title\n\ntext'), { contentType: 'text/markdown; charset=utf-8' })).doc_type, 'md')
    assert.equal((await parse('download', await makePdf({ pages: [['pdf by magic']] }))).doc_type, 'pdf')
  })

  it('names the supported types for an unknown one', async () => {
    await rejectsWith(parse('data.xyz', utf8('x')), 'PARSE_UNSUPPORTED_TYPE', /^unsupported file type '\.xyz': supported types are .*docx.*pdf/)
  })
})

describe('parsers loaded on first use', () => {
  it('loads a parser module once, and again only after a failed load', async () => {
    let loads = 0
    let fail = true
    const page = (text: string): ParsedDocument => ({ title: text, doc_type: 'txt', pages: [{ page_num: 1, page_label: null, text }] } as unknown as ParsedDocument)
    const parser = lazy(async () => {
      loads++
      if (fail) throw new Error('module failed to load')
      return { parse: (input: { filename: string }) => page(input.filename) }
    }, (m) => m.parse as never)
    const input = { bytes: new Uint8Array(), filename: 'a.txt', policy: 'lenient' } as never
    await assert.rejects(async () => parser(input), /module failed to load/)
    fail = false
    for (let i = 0; i < 5; i++) assert.equal((await parser(input)).title, 'a.txt')
    assert.equal(loads, 2)
  })
})
