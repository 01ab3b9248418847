// The files of an ingest job: paths, folders and glob patterns expanded to regular files, and the etag the
// service will give each one.
import { createHash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { stat } from 'node:fs/promises'
import { basename, resolve } from 'node:path'
import { glob, isDynamicPattern } from 'tinyglobby'

export interface InputFile {
  /** Absolute path. */
  path: string
  /** The document's `source`: the service keeps only the file name (plugins/docs/formats.ts baseName). */
  name: string
  size: number
  mtimeMs: number
}

export interface Expansion {
  files: InputFile[]
  /** Inputs that matched nothing. */
  unmatched: string[]
}

/**
 * A folder means every file below it; a glob is matched relative to the working directory. Hidden files and
 * folders are left out of both (a `.git` folder is never what a user means to ingest) unless the pattern
 * names them. Symbolic links are followed, as a shell would.
 */
export async function expandInputs(inputs: readonly string[], cwd = process.cwd()): Promise<Expansion> {
  const found = new Map<string, InputFile>()
  const unmatched: string[] = []
  for (const input of inputs) {
    const abs = resolve(cwd, input)
    const st = await stat(abs).catch(() => null)
    let paths: string[]
    if (st?.isFile()) paths = [abs]
    else if (st?.isDirectory()) paths = await glob('**/*', { cwd: abs, absolute: true, dot: false, onlyFiles: true })
    else if (isDynamicPattern(input)) paths = await glob(input, { cwd, absolute: true, dot: false, onlyFiles: true })
    else paths = []
    if (paths.length === 0) unmatched.push(input)
    for (const p of paths) {
      if (found.has(p)) continue
      const s = st?.isFile() ? st : await stat(p).catch(() => null)
      if (s?.isFile()) found.set(p, { path: p, name: basename(p), size: s.size, mtimeMs: s.mtimeMs })
    }
  }
  const files = [...found.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
  return { files, unmatched }
}

/** The service stores documents by file name, so a second file of the same name would replace the first. */
export function nameClashes(files: readonly InputFile[]): Map<string, InputFile> {
  const first = new Map<string, InputFile>()
  const clashes = new Map<string, InputFile>()
  for (const f of files) {
    const earlier = first.get(f.name)
    if (earlier) clashes.set(f.path, earlier)
    else first.set(f.name, f)
  }
  return clashes
}

/** The upload etag: both object stores record the MD5 of the bytes, in hex (adapters/objects). */
export async function fileEtag(path: string): Promise<string> {
  const hash = createHash('md5')
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer)
  return hash.digest('hex')
}
