// Child of postgres-driver.test.ts: plays one fault of postgres.js 3.4.9 that ends the process when unmended
// (adapters/postgres-driver-patch.mjs), prints what the queries answered, and exits 0 only if it lived to the end.
// argv: <case> <postgres url>
import postgres from 'postgres'

const [which, url] = process.argv.slice(2)
const codeOf = (p) => p.then(() => 'ok', (e) => e.code ?? String(e))

if (which === 'write-after-close') {
  // A query sent on a connection whose socket has closed: its write is queued (under 1 KB) and finds no socket.
  const sql = postgres(url, { max: 2, onnotice: () => {} })
  const killer = postgres(url, { max: 1, onnotice: () => {} })
  const reserved = await sql.reserve()
  const [{ pid }] = await reserved`SELECT pg_backend_pid() AS pid`
  await killer`SELECT pg_terminate_backend(${pid})`
  // Let the driver see the close before the next query.
  for (let i = 0; i < 100 && (await killer`SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ${pid}`)[0].n > 0; i++) {
    await new Promise((r) => setTimeout(r, 20))
  }
  await new Promise((r) => setTimeout(r, 100))
  console.log(`after close: ${await codeOf(reserved`SELECT 1`)}`)
  console.log(`again: ${await codeOf(reserved`SELECT 1`)}`)
  console.log(`another connection: ${(await killer`SELECT 2 AS x`)[0].x}`)
  await Promise.all([sql.end({ timeout: 1 }), killer.end({ timeout: 1 })])
} else if (which === 'types-query-fails') {
  // The array-types query a new connection runs first is cancelled by a 1 ms statement timeout.
  const sql = postgres(url, { max: 1, onnotice: () => {}, connection: { statement_timeout: 1 } })
  console.log(`first query: ${await codeOf(sql`SELECT pg_sleep(0.05)`)}`)
  await new Promise((r) => setTimeout(r, 100))
  await sql.end({ timeout: 1 })
} else {
  throw new Error(`unknown case ${which}`)
}
console.log('lived')
