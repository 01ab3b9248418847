// HWP 5 (the compound-file format of Hancom Office) through @ohah/hwpjs, a native (napi-rs) parser: its
// Markdown rendering keeps headings (outline levels), lists and tables, and the Markdown reader here turns
// that into text. The file header is read first so an encrypted document gets a clear refusal instead of a
// decompression error. A .hwp file that is really HWPX (a zip) is handed to the HWPX parser.
import { createRequire } from 'node:module'
import type { ParsedDocument } from '../types.ts'
import { errorMessage, ParseCode, parseError } from './errors.ts'
import { parseHwpx } from './hwpx.ts'
import { markdownToText } from './md.ts'
import type { ParserInput } from './registry.ts'
import { fileStem, firstLine } from './text-util.ts'
import { isCfb, isZip } from './zip.ts'

interface Hwpjs {
  fileHeader(data: Buffer): string
  toJson(data: Buffer): string
  toMarkdown(data: Buffer, options?: { includeVersion?: boolean; includePageInfo?: boolean; image?: string }): { markdown: string }
}

let hwpjs: Hwpjs | null = null
const load = (): Hwpjs => (hwpjs ??= createRequire(import.meta.url)('@ohah/hwpjs') as Hwpjs)

// toJson renders the whole document; the summary title is worth that only for files of ordinary size.
const SUMMARY_MAX_BYTES = 4 * 1024 * 1024
// hwpjs's Markdown starts with a heading of its own.
const SYNTHETIC_HEADING = /^#\s*HWP 문서\s*\n/

function summaryTitle(lib: Hwpjs, buf: Buffer): string {
  if (buf.length > SUMMARY_MAX_BYTES) return ''
  try {
    const json = lib.toJson(buf)
    const at = json.lastIndexOf('"summary_information"')
    const m = at < 0 ? null : /"title"\s*:\s*("(?:[^"\\]|\\.)*")/.exec(json.slice(at, at + 4096))
    return m ? (JSON.parse(m[1]) as string).replace(/\s+/g, ' ').trim() : ''
  } catch {
    return ''
  }
}

export async function parseHwp(input: ParserInput): Promise<ParsedDocument> {
  const { bytes } = input
  if (bytes.length === 0) throw parseError(ParseCode.EMPTY, 'file is empty')
  if (isZip(bytes)) return { ...(await parseHwpx(input)), doc_type: 'hwpx' }
  if (new TextDecoder('latin1').decode(bytes.subarray(0, 17)) === 'HWP Document File') {
    throw parseError(ParseCode.UNSUPPORTED, 'HWP 3.0 documents are not supported: save the file as HWP 5 or HWPX')
  }
  if (!isCfb(bytes)) throw parseError(ParseCode.CORRUPT, 'corrupt HWP: not an HWP 5 document (no compound-file signature)')
  const lib = load()
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  let flags: string[]
  try {
    const header = JSON.parse(lib.fileHeader(buf)) as { signature?: string; document_flags?: string[] }
    if (header.signature !== 'HWP Document File') throw new Error(`unexpected signature ${JSON.stringify(header.signature)}`)
    flags = header.document_flags ?? []
  } catch (err) {
    throw parseError(ParseCode.CORRUPT, `corrupt HWP: ${errorMessage(err)}`, err)
  }
  if (flags.includes('encrypted')) throw parseError(ParseCode.ENCRYPTED, 'encrypted HWP document is not supported: it is protected by a password')
  if (flags.includes('distribution')) throw parseError(ParseCode.ENCRYPTED, 'HWP distribution document (배포용 문서) is not supported: its content is encrypted')
  let markdown: string
  try {
    markdown = lib.toMarkdown(buf, { includeVersion: false, includePageInfo: false, image: 'blob' }).markdown
  } catch (err) {
    throw parseError(ParseCode.CORRUPT, `corrupt HWP: ${errorMessage(err)}`, err)
  }
  const md = markdownToText(markdown.replace(SYNTHETIC_HEADING, ''))
  if (!md.text) throw parseError(ParseCode.NO_CONTENT, 'HWP document contains no text')
  // Outline headings read like '1. 1', so the first line names a document better than the first heading.
  const title = summaryTitle(lib, buf) || firstLine(md.text) || fileStem(input.filename)
  return { title, doc_type: 'hwp', pages: [{ page_num: 1, page_label: '1', text: md.text }] }
}
