import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { murmur3Utf8 } from '../../compute/text/hash.ts'
import { porterStem } from '../../compute/text/porter.ts'
import { createWordTokenizer, loadUserWords, tokenizerForUserWords } from '../../compute/text/tokenizer.ts'

/** MurmurHash3 x86_32 over bytes, written out from the published algorithm, independent of hash.ts. */
function murmurBytes(bytes: Uint8Array, seed: number): number {
  let h = seed >>> 0
  const c1 = 0xcc9e2d51
  const c2 = 0x1b873593
  const blocks = bytes.length >> 2
  const rotl = (x: number, r: number) => ((x << r) | (x >>> (32 - r))) >>> 0
  for (let i = 0; i < blocks; i++) {
    let k = bytes[4 * i] | (bytes[4 * i + 1] << 8) | (bytes[4 * i + 2] << 16) | (bytes[4 * i + 3] << 24)
    k = Math.imul(rotl(Math.imul(k, c1) >>> 0, 15), c2) >>> 0
    h = (Math.imul(rotl(h ^ k, 13), 5) + 0xe6546b64) >>> 0
  }
  let k = 0
  const tail = blocks * 4
  const rest = bytes.length & 3
  if (rest >= 3) k ^= bytes[tail + 2] << 16
  if (rest >= 2) k ^= bytes[tail + 1] << 8
  if (rest >= 1) {
    k ^= bytes[tail]
    h ^= Math.imul(rotl(Math.imul(k, c1) >>> 0, 15), c2) >>> 0
  }
  h ^= bytes.length
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b) >>> 0
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35) >>> 0
  h ^= h >>> 16
  return h >>> 0
}

test('murmur3Utf8 matches the published test vectors', () => {
  assert.equal(murmur3Utf8(''), 0)
  assert.equal(murmur3Utf8('', 1), 0x514e28b7)
  assert.equal(murmur3Utf8('hello'), 0x248bfa47)
  assert.equal(murmur3Utf8('The quick brown fox jumps over the lazy dog'), 0x2e4ff723)
})

test('murmur3Utf8 hashes the UTF-8 bytes (Korean, astral, lone surrogate, every tail length)', () => {
  const samples = ['a', 'ab', 'abc', 'abcd', 'abcde', '한', '한국어', 'é', 'naïve', '𠀀', 'a😀b', '東京都', 'x\ud800y', '\udc00']
  for (const s of samples) {
    for (const seed of [0, 42]) assert.equal(murmur3Utf8(s, seed), murmurBytes(Buffer.from(s, 'utf8'), seed), `${JSON.stringify(s)} seed ${seed}`)
  }
})

test('Korean runs become overlapping bigrams; a one-syllable run stays a unigram', () => {
  const t = createWordTokenizer()
  assert.deepEqual(t.tokens('서울시에서'), ['서울', '울시', '시에', '에서'])
  assert.deepEqual(t.tokens('나 는'), ['나', '는'])
  assert.deepEqual(t.tokens('한국어 검색'), ['한국', '국어', '검색'])
})

test('Latin, Cyrillic and Greek words and numbers; NFKC and lower case; punctuation separates', () => {
  const t = createWordTokenizer()
  assert.deepEqual(t.tokens('Hello, WORLD! Привет мир ΑΒΓ 42 x3'), ['hello', 'world', 'привет', 'мир', 'αβγ', '42', 'x3'])
  // NFKC: full-width letters and the ﬁ ligature fold to ASCII
  assert.deepEqual(t.tokens('ＡＢＣ ﬁle'), ['abc', 'file'])
  assert.deepEqual(t.tokens(''), [])
  assert.deepEqual(t.tokens('  ...  '), [])
})

test('mixed scripts split at the script change; Han and kana are bigrammed too', () => {
  const t = createWordTokenizer()
  assert.deepEqual(t.tokens('GPT4는 東京都'), ['gpt4', '는', '東京', '京都'])
  // scripts without spaces form one run: the bigram at the junction is kept
  assert.deepEqual(t.tokens('한글カナ'), ['한글', '글カ', 'カナ'])
})

test('user words are kept whole, longest match first, before bigramming', () => {
  const t = createWordTokenizer({ userWords: ['삼성', '삼성전자', 'LG전자', 'C++'] })
  assert.deepEqual(t.tokens('삼성전자주가'), ['삼성전자', '주가'])
  assert.deepEqual(t.tokens('국내삼성전자'), ['국내', '삼성전자'])
  assert.deepEqual(t.tokens('lg전자와 c++ 코드'), ['lg전자', '와', 'c++', '코드'])
  // a dictionary word is not matched inside a longer word
  const u = createWordTokenizer({ userWords: ['app'] })
  assert.deepEqual(u.tokens('apple app'), ['apple', 'app'])
})

test('user words load from a file, one per line; tokenizers are cached per path', (t) => {
  const dir = mkdtempSync(join(os.tmpdir(), 'quarry-tok-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const path = join(dir, 'words.txt')
  writeFileSync(path, '# comment\n카카오톡\r\n\n네이버\n')
  assert.deepEqual(loadUserWords(path), ['카카오톡', '네이버'])
  const tok = tokenizerForUserWords(path)
  assert.equal(tokenizerForUserWords(path), tok)
  assert.deepEqual(tok.tokens('카카오톡으로'), ['카카오톡', '으로'])
  assert.deepEqual(tokenizerForUserWords('').tokens('카카오톡'), ['카카', '카오', '오톡'])
})

test('forEach emits the same tokens as tokens()', () => {
  const t = createWordTokenizer()
  const text = 'Mixed 텍스트 with 東京 and numbers 123'
  const seen: string[] = []
  t.forEach(text, (tok) => seen.push(tok))
  assert.deepEqual(seen, t.tokens(text))
})

test('forEachSpan gives every token as a span of the normalised text with its word hash (FNV-1a, then fmix32 with the length)', () => {
  // written out here, independent of hash.ts: FNV-1a over the UTF-16 code units, MurmurHash3's finaliser
  const plainHash = (token: string) => {
    let h = 0x811c9dc5
    for (let i = 0; i < token.length; i++) h = Math.imul(h ^ token.charCodeAt(i), 0x01000193) >>> 0
    h = (h ^ token.length) >>> 0
    h ^= h >>> 16
    h = Math.imul(h, 0x85ebca6b) >>> 0
    h ^= h >>> 13
    h = Math.imul(h, 0xc2b2ae35) >>> 0
    return (h ^ (h >>> 16)) >>> 0
  }
  const texts = ['', 'Mixed 텍스트 with 東京 and numbers 123', '서울시에서 나 는', '𠀀𠀁𠀂 a𠀀b 한𠀀', 'x\ud800y \udc00z 가\ud800', 'apple app 삼성전자에서 C++ 카카오톡으로', 'ﬁne Ｆｕｌｌ']
  for (const t of [createWordTokenizer(), createWordTokenizer({ userWords: ['삼성', '삼성전자', 'c++', 'app', '카카오톡'] })]) {
    for (const text of texts) {
      const normalized = text.normalize('NFKC').toLowerCase()
      const spans: string[] = []
      t.forEachSpan(normalized, (start, end, hash) => {
        const token = normalized.slice(start, end)
        assert.equal(hash, plainHash(token), `${JSON.stringify(token)} in ${JSON.stringify(text)}`)
        spans.push(token)
      })
      assert.deepEqual(spans, t.tokens(text))
    }
  }
})

test('Porter stemmer reproduces the examples of Porter (1980)', () => {
  const pairs: [string, string][] = [
    ['caresses', 'caress'], ['ponies', 'poni'], ['ties', 'ti'], ['caress', 'caress'], ['cats', 'cat'],
    ['feed', 'feed'], ['agreed', 'agre'], ['plastered', 'plaster'], ['bled', 'bled'], ['motoring', 'motor'],
    ['sing', 'sing'], ['conflated', 'conflat'], ['troubled', 'troubl'], ['sized', 'size'], ['hopping', 'hop'],
    ['tanned', 'tan'], ['falling', 'fall'], ['hissing', 'hiss'], ['fizzed', 'fizz'], ['failing', 'fail'],
    ['filing', 'file'], ['happy', 'happi'], ['sky', 'sky'], ['relational', 'relat'], ['conditional', 'condit'],
    ['rational', 'ration'], ['valenci', 'valenc'], ['digitizer', 'digit'], ['conformabli', 'conform'],
    ['radicalli', 'radic'], ['differentli', 'differ'], ['vileli', 'vile'], ['analogousli', 'analog'],
    ['vietnamization', 'vietnam'], ['predication', 'predic'], ['operator', 'oper'], ['feudalism', 'feudal'],
    ['decisiveness', 'decis'], ['hopefulness', 'hope'], ['callousness', 'callous'], ['formaliti', 'formal'],
    ['sensitiviti', 'sensit'], ['sensibiliti', 'sensibl'], ['triplicate', 'triplic'], ['formative', 'form'],
    ['formalize', 'formal'], ['electriciti', 'electr'], ['electrical', 'electr'], ['hopeful', 'hope'],
    ['goodness', 'good'], ['revival', 'reviv'], ['allowance', 'allow'], ['inference', 'infer'],
    ['airliner', 'airlin'], ['gyroscopic', 'gyroscop'], ['adjustable', 'adjust'], ['defensible', 'defens'],
    ['irritant', 'irrit'], ['replacement', 'replac'], ['adjustment', 'adjust'], ['dependent', 'depend'],
    ['adoption', 'adopt'], ['homologou', 'homolog'], ['communism', 'commun'], ['activate', 'activ'],
    ['angulariti', 'angular'], ['homologous', 'homolog'], ['effective', 'effect'], ['bowdlerize', 'bowdler'],
    ['probate', 'probat'], ['rate', 'rate'], ['cease', 'ceas'], ['controll', 'control'], ['roll', 'roll'],
    ['generalization', 'gener'], ['is', 'is'],
  ]
  for (const [word, stem] of pairs) assert.equal(porterStem(word), stem, word)
})
