// Near-duplicate detection through HTTP (issue 12), on either driver set: distinct documents of one domain
// are never hidden, edited copies get the verdict their edit calls for, and a renamed copy supersedes the
// older document ("title changed").
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { mulberry32 } from '../../bench/lib/rng.ts'
import { startApp, type StartOptions } from '../helpers/app.ts'
import { waitFor } from '../helpers/wait.ts'
import { md, newKb, settle, upload } from './docs.suite.ts'

type Json = any

/**
 * One synthetic domain: 4,000 made-up words drawn with Zipf frequencies (a few short words very often, most
 * words rarely), as in the abstracts of one field. Long texts of it share their frequent character n-grams,
 * which is what made count-weighted SimHash call them identical.
 */
const r0 = mulberry32(12)
const VOCAB = Array.from({ length: 4000 }, (_, i) => {
  const len = 2 + Math.min(10, Math.floor(-Math.log(1 - r0()) * (i < 100 ? 1.5 : 4)))
  return Array.from({ length: len }, () => 'etaoinshrdlcumwfgypbvkjxqz'[Math.floor(r0() ** 2 * 26)]).join('')
})
const CDF: number[] = []
for (let k = 1, acc = 0; k <= VOCAB.length; k++) CDF.push((acc += 1 / k))

function zipfWord(r: () => number): string {
  const x = r() * CDF[CDF.length - 1]
  let lo = 0
  let hi = CDF.length - 1
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (CDF[mid] < x) lo = mid + 1
    else hi = mid
  }
  return VOCAB[lo]
}

/** About `chars` characters of sentences of the domain, in paragraphs of about 1,000 characters. */
export function domainText(seed: number, chars: number): string {
  const r = mulberry32(seed)
  const paragraphs: string[] = []
  let sentences: string[] = []
  let size = 0
  let total = 0
  while (total < chars) {
    const w = Array.from({ length: 8 + Math.floor(r() * 18) }, () => zipfWord(r))
    const s = `${w[0][0].toUpperCase()}${w[0].slice(1)} ${w.slice(1).join(' ')}.`
    sentences.push(s)
    size += s.length + 1
    total += s.length + 1
    if (size >= 1000) {
      paragraphs.push(sentences.join(' '))
      sentences = []
      size = 0
    }
  }
  if (sentences.length > 0) paragraphs.push(sentences.join(' '))
  return paragraphs.join('\n\n')
}

/** `rate` of the words replaced by other words of the same length (punctuation and layout kept). */
export function replaceWords(text: string, rate: number, seed: number): string {
  const parts = text.split(/([^a-z]+)/i)
  const words = parts.flatMap((p, i) => (/^[a-z]{2,}$/i.test(p) ? [i] : []))
  const r = mulberry32(seed)
  for (let k = 0; k < Math.round(words.length * rate); k++) {
    const j = k + Math.floor(r() * (words.length - k))
    ;[words[k], words[j]] = [words[j], words[k]]
    const old = parts[words[k]]
    const same = VOCAB.filter((w) => w.length === old.length && w !== old.toLowerCase())
    parts[words[k]] = same.length > 0 ? same[Math.floor(r() * same.length)] : old.split('').reverse().join('')
  }
  return parts.join('')
}

/** 4 % of the words edited: every 25th replaced, deleted or followed by an inserted word, in turn. */
export function editEvery25th(text: string): string {
  return text.split(' ').map((w, i) => (i % 25 !== 7 ? w : i % 75 === 7 ? 'zzyzx' : i % 75 === 32 ? '' : `${w} qwerty`)).filter((w) => w !== '').join(' ')
}

/** A tenth of the words, one run starting at `at` (a share of the text), replaced by other text of the domain. */
export function replaceTenth(text: string, at: number, seed: number): string {
  const words = text.split(' ')
  const from = Math.floor(words.length * at)
  const run = Math.round(words.length / 10)
  return [...words.slice(0, from), ...domainText(seed, text.length).split(' ').slice(0, run), ...words.slice(from + run)].join(' ')
}

export function dedupQualitySuite(label: string, opts: StartOptions): void {
  const fast = (settings: Record<string, unknown> = {}) => ({ ...opts, settings: { queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 }, ...settings, ...opts.settings } })
  const docId = async (res: Response) => {
    assert.equal(res.status, 202)
    return ((await res.json()) as Json).doc_id as string
  }

  it(`${label}: 40 disjoint long documents of one domain all end indexed`, async (t) => {
    const svc = await startApp(t, fast())
    const kb = await newKb(svc)
    const ids: string[] = []
    for (let i = 0; i < 40; i++) ids.push(await docId(await upload(svc, kb, `report-${i}.txt`, domainText(1000 + i, 30_000))))
    const docs = await Promise.all(ids.map((id) => settle(svc, kb, id)))
    const hidden = docs.filter((d) => d.status !== 'indexed').map((d) => `${d.source}: ${d.status} (duplicate_of ${d.duplicate_of})`)
    assert.deepEqual(hidden, [], 'no distinct document is hidden')
    const counts = ((await (await svc.request(`/api/kb/${kb}/docs/status`)).json()) as Json).doc_counts
    assert.equal(counts.indexed, 40)
  })

  it(`${label}: a short document (two chunks): a copy with words edited is identical, one with a tenth replaced similar`, async (t) => {
    const svc = await startApp(t, fast({ embedding: { vector_size: 1024 } }))
    const kb = await newKb(svc)
    const body = domainText(3, 1500)
    const v1 = await docId(await upload(svc, kb, 'lab-v1.md', md('Lab notes', body)))
    assert.equal((await settle(svc, kb, v1)).status, 'indexed')

    // 4 % of the words edited (the text's length changes, as an author's edits change it)
    const v2Doc = await settle(svc, kb, await docId(await upload(svc, kb, 'lab-v2.md', md('Lab notes', editEvery25th(body)))))
    assert.equal(v2Doc.status, 'outdated')
    assert.equal(v2Doc.duplicate_of, v1)

    // a tenth of the words, one run, replaced: both chunks still look like near-copies of the original's, so
    // the chunk vectors alone called this identical and hid the new passage
    const v3 = await docId(await upload(svc, kb, 'lab-v3.md', md('Lab notes', replaceTenth(body, 0.45, 503))))
    assert.equal((await settle(svc, kb, v3)).status, 'indexed')
    // the older document is outdated just after the newer one is indexed (a statement of its own)
    const v1Doc = await settle(svc, kb, v1, ['outdated'])
    assert.equal(v1Doc.duplicate_of, v3)
  })

  it(`${label}: an edited copy is identical, a revision similar, a renamed copy supersedes the older document`, async (t) => {
    // the default vector size: stage 3 compares the chunk vectors the service stores by default
    const svc = await startApp(t, fast({ embedding: { vector_size: 1024 } }))
    const kb = await newKb(svc)
    // the superseded document's vectors are removed just after its status changes
    const noVectors = (id: string) => waitFor(async () => ((await svc.app.adapters.vectors.docVectors(kb, id)).length === 0 ? true : null), `the vectors of ${id} to be removed`)
    const body = domainText(7, 12_000)
    const v1 = await docId(await upload(svc, kb, 'notes-v1.md', md('Field notes', body)))
    assert.equal((await settle(svc, kb, v1)).status, 'indexed')

    // 2 % of the words changed, same title: identical, not indexed again
    const v2 = await docId(await upload(svc, kb, 'notes-v2.md', md('Field notes', replaceWords(body, 0.02, 1))))
    const v2Doc = await settle(svc, kb, v2)
    assert.equal(v2Doc.status, 'outdated')
    assert.equal(v2Doc.duplicate_of, v1)
    assert.equal((await svc.app.adapters.vectors.docVectors(kb, v2)).length, 0)

    // one paragraph in ten replaced: similar, the newer document is indexed and the older one outdated
    const paragraphs = body.split('\n\n')
    paragraphs[4] = domainText(99, paragraphs[4].length).split('\n\n')[0].slice(0, paragraphs[4].length)
    const v3 = await docId(await upload(svc, kb, 'notes-v3.md', md('Field notes', paragraphs.join('\n\n'))))
    assert.equal((await settle(svc, kb, v3)).status, 'indexed')
    const v1Doc = await settle(svc, kb, v1, ['outdated'])
    assert.equal(v1Doc.duplicate_of, v3)
    await noVectors(v1)

    // the same text under another file name (a text file's title is its name): title changed
    const text = domainText(8, 6_000)
    const a = await docId(await upload(svc, kb, 'minutes-draft.txt', text))
    assert.equal((await settle(svc, kb, a)).status, 'indexed')
    const b = await docId(await upload(svc, kb, 'minutes-2026-11.txt', text))
    const bDoc = await settle(svc, kb, b)
    assert.equal(bDoc.status, 'indexed', 'the renamed copy is indexed')
    assert.equal(bDoc.duplicate_of, null)
    const aDoc = await settle(svc, kb, a, ['outdated'])
    assert.equal(aDoc.duplicate_of, b, 'the older name is superseded')
    await noVectors(a)
    assert.ok((await svc.app.adapters.vectors.docVectors(kb, b)).length > 0)

    // deleting the newer document brings the superseded one back (it is queued again and compared anew)
    assert.equal((await svc.request(`/api/kb/${kb}/docs/${b}?force=true`, { method: 'DELETE' })).status, 202)
    const back = await settle(svc, kb, a, ['indexed'])
    assert.equal(back.duplicate_of, null)
  })
}
