// Title similarity for dedup stage 2: Jaccard similarity of the sets of character trigrams, built as
// PostgreSQL's pg_trgm builds them (words of letters and digits, each padded with two spaces before and one
// after), so the figure matches `similarity()` on ASCII titles and a later SQL pre-filter agrees with it.
const WORD = /[\p{L}\p{N}]+/gu

export function titleTrigrams(title: string): Set<string> {
  const out = new Set<string>()
  for (const [w] of title.normalize('NFKC').toLowerCase().matchAll(WORD)) {
    const cps = Array.from(`  ${w} `)
    for (let i = 0; i + 3 <= cps.length; i++) out.add(cps[i] + cps[i + 1] + cps[i + 2])
  }
  return out
}

/** 0..1; 0 when either title has no letters or digits (no evidence either way). */
export function titleSimilarity(a: string, b: string): number {
  const x = titleTrigrams(a)
  const y = titleTrigrams(b)
  if (x.size === 0 || y.size === 0) return 0
  let shared = 0
  for (const t of x) if (y.has(t)) shared++
  return shared / (x.size + y.size - shared)
}
