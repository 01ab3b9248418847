/** See compiled.mjs. */
export function compiledTasks(cacheRoot?: string): string | null
export function compiledEntry(file: string, cacheRoot?: string): Promise<string | null>
