// Value parsing both metadata drivers share, so that both return the same JS types. Plain JavaScript: the
// metadata thread (pglite-thread.mjs) loads it without TypeScript hooks; codecs.d.mts types it for the rest.

/** PostgreSQL text output of timestamptz ('2026-01-02 03:04:05.678+00') to ISO 8601. */
export function parseTimestamp(text) {
  const iso = text.replace(' ', 'T').replace(/([+-]\d\d)$/, '$1:00')
  const d = new Date(iso)
  return Number.isNaN(d.getTime()) ? text : d.toISOString()
}

/** int8 as a JS number: counts and byte sizes stay far below 2^53. */
export const parseInt8 = (text) => Number(text)

export const OID = Object.freeze({ INT8: 20, TIMESTAMP: 1114, TIMESTAMPTZ: 1184 })
