// Plain text: decoded (see encoding.ts) and normalized; its lines are its structure.
import type { ParsedDocument } from '../types.ts'
import { decodeText } from './encoding.ts'
import { ParseCode, parseError } from './errors.ts'
import type { ParserInput } from './registry.ts'
import { fileStem, normalizeText } from './text-util.ts'

export function parseTxt(input: ParserInput): ParsedDocument {
  const text = normalizeText(decodeText(input.bytes).text)
  if (!text) throw parseError(ParseCode.EMPTY, 'file is empty: it holds only whitespace')
  return { title: fileStem(input.filename), doc_type: 'txt', pages: [{ page_num: 1, page_label: '1', text }] }
}
