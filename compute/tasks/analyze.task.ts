// Worker task, first half of an ingest: parse the file and compute its dedup signatures in one thread
// crossing (the dedup decision needs the text before anything is chunked or embedded). With `segment`, the
// second half (segment.task.ts: chunks, sparse and built-in dense vectors) runs in the same call: the pages
// then do not cross to the main thread and back, and the pool is entered once per document instead of twice
// (the ingest profile: posting tasks and cloning their text was about a tenth of the main thread). A document
// found identical to another by the dedup screen has been segmented for nothing, which is rare.
import { AppError } from '../../kernel/errors.ts'
import { identityOf, packIdentity } from '../dedup/identity.ts'
import { dedupSignatures, type DedupSignatureOptions, type DedupSignatures } from '../dedup/index.ts'
import { parseDocument } from '../parse/index.ts'
import type { ParseRequest } from '../protocol.ts'
import { normalizeForDedup } from '../text/normalize.ts'
import type { ParsedDocument, TaskResult } from '../types.ts'
import { PAGE_SEPARATOR } from '../chunk/index.ts'
import { contextHeader } from '../chunk/context.ts'
import { segmentFailure, segmentPages, type SegmentRequest, type SegmentValue } from './segment.task.ts'

export interface AnalyzeRequest extends ParseRequest {
  /** null: dedup is off for this KB, no signatures. */
  dedup: DedupSignatureOptions | null
  /**
   * Segment in the same call: the segment request without its pages and title, which come from the parse. The
   * title put before chunks is `title` when set (a connector chose it), else the parsed title, else `fallbackTitle`.
   */
  segment?: Omit<SegmentRequest, 'pages' | 'title'> & { title: string | null; fallbackTitle: string }
}

export interface AnalyzeValue {
  parsed: ParsedDocument
  /** Characters of text over all pages. */
  chars: number
  signatures: (DedupSignatures & { title: string; identity: Uint8Array }) | null
  /**
   * With request.segment: the segmentation, or why it failed (a chunking failure, not a parse failure), and
   * the context header used; `parsed.pages` is then empty (the chunks carry the text).
   */
  segmented?: { ok: true; value: SegmentValue; header: string; ms: number } | { ok: false; code: string; message: string }
}

export default async function analyze(req: AnalyzeRequest): Promise<TaskResult<AnalyzeValue>> {
  try {
    const parsed = await parseDocument(req)
    const text = parsed.pages.map((p) => p.text).join(PAGE_SEPARATOR)
    if (text.trim().length === 0) {
      return { ok: false, code: 'PARSE_NO_TEXT', message: `no text could be extracted from '${req.filename}'` }
    }
    const signatures = req.dedup
      ? { ...dedupSignatures(text, req.dedup), title: normalizeForDedup(parsed.title), identity: packIdentity(identityOf(text, parsed.title)) }
      : null
    if (!req.segment) return { ok: true, value: { parsed, chars: text.length, signatures } }
    const { title, fallbackTitle, ...seg } = req.segment
    const started = performance.now()
    let segmented: AnalyzeValue['segmented']
    try {
      const header = contextHeader(parsed.pages[0]?.text ?? '', title || parsed.title || fallbackTitle)
      segmented = { ok: true, value: segmentPages({ ...seg, pages: parsed.pages, title: header }), header, ms: 0 }
      segmented.ms = performance.now() - started
    } catch (err) {
      segmented = segmentFailure(err)
    }
    return { ok: true, value: { parsed: { ...parsed, pages: [] }, chars: text.length, signatures, segmented } }
  } catch (err) {
    if (err instanceof AppError) return { ok: false, code: err.code, message: err.message }
    return { ok: false, code: 'PARSE_FAILED', message: `could not parse '${req.filename}': ${err instanceof Error ? err.message : String(err)}` }
  }
}
