// The one place where drivers are chosen from the settings: an empty host/endpoint selects the embedded engine.
import { join, resolve } from 'node:path'
import type { Settings } from '../kernel/config/schema.ts'
import type { Logger } from '../kernel/log.ts'
import type { Adapters, Embedder, ObjectStore, Queue, SearchCache, SharedSecrets, Sql, VectorStore } from './ports.ts'
import { migrate } from './metadata/migrate.ts'
import { withIndexVersions } from './cache/versioned-vectors.ts'
import { describeHolder, lockFolder, type FolderLock } from './lock.ts'

export type { Adapters }

export interface AdapterChoice {
  metadata: 'pglite' | 'postgres'
  objects: 'local' | 's3'
  queue: 'embedded' | 'redis'
  vectors: 'embedded' | 'qdrant' | 'pgvector'
}

export function chooseDrivers(s: Settings): AdapterChoice {
  return {
    metadata: s.postgres.host ? 'postgres' : 'pglite',
    objects: s.s3.endpoint ? 's3' : 'local',
    queue: s.redis.host ? 'redis' : 'embedded',
    // vector_store names the driver; 'auto' keeps the rule of the host keys.
    vectors: s.vector_store !== 'auto' ? s.vector_store : s.qdrant.host ? 'qdrant' : 'embedded',
  }
}

export const dataPath = (s: Settings, ...parts: string[]) => resolve(join(s.data_dir, ...parts))

export async function createSql(s: Settings): Promise<Sql> {
  if (s.postgres.host) {
    const { createPostgresSql } = await import('./metadata/postgres.ts')
    return createPostgresSql({
      host: s.postgres.host, port: s.postgres.port, database: s.postgres.dbname, user: s.postgres.user,
      password: s.postgres.password, poolSize: s.postgres.pool_size, connectTimeoutSec: s.postgres.connect_timeout,
    })
  }
  const { createPgliteSql } = await import('./metadata/pglite.ts')
  return createPgliteSql({ dir: dataPath(s, 'pglite') })
}

export async function createObjects(s: Settings): Promise<ObjectStore> {
  if (s.s3.endpoint) {
    const { createS3ObjectStore } = await import('./objects/s3.ts')
    return createS3ObjectStore({
      endpoint: s.s3.endpoint, accessKey: s.s3.access_key, secretKey: s.s3.secret_key,
      bucket: s.s3.rag_bucket, region: s.s3.region, insecure: s.s3.insecure,
    })
  }
  const { createLocalObjectStore } = await import('./objects/local.ts')
  return createLocalObjectStore({ dir: dataPath(s, 'objects') })
}

export async function createQueue(s: Settings): Promise<Queue> {
  if (s.redis.host) {
    const { createRedisQueue } = await import('./queue/redis.ts')
    return createRedisQueue({ host: s.redis.host, port: s.redis.port, password: s.redis.password, db: s.redis.db, prefix: s.redis.key_prefix })
  }
  const { createEmbeddedQueue } = await import('./queue/embedded.ts')
  return createEmbeddedQueue({ dir: dataPath(s, 'queue') })
}

export async function createVectors(s: Settings, log?: Logger): Promise<VectorStore> {
  const driver = chooseDrivers(s).vectors
  if (driver === 'pgvector') {
    // The metadata's database and credentials, with a pool of its own.
    const { createPgvectorVectorStore } = await import('./vectors/pgvector.ts')
    return createPgvectorVectorStore({
      host: s.postgres.host, port: s.postgres.port, database: s.postgres.dbname, user: s.postgres.user, password: s.postgres.password,
      poolSize: s.postgres.pool_size, connectTimeoutSec: s.postgres.connect_timeout, dimensions: s.embedding.vector_size,
    })
  }
  if (driver === 'qdrant') {
    const { createQdrantVectorStore } = await import('./vectors/qdrant.ts')
    return createQdrantVectorStore({
      host: s.qdrant.host, port: s.qdrant.port, insecure: s.qdrant.insecure,
      apiKey: s.qdrant.api_key || undefined, dimensions: s.embedding.vector_size,
    })
  }
  const { createEmbeddedVectorStore } = await import('./vectors/embedded.ts')
  return createEmbeddedVectorStore({ dir: dataPath(s, 'vectors'), dimensions: s.embedding.vector_size, log: log?.child({ port: 'vectors' }) })
}

/** Bounds of the search cache (answers are a few kB to a few hundred kB each). */
/** Redis when the queue is on Redis: every instance that shares the queue writes vectors and must share versions. */
export async function createSearchCache(s: Settings): Promise<SearchCache> {
  const limits = { ttlMs: s.search_cache.ttl_sec * 1000, maxEntries: s.search_cache.max_entries, maxBytes: s.search_cache.max_memory_mb * 1024 * 1024 }
  if (s.redis.host) {
    const { createRedisSearchCache } = await import('./cache/redis.ts')
    return createRedisSearchCache({
      host: s.redis.host, port: s.redis.port, password: s.redis.password, db: s.redis.db, prefix: s.redis.key_prefix,
      ttlMs: limits.ttlMs, maxEntries: limits.maxEntries,
    })
  }
  const { createMemorySearchCache } = await import('./cache/memory.ts')
  return createMemorySearchCache(limits)
}

/** With the services every API instance shares Redis; with the embedded engines one process owns data_dir. */
export async function createSecrets(s: Settings): Promise<SharedSecrets> {
  const { createFileSecrets, createRedisSecrets } = await import('./cache/secrets.ts')
  if (s.redis.host) return createRedisSecrets({ host: s.redis.host, port: s.redis.port, password: s.redis.password, db: s.redis.db, prefix: s.redis.key_prefix })
  return createFileSecrets(dataPath(s, 'secrets'))
}

export async function createEmbedderFromSettings(s: Settings): Promise<Embedder> {
  const { createEmbedder } = await import('./embedders/index.ts')
  return createEmbedder(
    { name: s.provider.name, url: s.provider.url, apiKey: s.provider.api_key, model: s.embedding.model, dimensions: s.embedding.vector_size },
    { batchSize: s.embedding.batch_size, timeoutMs: s.embedding.timeout_sec * 1000, maxRetries: s.embedding.max_retries },
  )
}

/** Whether any driver chosen keeps its data under data_dir (PGlite, local files, the queue journal, vectors, secrets). */
export function usesDataDir(s: Settings): boolean {
  const d = chooseDrivers(s)
  return d.metadata === 'pglite' || d.objects === 'local' || d.queue === 'embedded' || d.vectors === 'embedded'
}

/** The data folder's lock file: held by the one process whose embedded engines use the folder. */
export const DATA_LOCK_FILE = '.lock'

/**
 * Takes data_dir's lock (adapters/lock.ts: flock, released by the kernel however the process ends), before any
 * embedded engine opens: one process owns PGlite, the queue journal, the vector files and the objects at a time.
 * A second process refuses to start, in another PID namespace or container on the same host too.
 */
export function lockDataDir(s: Settings): Promise<FolderLock> {
  return lockFolder(dataPath(s), {
    file: DATA_LOCK_FILE,
    refusal: (dir, path, holder) =>
      `Data folder ${dir} is in use by another Quarry process (${describeHolder(holder)}; a process in another PID namespace or container ` +
      `shows another pid). The embedded engines (PGlite, queue, vectors, local files) serve one process at a time: stop that process ` +
      `before starting this one, or run several processes on PostgreSQL, Redis, S3 and Qdrant. The operating system holds the lock (${path}), ` +
      `so a process that died released it: there is nothing to remove by hand.`,
  })
}

/** data_dir's lock of each set of adapters that took one; closeAdapters releases it last. */
const dataLocks = new WeakMap<Adapters, FolderLock>()

/**
 * Opens every port; on failure closes what was opened and rethrows. Migrations run on the metadata store. With an
 * embedded engine among the drivers, data_dir's lock is taken first (lockDataDir).
 */
export async function createAdapters(s: Settings, log?: Logger): Promise<Adapters> {
  const lock = usesDataDir(s) ? await lockDataDir(s) : null
  if (lock && !lock.held) log?.warn({ data_dir: dataPath(s) }, 'no flock on this platform: the data folder is not locked against a second process')
  const opened: { close(): Promise<void> }[] = []
  const open = async <T extends { close(): Promise<void> }>(what: string, make: () => Promise<T>): Promise<T> => {
    const started = performance.now()
    const value = await make()
    opened.push(value)
    log?.debug({ port: what, driver: (value as { name?: string }).name, ms: Math.round(performance.now() - started) }, 'adapter ready')
    return value
  }
  try {
    const sql = await open('metadata', () => createSql(s))
    const applied = await migrate(sql)
    if (applied.length > 0) log?.info({ versions: applied }, 'migrations applied')
    const [objects, queue, vectors, embedder, searchCache] = await Promise.all([
      open('objects', () => createObjects(s)),
      open('queue', () => createQueue(s)),
      open('vectors', () => createVectors(s, log)),
      open('embeddings', () => createEmbedderFromSettings(s)),
      open('search cache', () => createSearchCache(s)),
    ])
    const secrets = await open('secrets', () => createSecrets(s))
    // Chosen here, for every process (API, worker, stdio MCP): no write path can skip the version bump.
    const adapters: Adapters = { sql, objects, queue, vectors: withIndexVersions(vectors, searchCache), embedder, searchCache, secrets }
    if (lock) dataLocks.set(adapters, lock)
    return adapters
  } catch (err) {
    for (const a of opened.reverse()) await a.close().catch(() => {})
    lock?.release()
    throw err
  }
}

/** Closes in reverse order of opening; one failure does not stop the others. */
export async function closeAdapters(a: Adapters, log?: Logger): Promise<void> {
  for (const [name, port] of [['secrets', a.secrets], ['search cache', a.searchCache], ['embeddings', a.embedder], ['vectors', a.vectors], ['queue', a.queue], ['objects', a.objects], ['metadata', a.sql]] as const) {
    try {
      await port.close()
    } catch (err) {
      log?.warn({ err, port: name }, 'adapter close failed')
    }
  }
  dataLocks.get(a)?.release()
  dataLocks.delete(a)
}
