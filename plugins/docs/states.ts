// Document states (spec 3.1, notes.md). Every status write is a compare-and-set on the expected states.

export const STATUSES = ['uploading', 'fetching', 'pending', 'running', 'indexed', 'failed', 'deleting', 'deleted', 'outdated'] as const
export type DocStatus = (typeof STATUSES)[number]

/** Upload, delete and reindex of an active document answer 409. */
export const ACTIVE: readonly DocStatus[] = ['uploading', 'pending', 'fetching', 'running', 'deleting']
export const STABLE: readonly DocStatus[] = ['indexed', 'failed', 'deleted', 'outdated']

/** Spec 3.1: fail applies to these; anything else answers 409. */
export const FAILABLE: readonly DocStatus[] = ['uploading', 'pending', 'running', 'deleting']
/** Spec 3.1: delete of these answers 409. */
export const UNDELETABLE: readonly DocStatus[] = ['running', 'deleting']

export const isActive = (s: string): boolean => (ACTIVE as readonly string[]).includes(s)

export const RECOVER_REASON = 'Manually recovered via API'
export const FAIL_REASON = 'Manually failed via API'
export const LAST_ERROR_MAX = 500

export const truncateError = (message: string): string => (message.length > LAST_ERROR_MAX ? `${message.slice(0, LAST_ERROR_MAX - 1)}…` : message)
