// Hierarchical strategy: every level of a descending size list is kept; each level is split inside the ranges
// of the level above, so children cover only their parent's text (and the top level is split page by page, so
// no parent, and no merged result of auto-merge, spans two pages). Overlap applies to the leaves only. Leaves
// shorter than min_chunk_chars are dropped, and parents left without any leaf below them are dropped too
// (auto-merge could never select them).
import type { Chunk, ChunkedDocument } from '../types.ts'
import { textFinder } from './breaks.ts'
import { splitByPage, toChunks, type DocumentText } from './document.ts'
import { splitRanges } from './ranges.ts'

export interface HierarchicalOptions {
  /** Descending sizes; the last is the leaf size. */
  sizes: readonly number[]
  chunkOverlap: number
  minChunkChars: number
}

interface Level {
  ranges: number[]
  /** Index of each range's parent in the level above (null at the top). */
  parents: (number | null)[]
}

export function chunkHierarchical(doc: DocumentText, o: HierarchicalOptions): ChunkedDocument {
  const text = doc.text
  const breaks = textFinder(text)
  const depth = o.sizes.length
  const levels: Level[] = []
  for (let l = 0; l < depth; l++) {
    const leaf = l === depth - 1
    // every level of a paged document keeps a page's short remainder, so a short page keeps its parent and leaf
    const opts = { size: o.sizes[l], overlap: leaf ? o.chunkOverlap : 0, minChars: o.minChunkChars, keepRemainder: doc.pages.length > 1 }
    if (l === 0) {
      const ranges = splitByPage(doc, (from, to) => splitRanges(text, breaks, from, to, opts))
      levels.push({ ranges, parents: new Array<null>(ranges.length / 2).fill(null) })
      continue
    }
    const above = levels[l - 1].ranges
    const ranges: number[] = []
    const parents: number[] = []
    for (let p = 0; p < above.length; p += 2) {
      const inner = splitRanges(text, breaks, above[p], above[p + 1], opts)
      for (let i = 0; i < inner.length; i++) ranges.push(inner[i])
      for (let i = 0; i < inner.length; i += 2) parents.push(p >> 1)
    }
    levels.push({ ranges, parents })
  }

  // Keep the parents that still have a leaf below them, renumbered in level order.
  const alive: Uint8Array[] = levels.map((lv) => new Uint8Array(lv.ranges.length / 2))
  alive[depth - 1].fill(1)
  for (let l = depth - 1; l > 0; l--) {
    const lv = levels[l]
    for (let i = 0; i < lv.parents.length; i++) if (alive[l][i]) alive[l - 1][lv.parents[i]!] = 1
  }
  const newIndex: Int32Array[] = levels.map((lv) => new Int32Array(lv.ranges.length / 2).fill(-1))
  const parents: Chunk[] = []
  for (let l = 0; l < depth - 1; l++) {
    const lv = levels[l]
    for (let i = 0; i < lv.parents.length; i++) {
      if (!alive[l][i]) continue
      newIndex[l][i] = parents.length
      const up = lv.parents[i]
      const [chunk] = toChunks(doc, [lv.ranges[2 * i], lv.ranges[2 * i + 1]], l, [up === null ? null : newIndex[l - 1][up]], parents.length)
      parents.push(chunk)
    }
  }
  const leaf = levels[depth - 1]
  const leafParents = depth > 1 ? leaf.parents.map((p) => newIndex[depth - 2][p!]) : leaf.parents
  return { chunks: toChunks(doc, leaf.ranges, depth - 1, leafParents), parents }
}
