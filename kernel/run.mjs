// Starts a TypeScript program compiled, without tsx: `node kernel/run.mjs <entry.ts> [arguments]`. npm start, npm run
// worker and npm run mcp start kernel/main.ts this way, and the ingest benchmark its service process. The entry is
// bundled with what it imports (kernel/compiled.mjs; reused while no source changed) and imported; the program
// sees the arguments after the entry, process.argv[1] is the entry's path and import.meta.url its source's URL, as
// under tsx. Where no build can be made (no esbuild, a read-only install), tsx is registered and the source runs
// as before. An idle service took 300-313 MB of RSS under tsx and 245 MB compiled.
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { compiledEntry } from './compiled.mjs'

const [file, ...args] = process.argv.slice(2)
if (file === undefined) {
  process.stderr.write('usage: node kernel/run.mjs <entry.ts> [arguments]\n')
  process.exit(2)
}
const entry = resolve(file)
process.argv.splice(1, process.argv.length - 1, entry, ...args)
const compiled = await compiledEntry(entry)
if (compiled !== null) {
  await import(compiled)
} else {
  const { register } = await import('tsx/esm/api')
  register()
  await import(pathToFileURL(entry).href)
}
