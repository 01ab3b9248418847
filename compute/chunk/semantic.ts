// Semantic strategy. It needs the embedder, which lives in the main thread, so it is an async function the
// pipeline calls in the main thread (not a pool task): sentence splitting is a linear scan, cheap next to the
// embedding calls it waits on.
//
// Sentences are grouped in windows of `groupSize` (default 2) and embedded; the distance at the boundary after
// sentence i is the cosine distance between the group ending at i and the group starting at i + 1 (so it peaks
// at the topic change itself, where LlamaIndex's centred buffer smears it over a sentence). A breakpoint goes
// where the distance is above the `semantic_threshold` percentile of all distances (0.8 => 80th). A group longer than
// chunk_size is split again at its largest inner distance until every part fits; a group shorter than
// min_chunk_chars joins a neighbour when the result fits, else it is dropped. No overlap: the breakpoints
// are topic changes. A page end is a breakpoint of its own (a chunk never spans two pages): sentences and
// embedded groups stay inside their page, and the percentile is taken over the boundaries inside pages.
import type { ChunkedDocument, ChunkingOptions, PageText } from '../types.ts'
import { arrayFinder, BREAK_SENTENCE, isWs, textBreaks } from './breaks.ts'
import { joinPages, splitByPage, toChunks } from './document.ts'
import { splitRanges } from './ranges.ts'

export type EmbedFunction = (texts: string[]) => Promise<Float32Array[]>

export interface SemanticOptions {
  /** Sentences per embedded group on each side of a boundary (default 2). */
  groupSize?: number
  /** Texts per embed call (default 64). */
  batchSize?: number
}

/** Sentence ranges (flat [start, end, ...]) of text[from, to), none longer than `maxChars`. */
export function sentenceRanges(text: string, breaks: Uint8Array, maxChars: number, from = 0, to = text.length): number[] {
  const out: number[] = []
  const n = to
  let s = from
  while (s < n) {
    while (s < n && isWs(text.charCodeAt(s))) s++
    if (s >= n) break
    let e = s + 1
    while (e < n && !(breaks[e] !== 0 && breaks[e] <= BREAK_SENTENCE)) e++
    let end = e
    while (end > s && isWs(text.charCodeAt(end - 1))) end--
    if (end - s <= maxChars) out.push(s, end)
    else for (const p of splitRanges(text, arrayFinder(breaks), s, end, { size: maxChars, overlap: 0, minChars: 0 })) out.push(p)
    s = e
  }
  return out
}

/** The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's default). */
export function percentile(values: ArrayLike<number>, q: number): number {
  if (values.length === 0) return 0
  const sorted = Float64Array.from(values).sort()
  const pos = (Math.min(100, Math.max(0, q)) / 100) * (sorted.length - 1)
  const lo = Math.floor(pos)
  const hi = Math.ceil(pos)
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo)
}

export function cosineDistance(a: Float32Array, b: Float32Array): number {
  let dot = 0
  let na = 0
  let nb = 0
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i]
    na += a[i] * a[i]
    nb += b[i] * b[i]
  }
  return na === 0 || nb === 0 ? 1 : 1 - dot / Math.sqrt(na * nb)
}

/**
 * Groups sentences [i, j] (inclusive unit indexes, flat pairs) from the distances between neighbours
 * (`distances[i]` is between unit i and i + 1).
 */
export function groupUnits(units: readonly number[], distances: ArrayLike<number>, opts: { threshold: number; maxChars: number; minChars: number; forced?: Uint8Array }): number[] {
  const m = units.length / 2
  if (m === 0) return []
  // forced[i] = 1: a page ends after unit i. Such a boundary is always cut and has no distance of its own.
  const forced = opts.forced
  const cut = percentile(forced ? Float64Array.from(distances).filter((_, i) => forced[i] === 0) : distances, opts.threshold * 100)
  const len = (a: number, b: number) => units[2 * b + 1] - units[2 * a]
  const groups: number[] = []
  const fit = (a: number, b: number) => {
    if (a === b || len(a, b) <= opts.maxChars) { groups.push(a, b); return }
    let k = a
    for (let i = a + 1; i < b; i++) if (distances[i] > distances[k]) k = i
    fit(a, k)
    fit(k + 1, b)
  }
  let a = 0
  for (let i = 0; i < m - 1; i++) {
    if (forced?.[i] === 1 || distances[i] > cut) { fit(a, i); a = i + 1 }
  }
  fit(a, m - 1)
  // Short groups join a neighbour when the result fits.
  const merged: number[] = []
  for (let g = 0; g < groups.length; g += 2) {
    const [ga, gb] = [groups[g], groups[g + 1]]
    const last = merged.length - 2
    if (last >= 0 && forced?.[ga - 1] !== 1 && (len(ga, gb) < opts.minChars || len(merged[last], merged[last + 1]) < opts.minChars) && len(merged[last], gb) <= opts.maxChars) {
      merged[last + 1] = gb
    } else merged.push(ga, gb)
  }
  return merged
}

export async function chunkSemantic(pages: readonly PageText[], opts: ChunkingOptions, embed: EmbedFunction, so: SemanticOptions = {}): Promise<ChunkedDocument> {
  const doc = joinPages(pages)
  const text = doc.text
  const maxChars = Array.isArray(opts.chunk_size) ? opts.chunk_size[opts.chunk_size.length - 1] : opts.chunk_size
  const breaks = textBreaks(text)
  // lastOfPage[k]: the last unit of unit k's page
  const lastOfPage: number[] = []
  const units = splitByPage(doc, (from, to) => {
    const r = sentenceRanges(text, breaks, maxChars, from, to)
    const last = lastOfPage.length + r.length / 2 - 1
    for (let i = 0; i < r.length; i += 2) lastOfPage.push(last)
    return r
  })
  const m = units.length / 2
  const forced = new Uint8Array(Math.max(0, m - 1))
  for (let i = 0; i < m - 1; i++) if (lastOfPage[i] === i) forced[i] = 1
  const g = Math.max(1, so.groupSize ?? 2)
  const batchSize = so.batchSize ?? 64
  const distances = new Float64Array(Math.max(0, m - 1))
  if (forced.includes(0)) {
    // windows[k] = sentences [k, k + g - 1] clipped to k's page; then, for a boundary i whose left group would
    // start before its page's first sentence f, the window [f, i]
    const slice = (a: number, b: number) => text.slice(units[2 * a], units[2 * b + 1])
    const windows: string[] = []
    for (let k = 0; k < m; k++) windows.push(slice(k, Math.min(lastOfPage[k], k + g - 1)))
    const leftWindow = new Int32Array(Math.max(0, m - 1))
    for (let i = 0, first = 0; i < m - 1; i++) {
      if (i > 0 && forced[i - 1] === 1) first = i
      if (forced[i] === 1) continue
      if (i - g + 1 >= first) leftWindow[i] = i - g + 1
      else {
        leftWindow[i] = windows.length
        windows.push(slice(first, i))
      }
    }
    const vectors: Float32Array[] = []
    for (let i = 0; i < windows.length; i += batchSize) {
      const batch = windows.slice(i, i + batchSize)
      const got = await embed(batch)
      if (got.length !== batch.length) throw new Error(`semantic chunking: the embedder returned ${got.length} vectors for ${batch.length} texts`)
      for (const v of got) vectors.push(v)
    }
    for (let i = 0; i < m - 1; i++) if (forced[i] === 0) distances[i] = cosineDistance(vectors[leftWindow[i]], vectors[i + 1])
  }
  const groups = groupUnits(units, distances, { threshold: opts.semantic_threshold, maxChars, minChars: opts.min_chunk_chars, forced })
  const ranges: number[] = []
  for (let g = 0; g < groups.length; g += 2) {
    const start = units[2 * groups[g]]
    const end = units[2 * groups[g + 1] + 1]
    // a short group of a paged document could not join a neighbour across its page end: kept, not lost
    if (end > start && (end - start >= opts.min_chunk_chars || doc.pages.length > 1)) ranges.push(start, end)
  }
  return { chunks: toChunks(doc, ranges), parents: [] }
}
