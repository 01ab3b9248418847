// What crosses the thread boundary between the pool and the tasks. A task is a file
// compute/tasks/<name>.task.ts whose default export is `async (request) => TaskResult<value>`; the map below
// reads each task's request and value types from its module, so `pool.run('parse', ...)` is typed end to
// end without a second declaration to keep in sync. A new task is one line in TaskModules.
import type { HtmlExtractionPolicy, TaskResult } from './types.ts'

export interface ParseRequest {
  /** The file's bytes; moved into the worker (the caller's copy is detached). */
  bytes: Uint8Array
  /** Its name: the extension picks the parser. */
  filename: string
  contentType?: string
  policy: HtmlExtractionPolicy
  /** ingestion.parser_plugins: 'module.path:register_func' entries, loaded in the worker at its first parse. */
  parserPlugins: readonly string[]
}

interface TaskModules {
  parse: typeof import('./tasks/parse.task.ts')
  selftest: typeof import('./tasks/selftest.task.ts')
  chunk: typeof import('./tasks/chunk.task.ts')
  dedup: typeof import('./tasks/dedup.task.ts')
  sparse: typeof import('./tasks/sparse.task.ts')
  analyze: typeof import('./tasks/analyze.task.ts')
  segment: typeof import('./tasks/segment.task.ts')
  chunkpairs: typeof import('./tasks/chunkpairs.task.ts')
}

export type TaskName = keyof TaskModules

type TaskFn<K extends TaskName> = TaskModules[K]['default']
export type TaskRequest<K extends TaskName> = Parameters<TaskFn<K>>[0]
export type TaskValue<K extends TaskName> = Awaited<ReturnType<TaskFn<K>>> extends TaskResult<infer V> ? V : never

/** What the pool posts to the generic worker entry (compute/worker.cjs, which hands it to worker.mjs). */
export interface TaskEnvelope {
  /** Pool-local call id: the worker reports it when the task starts, which starts the call's timeout. */
  id: number
  task: TaskName
  request: unknown
}

/** Posted by a worker on its parentPort when it starts a call (queue time does not count against timeouts). */
export interface TaskStartedMessage {
  quarryTaskStarted: number
}

export const isTaskStartedMessage = (m: unknown): m is TaskStartedMessage =>
  typeof m === 'object' && m !== null && typeof (m as TaskStartedMessage).quarryTaskStarted === 'number'

export const TASK_NAME = /^[a-z][a-z0-9-]*$/

/** What the worker entry answers: the task's own result, or why it threw (errors do not cross threads as classes). */
export type WorkerReply = { result: TaskResult<unknown> } | { thrown: string }
