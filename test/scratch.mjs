// Preloaded by the test scripts (package.json): scratch folders go to /dev/shm (memory) when the machine has it.
// Each embedded test service copies a migrated PGlite template (39 MB, 1,062 files) into its data folder; on this
// disk that copy cost 0.73 s of CPU, on tmpfs 0.08 s. QUARRY_TEST_TMPDIR chooses another folder. Set before any
// test file starts, so os.tmpdir() in every test process (they inherit the environment) answers the same.
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const writable = (dir) => {
  try {
    accessSync(dir, constants.W_OK)
    return true
  } catch {
    return false
  }
}
const chosen = process.env.QUARRY_TEST_TMPDIR ?? (writable('/dev/shm') ? '/dev/shm' : undefined)
if (chosen) process.env.TMPDIR = chosen

// One folder for the whole run, shared by every test process (they inherit the environment): what is costly to make
// and the same for all of them goes there once, such as the migrated PGlite database of test/helpers/app.ts (PGlite's
// initdb and the migrations: 7 s of wall time and 10 s of CPU each time, made by 31 test files before). The process
// that makes the folder (the runner, or a test file run alone) removes it when it exits.
if (!process.env.QUARRY_TEST_SHARED) {
  const shared = mkdtempSync(join(tmpdir(), 'quarry-run-'))
  process.env.QUARRY_TEST_SHARED = shared
  process.once('exit', () => rmSync(shared, { recursive: true, force: true }))
}
