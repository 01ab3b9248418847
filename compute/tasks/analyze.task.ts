// Worker task, first half of an ingest: parse the file and compute its dedup signatures in one thread
// crossing (the dedup decision needs the text before anything is chunked or embedded).
import { AppError } from '../../kernel/errors.ts'
import { dedupSignatures, type DedupSignatureOptions, type DedupSignatures } from '../dedup/index.ts'
import { parseDocument } from '../parse/index.ts'
import type { ParseRequest } from '../protocol.ts'
import { normalizeForDedup } from '../text/normalize.ts'
import type { ParsedDocument, TaskResult } from '../types.ts'
import { PAGE_SEPARATOR } from '../chunk/index.ts'

export interface AnalyzeRequest extends ParseRequest {
  /** null: dedup is off for this KB, no signatures. */
  dedup: DedupSignatureOptions | null
}

export interface AnalyzeValue {
  parsed: ParsedDocument
  /** Characters of text over all pages. */
  chars: number
  signatures: (DedupSignatures & { title: string }) | null
}

export default async function analyze(req: AnalyzeRequest): Promise<TaskResult<AnalyzeValue>> {
  try {
    const parsed = await parseDocument(req)
    const text = parsed.pages.map((p) => p.text).join(PAGE_SEPARATOR)
    if (text.trim().length === 0) {
      return { ok: false, code: 'PARSE_NO_TEXT', message: `no text could be extracted from '${req.filename}'` }
    }
    const signatures = req.dedup ? { ...dedupSignatures(text, req.dedup), title: normalizeForDedup(parsed.title) } : null
    return { ok: true, value: { parsed, chars: text.length, signatures } }
  } catch (err) {
    if (err instanceof AppError) return { ok: false, code: err.code, message: err.message }
    return { ok: false, code: 'PARSE_FAILED', message: `could not parse '${req.filename}': ${err instanceof Error ? err.message : String(err)}` }
  }
}
