import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import {
  createMinHasher, dedupSignatures, hammingDistance, isCurrentMinhash, jaccardEstimate, lshBands, minhashSignature,
  minhashValueBits, MINHASH_EMPTY, MINHASH_MARK, simhash, simhashFromHex, simhashToHex, titleSimilarity,
} from '../../compute/dedup/index.ts'
import { shingleHashes } from '../../compute/dedup/minhash.ts'
import { fmix32 } from '../../compute/text/hash.ts'
import { createWordTokenizer } from '../../compute/text/tokenizer.ts'
import dedupTask from '../../compute/tasks/dedup.task.ts'
import { mulberry32 as rng } from '../../bench/lib/rng.ts'
import { domainText, replaceWords } from '../plugins/dedup-quality.suite.ts'

const VOCAB = 'data model index query vector search result page chunk text user system service answer question knowledge base embedding retrieval ranking score filter cache queue worker storage document 문서 검색 결과 모델 질문 답변 사용자 서비스 지식 색인'.split(' ')
/** Text over a vocabulary of its own: random letter strings (so unrelated texts share few trigrams). */
function ownWords(seed: number, n: number): string {
  const r = rng(seed)
  const vocab = Array.from({ length: 60 }, () => Array.from({ length: 3 + Math.floor(r() * 6) }, () => String.fromCharCode(97 + Math.floor(r() * 26))).join(''))
  return Array.from({ length: n }, () => vocab[Math.floor(r() * vocab.length)]).join(' ')
}
function words(seed: number, n: number): string[] {
  const r = rng(seed)
  return Array.from({ length: n }, () => VOCAB[Math.floor(r() * VOCAB.length)])
}

test('simhash: near-duplicates are close, unrelated texts far', () => {
  const base = words(1, 400).join(' ')
  const reformatted = '  ' + base.toUpperCase().replace(/ /g, '\n  ') + '\n'
  const other = ownWords(2, 400)
  const a = simhash(base)
  assert.equal(a.length, 2)
  assert.equal(hammingDistance(a, simhash(reformatted)), 0, 'case and whitespace do not count')
  assert.ok(hammingDistance(a, simhash(other)) >= 12, `unrelated distance ${hammingDistance(a, simhash(other))}`)
  // unrelated texts differ in about half of the bits on average
  let total = 0
  for (let s = 10; s < 30; s++) total += hammingDistance(simhash(ownWords(s, 200)), simhash(ownWords(s + 100, 200)))
  assert.ok(total / 20 > 20, `mean distance ${total / 20}`)
})

test('simhash: every distinct n-gram counts once, so long texts of one domain stay apart (issue 12)', () => {
  // Ten 30,000-character texts of one vocabulary with Zipf frequencies, no sentence in common: weighted by
  // counts, their frequent n-grams set nearly every bit alike (distance 0-2, "identical").
  const docs = Array.from({ length: 10 }, (_, i) => simhash(domainText(500 + i, 30_000)))
  for (let i = 0; i < docs.length; i++) {
    for (let j = i + 1; j < docs.length; j++) assert.ok(hammingDistance(docs[i], docs[j]) > 5, `documents ${i} and ${j}: ${hammingDistance(docs[i], docs[j])}`)
  }
  // an edited copy (1 % of the words) stays close
  const text = domainText(500, 30_000)
  assert.ok(hammingDistance(simhash(text), simhash(replaceWords(text, 0.01, 3))) <= 5)
  // repeating the text adds no n-gram but those across the seam
  assert.ok(hammingDistance(simhash(text), simhash(`${text} ${text}`)) <= 1)
})

test('simhash: other widths and n-gram sizes; empty text; option checks', () => {
  const t = words(3, 100).join(' ')
  assert.equal(simhash(t, { bits: 128 }).length, 4)
  assert.equal(simhash(t, { bits: 32 }).length, 1)
  // the first 64 bits do not depend on the width
  assert.deepEqual([...simhash(t, { bits: 128 }).subarray(0, 2)], [...simhash(t)])
  assert.notDeepEqual([...simhash(t, { ngram: 4 })], [...simhash(t)])
  assert.deepEqual([...simhash('')], [0, 0])
  assert.deepEqual([...simhash('ab', { ngram: 3 })], [...simhash('AB', { ngram: 3 })])
  assert.throws(() => simhash(t, { bits: 48 }), RangeError)
  assert.throws(() => simhash(t, { ngram: 0 }), RangeError)
})

/**
 * SimHash written out plainly, with strings: whitespace runs (`\s` and U+0085) as one space, trimmed; the distinct
 * n-grams of code points (a text shorter than n is one n-gram); each n-gram's hash fmix32(p ^ width), where p is
 * the polynomial sum of its code points c_k * 0x01000193^(width-1-k) mod 2^32; lane j > 0 reads
 * fmix32(h ^ seed_j); a bit is set when more than half of the n-grams have it.
 */
function plainSimhash(text: string, n: number, bits: number): number[] {
  const seeds = [0, 0x9e3779b9, 0x85ebca6b, 0xc2b2ae35]
  const cps = Array.from(text.normalize('NFKC').toLowerCase().replace(/[\s\u0085]+/g, ' ').trim(), (c) => c.codePointAt(0)!)
  const width = Math.min(n, cps.length)
  const grams = new Set<string>()
  for (let i = 0; i + width <= cps.length && cps.length > 0; i++) grams.add(cps.slice(i, i + width).join(','))
  const ones = new Array<number>(bits).fill(0)
  for (const g of grams) {
    let p = 0n
    for (const c of g.split(',')) p = (p * 0x01000193n + BigInt(c)) % 2n ** 32n
    const h = fmix32((Number(p) ^ width) >>> 0)
    for (let j = 0; j < bits / 32; j++) {
      const lane = j === 0 ? h : fmix32((h ^ seeds[j]) >>> 0)
      for (let b = 0; b < 32; b++) if ((lane >>> (31 - b)) & 1) ones[j * 32 + b]++
    }
  }
  const lanes: number[] = []
  for (let j = 0; j < bits / 32; j++) {
    let lane = 0
    for (let b = 0; b < 32; b++) if (2 * ones[j * 32 + b] > grams.size) lane |= 1 << (31 - b)
    lanes.push(lane >>> 0)
  }
  return lanes
}

test('simhash equals SimHash written out plainly (the values are stored): whitespace, surrogates, short texts, widths', () => {
  const r = rng(13)
  const pieces = ['a', 'B', 'é', ' ', '  ', '\n\t', '\u0085', '\u00a0', '\u3000', '\ufeff', '\u0000', '\u001f', '가', '한국', '😀', '𠀀', '\ud800', '\udc00', 'ﬁ', 'x.']
  const texts = ['', ' ', 'a', 'ab', ' ab ', 'abc', domainText(3, 3_000), `  ${words(4, 300).join('\n')}  `]
  for (let k = 0; k < 300; k++) texts.push(Array.from({ length: Math.floor(r() * 14) }, () => pieces[Math.floor(r() * pieces.length)]).join(''))
  for (const text of texts) {
    for (const ngram of [1, 2, 3, 5]) {
      for (const bits of [32, 64, 128]) assert.deepEqual([...simhash(text, { ngram, bits })], plainSimhash(text, ngram, bits), `${JSON.stringify(text.slice(0, 30))} n=${ngram} bits=${bits}`)
    }
  }
})

test('hex form round-trips; Hamming distance counts differing bits', () => {
  const lanes = Uint32Array.from([0xdeadbeef, 0x00000001])
  assert.equal(simhashToHex(lanes), 'deadbeef00000001')
  assert.deepEqual([...simhashFromHex('deadbeef00000001')], [...lanes])
  assert.equal(hammingDistance('0000000000000000', 'ffffffffffffffff'), 64)
  assert.equal(hammingDistance('0000000000000000', '8000000000000001'), 2)
  assert.equal(hammingDistance(lanes, 'deadbeef00000000'), 1)
  assert.throws(() => hammingDistance('00000000', '0000000000000000'), RangeError)
  assert.throws(() => simhashFromHex('xyz'), RangeError)
})

test('LSH bands: equal-width keys, most significant first, shared when a band is equal', () => {
  assert.deepEqual(lshBands('0123456789abcdef', 4), ['b0:0123', 'b1:4567', 'b2:89ab', 'b3:cdef'])
  assert.deepEqual(lshBands(Uint32Array.from([0x01234567, 0x89abcdef]), 2), ['b0:01234567', 'b1:89abcdef'])
  // 64 bits in 8 bands of 8 bits, and in bands that are not whole hex digits (BigInt path)
  assert.deepEqual(lshBands('0123456789abcdef', 8), ['b0:01', 'b1:23', 'b2:45', 'b3:67', 'b4:89', 'b5:ab', 'b6:cd', 'b7:ef'])
  assert.deepEqual(lshBands('ffffffffffffffff', 32).slice(0, 2), ['b0:3', 'b1:3'])
  assert.deepEqual(lshBands('8000000000000000', 32)[0], 'b0:2')
  assert.throws(() => lshBands('0123456789abcdef', 3), RangeError)
  // distance below the band count => at least one shared key (pigeonhole)
  const a = simhash(words(4, 300).join(' '))
  const b = Uint32Array.from(a)
  b[0] ^= 0x80000001
  b[1] ^= 0x00010000
  const shared = lshBands(a).filter((k) => lshBands(b).includes(k))
  assert.equal(hammingDistance(a, b), 3)
  assert.ok(shared.length >= 1)
})

/**
 * Scheme 2 written out plainly: two copies of each shingle (x, and fmix32(x ^ 0x68e31da4)); each copy's bin
 * (floor(y * bins / 2^32)) and value (its low `bits` bits); each bin's minimum and the first shingle with it;
 * an empty bin takes the value of the first non-empty bin to its right (circularly), t bins away, as
 * MINHASH_MARK + t * 2^bits + value.
 */
function plainOph(shingles: number[], bins: number): { sig: number[]; pos: number[] } {
  const bits = minhashValueBits(bins)
  const best: ({ v: number; j: number } | null)[] = new Array(bins).fill(null)
  shingles.forEach((x, j) => {
    for (const y of [x, fmix32((x ^ 0x68e31da4) >>> 0)]) {
      const bin = Number((BigInt(y) * BigInt(bins)) >> 32n)
      const v = y % 2 ** bits
      if (!best[bin] || v < best[bin]!.v) best[bin] = { v, j }
    }
  })
  if (shingles.length === 0) return { sig: new Array(bins).fill(MINHASH_EMPTY), pos: new Array(bins).fill(0) }
  const sig: number[] = []
  const pos: number[] = []
  for (let i = 0; i < bins; i++) {
    let t = 0
    while (!best[(i + t) % bins]) t++
    const b = best[(i + t) % bins]!
    sig.push(Math.min(MINHASH_MARK + t * 2 ** bits + b.v, MINHASH_EMPTY - 1))
    pos.push(b.j)
  }
  return { sig, pos }
}

test('minhash: one permutation, each bin keeps the minimum of its shingles, empty bins borrow from the right; positions say which shingle', () => {
  const r = rng(5)
  for (const bins of [128, 18, 1]) {
    const hasher = createMinHasher({ permutations: bins })
    for (const n of [0, 1, 7, 50, 1000]) {
      // with repeats: the first shingle with the minimum is the one named
      const shingles = Array.from({ length: n }, () => Math.floor(r() * 2 ** 32))
      for (let k = 0; k < n / 5; k++) shingles.push(shingles[Math.floor(r() * n)])
      const positions = new Uint32Array(bins)
      const sig = hasher.signatureOf(Uint32Array.from(shingles), positions)
      const plain = plainOph(shingles, bins)
      assert.deepEqual([...sig], plain.sig, `${bins} bins, ${n} shingles`)
      assert.deepEqual([...positions], plain.pos, `${bins} bins, ${n} shingles: positions`)
      assert.deepEqual([...hasher.signatureOf(Uint32Array.from(shingles))], [...sig])
    }
  }
  // the values of scheme 2 are fixed: they are stored (a change here needs a new scheme and a migration)
  assert.deepEqual([...minhashSignature('alpha beta gamma delta epsilon').subarray(0, 4)], [2163126424, 2763706162, 2746928946, 2730151730])
  // dedupSignatures: each value is the minimum of its bin, so it is the value the 3-word shingle starting at
  // its position has in that bin (its own, or borrowed the same number of bins away)
  const text = 'alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi'
  const ds = dedupSignatures(text)
  const words = text.split(' ')
  const step = 2 ** minhashValueBits(128)
  assert.ok(new Set(ds.positions).size > 5, 'the values come from several shingles')
  for (let i = 0; i < 128; i++) {
    const at = ds.positions[i]
    assert.ok(at <= words.length - 3)
    const single = minhashSignature(words.slice(at, at + 3).join(' '))
    assert.equal(ds.minhash[i] % step, single[i] % step)
  }
})

test('signatures do not depend on the texts read before (the scratch arrays grow in the middle of a text)', () => {
  // longer than any text before it in this file: the word, shingle and n-gram arrays all grow while reading it
  const huge = ownWords(77, 60_000)
  const first = dedupSignatures(huge)
  const again = dedupSignatures(huge)
  assert.deepEqual([...first.minhash], [...again.minhash])
  assert.deepEqual([...first.positions], [...again.positions])
  assert.equal(first.simhash, again.simhash)
  assert.deepEqual([...first.minhash], [...createMinHasher().signatureOf(shingleHashes(huge, createWordTokenizer(), 3))])
  assert.deepEqual([...simhash(huge)], [...simhashFromHex(first.simhash)])
  // and a short text after it reads only its own words
  assert.deepEqual([...dedupSignatures('alpha beta gamma delta epsilon').minhash], [...minhashSignature('alpha beta gamma delta epsilon')])
})

test('minhash: scheme 2 sets MINHASH_MARK in every value, so a stored scheme-1 signature is told apart and shares no value', () => {
  const sig = minhashSignature('검색 서비스의 문서 색인 결과 and some english words here')
  assert.ok([...sig].every((v) => v >= MINHASH_MARK && v < MINHASH_EMPTY))
  assert.equal(isCurrentMinhash(sig), true)
  assert.equal(isCurrentMinhash(minhashSignature('')), true, 'an empty text reads the same in both schemes')
  // scheme 1: (a x + b) mod 2^31 - 1, every value below 2^31
  const r = rng(9)
  const old = Uint32Array.from({ length: 128 }, () => Math.floor(r() * (2 ** 31 - 1)))
  assert.equal(isCurrentMinhash(old), false)
  assert.equal(jaccardEstimate(old, sig), 0)
})

/** Exact Jaccard of the word 3-shingle sets, built independently with strings. */
function exactJaccard(x: string, y: string): number {
  const tok = createWordTokenizer()
  const set = (t: string) => {
    const w = tok.tokens(t)
    const s = new Set<string>()
    for (let i = 0; i + 3 <= w.length; i++) s.add(w.slice(i, i + 3).join('\u0000'))
    return s
  }
  const [a, b] = [set(x), set(y)]
  let inter = 0
  for (const s of a) if (b.has(s)) inter++
  return inter / (a.size + b.size - inter)
}

test('minhash: the Jaccard estimate is within tolerance of the exact Jaccard', () => {
  const base = words(6, 600)
  const cases: [string, string][] = []
  for (const keep of [1, 0.9, 0.7, 0.5, 0.3]) {
    const r = rng(Math.round(keep * 100))
    const other = base.map((w) => (r() < keep ? w : VOCAB[Math.floor(r() * VOCAB.length)] + 'x'))
    cases.push([base.join(' '), other.join(' ')])
  }
  cases.push([base.join(' '), words(7, 600).join(' ')])
  for (const [x, y] of cases) {
    const exact = exactJaccard(x, y)
    const est = jaccardEstimate(minhashSignature(x), minhashSignature(y))
    // 128 permutations: standard error at most 0.044; 0.15 is over three of them
    assert.ok(Math.abs(est - exact) <= 0.15, `estimate ${est} vs exact ${exact}`)
  }
  assert.equal(jaccardEstimate(minhashSignature(base.join(' ')), minhashSignature(base.join('  '))), 1)
})

test('minhash: signatures are stable, Uint32Array of 128, empty text is all-empty; short texts use words', () => {
  const s = minhashSignature('검색 서비스의 문서 색인 결과')
  assert.ok(s instanceof Uint32Array && s.length === 128)
  assert.deepEqual([...s], [...createMinHasher().signature('검색 서비스의 문서 색인 결과')])
  assert.ok([...minhashSignature('')].every((v) => v === MINHASH_EMPTY))
  assert.equal(jaccardEstimate(minhashSignature(''), s), 0)
  // two words (< 3): single-word shingles, so a shared word is visible
  assert.ok(jaccardEstimate(minhashSignature('alpha beta'), minhashSignature('alpha gamma')) > 0)
  assert.throws(() => jaccardEstimate(s, new Uint32Array(64)), RangeError)
  assert.throws(() => createMinHasher({ permutations: 0 }), RangeError)
})

test('title similarity: trigram Jaccard like pg_trgm, in 0..1', () => {
  // PostgreSQL documents similarity('word', 'two words') = 0.363636
  assert.ok(Math.abs(titleSimilarity('word', 'two words') - 4 / 11) < 1e-9)
  assert.equal(titleSimilarity('Annual Report 2024', 'annual  report, 2024!'), 1)
  assert.equal(titleSimilarity('', 'anything'), 0)
  assert.ok(titleSimilarity('2024년 사업 보고서', '2024년 사업보고서') > 0.4)
  assert.ok(titleSimilarity('quarterly sales', 'employee handbook') < 0.1)
})

test('dedupSignatures and the dedup task: hex simhash, band keys, minhash; user words change shingles', async (t) => {
  const text = words(8, 300).join(' ')
  const sig = dedupSignatures(text)
  assert.match(sig.simhash, /^[0-9a-f]{16}$/)
  assert.deepEqual(sig.bands, lshBands(sig.simhash, 4))
  assert.equal(sig.minhash.length, 128)
  const res = await dedupTask({ text, title: '  My  Title ', options: { ngram: 3, simhash_bits: 64, num_bands: 4 } })
  assert.ok(res.ok)
  if (res.ok) {
    assert.equal(res.value.simhash, sig.simhash)
    assert.deepEqual([...res.value.minhash], [...sig.minhash])
    assert.equal(res.value.title, 'my title')
  }
  const dir = mkdtempSync(join(os.tmpdir(), 'quarry-dedup-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'words.txt'), '삼성전자\n')
  const korean = '삼성전자 주가가 올랐다 삼성전자 실적 발표'
  const withWords = dedupSignatures(korean, { user_words_path: join(dir, 'words.txt') })
  assert.notDeepEqual([...withWords.minhash], [...dedupSignatures(korean).minhash])
  assert.equal(withWords.simhash, dedupSignatures(korean).simhash, 'simhash reads characters, not words')
  const missing = await dedupTask({ text, options: { user_words_path: join(dir, 'nope.txt') } })
  assert.equal(missing.ok, false)
  if (!missing.ok) assert.equal(missing.code, 'DEDUP_USER_WORDS_MISSING')
  const bad = await dedupTask({ text, options: { num_bands: 3 } })
  assert.equal(bad.ok, false)
  if (!bad.ok) assert.equal(bad.code, 'DEDUP_OPTIONS_INVALID')
})
