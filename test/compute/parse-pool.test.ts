// Every format through the compute pool: bytes moved into a worker, the same document as the pure function,
// and bad files failing their own call only.
import { describe, it, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { gzipSync } from 'node:zlib'
import path from 'node:path'
import { AppError } from '../../kernel/errors.ts'
import { createComputePool } from '../../compute/pool.ts'
import type { ComputePool } from '../../compute/pool.ts'
import { parseDocument } from '../../compute/parse/index.ts'
import type { HtmlExtractionPolicy } from '../../compute/types.ts'
import { CID_FONTS, makeCidPdf, makePdf } from '../fixtures/make-pdf.ts'
import { makeDocx, makeZipBomb } from '../fixtures/make-docx.ts'
import { encodeEucKr, utf8 } from '../fixtures/make-text.ts'
import { articlePage, markdownSample, rstSample } from '../fixtures/make-pages.ts'

const HWP_DIR = '/work/shared/fixtures/hwp'

describe('parse task in the compute pool', () => {
  let pool: ComputePool
  let dir: string
  before(() => {
    pool = createComputePool({ maxThreads: 2, minThreads: 1, taskTimeoutMs: 30_000 })
    dir = mkdtempSync(path.join(os.tmpdir(), 'quarry-parse-pool-'))
  })
  after(async () => {
    await pool.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const viaPool = (filename: string, bytes: Uint8Array, policy: HtmlExtractionPolicy = 'balanced', parserPlugins: string[] = []) =>
    pool.run('parse', { bytes, filename, policy, parserPlugins }, { transfer: [bytes] })

  async function samples(): Promise<[string, Uint8Array][]> {
    return [
      ['report.pdf', await makePdf({ title: 'Pool PDF', pages: [['page one text'], ['page two text']], pageLabels: [{ startIndex: 0, style: 'R' }] })],
      // A real PDF (42 pages, embedded fonts, flate streams) shipped in a pinned dependency: pool threads inflate
      // with pdf.js's own code, this thread with DecompressionStream, and the text must not differ.
      ['uws-report.pdf', new Uint8Array(readFileSync('node_modules/uWebSockets.js/docs/report.pdf'))],
      ['korean-cid.pdf', await makeCidPdf(CID_FONTS.korean, [['풀에서 읽는 한국어']])],
      ['plan.docx', await makeDocx({ title: 'Pool Docx', heading: 'Heading', bullets: ['a', 'b'], table: [['x', 'y']] })],
      ['example.hwp', new Uint8Array(readFileSync(`${HWP_DIR}/example.hwp`))],
      ['lists.hwpx', new Uint8Array(readFileSync(`${HWP_DIR}/lists.hwpx`))],
      ['post.html', utf8(articlePage())],
      ['guide.md', utf8(markdownSample)],
      ['doc.rst', utf8(rstSample)],
      ['korean.txt', encodeEucKr('한국어 텍스트 파일입니다.')],
    ]
  }

  it('parses every format in a worker, moving the bytes, with the same result as the pure function', async () => {
    for (const [filename, bytes] of await samples()) {
      const expected = await parseDocument({ bytes: bytes.slice(), filename, policy: 'balanced' })
      const got = await viaPool(filename, bytes)
      assert.equal(bytes.byteLength, 0, `${filename}: the bytes were moved, not copied`)
      assert.deepEqual(got, expected, filename)
      assert.ok(got.pages.some((p) => p.text.length > 0), filename)
    }
  })

  it('keeps PDF page numbers and labels across the thread boundary', async () => {
    const doc = await viaPool('r.pdf', await makePdf({ pages: [['a'], ['b'], ['c']], pageLabels: [{ startIndex: 0, style: 'a' }, { startIndex: 2, prefix: 'App-' }] }))
    assert.deepEqual(doc.pages.map((p) => [p.page_num, p.page_label, p.text]), [[1, 'a', 'a'], [2, 'b', 'b'], [3, 'App-', 'c']])
  })

  it('applies the HTML policy in the worker', async () => {
    const lengths = []
    for (const policy of ['strict', 'balanced', 'lenient'] as const) lengths.push((await viaPool('p.html', utf8(articlePage()), policy)).pages[0].text.length)
    assert.ok(lengths[0] < lengths[1] && lengths[1] < lengths[2], lengths.join(' < '))
  })

  it('fails each bad file alone with its own code and message, and no worker crashes', async () => {
    const good = await makePdf({ pages: [['x'], ['y']] })
    const cases: [string, Uint8Array, string, RegExp][] = [
      ['bad.pdf', utf8('%PDF-1.4 nonsense\n%%EOF'), 'PARSE_CORRUPT', /^corrupt PDF/],
      ['cut.pdf', good.slice(0, good.length >> 1), 'PARSE_TRUNCATED', /^truncated PDF/],
      ['locked.pdf', await makePdf({ pages: [['s']], encrypted: true }), 'PARSE_ENCRYPTED', /^encrypted PDF/],
      ['locked.hwp', new Uint8Array(readFileSync(`${HWP_DIR}/password-12345.hwp`)), 'PARSE_ENCRYPTED', /^encrypted HWP document is not supported/],
      ['bomb.docx', makeZipBomb(25), 'PARSE_TOO_LARGE', /zip bomb/],
      ['bin.txt', new Uint8Array([1, 2, 0, 0, 255, 0, 3]), 'PARSE_NOT_TEXT', /^file is not text/],
      ['empty.md', new Uint8Array(0), 'PARSE_EMPTY', /^file is empty$/],
      ['menu.html', utf8('<html><body><nav><a href="/">Home</a></nav></body></html>'), 'PARSE_NO_CONTENT', /^no main content found in HTML$/],
    ]
    const crashedBefore = pool.stats().crashed
    for (const [filename, bytes, code, message] of cases) {
      await assert.rejects(viaPool(filename, bytes), (err: unknown) => {
        assert.ok(err instanceof AppError, `${filename}: ${String(err)}`)
        assert.equal(err.code, code, `${filename}: ${err.message}`)
        assert.match(err.message, message)
        return true
      })
      const next = await viaPool('ok.txt', utf8(`after ${filename}`))
      assert.equal(next.pages[0].text, `after ${filename}`)
    }
    assert.equal(pool.stats().crashed, crashedBefore)
  })

  it('runs parses in parallel', async () => {
    const docs = await Promise.all(Array.from({ length: 6 }, (_, i) => makePdf({ pages: [[`parallel ${i}`]] }).then((b) => viaPool(`p${i}.pdf`, b))))
    assert.deepEqual(docs.map((d) => d.pages[0].text), [0, 1, 2, 3, 4, 5].map((i) => `parallel ${i}`))
  })

  it('gives parser plugins the DecompressionStream global that pool threads keep from pdf.js', async () => {
    writeFileSync(path.join(dir, 'gz.mjs'), `export function register(r) {
      r.register('gz', async (i) => {
        const out = new Response(new Blob([i.bytes]).stream().pipeThrough(new DecompressionStream('gzip')))
        return { title: 'gz', doc_type: 'txt', pages: [{ page_num: 1, page_label: '1', text: await out.text() }] }
      })
      r.register('probe', () => ({ title: typeof globalThis.DecompressionStream, doc_type: 'txt', pages: [{ page_num: 1, page_label: '1', text: 'x' }] }))
    }`)
    const globals = async () => (await pool.run('selftest', { mode: 'globals' })).echo
    assert.equal(await globals(), 'undefined', 'pool threads leave pdf.js to its own inflate')
    const gz = new Uint8Array(gzipSync('inflated by the plugin'))
    const doc = await viaPool('a.gz', gz, 'balanced', [`${dir}/gz.mjs:register`])
    assert.equal(doc.pages[0].text, 'inflated by the plugin')
    assert.equal((await viaPool('a.probe', utf8('x'), 'balanced', [`${dir}/gz.mjs:register`])).title, 'function')
    // Our PDF parser, which runs without it, still works after the plugin's call.
    const pdf = await viaPool('after.pdf', await makePdf({ pages: [['after the plugin']] }), 'balanced', [`${dir}/gz.mjs:register`])
    assert.equal(pdf.pages[0].text, 'after the plugin')
    assert.equal(await globals(), 'undefined', 'taken out again after the plugin ran')
  })

  it('loads parser plugins lazily inside the worker', async () => {
    writeFileSync(path.join(dir, 'rev.mjs'), `export function register(r) { r.register('txt', (i) => ({ title: 'rev', doc_type: 'txt', pages: [{ page_num: 1, page_label: '1', text: [...new TextDecoder().decode(i.bytes)].reverse().join('') }] })) }`)
    const doc = await viaPool('a.txt', utf8('abc'), 'balanced', [`${dir}/rev.mjs:register`])
    assert.equal(doc.pages[0].text, 'cba')
    await assert.rejects(viaPool('a.txt', utf8('abc'), 'balanced', [`${dir}/absent:register`]), /parser plugin '.*absent:register' could not be loaded/)
  })
})
