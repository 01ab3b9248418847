// Worker task: parse one document. The bytes arrive moved (not copied); failures come back as data with the
// parser's code and a message that becomes the document's last_error.
import { AppError } from '../../kernel/errors.ts'
import { parseDocument } from '../parse/index.ts'
import type { ParseRequest } from '../protocol.ts'
import type { ParsedDocument, TaskResult } from '../types.ts'

export default async function parse(req: ParseRequest): Promise<TaskResult<ParsedDocument>> {
  try {
    return { ok: true, value: await parseDocument(req) }
  } catch (err) {
    if (err instanceof AppError) return { ok: false, code: err.code, message: err.message }
    return { ok: false, code: 'PARSE_FAILED', message: `could not parse '${req.filename}': ${err instanceof Error ? err.message : String(err)}` }
  }
}
