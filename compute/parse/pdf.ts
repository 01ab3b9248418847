// PDF through unpdf, which bundles pdf.js 5.6 built for serverless use: it runs in a worker thread with no
// DOM, no canvas and no pdf.js worker file to locate (pdf.js runs its "worker" in the calling thread, which is
// what a pool thread wants). Text is rebuilt per page from the text items (hasEOL and y positions make the
// lines), page labels come from /PageLabels.
import { getDocumentProxy } from 'unpdf'
import type { PageText, ParsedDocument } from '../types.ts'
import { errorMessage, ParseCode, parseError } from './errors.ts'
import type { ParserInput } from './registry.ts'
import { fileStem, firstLine, normalizeText } from './text-util.ts'

/** The fields of a pdf.js text item the line builder reads. */
export interface PdfTextItem {
  str: string
  transform: number[]
  width: number
  height: number
  hasEOL: boolean
}

const isTextItem = (it: unknown): it is PdfTextItem => typeof (it as PdfTextItem).str === 'string'
const isSpace = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0xa0 || c === 0x3000

/** Lines from text items: a new line at hasEOL or when the baseline moves; a blank line at a wide gap. */
export function pageTextFromItems(items: readonly unknown[]): string {
  let out = ''
  let lastY: number | null = null
  let lastEnd = 0
  let lastH = 0
  let eol = false
  for (const it of items) {
    if (!isTextItem(it)) continue
    const x = it.transform[4]
    const y = it.transform[5]
    const h = it.height || Math.hypot(it.transform[2], it.transform[3]) || 10
    if (it.str === '') {
      if (it.hasEOL) eol = true
      continue
    }
    if (out !== '' && lastY !== null) {
      const dy = Math.abs(y - lastY)
      const lineH = Math.max(h, lastH)
      if (eol || dy > 0.5 * lineH) {
        out += dy > 1.8 * lineH ? '\n\n' : '\n'
      } else if (x - lastEnd > 0.15 * lineH && !isSpace(out.charCodeAt(out.length - 1)) && !isSpace(it.str.charCodeAt(0))) {
        out += ' '
      }
    }
    out += it.str
    lastY = y
    lastEnd = x + it.width
    lastH = h
    eol = it.hasEOL
  }
  return normalizeText(out)
}

function hasPdfHeader(bytes: Uint8Array): boolean {
  const head = new TextDecoder('latin1').decode(bytes.subarray(0, 1024))
  return head.includes('%PDF-')
}

function hasEofMarker(bytes: Uint8Array): boolean {
  const tail = new TextDecoder('latin1').decode(bytes.subarray(Math.max(0, bytes.length - 2048)))
  return tail.includes('%%EOF')
}

function failure(err: unknown, bytes: Uint8Array) {
  const name = (err as { name?: string })?.name
  if (name === 'PasswordException') {
    return parseError(ParseCode.ENCRYPTED, 'encrypted PDF is not supported: it is protected by a password', err)
  }
  if (!hasEofMarker(bytes)) {
    return parseError(ParseCode.TRUNCATED, 'truncated PDF: the file ends before its end-of-file marker (%%EOF); upload the complete file', err)
  }
  const detail = name === 'InvalidPDFException' ? 'invalid PDF structure' : errorMessage(err).replace(/\.$/, '')
  return parseError(ParseCode.CORRUPT, `corrupt PDF: ${detail}`, err)
}

function decodeInfoString(v: unknown): string {
  return typeof v === 'string' ? v.replace(/\0/g, '').replace(/\s+/g, ' ').trim() : ''
}

export async function parsePdf(input: ParserInput): Promise<ParsedDocument> {
  const { bytes } = input
  if (bytes.length === 0) throw parseError(ParseCode.EMPTY, 'file is empty')
  if (!hasPdfHeader(bytes)) throw parseError(ParseCode.CORRUPT, 'corrupt PDF: not a PDF file (no %PDF- header)')
  let pdf: Awaited<ReturnType<typeof getDocumentProxy>>
  try {
    // pdf.js takes ownership of (detaches) the buffer it is given: give it a copy so the caller's stays usable.
    pdf = await getDocumentProxy(bytes.slice(), { verbosity: 0, isEvalSupported: false, stopAtErrors: false })
  } catch (err) {
    throw failure(err, bytes)
  }
  try {
    const labels = await pdf.getPageLabels().catch(() => null)
    const pages: PageText[] = []
    for (let n = 1; n <= pdf.numPages; n++) {
      const page = await pdf.getPage(n)
      const content = await page.getTextContent()
      pages.push({ page_num: n, page_label: labels?.[n - 1] || String(n), text: pageTextFromItems(content.items) })
      page.cleanup()
    }
    if (!pages.some((p) => p.text)) {
      throw parseError(ParseCode.NO_CONTENT, 'PDF contains no extractable text (it may be scanned images; OCR is not enabled)')
    }
    const meta = await pdf.getMetadata().catch(() => null)
    const info = (meta?.info ?? {}) as Record<string, unknown>
    const xmpTitle = (meta?.metadata as { get?(k: string): unknown } | null | undefined)?.get?.('dc:title')
    const title = decodeInfoString(info.Title) || decodeInfoString(xmpTitle) || firstLine(pages.find((p) => p.text)?.text ?? '') || fileStem(input.filename)
    return { title, doc_type: 'pdf', pages }
  } catch (err) {
    if (err instanceof Error && err.name === 'AppError') throw err
    throw failure(err, bytes)
  } finally {
    await pdf.destroy().catch(() => undefined)
  }
}
