// Preloaded by the test scripts (package.json): scratch folders go to /dev/shm (memory) when the machine has it.
// Each embedded test service copies a migrated PGlite template (39 MB, 1,062 files) into its data folder; on this
// disk that copy cost 0.73 s of CPU, on tmpfs 0.08 s. QUARRY_TEST_TMPDIR chooses another folder. Set before any
// test file starts, so os.tmpdir() in every test process (they inherit the environment) answers the same.
import { accessSync, constants } from 'node:fs'

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
