// Objects as plain files: `<dir>/objects/<key>`, one folder per key segment, so an operator can read
// them with ordinary tools. A sidecar `<dir>/meta/<key>.meta.json` keeps the etag and content type of an
// object over SMALL_OBJECT bytes (head hashes a smaller one); it is only trusted while it names the data
// file's inode, size and mtime, so a crash between the two renames or two concurrent puts can make it stale
// but never wrong (head then hashes the file again).
import { createHash, randomUUID } from 'node:crypto'
import { closeSync, constants, createReadStream, fstatSync, fsync, mkdirSync, open, openSync, promises as fs, readSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { Readable } from 'node:stream'
import { AppError, storageFailure } from '../../kernel/errors.ts'
import type { ObjectInfo, ObjectStore } from '../ports.ts'
import { fsyncDir } from '../durable.ts'
import { checkKey, checkPrefix, compareKeys, contentTypeFor, sizeMismatch } from './keys.ts'

export interface LocalObjectStoreOptions {
  /** Root folder; created when missing. */
  dir: string
}

interface Sidecar {
  etag: string
  size: number
  contentType?: string
  ino: number
  mtimeMs: number
}

/** Temp files older than this are leftovers of a crashed write (another process may still be writing newer ones). */
const STALE_TMP_MS = 60 * 60 * 1000
const DELETE_CONCURRENCY = 16
/**
 * Objects up to this size are written and read with in-place system calls and two thread hand-offs (creating the
 * file, and the fsync); larger ones stream through the thread pool. The ingest profile: puts were 16 % of the main
 * thread, mostly the fourteen hand-offs of each; in place, the main thread spent less and the pool threads a fifth.
 * Creating a file is usually microseconds, but in place it was 12.7 % of the main thread's time in a later profile
 * (perf, bench/ingest.bench.ts --service-only --documents=1000, Intel Xeon, 2 cores: ext4_create, find_inode_bit,
 * recently_deleted), about 0.7 ms a document in a /tmp where earlier runs had just deleted thousands of files. Made in
 * the thread pool (writeSmall), three runs each way in turn: the main thread 5.60-5.76 against 6.21-6.41 ms of CPU a
 * document, 93.9-97.1 against 90.2-93.1 documents/s, the same peak RSS.
 */
const SMALL_OBJECT = 256 * 1024

const notFound = (key: string) => new AppError('OBJECT_NOT_FOUND', 404, `Object ${JSON.stringify(key)} not found`)
const keyConflict = (key: string, cause: unknown) =>
  new AppError('OBJECT_KEY_CONFLICT', 409, `Object key ${JSON.stringify(key)} conflicts with an existing object: one key cannot be both an object and a folder of other objects in local storage`, { cause })

const errno = (err: unknown): string | undefined => (err as NodeJS.ErrnoException | null)?.code

async function writeAll(fh: FileHandle, buf: Uint8Array): Promise<void> {
  for (let off = 0; off < buf.byteLength; ) off += (await fh.write(buf, off, buf.byteLength - off)).bytesWritten
}

/** Writes the parts to a new file and fsyncs it (the file's creation and the fsync are sent to the thread pool). */
async function writeSmall(path: string, parts: Uint8Array[]): Promise<{ ino: number; mtimeMs: number }> {
  // Created in libuv's thread pool, not in place: creating the file is ext4's search for a free inode, which passes
  // over every inode of the folder's group deleted in the last moments, and that can take most of a millisecond.
  const fd = await new Promise<number>((resolve, reject) => open(path, 'wx', (err, fd) => (err ? reject(err) : resolve(fd))))
  try {
    for (const part of parts) for (let off = 0; off < part.byteLength; ) off += writeSync(fd, part, off, part.byteLength - off)
    await new Promise<void>((resolve, reject) => fsync(fd, (err) => (err ? reject(err) : resolve())))
    const st = fstatSync(fd)
    return { ino: st.ino, mtimeMs: st.mtimeMs }
  } finally {
    closeSync(fd)
  }
}

function readAll(fd: number, size: number): Buffer {
  const buf = Buffer.allocUnsafeSlow(size)
  let at = 0
  while (at < size) {
    const n = readSync(fd, buf, at, size - at, at)
    if (n === 0) break
    at += n
  }
  return at === size ? buf : buf.subarray(0, at)
}

export async function createLocalObjectStore(options: LocalObjectStoreOptions): Promise<ObjectStore> {
  if (!options?.dir) throw new Error('createLocalObjectStore: dir is required')
  const root = resolve(options.dir)
  const objectsDir = join(root, 'objects')
  const metaDir = join(root, 'meta')
  const tmpDir = join(root, 'tmp')
  for (const d of [objectsDir, metaDir, tmpDir]) await fs.mkdir(d, { recursive: true })
  await removeStaleTemps(tmpDir)
  let closed = false

  const dataPath = (key: string) => join(objectsDir, ...key.split('/'))
  const metaPath = (key: string) => join(metaDir, ...key.split('/')) + '.meta.json'
  const tmpPath = () => join(tmpDir, randomUUID())

  function ensureOpen(): void {
    if (closed) throw storageFailure(`Local object store at ${root} is closed`)
  }

  /**
   * Renames a finished temp file to its final name, creating folders (retried when a delete prunes them
   * meanwhile). Returns the folders whose entries changed: the final one, and the parent of each folder made.
   * Done in place, as SMALL_OBJECT explains.
   */
  function place(tmp: string, final: string, key: string): string[] {
    const changed = new Set([dirname(final)])
    for (let attempt = 0; ; attempt++) {
      try {
        renameSync(tmp, final)
        return [...changed]
      } catch (err) {
        const code = errno(err)
        if (code === 'ENOENT' && attempt < 5) {
          try {
            const first = mkdirSync(dirname(final), { recursive: true })
            // Each folder made, from the first one down, is a new entry in the folder above it.
            if (first) for (let d = dirname(final); d.length >= first.length; d = dirname(d)) changed.add(dirname(d))
          } catch (mkErr) {
            const mkCode = errno(mkErr)
            if (mkCode === 'EEXIST' || mkCode === 'ENOTDIR') throw keyConflict(key, mkErr)
            if (mkCode !== 'ENOENT') throw mkErr
          }
          continue
        }
        if (code === 'EEXIST' || code === 'ENOTDIR' || code === 'EISDIR' || code === 'ENOTEMPTY') throw keyConflict(key, err)
        throw err
      }
    }
  }

  /** The sidecar is a cache checked against the data file, written without fsync; without it head hashes the file. */
  function writeSidecar(key: string, meta: Sidecar): void {
    const tmp = tmpPath()
    try {
      writeFileSync(tmp, JSON.stringify(meta), { flag: 'wx' })
      place(tmp, metaPath(key), key)
    } catch {
      rmSync(tmp, { force: true })
    }
  }

  async function readSidecar(key: string): Promise<Sidecar | null> {
    try {
      return JSON.parse(await fs.readFile(metaPath(key), 'utf8')) as Sidecar
    } catch {
      return null
    }
  }

  /** Opens the data file of key, or returns null when there is no such object. */
  async function openObject(key: string): Promise<{ fh: FileHandle; size: number; ino: number; mtimeMs: number } | null> {
    let fh: FileHandle
    try {
      fh = await fs.open(dataPath(key), constants.O_RDONLY)
    } catch (err) {
      const code = errno(err)
      if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR') return null
      throw err
    }
    const st = await fh.stat()
    if (!st.isFile()) {
      await fh.close()
      return null
    }
    return { fh, size: st.size, ino: st.ino, mtimeMs: st.mtimeMs }
  }

  /** Removes folders left empty by a delete, up to the objects root. */
  async function prune(base: string, from: string): Promise<void> {
    for (let d = from; d.length > base.length && d.startsWith(base); d = dirname(d)) {
      try {
        await fs.rmdir(d)
      } catch {
        return
      }
    }
  }

  async function deleteOne(key: string): Promise<boolean> {
    const file = dataPath(key)
    let removed = true
    try {
      const st = await fs.lstat(file)
      if (!st.isFile()) return false
      await fs.unlink(file)
    } catch (err) {
      const code = errno(err)
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw err
      removed = false
    }
    await fs.rm(metaPath(key), { force: true }).catch(() => {})
    if (removed) {
      await prune(objectsDir, dirname(file))
      await prune(metaDir, dirname(metaPath(key)))
    }
    return removed
  }

  async function* walk(dirPath: string, keyPrefix: string, filter: string): AsyncGenerator<string> {
    let entries
    try {
      entries = await fs.readdir(dirPath, { withFileTypes: true })
    } catch (err) {
      const code = errno(err)
      if (code === 'ENOENT' || code === 'ENOTDIR') return
      throw err
    }
    // A folder sorts as `name/` so the walk yields keys in the byte order S3 lists them in.
    const items = entries
      .filter((e) => e.isDirectory() || e.isFile())
      .map((e) => ({ e, sortKey: e.isDirectory() ? `${e.name}/` : e.name }))
      .sort((a, b) => compareKeys(a.sortKey, b.sortKey))
    for (const { e } of items) {
      const key = keyPrefix + e.name
      if (e.isDirectory()) {
        if (`${key}/`.startsWith(filter) || filter.startsWith(`${key}/`)) yield* walk(join(dirPath, e.name), `${key}/`, filter)
      } else if (key.startsWith(filter)) {
        yield key
      }
    }
  }

  const store: ObjectStore = {
    name: 'local',

    async put(key, body, opts = {}) {
      checkKey(key)
      ensureOpen()
      const tmp = tmpPath()
      const hash = createHash('md5')
      let size = 0
      // A body of at most SMALL_OBJECT bytes is gathered and written in place with one thread hand-off (its
      // fsync); a larger one streams to the file through the thread pool as it arrives.
      const gathered: Uint8Array[] = []
      let fh: FileHandle | null = null
      let st: { ino: number; mtimeMs: number }
      try {
        const chunks = body instanceof Uint8Array ? [body] : (body as Readable)
        for await (const c of chunks) {
          const chunk = typeof c === 'string' ? Buffer.from(c) : (c as Uint8Array)
          hash.update(chunk)
          size += chunk.byteLength
          if (opts.size !== undefined && size > opts.size) throw sizeMismatch(key, opts.size, `more than ${opts.size}`)
          if (fh) {
            await writeAll(fh, chunk)
            continue
          }
          gathered.push(chunk)
          if (size > SMALL_OBJECT) {
            fh = await fs.open(tmp, 'wx')
            for (const g of gathered.splice(0)) await writeAll(fh, g)
          }
        }
        if (opts.size !== undefined && size !== opts.size) throw sizeMismatch(key, opts.size, String(size))
        // Durable before it takes the final name: a crash leaves the old object or the new one, never half of it.
        const large = fh !== null
        if (fh) {
          await fh.sync()
          st = await fh.stat()
          await fh.close()
          fh = null
        } else {
          st = await writeSmall(tmp, gathered)
        }
        const final = dataPath(key)
        await Promise.all(place(tmp, final, key).map(fsyncDir))
        const info: ObjectInfo = { size, etag: hash.digest('hex'), contentType: opts.contentType ?? contentTypeFor(key) }
        // A small object gets no sidecar: head hashes it in well under a millisecond, and a sidecar costs two
        // new inodes (its file and folder), which some disks make expensive (0.8 ms each measured in this
        // machine's /tmp). Its content type then comes from the key's extension.
        if (large) writeSidecar(key, { ...info, ino: st.ino, mtimeMs: st.mtimeMs })
        return info
      } catch (err) {
        if (fh) await fh.close().catch(() => {})
        rmSync(tmp, { force: true })
        if (err instanceof AppError) throw err
        if (errno(err) === 'ENAMETOOLONG') throw new AppError('OBJECT_KEY_INVALID', 422, `Object key ${JSON.stringify(key)} is too long for local storage`)
        throw storageFailure(`Local object store: put of ${JSON.stringify(key)} failed: ${(err as Error).message}`, err)
      }
    },

    async get(key) {
      checkKey(key)
      ensureOpen()
      const path = dataPath(key)
      let fd: number
      try {
        fd = openSync(path, constants.O_RDONLY)
      } catch (err) {
        const code = errno(err)
        if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR') throw notFound(key)
        throw err
      }
      let streamed = false
      try {
        const st = fstatSync(fd)
        if (!st.isFile()) throw notFound(key)
        // A small object is read in place, into a buffer of its own (a reader may move it to another thread).
        if (st.size <= SMALL_OBJECT) return Readable.from([readAll(fd, st.size)])
        // A larger one streams from the descriptor already open; the stream closes it.
        streamed = true
        return createReadStream('', { fd })
      } finally {
        if (!streamed) closeSync(fd)
      }
    },

    async head(key) {
      checkKey(key)
      ensureOpen()
      const obj = await openObject(key)
      if (!obj) return null
      try {
        const meta = await readSidecar(key)
        if (meta && meta.ino === obj.ino && meta.size === obj.size && meta.mtimeMs === obj.mtimeMs) {
          return { size: meta.size, etag: meta.etag, contentType: meta.contentType }
        }
        const hash = createHash('md5')
        for await (const chunk of obj.fh.createReadStream({ autoClose: false, start: 0 })) hash.update(chunk as Buffer)
        return { size: obj.size, etag: hash.digest('hex'), contentType: contentTypeFor(key) }
      } finally {
        await obj.fh.close()
      }
    },

    async delete(keys) {
      keys.forEach(checkKey)
      ensureOpen()
      const unique = [...new Set(keys)]
      let count = 0
      let next = 0
      const worker = async () => {
        while (next < unique.length) if (await deleteOne(unique[next++])) count++
      }
      await Promise.all(Array.from({ length: Math.min(DELETE_CONCURRENCY, unique.length) }, worker))
      return count
    },

    async deletePrefix(prefix) {
      checkPrefix(prefix)
      if (prefix === '') throw new AppError('OBJECT_KEY_INVALID', 422, 'deletePrefix needs a non-empty prefix (refusing to delete every object)')
      ensureOpen()
      const keys: string[] = []
      for await (const key of store.list(prefix)) keys.push(key)
      return store.delete(keys)
    },

    async *list(prefix) {
      checkPrefix(prefix)
      ensureOpen()
      // Start at the deepest folder the prefix names in full; the rest of the prefix filters names.
      const cut = prefix.lastIndexOf('/')
      const base = cut < 0 ? '' : prefix.slice(0, cut)
      const start = base ? join(objectsDir, ...base.split('/')) : objectsDir
      yield* walk(start, base ? `${base}/` : '', prefix)
    },

    async ping() {
      if (closed) return false
      try {
        await fs.access(objectsDir, constants.W_OK)
        return true
      } catch {
        return false
      }
    },

    async close() {
      closed = true
    },
  }
  return store
}


async function removeStaleTemps(tmpDir: string): Promise<void> {
  const now = Date.now()
  for (const name of await fs.readdir(tmpDir)) {
    const file = join(tmpDir, name)
    const st = await fs.stat(file).catch(() => null)
    if (st && now - st.mtimeMs > STALE_TMP_MS) await fs.rm(file, { force: true, recursive: true })
  }
}
