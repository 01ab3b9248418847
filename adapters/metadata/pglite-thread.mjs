// The metadata thread: PGlite (PostgreSQL compiled to WebAssembly) runs here, not on the main thread, so the
// query work (about 40 % of the main thread during a bulk ingest) runs beside HTTP, the vector store and the
// pipeline instead of between them. pglite.ts is the other end: one message per query, transactions by id; it
// declares the messages' types (Request, Reply, SerializedError).
//
// Plain JavaScript, started with no TypeScript hooks: registering tsx in this thread cost the process 50-60 MB
// of RSS (an idle service: 378-393 MB with it, 327-345 without). So this file and what it imports of ours
// (keep-bom.mjs, codecs.mjs, kernel/thread-name.mjs) need no transpiling.
import { parentPort, workerData } from 'node:worker_threads'
// first: before PGlite makes its text decoders (keep-bom.mjs says why)
import './keep-bom.mjs'
import { PGlite, parse, protocol } from '@electric-sql/pglite'
import { nameThread } from '../../kernel/thread-name.mjs'
import { OID, parseInt8, parseTimestamp } from './codecs.mjs'

const port = parentPort
// Run as a process (`node pglite-thread.mjs <dir>`), this file only creates the database in a new folder and exits:
// pglite.ts does that before it starts the thread (see createPgliteSql).
const initOnly = port === null
if (!initOnly) nameThread('quarry-metadata')
/** @type {string | undefined} */
const dir = initOnly ? process.argv[2] : workerData.dir

/** An error as a message can carry it: its message, name and plain fields (SQLSTATE and the rest). */
function serialize(err) {
  const e = err instanceof Error ? err : new Error(String(err))
  const fields = {}
  for (const [k, v] of Object.entries(e)) if (v === null || ['string', 'number', 'boolean'].includes(typeof v)) fields[k] = v
  return { message: e.message, name: e.name, fields }
}

const reply = (id, value) => port.postMessage({ id, ok: true, value })
const fail = (id, err) => port.postMessage({ id, ok: false, error: serialize(err) })

// shared_buffers: PostgreSQL's default of 128 MB is touched as the catalog and the tables are read, and it
// stayed resident (a process running only this thread measured 394 MB of RSS with it, 271 MB with 16 MB). The
// files below it are cached by the OS anyway; the ingest bench ran as fast with 16 MB.
const SHARED_BUFFERS = '16MB'

// relaxedDurability: a query returns once PGlite handed its writes to the OS, without waiting for the flush.
// A killed process loses nothing (the OS has the pages); only an OS crash can lose the last moments, and the
// document states are built to be recovered from that (heartbeats, idempotent re-queueing).
const db = new PGlite(dir, {
  relaxedDurability: true,
  startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${SHARED_BUFFERS}`],
  parsers: { [OID.INT8]: parseInt8, [OID.TIMESTAMPTZ]: parseTimestamp, [OID.TIMESTAMP]: parseTimestamp },
})

if (initOnly) {
  try {
    await db.waitReady
    await db.close()
    process.exit(0)
  } catch (err) {
    // One line for pglite.ts to quote. PGlite's file errors are not Errors and carry only an Emscripten errno.
    const line = err instanceof Error ? `${err.name}: ${err.message}` : err?.name === 'ErrnoError' ? `file system error under ${dir} (Emscripten errno ${err.errno})` : String(err)
    process.stderr.write(`${line}\n`)
    process.exit(1)
  }
}

class Rollback extends Error {}

// Prepared statements. PGlite's own query() makes six calls into PostgreSQL per query (parse, describe the
// statement, bind, describe the portal, execute, sync), and parses and plans the text every time: about
// 490 us of CPU for an update by primary key. Here each text is parsed once into a named statement (its
// parameter types read with it), and each run is one call of bind + describe + execute + sync: 170 us for the
// same update. The PostgreSQL driver (postgres.js) prepares its statements the same way, so both drivers plan
// alike (PostgreSQL's plan_cache_mode). The least recently used statement is closed past MAX_PREPARED.
const MAX_PREPARED = 256
/** @type {Map<string, { name: string, types: number[] }>} */
const prepared = new Map()
let nextStatement = 1
const { serialize: wire } = protocol

const send = (parts) => db.execProtocolStream(Buffer.concat(parts), { syncToFs: false })

/** The named statement of `text`, parsed (and its parameter types read) on first use. */
async function statement(text) {
  const known = prepared.get(text)
  if (known) {
    prepared.delete(text) // re-inserted: the map's order is the order of use
    prepared.set(text, known)
    return known
  }
  const name = `q${nextStatement++}`
  const types = parse.parseDescribeStatementResults(await send([wire.parse({ name, text, types: [] }), wire.describe({ type: 'S', name }), wire.sync()]))
  const entry = { name, types }
  prepared.set(text, entry)
  if (prepared.size > MAX_PREPARED) {
    const [oldText, old] = prepared.entries().next().value
    prepared.delete(oldText)
    await send([wire.close({ type: 'S', name: old.name }), wire.sync()])
  }
  return entry
}

/** Runs `text` as a prepared statement; the caller holds PGlite's query lock. */
async function execute(text, params) {
  const { name, types } = await statement(text)
  const values = params.map((v, i) => {
    if (v === null || v === undefined) return null
    const serializer = db.serializers[types[i]]
    return serializer ? serializer(v) : String(v)
  })
  const messages = await send([wire.bind({ statement: name, values }), wire.describe({ type: 'P' }), wire.execute({}), wire.sync()])
  return parse.parseResults(messages, db.parsers)[0]?.rows ?? []
}

/** A query outside a transaction waits for open transactions, as PGlite's query() does; one inside holds that lock already. */
async function query(text, params, inTransaction) {
  const run = () => db._runExclusiveQuery(async () => {
    try {
      return await execute(text, params)
    } catch (err) {
      // A table altered since the statement was prepared ("cached plan must not change result type"): the
      // statement is closed (PostgreSQL accepts a Close in an aborted transaction too) and prepared again, at
      // once outside a transaction; inside one, which the error aborted, at its next use.
      if (err?.code !== '0A000') throw withQuery(err, text)
      const stale = prepared.get(text)
      prepared.delete(text)
      if (stale) await send([wire.close({ type: 'S', name: stale.name }), wire.sync()])
      if (inTransaction) throw withQuery(err, text)
      try {
        return await execute(text, params)
      } catch (again) {
        throw withQuery(again, text)
      }
    } finally {
      if (!inTransaction) await db.syncToFs()
    }
  })
  return inTransaction ? run() : db._runExclusiveTransaction(run)
}

function withQuery(err, text) {
  if (err instanceof Error) err.query = text
  return err
}

/**
 * Open transactions: each holds PGlite's transaction lock until its `end` message arrives; its queries run
 * under that lock (query(..., true)).
 * @type {Map<number, { end: (commit: boolean, replyId: number) => void }>}
 */
const txs = new Map()
let nextTx = 1

function begin(id) {
  const txId = nextTx++
  let endReply = 0
  db.transaction(async () => {
    const commit = await new Promise((resolve) => {
      txs.set(txId, { end: (c, replyId) => { endReply = replyId; resolve(c) } })
      reply(id, txId)
    })
    txs.delete(txId)
    if (!commit) throw new Rollback()
  }).then(
    () => reply(endReply, null),
    (err) => {
      txs.delete(txId)
      if (err instanceof Rollback) reply(endReply, null)
      else if (endReply) fail(endReply, err)
      else fail(id, err) // BEGIN itself failed
    },
  )
}

async function handle(msg) {
  switch (msg.op) {
    case 'query': {
      if (msg.tx !== undefined && !txs.has(msg.tx)) throw new Error(`transaction ${msg.tx} is not open`)
      return reply(msg.id, await query(msg.text, msg.params, msg.tx !== undefined))
    }
    case 'begin':
      return begin(msg.id)
    case 'end': {
      const t = txs.get(msg.tx)
      if (!t) throw new Error(`transaction ${msg.tx} is not open`)
      return t.end(msg.commit, msg.id)
    }
    case 'close':
      await db.close()
      reply(msg.id, null)
      port.close()
  }
}

try {
  await db.waitReady
  await db.exec("SET TIME ZONE 'UTC'")
  port.postMessage({ ready: true })
} catch (err) {
  port.postMessage({ ready: false, error: serialize(err) })
}
port.on('message', (msg) => {
  handle(msg).catch((err) => fail(msg.id, err))
})
