// Names the calling thread for the operating system: `top -H`, `ps -L` and /proc/<pid>/task/<tid>/comm then tell
// the service's threads apart (Node names every thread "node": the main one, worker threads, V8's and libuv's).
// The compute pool's workers and the PGlite thread call it when they start; the ingest bench reads the names to
// split CPU per document by role. Plain JavaScript: both run before (or without) any TypeScript hooks.
import { writeFileSync } from 'node:fs'

/** Linux keeps 15 bytes of a thread's name. */
const MAX_NAME = 15

/** Names this thread `name` (cut to 15 bytes); does nothing where /proc/thread-self is missing (not Linux). */
export function nameThread(name) {
  try {
    writeFileSync('/proc/thread-self/comm', name.slice(0, MAX_NAME))
  } catch {
    // Another OS, or /proc not mounted: the name is a diagnostic only.
  }
}
