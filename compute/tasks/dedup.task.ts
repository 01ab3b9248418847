// Worker task: the dedup signatures of one document (SimHash + LSH bands, MinHash). The minhash array is
// moved back, not copied.
import { dedupSignatures, type DedupSignatureOptions, type DedupSignatures } from '../dedup/index.ts'
import { normalizeForDedup } from '../text/normalize.ts'
import type { TaskResult } from '../types.ts'

export interface DedupRequest {
  text: string
  title?: string
  options?: DedupSignatureOptions
}

export interface DedupValue extends DedupSignatures {
  /** The title as the trigram similarity reads it (NFKC, lower case, whitespace collapsed). */
  title: string
}

export default async function dedup(req: DedupRequest): Promise<TaskResult<DedupValue>> {
  try {
    const sig = dedupSignatures(req.text, req.options)
    const title = normalizeForDedup(req.title ?? '')
    return { ok: true, value: { ...sig, title } }
  } catch (err) {
    const code = err instanceof RangeError ? 'DEDUP_OPTIONS_INVALID' : (err as NodeJS.ErrnoException)?.code === 'ENOENT' ? 'DEDUP_USER_WORDS_MISSING' : 'DEDUP_FAILED'
    return { ok: false, code, message: `dedup signatures failed: ${err instanceof Error ? err.message : String(err)}` }
  }
}
