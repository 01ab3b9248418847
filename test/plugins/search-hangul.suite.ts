// Korean keyword search through HTTP (issue 38, item 5): a Korean chunk's BM25 length is counted like an English
// chunk's of the same size, and hybrid with the built-in embedder keeps the sparse ranking's first ten.
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, type StartOptions } from '../helpers/app.ts'
import { md, newKb, prose } from './docs.suite.ts'
import { ingest, search } from './search.suite.ts'

type Json = any

const fast = { queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 } }

// Korean words (nouns with their particles) that share no syllable pair with 금리 (interest rate).
const KOREAN = ('은행은 예금을 대출로 고객에게 정부가 정책을 발표했다 시장의 물가는 경제가 성장률이 투자자는 기업의 ' +
  '실적을 보고서에 따르면 수출이 증가했다 소비자의 지출은 부동산 가격이 주식 시장에서 환율이 국채를 중앙은행은 ' +
  '통화 정책의 방향을 분기별 매출은 제조업의 고용이 세금을 예산안에 지방 정부의 공공요금은 전망을 내놓았다').split(' ')

/** Deterministic Korean prose of about `chars` characters from KOREAN (seeded, like docs.suite's prose). */
function koreanProse(seed: string, chars: number): string {
  let x = [...seed].reduce((h, c) => (h * 31 + c.charCodeAt(0)) | 0, 7) & 0x7fffffff
  const next = () => (x = (x * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff
  const words: string[] = []
  let size = 0
  while (size < chars) {
    const w = KOREAN[Math.floor(next() * KOREAN.length)]
    words.push(w)
    size += w.length + 1
  }
  return words.join(' ')
}

/** `text` with `term` put in `times` times, evenly. */
function withTerm(text: string, term: string, times: number): string {
  const words = text.split(' ')
  for (let i = 0; i < times; i++) words.splice(Math.floor(((i + 0.5) * words.length) / times) + i, 0, term)
  return words.join(' ')
}

export function searchHangulSuite(label: string, opts: StartOptions): void {
  const withSettings = (settings: Record<string, unknown>) => ({ ...opts, settings: { ...fast, ...opts.settings, ...settings } })

  it(`${label}: a long Korean chunk naming the term six times outranks a short one naming it once, as in English`, async (t) => {
    const svc = await startApp(t, withSettings({}))
    // One chunk per document (under chunk_size 1024): what is compared is two chunks of very different lengths.
    const ko = await newKb(svc)
    await ingest(svc, ko, {
      'long.md': md('경제 동향', withTerm(koreanProse('long', 760), '금리', 6)),
      'short.md': md('안내', `${koreanProse('short', 40)} 금리`),
    })
    const en = await newKb(svc)
    await ingest(svc, en, {
      'long.md': md('Economy', withTerm(prose('long', 9), 'tariff', 6)),
      'short.md': md('Notice', `${prose('short', 1).split(' ').slice(0, 6).join(' ')} tariff`),
    })
    for (const [kb, query, language] of [[ko, '금리', 'Korean'], [en, 'tariff', 'English']]) {
      const { status, body } = await search(svc, { query, kb_ids: [kb], options: { 'hybrid.alpha': 0, top_k: 2 } })
      assert.equal(status, 200)
      assert.deepEqual(body.results.map((r: Json) => r.source), ['long.md', 'short.md'], `${language}: the long chunk first`)
      const long = body.results[0].text as string
      assert.ok(long.length > 700 && long.length < 1024, `${language}: one chunk of ${long.length} characters`)
    }
  })

  it(`${label}: hybrid with the built-in embedder keeps the sparse ranking's first ten, which the dense list would change`, async (t) => {
    // Full-size vectors, as the alpha test of the search suite: cosines of hashed features mean something there.
    const svc = await startApp(t, withSettings({ embedding: { vector_size: 1024 } }))
    const kb = await newKb(svc)
    const files: Record<string, string> = {}
    for (let i = 0; i < 24; i++) files[`doc-${i}.md`] = md(`문서 ${i}`, koreanProse(`doc-${i}`, 150 + 25 * (i % 5)))
    await ingest(svc, kb, files)
    const query = '중앙은행은 통화 정책의 방향을 발표했다'
    const ids = async (options: Record<string, unknown>) =>
      (await search(svc, { query, kb_ids: [kb], options: { top_k: 10, ...options } })).body.results.map((r: Json) => r.source)
    const sparse = await ids({ 'hybrid.alpha': 0 })
    const dense = await ids({ 'hybrid.alpha': 1 })
    const hybrid = await ids({})
    assert.equal(sparse.length, 10)
    // The lists disagree, and an alpha of 0.2 (the profile before) lets the dense one reorder the first page...
    assert.notDeepEqual(dense, sparse, 'the dense list ranks otherwise')
    assert.notDeepEqual(await ids({ 'hybrid.alpha': 0.2 }), sparse, 'alpha 0.2 reorders the first page')
    // ...while the built-in profile keeps it, and alpha still means what it says at both ends.
    assert.equal(svc.app.settings.retrieval.hybrid.alpha, 0.02)
    assert.deepEqual(hybrid, sparse)
  })
}
