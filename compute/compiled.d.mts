/** See compiled.mjs. */
export function compiledTasks(cacheRoot?: string): string | null
