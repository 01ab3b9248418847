// Child process of lock.test.ts: takes the lock of the folder in argv[2] (lock file argv[3]), prints "locked <pid>",
// and holds it until it is killed.
import { lockFolder } from '../../adapters/lock.ts'

const [dir, file] = process.argv.slice(2)
await lockFolder(dir, { file, refusal: (d) => `child: ${d} is locked` })
process.stdout.write(`locked ${process.pid}\n`)
setInterval(() => {}, 60_000)
