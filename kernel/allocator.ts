// glibc's malloc gives each thread that allocates an arena of its own, up to 8 per core: here the main thread,
// the compute pool's workers, the PGlite thread, libuv's pool and V8's helper threads. Buffers and typed arrays
// are malloc'd, and a block freed by one thread goes back to the arena that allocated it, where only that
// arena's next allocations reuse it: through a bulk ingest every arena holds what the others freed. With one
// arena (bench/ingest.bench.ts --service-only, the same process with and without): peak RSS 808 -> 665 MB at
// 1,000 documents and 1,286 -> 1,135 MB at 5,000, with no more CPU per document. Small blocks still come from
// each thread's own cache (glibc's tcache) without taking the arena's lock.
//
// glibc reads MALLOC_ARENA_MAX once, when the process starts: npm's scripts set it (package.json), and a
// service started another way says so in its log (a warning of loadSettings, which reads the environment).
import { createRequire } from 'node:module'
import { availableParallelism } from 'node:os'
import { getHeapStatistics, setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'

/**
 * The young generation (V8's nursery: its two semi-spaces) of the service's worker threads, MB: the compute
 * pool's workers and the PGlite thread. V8 gives a worker 48 MB, and through a bulk ingest each fills it: at
 * 24 MB the peak RSS of 1,000 documents (bench/ingest.bench.ts --service-only, seven runs each way in turn) went
 * from 608-649 MB (median 627) to 565-599 MB (median 584), with the same time (median 9.64 s against 9.77)
 * and CPU (14.4 ms per document both ways); at 5,000 documents 1,065 -> 1,010 MB in one run each way. PDF
 * parsing in the pool (bench/parse.bench.ts, two runs each way): one worker 523-537 against 534-539 pages/s,
 * two workers 921-961 against 984-997. At 12 MB (2026-12-01, AMD EPYC, 2 cores, --service-only --documents=5000,
 * runs in turn): peak RSS 481-490 MB in six runs against 498-512 in four at 24 (the PGlite thread at 12 alone: 498
 * and 503), at 18.2-23.1 against 18.8-21.1 ms of CPU per document and the compute worker's 5.1-6.5 against 5.2-6.0;
 * bench/parse.bench.ts --quick, one run each in a drifting stretch: one worker 455.5 against 493.9 pages/s, two
 * 588.8 against 712.9, with plain threads (no pool, not limited) 291 / 498 against 338 / 580 in the same runs: the
 * pool against them 1.56x / 1.18x at 12, 1.46x / 1.23x at 24. The main thread keeps V8's default: at 8 MB
 * semi-spaces for the whole process (--max-semi-space-size=8) search throughput under load fell by 3-23 %
 * (bench/search.bench.ts).
 */
export const WORKER_YOUNG_GENERATION_MB = 12

/**
 * Most threads V8's platform may keep for a process (Node's --v8-pool-size; Node starts 4 whatever the cores).
 * They run the background work of every thread's heap: parallel scavenges, concurrent marking and sweeping,
 * optimising compiles. The service starts min(4, cores) of them (v8PoolSize): Node's own 4 from four cores
 * up, and no more than the cores below. On 2 cores the peak RSS of 1,000 documents (bench/ingest.bench.ts
 * --service-only, runs each way in turn) went from 573-599 MB (median 589, seven runs) with 4 to 545-586 MB
 * (median 562, ten runs) with 2, at the same documents/s and CPU per document; at 5,000 documents 1,024 and
 * 1,025 MB (one run each: there the index's growth is the peak). Search under load (bench/search.bench.ts
 * --quick, two runs each way) stayed within its noise.
 */
export const V8_POOL_MAX = 4

/** The V8 platform threads of a service process on a machine of `cores` cores. */
export function v8PoolSize(cores: number): number {
  return Math.max(1, Math.min(V8_POOL_MAX, Math.floor(cores)))
}

/**
 * How far V8 lets a heap's old generation grow past what its last full collection kept alive before it collects
 * again, in percent (V8's --heap-growing-percent; every thread's heap: main, compute pool, PGlite). V8's own factor
 * moves with its measured collection speed and reached up to 4x through a bulk ingest: the main thread kept 51 MB
 * alive in a heap of 130 MB. Measured when it was set to 100 (2x), bench/ingest.bench.ts --service-only
 * --documents=5000 (Intel Xeon, 2 cores, runs in turn): peak RSS 555 and 560 MB against 625, 644 and 651 MB, at 97.0 and 93.1 against 95.5, 96.9
 * and 84.8 documents/s and 15.8 and 16.5 against 15.7, 15.8 and 17.9 ms of CPU per document; 60 gave 538-549 MB
 * for about 0.6 ms more CPU per document in V8's helper threads, 30 gave 538-545 MB for 1.8 ms more and 5 % fewer
 * documents/s. --optimize-for-size gave 456-475 MB for 18 % fewer documents/s. Search under load
 * (bench/search.bench.ts --quick, one run each way): 942, 734, 982 and 747 against 969, 760, 1,022 and 726
 * queries/s (hybrid and similarity, 1 KB and 10 KBs), within about 4 %. At 60 against 100 (2026-12-02, AMD EPYC family
 * 26, 2 cores, runs in turn, the peak the kernel's high-water mark): 467, 456, 463 and 459 MB against 499 and 492, at
 * 68.0, 69.2, 63.6 and 65.9 against 68.2 and 66.4 documents/s and 21.7-23.2 against 22.1-22.4 ms of CPU per
 * document (V8's helper threads about 0.2 ms more). Search under load (bench/search.bench.ts --quick --no-pgvector,
 * two runs each way, queries/s): hybrid 1 KB 734 and 1,062 against 634 and 793, 10 KBs 597 and 765 against 574 and
 * 597; similarity 1 KB 772 and 1,121 against 845 and 805, 10 KBs 626 and 759 against 623 and 669: no loss beyond
 * the machine's drift. On an AMD EPYC family 25 (2026-12-01, sampled peaks, the collection at a burst's end
 * compacting both ways): 435-451 against 473-478 MB, for about 4.6 % fewer documents/s.
 */
export const HEAP_GROWING_PERCENT = 60

/** Node's flags a service process is started with (a benchmark's child); package.json's scripts pass the same. */
export function serviceExecArgv(cores = availableParallelism()): string[] {
  return [`--v8-pool-size=${v8PoolSize(cores)}`, `--heap-growing-percent=${HEAP_GROWING_PERCENT}`]
}

/** The arena count the service is started with, unless its environment sets one (package.json's scripts say the same). */
export const MALLOC_ARENA_MAX = '1'

/** The environment of a service process started from `env`'s (a benchmark's child): with MALLOC_ARENA_MAX unless it sets its own. */
export function serviceEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return { ...env, MALLOC_ARENA_MAX: env.MALLOC_ARENA_MAX ?? MALLOC_ARENA_MAX }
}

/** Whether this process's C library is glibc (process.report names its version only then). */
export function onGlibc(): boolean {
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header
  return typeof header?.glibcVersionRuntime === 'string'
}

/** The warning a service logs when it runs on glibc with the arena count left to glibc; null otherwise. */
export function allocatorWarning(env: Readonly<Record<string, string | undefined>>, glibc?: boolean): string | null {
  if (env.MALLOC_ARENA_MAX !== undefined || /glibc\.malloc\.arena_max=/.test(env.GLIBC_TUNABLES ?? '')) return null
  // Asked only now: a diagnostic report is a few milliseconds' work.
  if (!(glibc ?? onGlibc())) return null
  return `MALLOC_ARENA_MAX is not set: glibc keeps a malloc arena per thread, which costs this service 100-150 MB of RSS ` +
    `through a bulk ingest. npm start, npm run worker and npm run mcp set MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX}; ` +
    `set it in the environment when starting the service another way.`
}

let gcFunction: ((opts?: unknown) => void) | null | undefined

/** The heap in use (V8's used_heap_size) above which collectGarbage does not compact: its pause, see there. */
export const COMPACT_HEAP_LIMIT_BYTES = 192 * 2 ** 20

/** Whether the process was started with V8's compaction flag either way (Node refuses it in NODE_OPTIONS). */
export function compactionFlagSet(execArgv: readonly string[]): boolean {
  return execArgv.some((a) => /^--(no[-_]?)?compact[-_]on[-_]every[-_]full[-_]gc(=|$)/.test(a))
}

let operatorFlag: boolean | undefined

/**
 * A full garbage collection of the calling thread's heap: its duration in ms and whether it compacted, or null where
 * V8 does not give gc. The docs worker runs it at the end of a bulk ingest (plugins/docs/index.ts, afterBurst). V8 collects the old
 * generation when it has grown well past what survived the last collection, and through a bulk ingest that is
 * 50-100 MB of dead objects and buffers (the uploads, the pipeline's texts and vectors, the log's records), which
 * glibc's heap then holds: 5,000 documents (bench/ingest.bench.ts --service-only) ended with 100 MB of heap and
 * 159 MB of buffers, of which the first collection, V8's own 50 s later, freed 46 and 42 MB, while the HNSW graph
 * grew on top of them.
 *
 * This collection also compacts the old generation (V8's --compact-on-every-full-gc, set for it and reset after):
 * it moves every survivor together and gives back the pages they were scattered over. V8's own full collections
 * compact too, but only pages that the collection before them found mostly free, and at most a few MB of survivors
 * each; a collection just after a burst compacts none of the burst's pages, since when V8 last looked every object
 * on them was alive. Without it, the main thread's heap stayed at 99-106 MB from the end of a 5,000-document ingest
 * (bench/ingest.bench.ts --service-only, AMD EPYC, 2 cores, runs in turn) through the HNSW graph's catch-up, until
 * V8's memory reducer compacted it to 46 MB 45-47 s later, when the graph had grown by 40 MB; with it, the heap was
 * 77 MB from the collection on, and the catch-up's highest RSS after the collection 433 and 436 MB against 456-461 MB
 * in five runs without. The run's peak is the end of the ingest either way (the bench's peak RSS 471 and 468 MB with
 * it, 466 and 469 without). Another thread's full collection that starts while the flag is set compacts as well.
 *
 * Moving every survivor is a main-thread pause that grows with the live heap: 158 ms against 52-90 ms swept in place
 * at the end of those 5,000 documents; in a process of its own, a heap of small objects (AMD EPYC, family 26, 2
 * cores) 43 MB alive: 202-209 ms against 63-79 ms; 163 MB alive: 784-823 ms against 275-334 ms. So a heap with more
 * than COMPACT_HEAP_LIMIT_BYTES in use before the collection (garbage included: what is alive is known only after
 * it) is swept in place, its pause the plain one. Where the process was started with --compact-on-every-full-gc or
 * --no-compact-on-every-full-gc, that flag is left as the operator set it.
 */
export function collectGarbage(limitBytes = COMPACT_HEAP_LIMIT_BYTES): { ms: number; compacted: boolean } | null {
  if (gcFunction === undefined) {
    const exposed = (globalThis as { gc?: () => void }).gc
    try {
      if (typeof exposed === 'function') gcFunction = exposed
      else {
        // Exposes gc to contexts made from now on; this process's own global is left as it was.
        setFlagsFromString('--expose-gc')
        gcFunction = runInNewContext('gc') as () => void
      }
    } catch {
      gcFunction = null
    }
  }
  if (gcFunction === null) return null
  operatorFlag ??= compactionFlagSet(process.execArgv)
  const compact = !operatorFlag && getHeapStatistics().used_heap_size <= limitBytes
  const started = performance.now()
  if (compact) setFlagsFromString('--compact-on-every-full-gc')
  try {
    gcFunction()
  } finally {
    if (compact) setFlagsFromString('--no-compact-on-every-full-gc')
  }
  return { ms: performance.now() - started, compacted: compact }
}

/** glibc's libc, loaded through koffi once: null off glibc or where koffi has no build for the platform. */
let libc: { func(decl: string): (...args: number[]) => number } | null | undefined

function glibc(): { func(decl: string): (...args: number[]) => number } | null {
  if (libc === undefined) {
    libc = null
    try {
      if (onGlibc()) {
        const koffi = createRequire(import.meta.url)('koffi') as { load(lib: string): { func(decl: string): (...args: number[]) => number } }
        libc = koffi.load('libc.so.6')
      }
    } catch {
      // No koffi build for this platform: nothing to call.
    }
  }
  return libc
}

/** mallopt's parameters (glibc's malloc.h): M_TRIM_THRESHOLD, M_MMAP_THRESHOLD. */
const M_TRIM_THRESHOLD = -1
const M_MMAP_THRESHOLD = -3

/**
 * glibc's mmap and trim thresholds, bytes: glibc's own starting values, kept. Left to itself, glibc raises the mmap
 * threshold to the size of each mapped block freed (up to 32 MB) and its trim threshold to twice that: once the vector
 * store has dropped a 16 MB arena segment, every block below 16 MB comes from the heap and up to 32 MB may stay free
 * at its top (malloc_trim, trimHeap, gives that back only once a second). Fixed, a block of 128 KB or more that the
 * heap's free chunks cannot hold gets a mapping of its own, unmapped when freed, and free space at the heap's top
 * past 128 KB goes back to the OS when a block is freed. bench/ingest.bench.ts --service-only --documents=5000 (AMD
 * EPYC Zen 1, 2 cores, runs in turn): peak RSS 530, 533, 529, 535 MB (526 and 531 with a 64 KB mmap threshold alone)
 * against 546, 547, 548, 554, 559 and 564 MB; CPU per document 23.8-25.2 ms against 23.5-24.7 (within the runs'
 * spread). Search under load (bench/search.bench.ts --quick, one run each way) within 4 %.
 */
export const MALLOC_THRESHOLD_BYTES = 128 * 1024

/**
 * Fixes glibc's mmap and trim thresholds at `bytes` (mallopt, through koffi), which also stops glibc from raising
 * them (MALLOC_THRESHOLD_BYTES says why). Once per process, at start: kernel/main.ts and the benchmarks' service
 * processes. True when glibc took them; null off glibc or without koffi. An environment that sets either
 * (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, or either in GLIBC_TUNABLES) is left as it is: false.
 */
export function fixMallocThresholds(env: Readonly<Record<string, string | undefined>> = process.env, bytes = MALLOC_THRESHOLD_BYTES): boolean | null {
  const lib = glibc()
  if (lib === null) return null
  if (env.MALLOC_MMAP_THRESHOLD_ !== undefined || env.MALLOC_TRIM_THRESHOLD_ !== undefined || /glibc\.malloc\.(mmap|trim)_threshold=/.test(env.GLIBC_TUNABLES ?? '')) return false
  const mallopt = lib.func('int mallopt(int, int)')
  return mallopt(M_MMAP_THRESHOLD, bytes) === 1 && mallopt(M_TRIM_THRESHOLD, bytes) === 1
}

let mallocTrim: ((pad: number) => number) | null | undefined

/**
 * Hands the free pages inside glibc's heap back to the OS (malloc_trim(0), called through koffi); the ms it took,
 * or null off glibc or where koffi has no build for the platform. glibc returns memory by itself only from the top
 * of its heap: what is freed below a block still in use stays resident, and through a bulk ingest (uploads,
 * texts, vectors, log records freed in the order they die) that is 25-75 MB at a time, measured by calling it from
 * outside every 8 s (gdb) at 5,000 documents. The docs plugin calls it once a second while documents are being
 * ingested and after the collection that ends a burst (plugins/docs/index.ts): peak RSS at 5,000 documents
 * (bench/ingest.bench.ts --service-only, Intel Xeon) was 711-767 MB in three runs without it and 680 and 697 MB in two
 * with it (674 MB calling it every millisecond), at the same documents/s and CPU per document; a call took 1.3 ms.
 */
export function trimHeap(): number | null {
  if (mallocTrim === undefined) mallocTrim = glibc()?.func('int malloc_trim(size_t)') ?? null
  if (mallocTrim === null) return null
  const started = performance.now()
  mallocTrim(0)
  return performance.now() - started
}
