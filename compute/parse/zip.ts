// Zip containers (docx, hwpx) are checked before anything inflates them: the central directory's sizes must
// stay under a cap, and the XML entries are then inflated in a counting stream, so a zip whose directory lies
// is stopped at the cap too instead of filling the worker's heap.
import { Unzip, UnzipInflate, unzipSync } from 'fflate'
import { errorMessage, ParseCode, parseError } from './errors.ts'

const MB = 1024 * 1024
export const ZIP_MAX_TOTAL = 200 * MB
const ZIP_RATIO = 50
const ZIP_RATIO_FLOOR = 20 * MB

/** Uncompressed bytes allowed for a zip of this size: 50x the file, at least 20 MB, at most 200 MB. */
export const zipLimit = (fileSize: number) => Math.min(ZIP_MAX_TOTAL, Math.max(ZIP_RATIO_FLOOR, ZIP_RATIO * fileSize))

export const isZip = (b: Uint8Array) => b.length >= 4 && b[0] === 0x50 && b[1] === 0x4b && (b[2] === 3 || b[2] === 5) && (b[3] === 4 || b[3] === 6)
export const isCfb = (b: Uint8Array) => b.length >= 8 && b[0] === 0xd0 && b[1] === 0xcf && b[2] === 0x11 && b[3] === 0xe0 && b[4] === 0xa1 && b[5] === 0xb1 && b[6] === 0x1a && b[7] === 0xe1

const mb = (n: number) => `${(n / MB).toFixed(n < 10 * MB ? 1 : 0)} MB`

function bomb(kind: string, size: number, limit: number) {
  return parseError(ParseCode.TOO_LARGE, `${kind} rejected as a zip bomb: it expands to more than ${mb(size)} (limit ${mb(limit)} for a ${kind} of this size)`)
}

/** Entry name -> declared uncompressed size, from the central directory; nothing is inflated. */
export function zipDirectory(bytes: Uint8Array, kind: string): Map<string, number> {
  const sizes = new Map<string, number>()
  try {
    unzipSync(bytes, {
      filter(file) {
        sizes.set(file.name, file.originalSize)
        return false
      },
    })
  } catch (err) {
    throw parseError(ParseCode.CORRUPT, `corrupt ${kind}: ${errorMessage(err)}`, err)
  }
  return sizes
}

/**
 * Checks the declared sizes, then inflates the entries `wanted` selects in a counting stream and returns
 * them; the count of real bytes is held to the same limit.
 */
export function readZipGuarded(bytes: Uint8Array, kind: string, wanted: (name: string) => boolean): { directory: Map<string, number>; files: Map<string, Uint8Array> } {
  const directory = zipDirectory(bytes, kind)
  const limit = zipLimit(bytes.length)
  let declared = 0
  for (const size of directory.values()) declared += size
  if (declared > limit) throw bomb(kind, declared, limit)

  const files = new Map<string, Uint8Array>()
  let inflated = 0
  let failure: unknown = null
  const unzip = new Unzip((file) => {
    if (!wanted(file.name)) return
    const chunks: Uint8Array[] = []
    file.ondata = (err, chunk, final) => {
      if (failure) return
      if (err) {
        failure = parseError(ParseCode.CORRUPT, `corrupt ${kind}: ${file.name}: ${errorMessage(err)}`, err)
        return
      }
      inflated += chunk.length
      if (inflated > limit) {
        failure = bomb(kind, inflated, limit)
        file.terminate()
        return
      }
      chunks.push(chunk)
      if (final) files.set(file.name, concat(chunks))
    }
    file.start()
  })
  unzip.register(UnzipInflate)
  try {
    // Pushed in slices so that a runaway entry is stopped within one slice's worth of output.
    const step = 8 * 1024
    for (let i = 0; i < bytes.length && !failure; i += step) unzip.push(bytes.subarray(i, Math.min(bytes.length, i + step)), i + step >= bytes.length)
  } catch (err) {
    failure ??= parseError(ParseCode.CORRUPT, `corrupt ${kind}: ${errorMessage(err)}`, err)
  }
  if (failure) throw failure
  return { directory, files }
}

function concat(chunks: Uint8Array[]): Uint8Array {
  if (chunks.length === 1) return chunks[0]
  let n = 0
  for (const c of chunks) n += c.length
  const out = new Uint8Array(n)
  let o = 0
  for (const c of chunks) {
    out.set(c, o)
    o += c.length
  }
  return out
}
