// Generated documents for the ingest and search benchmarks: deterministic, with a large vocabulary so that
// unrelated documents are not near-duplicates of each other (dedup would skip them and flatter the figures).
import { makePdf } from '../../test/fixtures/make-pdf.ts'

const SYLLABLES = ('ka ri to ne su mi la po de vi ro sa ku ta bo li me fu ga zo hi pe ny qua tre ble cor mun dal fin gol har ' +
  'sto pra gre wil ox ul ast ent ion ver sch tha kri mos dun pel zar vek lo ju').split(' ')

export function createRng(seed: number): () => number {
  let x = seed >>> 0 || 1
  return () => {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    return (x >>> 0) / 0x100000000
  }
}

/** A vocabulary of `size` pseudo-words (2-4 syllables), the same for a given seed. */
export function vocabulary(size: number, seed = 1): string[] {
  const rnd = createRng(seed)
  const words = new Set<string>()
  while (words.size < size) {
    const n = 2 + Math.floor(rnd() * 3)
    let w = ''
    for (let i = 0; i < n; i++) w += SYLLABLES[Math.floor(rnd() * SYLLABLES.length)]
    words.add(w)
  }
  return [...words]
}

const FUNCTION_WORDS = 'the of and to in a is that for it as was with be by on not he this are or his from at which but have an they you were her'.split(' ')

/**
 * Sentences about `chars` long: function words, a Zipf-like draw from the document's own topic words (a
 * random slice of the vocabulary, as real documents each have their subject), and rarer words from anywhere.
 */
export function text(rnd: () => number, vocab: readonly string[], chars: number): string {
  const topic = Array.from({ length: 150 }, () => vocab[Math.floor(rnd() * vocab.length)])
  const pick = () => {
    const r = rnd()
    if (r < 0.35) return FUNCTION_WORDS[Math.floor(rnd() * FUNCTION_WORDS.length)]
    if (r < 0.9) return topic[Math.floor(topic.length * rnd() ** 1.8)]
    return vocab[Math.floor(rnd() * vocab.length)]
  }
  const out: string[] = []
  let len = 0
  while (len < chars) {
    const n = 6 + Math.floor(rnd() * 14)
    const words: string[] = []
    for (let i = 0; i < n; i++) words.push(pick())
    const s = `${words[0][0].toUpperCase()}${words[0].slice(1)} ${words.slice(1).join(' ')}.`
    out.push(s)
    len += s.length + 1
    if (rnd() < 0.15) {
      out.push('\n\n')
      len += 2
    }
  }
  return out.join(' ').replace(/ \n\n /g, '\n\n')
}

export interface GeneratedDoc {
  name: string
  type: 'md' | 'html' | 'txt' | 'pdf'
  bytes: Uint8Array
}

const enc = new TextEncoder()

/** `count` documents of 5-20 KB, mixed md, html, txt and pdf. */
export async function generateDocuments(count: number, seed = 7): Promise<GeneratedDoc[]> {
  const rnd = createRng(seed)
  const vocab = vocabulary(20_000, seed)
  const docs: GeneratedDoc[] = []
  const types = ['md', 'html', 'txt', 'pdf'] as const
  for (let i = 0; i < count; i++) {
    const type = types[i % types.length]
    const size = 5_000 + Math.floor(rnd() * 15_000)
    const body = text(rnd, vocab, type === 'html' ? size * 0.8 : type === 'pdf' ? size * 0.55 : size)
    const title = `Document ${i} ${vocab[i % vocab.length]}`
    let bytes: Uint8Array
    if (type === 'md') bytes = enc.encode(`# ${title}\n\n${body.replace(/\n\n/g, '\n\n## Section\n\n')}\n`)
    else if (type === 'txt') bytes = enc.encode(`${title}\n\n${body}\n`)
    else if (type === 'html') {
      const paras = body.split('\n\n').map((p) => `<p>${p}</p>`).join('\n')
      bytes = enc.encode(`<!doctype html><html><head><title>${title}</title></head><body><nav><a href="/">Home</a></nav><main><article><h1>${title}</h1>${paras}</article></main><footer>Footer</footer></body></html>`)
    } else {
      const lines = body.replace(/\n\n/g, ' ').match(/.{1,90}(\s|$)/g) ?? []
      const pages: string[][] = []
      for (let p = 0; p < lines.length; p += 45) pages.push(lines.slice(p, p + 45).map((l) => l.trim()))
      bytes = await makePdf({ pages, title })
    }
    docs.push({ name: `doc-${String(i).padStart(5, '0')}.${type}`, type, bytes })
  }
  return docs
}
