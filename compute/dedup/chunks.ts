// Dedup stage 3's chunk comparison (spec 2.9): how much of a new document has a near-copy among a candidate's
// chunks, set against the background likeness of the two documents' unrelated chunks. It runs in the compute pool
// (compute/tasks/chunkpairs.task.ts): two documents of 5,000 chunks each are 25M cosines of 1,024 dimensions, and on
// the main thread they held every request for almost two minutes (issue 36). The work is also bounded: past
// MAX_PAIRS pairs, an even sample of the new document's chunks stands for all of them (the score is a mean over
// the new chunks, and a sample of a few hundred estimates it within a few hundredths).

/** Chunk pairs compared at most (about 1 s of one worker at 1,024 dimensions). */
export const MAX_PAIRS = 1 << 20
/** Chunks of each side kept at least when sampling. */
const MIN_SAMPLE = 64

/**
 * How far from the background towards an exact copy a best match must lie to count as the same passage in
 * full. A passage with a few words changed then scores 1 (built-in embedder, 1024 dimensions, SciFact: 5 % of
 * the words replaced leaves cosines of 0.90-0.99, 0.87-0.99 relative to the background), so small edits spread
 * over a document leave it identical, while a passage partly rewritten keeps its graded score (one paragraph
 * in ten replaced: similar), and one about the same subject in other words falls below chunk_match_threshold.
 */
const NEAR_COPY = 0.88

export interface ChunkPairs {
  /** The stage-3 chunk score: mean pair score of the new chunks (below the match threshold: 0), size-scaled. */
  score: number
  /** The highest pair score of a new chunk, before the cut at the match threshold. */
  top: number
  /** New chunks compared (all, or an even sample) and candidate chunks compared. */
  compared: [number, number]
}

/** Indexes of an even sample of `k` out of `n` (all when k >= n). */
function evenSample(n: number, k: number): Int32Array {
  if (k >= n) return Int32Array.from({ length: n }, (_, i) => i)
  return Int32Array.from({ length: k }, (_, i) => Math.floor(((i + 0.5) * n) / k))
}

/**
 * The chunks chunkPairs compares of n new and m candidate chunks: the candidate's all while the new side can keep
 * MIN_SAMPLE, past that both sampled evenly. A caller on the main thread packs only these (a 5 MB document's 7,351
 * chunks are 30 MB of vectors; 142 of them are compared) and passes the counts for the size ratio.
 */
export function samplePairs(n: number, m: number, maxPairs = MAX_PAIRS): { rows: Int32Array; cols: Int32Array } {
  const cols = evenSample(m, Math.max(MIN_SAMPLE, Math.floor(maxPairs / MIN_SAMPLE)))
  const rows = evenSample(n, Math.max(MIN_SAMPLE, Math.floor(maxPairs / Math.max(1, cols.length))))
  return { rows, cols }
}

function norms(flat: Float32Array, dims: number, rows: Int32Array): Float64Array {
  const out = new Float64Array(rows.length)
  for (let r = 0; r < rows.length; r++) {
    const base = rows[r] * dims
    let s = 0
    for (let i = 0; i < dims; i++) s += flat[base + i] * flat[base + i]
    out[r] = Math.sqrt(s)
  }
  return out
}

/**
 * The score of `fresh` (n rows of `dims`, flat) against `other` (m rows): for each new chunk its best (top-1)
 * cosine among the candidate's chunks, relative to the background (the mean cosine of the pairs that are not a
 * chunk's best match nor a neighbour of it: neighbouring chunks share chunk_overlap characters and continue one
 * passage), (best - background) / (1 - background), 1 from NEAR_COPY up; pair scores below `matchThreshold` count
 * 0; the mean is scaled by the chunk-count ratio min(n, m) / max(n, m), so that a document contained in a much
 * longer one is not called identical to it. Raw cosines of unrelated passages of one language or domain are far
 * from 0 (shared vocabulary with hashed lexical features, shared topic with a neural model): a mean of raw
 * cosines rose with that background.
 */
export function chunkPairs(fresh: Float32Array, other: Float32Array, dims: number, matchThreshold: number, maxPairs = MAX_PAIRS,
  counts?: { fresh: number; other: number }): ChunkPairs {
  const rowsGiven = dims > 0 ? Math.floor(fresh.length / dims) : 0
  const colsGiven = dims > 0 ? Math.floor(other.length / dims) : 0
  if (rowsGiven === 0 || colsGiven === 0) return { score: 0, top: 0, compared: [0, 0] }
  // the documents' own chunk counts (the rows given may be a sample the caller took: samplePairs)
  const n = counts?.fresh ?? rowsGiven
  const m = counts?.other ?? colsGiven
  const { rows, cols } = samplePairs(rowsGiven, colsGiven, maxPairs)
  const nr = rows.length
  const mc = cols.length
  const rn = norms(fresh, dims, rows)
  const cn = norms(other, dims, cols)
  const cos = new Float64Array(nr * mc)
  const best = new Float64Array(nr).fill(-Infinity)
  const at = new Int32Array(nr)
  for (let i = 0; i < nr; i++) {
    const a = rows[i] * dims
    for (let j = 0; j < mc; j++) {
      const b = cols[j] * dims
      let dot = 0
      for (let d = 0; d < dims; d++) dot += fresh[a + d] * other[b + d]
      const den = rn[i] * cn[j]
      const c = (cos[i * mc + j] = den === 0 ? 0 : dot / den)
      if (c > best[i]) {
        best[i] = c
        at[i] = j
      }
    }
  }
  // Background pairs: not a chunk's best match, nor a neighbour of it. Against a candidate of one or two chunks
  // there are none, and the cosines stand as they are. (Sampled columns are neighbours when their chunks are.)
  let sum = 0
  let pairs = 0
  for (let i = 0; i < nr; i++) {
    const bestCol = cols[at[i]]
    for (let j = 0; j < mc; j++) {
      if (Math.abs(cols[j] - bestCol) <= 1) continue
      sum += cos[i * mc + j]
      pairs++
    }
  }
  // unrelated passages are not anti-correlated: a negative mean is noise, not a lower background
  const background = pairs > 0 ? Math.min(Math.max(0, sum / pairs), 0.9) : 0
  let score = 0
  let top = 0
  for (let i = 0; i < nr; i++) {
    let pair = (best[i] - background) / (1 - background)
    if (pair >= NEAR_COPY) pair = 1
    if (pair >= matchThreshold) score += pair
    if (pair > top) top = pair
  }
  return { score: (score / nr) * (Math.min(n, m) / Math.max(n, m)), top, compared: [nr, mc] }
}

/**
 * Rows of one length, packed back to back. With `share`, rows that already lie back to back in one buffer (views
 * of one matrix, as the embedded store's docVectors gives them) are answered as a view of it, without a copy.
 */
export function packRows(rows: readonly Float32Array[], share = false): { flat: Float32Array; dims: number } {
  const dims = rows[0]?.length ?? 0
  if (share && rows.length > 0) {
    const first = rows[0]
    let consecutive = true
    for (let i = 1; i < rows.length && consecutive; i++) {
      consecutive = rows[i].buffer === first.buffer && rows[i].length === dims && rows[i].byteOffset === first.byteOffset + i * dims * 4
    }
    if (consecutive) return { flat: new Float32Array(first.buffer, first.byteOffset, rows.length * dims), dims }
  }
  const flat = new Float32Array(rows.length * dims)
  rows.forEach((r, i) => flat.set(r.length === dims ? r : r.subarray(0, dims), i * dims))
  return { flat, dims }
}

/** The rows at `at`, packed (a sample taken on the main thread: only these are copied). */
export function packPicked(rows: readonly Float32Array[], at: Int32Array): { flat: Float32Array; dims: number } {
  return packRows(at.length === rows.length ? rows : Array.from(at, (i) => rows[i]))
}
