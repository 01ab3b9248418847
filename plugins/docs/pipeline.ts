// The ingest pipeline (spec 1, 2.9): validate, dedup, parse, chunk, embed, upsert, meta. CPU-heavy steps run
// in the compute pool; every status write is a compare-and-set, so a document failed through the API while
// this runs is never overwritten, and what this run wrote is removed again. Such a fail also stops the run
// (worker.ts RunStopped on the run's signal): the pool task in flight is abandoned (its thread ends), embedder
// calls are cancelled, and the stages check the signal between them and between upsert batches.
import type { Adapters, ChunkPayload, VectorPoint } from '../../adapters/ports.ts'
import type { ComputePool } from '../../compute/pool.ts'
import { contextHeader, encodingTexts } from '../../compute/chunk/context.ts'
import { chunkSemantic } from '../../compute/chunk/index.ts'
import { unpackSparse } from '../../compute/text/sparse.ts'
import type { Chunk, DocType } from '../../compute/types.ts'
import type { Settings } from '../../kernel/config/schema.ts'
import type { Logger } from '../../kernel/log.ts'
import { packPicked, packRows, samplePairs } from '../../compute/dedup/chunks.ts'
import { commitUnlessLate, compare, dedupRecords, dropSignatures, finishIndexed, laterVerdict, rankByIdentity, relate, relationSideOf, relationSides, SignatureIndex, titleChanged, type EarlyVerdict, type FinalVerdict, type PairScorer } from './dedup.ts'
import { effectiveKbSettings } from '../../kernel/config/kb-settings.ts'
import { docTypeOf } from './formats.ts'
import type { DocRepo, DocumentRecord } from './repo.ts'
import { INGEST_TOPIC, type DocEvent } from './service.ts'
import { isTransient, retryDelayMs, TRANSIENT_RETRIES } from './transient.ts'
import { truncateError } from './states.ts'
import { runStopped, type Processor } from './worker.ts'
import { telemetry } from '../../kernel/telemetry.ts'

export const STAGES = ['validate', 'dedup', 'parse', 'chunk', 'embed', 'upsert', 'meta'] as const
export type Stage = (typeof STAGES)[number]

/** Totals since start: what the ingest benchmark reports per stage. */
export interface PipelineMetrics {
  documents: number
  indexed: number
  failed: number
  skipped: number
  bytes: number
  chunks: number
  stageMs: Record<Stage, number>
}

class StageError extends Error {
  constructor(readonly stage: Stage, readonly detail: string, cause?: unknown) {
    super(`${stage} failed: ${detail}`, cause === undefined ? undefined : { cause })
  }
}

class Superseded extends Error {}

const UPSERT_BATCH = 256

export const chunkId = (docId: string, index: number) => `${docId}-${index}`
export const parentId = (docId: string, level: number, index: number) => `${docId}-p${level}-${index}`

export function createProcessor(deps: {
  adapters: Adapters
  pool: ComputePool
  repo: DocRepo
  settings: Readonly<Settings>
  log: Logger
  /** Queues again the documents kept out of the index as duplicates of a document going away. */
  promoteDuplicates(docId: string): Promise<number>
}): Processor & { metrics: PipelineMetrics } {
  const { adapters, pool, repo, settings, log } = deps
  const { sql, objects, vectors, embedder } = adapters
  const metrics: PipelineMetrics = { documents: 0, indexed: 0, failed: 0, skipped: 0, bytes: 0, chunks: 0, stageMs: Object.fromEntries(STAGES.map((s) => [s, 0])) as Record<Stage, number> }
  const builtin = embedder.name === 'builtin'
  const signatureIndex = new SignatureIndex()

  async function timed<T>(stage: Stage, fn: () => Promise<T>): Promise<T> {
    const started = performance.now()
    try {
      return await telemetry.span(`ingest.${stage}`, fn)
    } catch (err) {
      if (err instanceof StageError || err instanceof Superseded) throw err
      throw new StageError(stage, err instanceof Error ? err.message : String(err), err)
    } finally {
      const ms = performance.now() - started
      metrics.stageMs[stage] += ms
      telemetry.metrics.ingestStage.observe({ stage }, ms / 1000)
    }
  }

  async function embedAll(texts: string[], signal: AbortSignal): Promise<Float32Array[]> {
    return embedder.embed(texts, { signal })
  }

  async function ingest(doc: DocumentRecord & { kb_overrides: Record<string, unknown> | null }, event: Extract<DocEvent, { op: 'ingest' }>, signal: AbortSignal): Promise<void> {
    metrics.documents++
    const kbId = doc.kb_id
    const docId = doc.doc_id
    let wroteVectors = false
    /** The document is indexed: what fails after (superseding the older one) must not undo it. */
    let indexed = false
    /** A check point: a stopped run (or a shutdown) goes no further. */
    const stage = <T>(name: Stage, fn: () => Promise<T>): Promise<T> => {
      signal.throwIfAborted()
      return timed(name, fn)
    }
    try {
      // validate
      const { bytes, cfg, docType } = await stage('validate', async () => {
        if (!doc.storage_key) throw new Error('the document has no stored file')
        const type = (doc.doc_type as DocType | null) ?? docTypeOf(doc.source)
        if (!type) throw new Error(`unsupported file format: ${doc.source}`)
        // The claim brought the KB's overrides along: no settings query per document.
        const cfg = effectiveKbSettings(settings as Settings, doc.kb_overrides ?? {})
        const stream = await objects.get(doc.storage_key)
        const parts: Buffer[] = []
        let size = 0
        const limit = settings.ingestion.max_file_size_mb * 1024 * 1024
        for await (const part of stream) {
          signal.throwIfAborted()
          size += (part as Buffer).length
          if (size > limit) throw new Error(`file is larger than the ${settings.ingestion.max_file_size_mb} MB limit`)
          parts.push(part as Buffer)
        }
        if (size === 0) throw new Error('file is empty')
        metrics.bytes += size
        // A buffer of its own, exactly sized: it is moved to the worker thread, which detaches it here. A file
        // read in one piece into a buffer of its own (the local store's small objects) is moved as it is.
        const only = parts.length === 1 ? parts[0] : null
        if (only && only.byteOffset === 0 && only.byteLength === only.buffer.byteLength) return { bytes: new Uint8Array(only.buffer, 0, size), cfg, docType: type }
        const bytes = new Uint8Array(size)
        let at = 0
        for (const p of parts) {
          bytes.set(p, at)
          at += p.length
        }
        return { bytes, cfg, docType: type }
      })

      // parse (+ dedup signatures, + chunk, sparse and built-in dense vectors unless chunking is semantic, which
      // embeds through the embedder here: all in one worker call)
      const semantic = cfg.chunking.strategy === 'semantic'
      const analyzed = await stage('parse', () => pool.run('analyze', {
        bytes, filename: doc.source, contentType: doc.content_type ?? undefined, policy: cfg.ingestion.html_extraction_policy,
        parserPlugins: cfg.ingestion.parser_plugins, dedup: cfg.dedup.enabled ? {
          ngram: cfg.dedup.simhash.ngram, simhash_bits: cfg.dedup.simhash.simhash_bits, num_bands: cfg.dedup.simhash.num_bands,
          user_words_path: cfg.dedup.minhash.user_words_path,
        } : null,
        segment: semantic ? undefined : {
          options: cfg.chunking, kind: docType === 'code' ? 'code' : 'text',
          language: docType === 'code' ? doc.source.slice(doc.source.lastIndexOf('.') + 1) : undefined,
          builtinDimensions: builtin ? embedder.dimensions : 0, title: (doc.connector_id && doc.title) || null, fallbackTitle: doc.title,
        },
      }, { transfer: [bytes], signal }))
      const { parsed, signatures, segmented } = analyzed
      if (segmented?.ok) {
        // The worker's segmentation time belongs to the chunk stage.
        metrics.stageMs.parse -= segmented.ms
        metrics.stageMs.chunk += segmented.ms
      }
      // A connector chose the title (notes.md order: og:title, h1, <title>, URL) and the type (`code` keeps the
      // code splitter on a reindex): the parser's own guesses do not overwrite them.
      if (doc.connector_id && doc.doc_type) parsed.doc_type = doc.doc_type as DocType
      const title = (doc.connector_id && doc.title) || parsed.title || doc.title

      // dedup stages 1-2
      const screened = signatures
        ? await stage('dedup', () => signatureIndex.screenFrom(sql, kbId, docId, signatures, cfg.dedup))
        : { early: { verdict: 'unique' as const }, seen: 0 }
      const early: EarlyVerdict = screened.early
      // The relation rule tells a copy or a revision from a sibling or an overlap before anything is hidden.
      const related = async (v: FinalVerdict): Promise<FinalVerdict> => {
        if (v.verdict === 'unique' || !signatures) return v
        const older = await relationSideOf(sql, v.match)
        if (!older) return v
        return relate(v, { identity: signatures.identity ?? null, title: signatures.title, connector_id: doc.connector_id, source: doc.source }, older, cfg.dedup)
      }
      // an identical body under another title is indexed, and supersedes the older document at the end
      let verdict: FinalVerdict = early.verdict === 'identical'
        ? await stage('dedup', () => related(titleChanged({ verdict: 'identical', match: early.match, score: 1, title: early.title, stage: 1 }, signatures?.title ?? '')))
        : { verdict: 'unique' }
      if (verdict.verdict === 'identical') {
        await finishIdentical(doc, verdict, title, parsed.doc_type)
        return
      }

      // chunk (+ sparse vectors, + built-in dense vectors); later chunks are encoded with the document's header
      const header = segmented?.ok ? segmented.header : contextHeader(parsed.pages[0]?.text ?? '', title)
      const seg = await stage('chunk', async () => {
        if (segmented) {
          if (!segmented.ok) throw new StageError('chunk', segmented.message)
          return segmented.value
        }
        const chunked = await chunkSemantic(parsed.pages, cfg.chunking, (texts) => embedAll([...texts], signal))
        const sparse = await pool.run('sparse', { texts: encodingTexts(chunked.chunks, header), kind: 'document' }, { signal })
        return { ...chunked, sparse, dense: new Float32Array(0) }
      })
      if (seg.chunks.length === 0) throw new StageError('chunk', 'the document produced no chunk of at least chunking.min_chunk_chars characters')
      metrics.chunks += seg.chunks.length

      // embed
      const dense = await stage('embed', async () => {
        if (seg.dense.length > 0) {
          const d = embedder.dimensions
          return seg.chunks.map((_, i) => seg.dense.subarray(i * d, (i + 1) * d))
        }
        return embedAll(encodingTexts(seg.chunks, header), signal)
      })

      // dedup stage 3: the chunk comparison runs in the compute pool, bounded in pairs (compute/dedup/chunks.ts)
      const judge = async (v: EarlyVerdict): Promise<FinalVerdict> => {
        if (v.verdict === 'unique') return v
        if (v.verdict === 'identical') return related(titleChanged({ verdict: 'identical', match: v.match, score: 1, title: v.title, stage: 1 }, signatures?.title ?? ''))
        // Only the chunks that will be compared are copied here (a sample of the new document's past 2^20 pairs), and
        // the candidate's rows as the store read them (one matrix in the embedded store): the main thread does no
        // more than what the worker needs moved to it.
        const pairs: PairScorer = async (fresh, other, matchThreshold) => {
          const { rows, cols } = samplePairs(fresh.length, other.length)
          const a = packPicked(fresh, rows)
          const b = cols.length === other.length ? packRows(other, true) : packPicked(other, cols)
          const moved = b.flat.byteLength === b.flat.buffer.byteLength ? [a.flat, b.flat] : [a.flat]
          return pool.run('chunkpairs', {
            fresh: a.flat, other: b.flat, dims: a.dims || b.dims, matchThreshold, maxPairs: Infinity, counts: { fresh: fresh.length, other: other.length },
          }, { transfer: moved, signal })
        }
        const candidates = await rankByIdentity(v.candidates, signatures?.identity ?? null, (ids) => relationSides(sql, ids))
        return related(titleChanged(
          await compare(candidates, dense, (id) => vectors.docVectors(kbId, id), cfg.dedup, signatures ?? undefined, pairs), signatures?.title ?? ''))
      }
      if (early.verdict === 'compare') {
        verdict = await stage('dedup', () => judge(early))
        if (verdict.verdict === 'identical') {
          await finishIdentical(doc, verdict, title, parsed.doc_type)
          return
        }
      }

      // upsert
      const now = new Date().toISOString()
      await stage('upsert', async () => {
        await vectors.ensureCollection(kbId, embedder.dimensions)
        await vectors.deleteByDoc(kbId, docId)
        wroteVectors = true
        const parentIds = seg.parents.map((p) => parentId(docId, p.level, p.index))
        const point = (c: Chunk, i: number): VectorPoint => ({
          dense: dense[i],
          sparse: unpackSparse(seg.sparse, i),
          payload: {
            chunk_id: chunkId(docId, i), kb_id: kbId, doc_id: docId, chunk_index: i, title, source_type: doc.source_type,
            source: doc.source, doc_type: parsed.doc_type, page_num: c.page_num, page_label: c.page_label, text: c.text,
            start: c.start, end: c.end, parent_chunk_id: c.parent === null ? null : parentIds[c.parent], updated_at: now,
          } satisfies ChunkPayload,
        })
        // Batch by batch, each a check point: a run stopped here has written at most one more batch.
        for (let i = 0; i < seg.chunks.length; i += UPSERT_BATCH) {
          signal.throwIfAborted()
          const batch: VectorPoint[] = []
          for (let j = i; j < Math.min(i + UPSERT_BATCH, seg.chunks.length); j++) batch.push(point(seg.chunks[j], j))
          await vectors.upsert(kbId, batch)
        }
      })

      // meta (one transaction, at the end: until the final compare-and-set the document is `running`, and a crash
      // before it makes recovery run it again; signature rows of a document that is not indexed are never compared)
      const ended = await stage('meta', async (): Promise<'indexed' | 'copy'> => {
        const reindex = doc.chunk_count !== null
        if (reindex) await sql.query('DELETE FROM parent_chunks WHERE doc_id = $1', [docId])
        if (seg.parents.length > 0) {
          const childCount = new Array<number>(seg.parents.length).fill(0)
          for (const c of seg.chunks) if (c.parent !== null) childCount[c.parent]++
          for (const p of seg.parents) if (p.parent !== null) childCount[p.parent]++
          const rows = seg.parents.map((p, i) => [
            parentId(docId, p.level, p.index), kbId, docId, p.level, p.parent === null ? null : parentId(docId, seg.parents[p.parent].level, seg.parents[p.parent].index),
            childCount[i], p.text, p.page_num, p.page_label, p.start, p.end,
          ])
          await sql.query(
            `INSERT INTO parent_chunks (chunk_id, kb_id, doc_id, level, parent_chunk_id, child_count, text, page_num, page_label, start_offset, end_offset)
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::text[], $6::int[], $7::text[], $8::int[], $9::text[], $10::int[], $11::int[])`,
            Array.from({ length: 11 }, (_, col) => rows.map((r) => r[col])),
          )
        }
        // auto-merge reads these rows: an answer cached since the vectors landed may lack them or hold the old ones
        if (reindex || seg.parents.length > 0) await adapters.searchCache.bump(kbId).catch(() => {})
        const fields = { chunk_count: seg.chunks.length, embedding_model: embedder.model, title, doc_type: parsed.doc_type }
        signal.throwIfAborted()
        let moved: boolean
        let superseded = false
        const supersedeOf = (v: FinalVerdict) => v.verdict === 'similar' || v.verdict === 'title_changed' ? v.match : null
        if (signatures) {
          // A copy or a revision processed at the same moment as this document was not indexed when this one was
          // screened: under the KB's commit lock, the signatures committed since are screened too, and the document
          // is indexed in the same transaction only when they change nothing. What they do change is judged outside
          // the lock (stage 3 reads vectors and runs in the pool), then the commit is tried again.
          let since = screened.seen
          const judged = new Set(early.verdict === 'compare' ? early.candidates.map((c) => c.doc_id) : [])
          for (;;) {
            signal.throwIfAborted()
            const supersedes = supersedeOf(verdict)
            const records = dedupRecords(docId, verdict)
            // a revision supersedes the older document in the statement that indexes it (issue 42: no crash can leave
            // both indexed); the older one's vectors go after, and start-up reconciliation removes them if a crash came first
            const round = await commitUnlessLate(sql, signatureIndex, kbId, docId, signatures, cfg.dedup, since, judged,
              (tx) => finishIndexed(tx, kbId, docId, signatures, fields, records.fresh, supersedes ? { docId: supersedes, dedup: records.older } : null))
            since = round.seen
            if ('done' in round) {
              const done = round.done
              moved = done !== null
              superseded = done?.superseded ?? false
              break
            }
            if (round.late.verdict === 'compare') for (const c of round.late.candidates) judged.add(c.doc_id)
            else judged.add(round.late.match)
            const late = await judge(round.late)
            // the late document may have superseded the one this document was judged against (two newer revisions)
            const currentIndexed = verdict.verdict === 'unique' || (await sql.query<{ indexed: boolean }>(
              "SELECT status = 'indexed' AS indexed FROM documents WHERE doc_id = $1", [verdict.match]))[0]?.indexed === true
            verdict = laterVerdict(verdict, late, currentIndexed)
            if (verdict.verdict === 'identical') return 'copy'
          }
        } else {
          if (reindex) await dropSignatures(sql, docId)
          moved = (await repo.transition(docId, ['running'], 'indexed', { ...fields, last_error: null, duplicate_of: null, dedup: null })) !== null
        }
        if (!moved) throw new Superseded()
        indexed = true
        if (signatures) countVerdict(verdict)
        const supersedes = supersedeOf(verdict)
        if (supersedes !== null && superseded) {
          signatureIndex.forget(kbId, supersedes)
          await vectors.deleteByDoc(kbId, supersedes)
          await sql.query('DELETE FROM parent_chunks WHERE doc_id = $1', [supersedes])
          log.info({ doc_id: docId, outdated: supersedes, verdict: verdict.verdict }, verdict.verdict === 'similar'
            ? 'similar document supersedes an older one' : 'identical content under a new title supersedes the older document')
        }
        return 'indexed'
      })
      if (ended === 'copy' && verdict.verdict !== 'unique') {
        await finishIdentical(doc, verdict, title, parsed.doc_type)
        return
      }
      metrics.indexed++
    } catch (err) {
      if (indexed) {
        metrics.indexed++
        log.warn({ err, doc_id: docId }, 'document indexed, but superseding the older document failed')
        return
      }
      // Stopped: the document left running (a fail through the API); nothing of this run is in flight any more.
      const stopped = runStopped(signal)
      if (signal.aborted && !stopped) throw err // shutting down: the row stays running and recovery re-queues it
      if (wroteVectors || stopped || err instanceof Superseded) await cleanup(kbId, docId).catch((e) => log.warn({ err: e, doc_id: docId }, 'cleanup after a discarded run failed'))
      if (stopped) {
        log.info({ doc_id: docId, kb_id: kbId }, 'document left running while being processed (failed through the API): run stopped, what it wrote removed')
        return
      }
      if (err instanceof Superseded) {
        log.info({ doc_id: docId }, 'document changed state while processing; result discarded')
        return
      }
      const message = err instanceof StageError ? err.message : `processing failed: ${err instanceof Error ? err.message : String(err)}`
      const retry = (event.retry ?? 0) + 1
      // An embedding provider that is down has its own retries (embedding.max_retries), and they are its policy.
      if (isTransient(err) && !(err instanceof StageError && err.stage === 'embed')) {
        if (retry <= TRANSIENT_RETRIES && (await retryLater(doc, event, retry, message))) return
        if (retry > TRANSIENT_RETRIES) {
          metrics.failed++
          await repo.transition(docId, ['running'], 'failed', { last_error: truncateError(`${message} (tried ${retry} times over ${Math.round(totalRetryMs() / 1000)} s; reindex the document once the store is back)`) })
          log.warn({ doc_id: docId, kb_id: kbId, reason: message }, 'document failed: a store stayed unavailable through every retry')
          return
        }
        // Could not even queue the retry (the queue is down too): the row stays running without a heartbeat, and the
        // worker's recovery queues it again once it is stale.
        log.warn({ doc_id: docId, kb_id: kbId, reason: message }, 'transient failure and the retry could not be queued: left to recovery')
        return
      }
      metrics.failed++
      await repo.transition(docId, ['running'], 'failed', { last_error: truncateError(message) })
      log.warn({ doc_id: docId, kb_id: kbId, reason: message }, 'document failed')
    }
  }

  const totalRetryMs = () => Array.from({ length: TRANSIENT_RETRIES }, (_, i) => retryDelayMs(i + 1)).reduce((a, b) => a + b, 0)

  /**
   * A run met a store or provider that is down for now (transient.ts): the retry event is queued with a delay first,
   * then the row goes back to pending with the reason, so a client sees why it waits. False when the retry could not
   * be queued. If the row cannot be moved (PostgreSQL down as well), the queued retry finds it running, waits its
   * turn, and the worker's recovery moves it once its heartbeat is stale.
   */
  async function retryLater(doc: DocumentRecord, event: Extract<DocEvent, { op: 'ingest' }>, retry: number, message: string): Promise<boolean> {
    const delayMs = retryDelayMs(retry)
    try {
      await adapters.queue.enqueue(INGEST_TOPIC, doc.doc_id, { ...event, force: true, retry } satisfies DocEvent, { delayMs })
    } catch {
      return false
    }
    await repo.transition(doc.doc_id, ['running'], 'pending', {
      pending_op: 'ingest', last_error: truncateError(`Retry ${retry} of ${TRANSIENT_RETRIES} in ${delayMs / 1000} s: ${message}`),
    }).catch((err) => log.warn({ err, doc_id: doc.doc_id }, 'could not move a document back to pending for its retry'))
    log.warn({ doc_id: doc.doc_id, retry, delay_ms: delayMs, reason: message }, 'transient failure: document queued again')
    return true
  }

  async function finishIdentical(doc: DocumentRecord, verdict: Exclude<FinalVerdict, { verdict: 'unique' }>, title: string, docType: string): Promise<void> {
    metrics.skipped++
    const match = verdict.match
    await cleanup(doc.kb_id, doc.doc_id)
    const moved = await repo.transition(doc.doc_id, ['running'], 'outdated', {
      duplicate_of: match, chunk_count: 0, title, doc_type: docType, last_error: null, dedup: dedupRecords(doc.doc_id, verdict).fresh,
    })
    if (moved) {
      countVerdict(verdict)
      log.info({ doc_id: doc.doc_id, duplicate_of: match }, 'identical to an indexed document: not indexed')
    }
  }

  function countVerdict(v: FinalVerdict): void {
    telemetry.metrics.dedupVerdicts.inc({ verdict: v.verdict })
  }

  async function cleanup(kbId: string, docId: string): Promise<void> {
    signatureIndex.forget(kbId, docId)
    await vectors.deleteByDoc(kbId, docId)
    await sql.query('DELETE FROM parent_chunks WHERE doc_id = $1', [docId])
    await dropSignatures(sql, docId)
  }

  async function remove(doc: DocumentRecord, hard: boolean): Promise<void> {
    await cleanup(doc.kb_id, doc.doc_id)
    if (hard) {
      if (doc.storage_key) await objects.delete([doc.storage_key])
      await repo.remove(doc.doc_id, ['deleting'])
    } else {
      await repo.transition(doc.doc_id, ['deleting'], 'deleted')
    }
    await deps.promoteDuplicates(doc.doc_id)
  }

  return { ingest, remove, metrics }
}

