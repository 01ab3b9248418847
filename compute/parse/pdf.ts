// PDF through unpdf, which bundles pdf.js 5.6 built for serverless use: it runs in a worker thread with no
// DOM, no canvas and no pdf.js worker file to locate (pdf.js runs its "worker" in the calling thread, which is
// what a pool thread wants). Text is rebuilt per page from the text items (hasEOL and y positions make the
// lines), page labels come from /PageLabels.
//
// pdf.js's two halves, the API and the "worker" that parses, talk through a port. Left to itself, pdf.js gives
// every document its own in-thread worker joined by a port that structured-clones each message, so every text
// chunk of every page is copied once more. This parser instead keeps one pdf.js worker per thread, set up
// through pdf.js's public API (a PDFWorker on a given port, and the WorkerMessageHandler that the bundle
// registers on globalThis.pdfjsWorker), joined by InThreadPort, which hands messages over without copying.
import { createRequire } from 'node:module'
import path from 'node:path'
import { getResolvedPDFJS } from 'unpdf'
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

type Listener = (this: InThreadPort, event: { data: unknown }) => void

/**
 * Both ends of pdf.js's message channel in one thread: a message reaches the listeners a microtask after it is
 * posted, as with pdf.js's own LoopbackPort, but as it is rather than structured-cloned, and transfer lists are
 * ignored (nothing needs detaching in one thread). That is safe for what this parser asks for (document, pages,
 * text content, page labels, metadata): each of these messages is built for sending and not changed after it is
 * sent (text chunks are replaced, not emptied). Operator lists are, so this port must not carry rendering.
 * Listeners go when their AbortSignal fires: pdf.js removes each document's handlers that way on destroy().
 */
export class InThreadPort {
  readonly #listeners = new Set<Listener>()

  postMessage(data: unknown): void {
    const m = data as { chunk?: unknown }
    // A stream chunk's sender reuses the chunk object (its fields are replaced for the next chunk): copy that
    // level. Byte chunks (a range reader's, which this parser does not use) are new arrays, passed as they are.
    if (m !== null && typeof m === 'object' && m.chunk !== null && typeof m.chunk === 'object' && !ArrayBuffer.isView(m.chunk)) {
      data = { ...m, chunk: { ...m.chunk } }
    }
    const event = { data }
    queueMicrotask(() => {
      for (const listener of this.#listeners) listener.call(this, event)
    })
  }

  addEventListener(_type: 'message', listener: Listener, options?: { signal?: AbortSignal } | null): void {
    const signal = options?.signal
    if (signal?.aborted) return
    this.#listeners.add(listener)
    signal?.addEventListener('abort', () => this.#listeners.delete(listener), { once: true })
  }

  removeEventListener(_type: 'message', listener: Listener): void {
    this.#listeners.delete(listener)
  }

  terminate(): void {
    this.#listeners.clear()
  }

  /** Listeners attached now: two for the worker itself, two more per open document. */
  get listenerCount(): number {
    return this.#listeners.size
  }
}

/**
 * Adobe's predefined CMaps (UniKS-UCS2-H, Adobe-Korea1-UCS2, UniJIS-UTF16-H, ...), shipped in pdfjs-dist at the
 * version unpdf bundles. pdf.js needs them to read text set in a CJK font that the PDF names but does not embed,
 * as Korean PDFs made by TCPDF, FPDF and many office tools do (HYSMyeongJo-Medium with UniKS-UCS2-H); without
 * them such a page has no extractable text. A directory path: pdf.js reads it with fs.readFile in Node.
 */
const CMAP_DIR = `${path.join(path.dirname(createRequire(import.meta.url).resolve('pdfjs-dist/package.json')), 'cmaps')}${path.sep}`

type PdfJs = Awaited<ReturnType<typeof getResolvedPDFJS>>
interface WorkerMessageHandler {
  initializeFromPort(port: InThreadPort): void
}

let shared: Promise<{ pdfjs: PdfJs; port: InThreadPort; worker: InstanceType<PdfJs['PDFWorker']> }> | undefined

/**
 * Listeners past which the shared worker is replaced. Each open document holds two; a document whose destroy()
 * failed would hold its two for good, so a port that has gathered this many is left to the documents still on
 * it and the next document starts a new worker.
 */
const PORT_LISTENER_LIMIT = 2 + 2 * 256

/** This thread's pdf.js and its one worker, made on first use. */
function pdfjsWorker() {
  if (shared === undefined) {
    shared = makeWorker()
    shared.catch(() => {
      shared = undefined
    })
  }
  return shared
}

async function makeWorker() {
  const pdfjs = await getResolvedPDFJS()
  const handler = (globalThis as { pdfjsWorker?: { WorkerMessageHandler?: WorkerMessageHandler } }).pdfjsWorker?.WorkerMessageHandler
  if (!handler) throw new Error('pdf.js bundle did not register globalThis.pdfjsWorker.WorkerMessageHandler')
  const port = new InThreadPort()
  handler.initializeFromPort(port)
  const worker = new pdfjs.PDFWorker({ port: port as never, verbosity: 0 })
  await worker.promise
  return { pdfjs, port, worker }
}

/** The port of this thread's pdf.js worker, for tests: its listener count shows that closed documents let go. */
export async function pdfPort(): Promise<InThreadPort> {
  return (await pdfjsWorker()).port
}

export async function parsePdf(input: ParserInput): Promise<ParsedDocument> {
  const { bytes } = input
  if (bytes.length === 0) throw parseError(ParseCode.EMPTY, 'file is empty')
  if (!hasPdfHeader(bytes)) throw parseError(ParseCode.CORRUPT, 'corrupt PDF: not a PDF file (no %PDF- header)')
  const { pdfjs, port, worker } = await pdfjsWorker()
  if (port.listenerCount > PORT_LISTENER_LIMIT) shared = undefined
  let task: ReturnType<PdfJs['getDocument']> | undefined
  let pdf: Awaited<ReturnType<PdfJs['getDocument']>['promise']>
  try {
    // unpdf's getDocumentProxy options without its per-call module resolution, and no standard font files
    // (text needs only the metrics pdf.js has built in). The copy keeps the caller's bytes out of pdf.js's reach.
    task = pdfjs.getDocument({ data: bytes.slice(), worker, verbosity: 0, isEvalSupported: false, useSystemFonts: true, stopAtErrors: false, cMapUrl: CMAP_DIR, cMapPacked: true })
    pdf = await task.promise
  } catch (err) {
    // The worker is shared: a document that failed to open must still let go of its handlers there.
    await task?.destroy().catch(() => undefined)
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
