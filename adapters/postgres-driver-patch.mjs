// Run by `npm install` (package.json "postinstall"): mends two faults of postgres.js 3.4.9 (the newest release) that
// end the whole process when PostgreSQL goes away under load, as it does when the server is restarted. Neither can be
// caught by the caller, because both are thrown where no query's promise is waiting. Upstream has both open:
// - porsager/postgres#1154, #1208 (fix proposed in #1168 and #1209): a write under 1 KB is sent from a setImmediate;
//   if the connection has closed by then, `socket` is null and `socket.write` throws a TypeError. The teardown also
//   cancels that immediate without forgetting it (nor the bytes it held), so a connection used again afterwards never
//   schedules a write again and puts the dead socket's bytes before its next ones. Mended: the write settles the
//   queries waiting on it with CONNECTION_CLOSED, and the teardown forgets the immediate and its bytes.
// - porsager/postgres#1192, #1205 (and #279): a new connection's array-types query runs from a promise nobody holds,
//   so its failure (the backend killed, a statement timeout) is an unhandled rejection. Mended: that promise is caught;
//   the query the connection was opened for still gets its own answer or error, as it did.
// Each mend replaces an exact text once in each of the package's copies (ESM, CommonJS, Cloudflare) and marks the file;
// a marked file is left alone. Another version of the package is left alone with a notice: test/adapters/
// postgres-driver.test.ts reproduces both faults and says whether it still needs this.
import { readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'

const VERSION = '3.4.9'
const MARK = '// quarry patch: postgres.js 3.4.9 (adapters/postgres-driver-patch.mjs)'

const MENDS = [
  {
    what: 'a queued write finds its connection closed',
    from: '  function nextWrite(fn) {\n    const x = socket.write(chunk, fn)\n',
    to:
      '  function nextWrite(fn) {\n' +
      '    if (!socket) {\n' +
      '      nextWriteTimer !== null && clearImmediate(nextWriteTimer)\n' +
      '      chunk = nextWriteTimer = null\n' +
      "      error(Errors.connection('CONNECTION_CLOSED', options))\n" +
      '      return false\n' +
      '    }\n' +
      '    const x = socket.write(chunk, fn)\n',
  },
  {
    what: 'terminate() forgets the queued write',
    from: '    clearImmediate(nextWriteTimer)\n    if (socket) {\n',
    to: '    clearImmediate(nextWriteTimer)\n    chunk = nextWriteTimer = null\n    if (socket) {\n',
  },
  {
    what: 'closed() forgets the queued write',
    from: "    clearImmediate(nextWriteTimer)\n    socket.removeListener('data', data)\n",
    to: "    clearImmediate(nextWriteTimer)\n    chunk = nextWriteTimer = null\n    socket.removeListener('data', data)\n",
  },
  {
    what: "the array-types query's failure is caught",
    from: '        return fetchArrayTypes()\n',
    to: '        return fetchArrayTypes().catch(() => {})\n',
  },
]

/** Mends one copy of connection.js; returns what it did. Throws when a text to replace is not there exactly once. */
export function mendConnection(text, file) {
  if (text.includes(MARK)) return { text, changed: false }
  let out = text
  for (const mend of MENDS) {
    const at = out.indexOf(mend.from)
    if (at < 0 || out.indexOf(mend.from, at + 1) >= 0) {
      throw new Error(`${file}: the text to mend (${mend.what}) is not there exactly once; postgres.js ${VERSION} was expected`)
    }
    out = out.slice(0, at) + mend.to + out.slice(at + mend.from.length)
  }
  return { text: `${MARK}\n${out}`, changed: true }
}

/** The package's folder: its CommonJS entry is <root>/cjs/src/index.js (package.json is not in its exports). */
export function driverRoot() {
  return resolve(dirname(createRequire(import.meta.url).resolve('postgres')), '..', '..')
}

/** Mends the installed package's copies (with write false, only says which copies would change). */
export function mendInstalledDriver(root = driverRoot(), write = true) {
  const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
  if (version !== VERSION) return { version, files: [], skipped: true }
  const files = []
  for (const copy of ['src', 'cjs/src', 'cf/src']) {
    const file = join(root, copy, 'connection.js')
    const { text, changed } = mendConnection(readFileSync(file, 'utf8'), file)
    if (changed && write) writeFileSync(file, text)
    files.push({ file, changed })
  }
  return { version, files, skipped: false }
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const done = mendInstalledDriver()
  if (done.skipped) {
    console.log(`postgres-driver-patch: postgres.js ${done.version} installed, the patch is for ${VERSION}: left alone (run test/adapters/postgres-driver.test.ts)`)
  } else {
    const changed = done.files.filter((f) => f.changed).length
    console.log(`postgres-driver-patch: postgres.js ${VERSION}: ${changed ? `mended ${changed} of ${done.files.length} copies` : 'already mended'}`)
  }
}
