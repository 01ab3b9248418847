// Entry of the metadata thread: plain ESM so it runs before any TypeScript can (tsx registered here, as in
// compute/worker.mjs), then the PGlite host in pglite-thread.ts.
import { register } from 'tsx/esm/api'

register()
await import('./pglite-thread.ts')
