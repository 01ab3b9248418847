import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { CHARS_PER_WORD, createSparseEncoder, encodeDocument, encodeQuery, packSparse, STOP_WORDS, tokenId, unpackSparse } from '../../compute/text/sparse.ts'
import sparseTask from '../../compute/tasks/sparse.task.ts'
import { createWordTokenizer } from '../../compute/text/tokenizer.ts'

/** MurmurHash3 x86_32 of the UTF-8 bytes, seed 0: the documented token id, recomputed independently. */
function documentedId(token: string): number {
  const bytes = Buffer.from(token, 'utf8')
  const rotl = (x: number, r: number) => ((x << r) | (x >>> (32 - r))) >>> 0
  let h = 0
  let i = 0
  for (; i + 4 <= bytes.length; i += 4) {
    let k = bytes.readUInt32LE(i)
    k = Math.imul(rotl(Math.imul(k, 0xcc9e2d51) >>> 0, 15), 0x1b873593) >>> 0
    h = (Math.imul(rotl(h ^ k, 13), 5) + 0xe6546b64) >>> 0
  }
  let k = 0
  for (let j = bytes.length - 1; j >= i; j--) k = (k << 8) | bytes[j]
  if (bytes.length > i) h ^= Math.imul(rotl(Math.imul(k, 0xcc9e2d51) >>> 0, 15), 0x1b873593) >>> 0
  h ^= bytes.length
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0
  return (h ^ (h >>> 16)) >>> 0
}

test('token ids are the documented murmur3 of the token (stemmed ASCII words, Korean bigrams as is)', () => {
  for (const tok of ['search', 'retriev', '검색', '서울', 'привет', '東京']) assert.equal(tokenId(tok), documentedId(tok), tok)
  const q = encodeQuery('Retrieval 검색')
  const expected = [documentedId('retriev'), documentedId('검색')].sort((a, b) => a - b)
  assert.deepEqual([...q.indices], expected)
})

test('the same token gets the same id in every call and in a fresh encoder', () => {
  const a = encodeDocument('vector search engines')
  const b = createSparseEncoder().encodeDocument('vector search engines')
  assert.deepEqual([...a.indices], [...b.indices])
  assert.deepEqual([...a.values], [...b.values])
  // a content hash of a whole vector pins the ids to this version: a change would re-index every KB
  const digest = createHash('sha256').update(Buffer.from(encodeQuery('the quick brown fox').indices.buffer)).digest('hex')
  const again = createHash('sha256').update(Buffer.from(Uint32Array.from(['quick', 'brown', 'fox'].map(documentedId)).sort().buffer)).digest('hex')
  assert.equal(digest, again)
})

test('document vectors: sorted indices, duplicates merged, BM25 saturation with the assumed avgLen', () => {
  const k1 = 1.2
  const b = 0.75
  const avgLen = 10
  const enc = createSparseEncoder({ avgLen })
  const v = enc.encodeDocument('cat cat cat dog 고양이')
  for (let i = 1; i < v.indices.length; i++) assert.ok(v.indices[i] > v.indices[i - 1], 'strictly increasing')
  // terms: cat x3, dog x1, 고양 x1, 양이 x1; length: 4 words and 3 Hangul characters (CHARS_PER_WORD to a word)
  const len = 4 + 3 / CHARS_PER_WORD
  assert.equal(enc.length('cat cat cat dog 고양이'), len)
  const bm25 = (tf: number) => (tf * (k1 + 1)) / (tf + k1 * (1 - b + (b * len) / avgLen))
  const value = (tok: string) => v.values[v.indices.indexOf(documentedId(tok))]
  assert.equal(v.indices.length, 4)
  assert.ok(Math.abs(value('cat') - bm25(3)) < 1e-6)
  assert.ok(Math.abs(value('dog') - bm25(1)) < 1e-6)
  assert.ok(Math.abs(value('고양') - bm25(1)) < 1e-6)
})

test('document length: bigram-script characters count a word per CHARS_PER_WORD, whatever the bigrams and the runs', () => {
  const enc = createSparseEncoder()
  assert.equal(CHARS_PER_WORD, 8)
  // 16 Hangul characters in one run (15 bigrams) and in four runs of four (12 bigrams): the same length, 2 words
  assert.equal(enc.length('가나다라마바사아자차카타파하거너'), 2)
  assert.equal(enc.length('가나다라 마바사아 자차카타 파하거너'), 2)
  assert.equal(enc.termIds('가나다라마바사아자차카타파하거너').length, 15)
  // a one-character run is one token and one character; kana and Han as Hangul; stop words are not counted
  assert.equal(enc.length('the 집 of'), 1 / 8)
  assert.equal(enc.length('東京タワー'), 5 / 8)
  assert.equal(enc.length('Samsung 삼성전자 reports'), 2 + 4 / 8)
  // Per character (chunks are cut by characters), Korean and English text have about the same length; counted in
  // tokens, Korean read as more than four times as long
  const korean = '시중은행, 지방은행, 인터넷은행 모두 은행업을 영위하기 위해서는 은행법 제8조에 근거해 금융위원회의 인가를 필요로 합니다. '.repeat(10)
  const english = 'Commercial banks, regional banks and internet banks all need a licence from the Financial Services Commission. '.repeat(10)
  const perChar = (n: number, text: string) => n / text.length
  const ratio = perChar(enc.length(korean), korean) / perChar(enc.length(english), english)
  assert.ok(ratio > 0.8 && ratio < 1.25, `length per character, Korean / English: ${ratio}`)
  assert.ok(perChar(enc.termIds(korean).length, korean) / perChar(enc.termIds(english).length, english) > 4)
  // with a user dictionary, a Hangul word read whole counts its characters too
  const dict = createSparseEncoder({ tokenizer: createWordTokenizer({ userWords: ['삼성전자'] }) })
  assert.equal(dict.length('삼성전자 주가'), 6 / 8)
})

test('query vectors: 1 per distinct term, or counts with queryTf', () => {
  const q = encodeQuery('cats and cats and dogs')
  assert.deepEqual([...q.values], [1, 1])
  const qt = createSparseEncoder({ queryTf: true }).encodeQuery('cats and cats and dogs')
  const cat = [...qt.indices].indexOf(documentedId('cat'))
  assert.equal(qt.values[cat], 2)
})

test('stop words are dropped and stemming folds inflections, both switchable', () => {
  assert.ok(STOP_WORDS.has('the'))
  assert.equal(encodeQuery('the of and').indices.length, 0)
  assert.deepEqual([...encodeQuery('connections').indices], [...encodeQuery('connected').indices])
  const raw = createSparseEncoder({ stem: false, stopWords: false })
  assert.deepEqual([...raw.encodeQuery('the connections').indices], [documentedId('the'), documentedId('connections')].sort((a, b) => a - b))
})

test('empty text gives an empty vector', () => {
  const v = encodeDocument('')
  assert.equal(v.indices.length, 0)
  assert.equal(v.values.length, 0)
})

test('invalid BM25 parameters are rejected', () => {
  assert.throws(() => createSparseEncoder({ b: 2 }), RangeError)
  assert.throws(() => createSparseEncoder({ avgLen: 0 }), RangeError)
})

test('packSparse / unpackSparse round-trip', () => {
  const vs = [encodeDocument('alpha beta'), encodeDocument(''), encodeDocument('gamma 감마 gamma')]
  const batch = packSparse(vs)
  assert.equal(batch.offsets.length, 4)
  vs.forEach((v, i) => {
    const u = unpackSparse(batch, i)
    assert.deepEqual([...u.indices], [...v.indices])
    assert.deepEqual([...u.values], [...v.values])
  })
})

test('sparse task encodes documents and queries in one packed batch', async () => {
  const res = await sparseTask({ texts: ['vector search', '벡터 검색'], kind: 'document' })
  assert.ok(res.ok)
  if (!res.ok) return
  assert.deepEqual([...unpackSparse(res.value, 1).indices], [...encodeDocument('벡터 검색').indices])
  const q = await sparseTask({ texts: ['vector'], kind: 'query' })
  assert.ok(q.ok && q.value.values[0] === 1)
  const bad = await sparseTask({ texts: ['x'], kind: 'document', options: { k1: -1 } })
  assert.equal(bad.ok, false)
  if (!bad.ok) assert.equal(bad.code, 'SPARSE_OPTIONS_INVALID')
})
