// The in-process queue: state in memory, every operation appended to a journal file that is replayed at
// open. Enqueue, defer and removeByKey resolve only after their record is fsync'd; records written
// while one fsync runs share the next one (group commit), so concurrent callers pay one disk flush.
// A reserve's lease record and an ack are written without waiting, and a flush holding only such records makes
// no fsync of its own (they ride along with the next one): losing them in a crash only means the message is
// handed out again, which at-least-once delivery allows and every consumer's claim expects. The ingest bench
// counted 2.8 fdatasyncs per document before, most of them for these records.
//
// After a restart every message that was reserved and not acked is ready at once (its lease died with
// the process) with attempts + 1; the Redis driver instead waits for the lease to run out.
import { randomUUID } from 'node:crypto'
import { constants, promises as fs } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { serviceUnavailable } from '../../kernel/errors.ts'
import { fsyncDir } from '../durable.ts'
import { describeHolder, lockFolder, type FolderLock } from '../lock.ts'
import type { Queue, QueueDepth, QueueMessage } from '../ports.ts'
import { checkEnqueue, checkReserve, checkTopic, checkDelay } from './checks.ts'

export interface EmbeddedQueueOptions {
  /** Folder of the journal; created when missing. Only one open queue may use it at a time. */
  dir: string
  /** The journal is compacted once it holds at least this many records and dead ones dominate. */
  compactMinRecords?: number
}

type State = 'ready' | 'delayed' | 'inflight'

interface Message {
  id: string
  key: string
  /** The payload as JSON: stored once, parsed for each delivery so consumers never share state. */
  payload: string
  attempts: number
  state: State
  /** Due time (delayed) or lease deadline (inflight), epoch ms. */
  at: number
  /** Enqueue order; keeps FIFO across compaction and restart. */
  seq: number
  /** Bumped on every move, so stale entries left in the ready deque and the heaps are skipped. */
  gen: number
}

interface Entry {
  id: string
  gen: number
  at: number
  seq: number
}

interface Topic {
  name: string
  messages: Map<string, Message>
  ready: Deque
  delayed: Heap
  inflight: Heap
  counts: Record<State, number>
  listeners: Set<() => void>
  timer?: NodeJS.Timeout
  timerAt?: number
}

/** Journal records, one JSON object a line. */
type JournalRecord =
  | { o: 'put'; t: string; i: string; k: string; p: unknown; a: number; s: 'r' | 'd' | 'i'; at?: number }
  | { o: 'res'; t: string; i: string; a: number }
  | { o: 'ack'; t: string; i: string }
  | { o: 'def'; t: string; i: string; at: number }
  | { o: 'rm'; t: string; i: string[] }

const JOURNAL = 'queue.journal'
const LOCK = 'queue.lock'
const DEFAULT_COMPACT_MIN_RECORDS = 10_000
/** Timers beyond this are clamped (setTimeout's limit); the timer re-arms when it fires. */
const MAX_TIMER_MS = 2 ** 31 - 1

/** Folders opened by this process, with their locks: a second open of the same folder would corrupt the journal. */
const openDirs = new Map<string, FolderLock | null>()

export async function createEmbeddedQueue(options: EmbeddedQueueOptions): Promise<Queue> {
  if (!options?.dir) throw new Error('createEmbeddedQueue: dir is required')
  const dir = resolve(options.dir)
  const compactMinRecords = options.compactMinRecords ?? DEFAULT_COMPACT_MIN_RECORDS
  await fs.mkdir(dir, { recursive: true })
  await acquireLock(dir)
  try {
    const topics = new Map<string, Topic>()
    const replayed = await replay(join(dir, JOURNAL), topics)
    // Compact once dead records (acked, removed, superseded) outnumber the live ones several times over.
    const shouldCompact = (records: number) => records >= compactMinRecords && records > 4 * liveRecords(topics)
    const journal = await Journal.open(dir, replayed, (write) => snapshot(topics, write), shouldCompact)
    return createQueue(dir, topics, journal)
  } catch (err) {
    await releaseLock(dir)
    throw err
  }
}

function createQueue(dir: string, topics: Map<string, Topic>, journal: Journal): Queue {
  let closed = false
  let seq = 0
  for (const topic of topics.values()) for (const m of topic.messages.values()) seq = Math.max(seq, m.seq)

  const ensureOpen = () => {
    if (closed) throw serviceUnavailable(`Embedded queue at ${dir} is closed`)
    if (journal.failure) throw serviceUnavailable(`Embedded queue at ${dir} cannot write its journal: ${journal.failure.message}`, journal.failure)
  }

  const topicOf = (name: string): Topic => {
    let topic = topics.get(name)
    if (!topic) topics.set(name, (topic = newTopic(name)))
    return topic
  }

  const notify = (topic: Topic) => {
    if (topic.listeners.size === 0) return
    setImmediate(() => {
      for (const listener of topic.listeners) {
        try {
          listener()
        } catch {
          // A listener is only a hint to poll; its failure is not the queue's.
        }
      }
    })
  }

  /** Wakes listeners when the next delayed message comes due or the next lease runs out. */
  const arm = (topic: Topic) => {
    if (closed || topic.listeners.size === 0) {
      if (topic.timer) clearTimeout(topic.timer)
      topic.timer = topic.timerAt = undefined
      return
    }
    const next = Math.min(peekAt(topic, topic.delayed, 'delayed'), peekAt(topic, topic.inflight, 'inflight'))
    if (next === Infinity) return
    if (topic.timer && topic.timerAt !== undefined && topic.timerAt <= next) return
    if (topic.timer) clearTimeout(topic.timer)
    topic.timerAt = next
    topic.timer = setTimeout(() => {
      topic.timer = topic.timerAt = undefined
      if (closed) return
      promote(topic, Date.now())
      if (topic.counts.ready > 0) notify(topic)
      arm(topic)
    }, Math.min(MAX_TIMER_MS, Math.max(0, next - Date.now())))
    topic.timer.unref()
  }

  return {
    name: 'embedded',

    async enqueue<T>(topicName: string, key: string, payload: T, opts: { delayMs?: number } = {}): Promise<string> {
      const { delayMs, payloadJson } = checkEnqueue(topicName, key, payload, opts)
      ensureOpen()
      const id = randomUUID()
      const at = delayMs > 0 ? Date.now() + delayMs : undefined
      const line = `{"o":"put","t":${JSON.stringify(topicName)},"i":"${id}","k":${JSON.stringify(key)},"p":${payloadJson},"a":0,"s":"${at === undefined ? 'r' : 'd'}"${at === undefined ? '' : `,"at":${at}`}}\n`
      // Applied only once durable, so nothing is handed out that a crash could still lose.
      await journal.write(line, () => {
        const topic = topicOf(topicName)
        const m: Message = { id, key, payload: payloadJson, attempts: 0, state: 'ready', at: 0, seq: ++seq, gen: 0 }
        topic.messages.set(id, m)
        if (at === undefined) {
          place(topic, m, 'ready', 0)
          notify(topic)
        } else {
          place(topic, m, 'delayed', at)
          arm(topic)
        }
      })
      return id
    },

    async reserve<T = unknown>(topicName: string, max: number, leaseMs: number): Promise<QueueMessage<T>[]> {
      checkReserve(topicName, max, leaseMs)
      ensureOpen()
      const topic = topics.get(topicName)
      if (!topic) return []
      const now = Date.now()
      promote(topic, now)
      const out: QueueMessage<T>[] = []
      while (out.length < max) {
        const entry = topic.ready.shift()
        if (!entry) break
        const m = topic.messages.get(entry.id)
        if (!m || m.gen !== entry.gen || m.state !== 'ready') continue
        place(topic, m, 'inflight', now + leaseMs)
        journal.writeLazy(`{"o":"res","t":${JSON.stringify(topicName)},"i":"${m.id}","a":${m.attempts}}\n`)
        out.push({ id: m.id, key: m.key, payload: JSON.parse(m.payload) as T, attempts: m.attempts })
      }
      if (out.length > 0) arm(topic)
      return out
    },

    async ack(topicName, id) {
      checkTopic(topicName)
      ensureOpen()
      const topic = topics.get(topicName)
      const m = topic?.messages.get(id)
      if (!topic || !m) return
      remove(topic, m)
      journal.writeLazy(`{"o":"ack","t":${JSON.stringify(topicName)},"i":${JSON.stringify(id)}}\n`)
    },

    async defer(topicName, id, delayMs) {
      checkTopic(topicName)
      checkDelay(delayMs)
      ensureOpen()
      const topic = topics.get(topicName)
      const m = topic?.messages.get(id)
      if (!topic || !m) return
      const at = Date.now() + delayMs
      place(topic, m, 'delayed', at)
      arm(topic)
      await journal.write(`{"o":"def","t":${JSON.stringify(topicName)},"i":${JSON.stringify(id)},"at":${at}}\n`)
    },

    async removeByKey(topicName, key) {
      checkTopic(topicName)
      ensureOpen()
      const topic = topics.get(topicName)
      if (!topic) return 0
      const ids: string[] = []
      for (const m of [...topic.messages.values()]) {
        if (m.key === key && m.state !== 'inflight') {
          remove(topic, m)
          ids.push(m.id)
        }
      }
      if (ids.length > 0) await journal.write(`{"o":"rm","t":${JSON.stringify(topicName)},"i":${JSON.stringify(ids)}}\n`)
      return ids.length
    },

    async present(topicName, keys) {
      checkTopic(topicName)
      ensureOpen()
      const wanted = new Set(keys)
      const found = new Set<string>()
      const topic = topics.get(topicName)
      if (topic && wanted.size > 0) for (const m of topic.messages.values()) if (wanted.has(m.key)) found.add(m.key)
      return found
    },

    async depth(topicName): Promise<QueueDepth> {
      checkTopic(topicName)
      ensureOpen()
      const topic = topics.get(topicName)
      if (!topic) return { ready: 0, delayed: 0, inflight: 0 }
      promote(topic, Date.now())
      return { ...topic.counts }
    },

    subscribe(topicName, listener) {
      checkTopic(topicName)
      const topic = topicOf(topicName)
      topic.listeners.add(listener)
      arm(topic)
      return () => {
        topic.listeners.delete(listener)
        arm(topic)
      }
    },

    async ping() {
      return !closed && !journal.failure
    },

    async close() {
      if (closed) return
      closed = true
      for (const topic of topics.values()) {
        if (topic.timer) clearTimeout(topic.timer)
        topic.listeners.clear()
      }
      try {
        await journal.close()
      } finally {
        await releaseLock(dir)
      }
    },
  }
}

function newTopic(name: string): Topic {
  return {
    name,
    messages: new Map(),
    ready: new Deque(),
    delayed: new Heap(),
    inflight: new Heap(),
    counts: { ready: 0, delayed: 0, inflight: 0 },
    listeners: new Set(),
  }
}

/** Moves m to state (appending to the ready deque or pushing on a heap); older entries go stale. */
function place(topic: Topic, m: Message, state: State, at: number): void {
  if (topic.messages.get(m.id) === m && m.gen > 0) topic.counts[m.state]--
  m.gen++
  m.state = state
  m.at = at
  topic.counts[state]++
  const entry = { id: m.id, gen: m.gen, at, seq: m.seq }
  if (state === 'ready') topic.ready.push(entry)
  else if (state === 'delayed') topic.delayed.push(entry)
  else topic.inflight.push(entry)
}

function remove(topic: Topic, m: Message): void {
  topic.messages.delete(m.id)
  topic.counts[m.state]--
  m.gen++
}

/** Due delayed messages and expired leases become ready; an expired lease counts as a failed attempt. */
function promote(topic: Topic, now: number): void {
  for (const [heap, state] of [[topic.delayed, 'delayed'], [topic.inflight, 'inflight']] as const) {
    for (;;) {
      const top = heap.peek()
      if (!top || top.at > now) break
      heap.pop()
      const m = topic.messages.get(top.id)
      if (!m || m.gen !== top.gen || m.state !== state) continue
      if (state === 'inflight') m.attempts++
      place(topic, m, 'ready', 0)
    }
  }
}

/** The earliest live time on a heap, dropping stale tops on the way. */
function peekAt(topic: Topic, heap: Heap, state: State): number {
  for (;;) {
    const top = heap.peek()
    if (!top) return Infinity
    const m = topic.messages.get(top.id)
    if (m && m.gen === top.gen && m.state === state) return top.at
    heap.pop()
  }
}

function liveRecords(topics: Map<string, Topic>): number {
  let n = 0
  for (const topic of topics.values()) n += topic.messages.size + topic.counts.inflight
  return n
}

/** The journal lines that rebuild the live state: one put per message, oldest first. */
function snapshot(topics: Map<string, Topic>, write: (line: string) => void): void {
  for (const topic of topics.values()) {
    const t = JSON.stringify(topic.name)
    const messages = [...topic.messages.values()].sort((a, b) => a.seq - b.seq)
    for (const m of messages) {
      const s = m.state === 'ready' ? 'r' : m.state === 'delayed' ? 'd' : 'i'
      write(`{"o":"put","t":${t},"i":"${m.id}","k":${JSON.stringify(m.key)},"p":${m.payload},"a":${m.attempts},"s":"${s}"${m.state === 'delayed' ? `,"at":${m.at}` : ''}}\n`)
    }
  }
}

/**
 * Rebuilds topics from the journal and returns how many records it holds and the byte length of its
 * whole records. A torn last line (a crash mid-write) is dropped; the caller truncates it away.
 */
async function replay(path: string, topics: Map<string, Topic>): Promise<{ records: number; goodBytes: number; size: number }> {
  let data: Buffer
  try {
    data = await fs.readFile(path)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { records: 0, goodBytes: 0, size: 0 }
    throw err
  }
  let seq = 0
  let records = 0
  let start = 0
  const topicOf = (name: string) => {
    let topic = topics.get(name)
    if (!topic) topics.set(name, (topic = newTopic(name)))
    return topic
  }
  for (let nl = data.indexOf(10, start); nl >= 0; start = nl + 1, nl = data.indexOf(10, start)) {
    let rec: JournalRecord
    try {
      rec = JSON.parse(data.toString('utf8', start, nl)) as JournalRecord
    } catch {
      continue // a damaged line loses its record only
    }
    records++
    const topic = topicOf(rec.t)
    const m = typeof rec.i === 'string' ? topic.messages.get(rec.i) : undefined
    switch (rec.o) {
      case 'put': {
        if (m) break
        const msg: Message = { id: rec.i, key: rec.k, payload: JSON.stringify(rec.p ?? null), attempts: rec.a ?? 0, state: 'ready', at: 0, seq: ++seq, gen: 0 }
        topic.messages.set(msg.id, msg)
        setState(topic, msg, rec.s === 'd' ? 'delayed' : rec.s === 'i' ? 'inflight' : 'ready', rec.at ?? 0)
        break
      }
      case 'res':
        // Records set state rather than change it, so replaying one twice (compaction keeps later ones) is harmless.
        if (m) {
          m.attempts = rec.a
          setState(topic, m, 'inflight', 0)
        }
        break
      case 'def':
        if (m) setState(topic, m, 'delayed', rec.at)
        break
      case 'ack':
        if (m) {
          topic.messages.delete(m.id)
          topic.counts[m.state]--
        }
        break
      case 'rm':
        for (const id of rec.i) {
          const r = topic.messages.get(id)
          if (r) {
            topic.messages.delete(id)
            topic.counts[r.state]--
          }
        }
        break
    }
  }
  // Leases died with the process that held them.
  for (const topic of topics.values()) {
    const messages = [...topic.messages.values()].sort((a, b) => a.seq - b.seq)
    topic.ready = new Deque()
    topic.delayed = new Heap()
    topic.inflight = new Heap()
    topic.counts = { ready: 0, delayed: 0, inflight: 0 }
    for (const m of messages) {
      if (m.state === 'inflight') m.attempts++
      const state = m.state === 'delayed' ? 'delayed' : 'ready'
      m.gen = 0
      place(topic, m, state, state === 'delayed' ? m.at : 0)
    }
    if (topic.messages.size === 0) topics.delete(topic.name)
  }
  return { records, goodBytes: start, size: data.length }
}

/** Replay-time state change: counts only, the queues are rebuilt once replay ends. */
function setState(topic: Topic, m: Message, state: State, at: number): void {
  if (m.gen > 0) topic.counts[m.state]--
  m.gen = 1
  m.state = state
  m.at = at
  topic.counts[state]++
}

interface Waiter {
  apply?: () => void
  resolve: () => void
  reject: (err: Error) => void
}

/** Append-only journal with group commit and compaction. */
class Journal {
  failure?: Error
  private pending: string[] = []
  private waiters: Waiter[] = []
  private running?: Promise<void>
  private closed = false

  private constructor(
    private readonly dir: string,
    private fh: FileHandle,
    private size: number,
    private records: number,
    private readonly snapshot: (write: (line: string) => void) => void,
    private readonly shouldCompact: (records: number) => boolean,
  ) {}

  static async open(
    dir: string,
    replayed: { records: number; goodBytes: number; size: number },
    snapshot: (write: (line: string) => void) => void,
    shouldCompact: (records: number) => boolean,
  ): Promise<Journal> {
    const path = join(dir, JOURNAL)
    const fh = await fs.open(path, constants.O_RDWR | constants.O_CREAT)
    if (replayed.size !== replayed.goodBytes) {
      await fh.truncate(replayed.goodBytes)
      await fh.sync()
    }
    // A journal created just now must survive a crash too: its folder entry is made durable once.
    if (replayed.size === 0) await fsyncDir(dir)
    const journal = new Journal(dir, fh, replayed.goodBytes, replayed.records, snapshot, shouldCompact)
    if (shouldCompact(replayed.records)) await journal.compact()
    return journal
  }

  /** Appends a line; resolves once it is on disk, after running apply. */
  write(line: string, apply?: () => void): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending.push(line)
      this.waiters.push({ apply, resolve, reject })
      this.kick()
    })
  }

  /** Appends a line that rides along with the next flush; nobody waits for it. */
  writeLazy(line: string): void {
    this.pending.push(line)
    this.kick()
  }

  async close(): Promise<void> {
    this.closed = true
    while (this.running) await this.running
    await this.fh.close()
  }

  private kick(): void {
    if (!this.running) this.running = this.run().finally(() => (this.running = undefined))
  }

  private async run(): Promise<void> {
    // Let the callers of this tick add their lines, so they share one fsync.
    await new Promise<void>((r) => setImmediate(r))
    while (this.pending.length > 0) {
      const lines = this.pending
      const waiters = this.waiters
      this.pending = []
      this.waiters = []
      const buf = Buffer.from(lines.join(''))
      try {
        if (this.failure) throw this.failure
        for (let off = 0; off < buf.length; ) off += (await this.fh.write(buf, off, buf.length - off, this.size + off)).bytesWritten
        // Lazy records alone are left to the next flush that someone waits for.
        if (waiters.length > 0) await this.fh.datasync()
        this.size += buf.length
        this.records += lines.length
      } catch (err) {
        await this.recover(err as Error)
        const failure = serviceUnavailable(`Embedded queue journal write failed: ${(err as Error).message}`, err)
        for (const w of waiters) w.reject(failure)
        continue
      }
      for (const w of waiters) {
        try {
          w.apply?.()
        } finally {
          w.resolve()
        }
      }
      if (!this.closed && this.shouldCompact(this.records)) {
        try {
          await this.compact()
        } catch {
          // The old journal is intact until the rename; compaction is tried again after a later flush.
        }
      }
    }
  }

  /** Cuts a partly written batch off, so the next record does not start in the middle of a line. */
  private async recover(err: Error): Promise<void> {
    try {
      await this.fh.truncate(this.size)
    } catch {
      this.failure = err
    }
  }

  /** Rewrites the live messages into a new file and renames it over the journal. */
  private async compact(): Promise<void> {
    const path = join(this.dir, JOURNAL)
    const tmp = `${path}.compact`
    const lines: string[] = []
    this.snapshot((line) => lines.push(line))
    const out = await fs.open(tmp, 'w')
    let size = 0
    try {
      for (let i = 0; i < lines.length; i += 1000) {
        const buf = Buffer.from(lines.slice(i, i + 1000).join(''))
        for (let off = 0; off < buf.length; ) off += (await out.write(buf, off, buf.length - off)).bytesWritten
        size += buf.length
      }
      await out.sync()
    } finally {
      await out.close()
    }
    await fs.rename(tmp, path)
    await fsyncDir(this.dir)
    const old = this.fh
    this.fh = await fs.open(path, constants.O_RDWR)
    this.size = size
    this.records = lines.length
    await old.close()
  }
}

/** FIFO of entries; shift is O(1) amortised. */
class Deque {
  private items: Entry[] = []
  private head = 0
  push(e: Entry): void {
    this.items.push(e)
  }
  shift(): Entry | undefined {
    if (this.head >= this.items.length) return undefined
    const e = this.items[this.head++]
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head)
      this.head = 0
    }
    return e
  }
}

/** Min-heap on (at, seq): among messages due at once, the older comes first. */
class Heap {
  private items: Entry[] = []
  private less = (a: Entry, b: Entry) => a.at < b.at || (a.at === b.at && a.seq < b.seq)
  peek(): Entry | undefined {
    return this.items[0]
  }
  push(e: Entry): void {
    const a = this.items
    a.push(e)
    for (let i = a.length - 1; i > 0; ) {
      const p = (i - 1) >> 1
      if (!this.less(a[i], a[p])) break
      ;[a[i], a[p]] = [a[p], a[i]]
      i = p
    }
  }
  pop(): Entry | undefined {
    const a = this.items
    const top = a[0]
    const last = a.pop()
    if (a.length > 0 && last) {
      a[0] = last
      for (let i = 0; ; ) {
        const l = 2 * i + 1
        const r = l + 1
        let m = i
        if (l < a.length && this.less(a[l], a[m])) m = l
        if (r < a.length && this.less(a[r], a[m])) m = r
        if (m === i) break
        ;[a[i], a[m]] = [a[m], a[i]]
        i = m
      }
    }
    return top
  }
}


/** The journal's own lock (adapters/lock.ts, held by the OS), besides data_dir's: a queue opened on its own is guarded too. */
async function acquireLock(dir: string): Promise<void> {
  if (openDirs.has(dir)) throw new Error(`Embedded queue at ${dir} is already open in this process`)
  openDirs.set(dir, null)
  try {
    openDirs.set(dir, await lockFolder(dir, {
      file: LOCK,
      refusal: (folder, _path, holder) =>
        `Embedded queue at ${folder} is in use by another process (${describeHolder(holder)}): the embedded queue serves one process; use Redis to share a queue`,
    }))
  } catch (err) {
    openDirs.delete(dir)
    throw err
  }
}

async function releaseLock(dir: string): Promise<void> {
  openDirs.get(dir)?.release()
  openDirs.delete(dir)
}
