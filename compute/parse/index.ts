// parseDocument: bytes + file name -> ParsedDocument, by extension (then content type, then magic bytes).
// Format parsers are imported on first use, so a worker that never sees a PDF never loads pdf.js.
// Every failure is an AppError with a PARSE_* code and a message fit to be a document's last_error.
import { AppError } from '../../kernel/errors.ts'
import type { HtmlExtractionPolicy, ParsedDocument } from '../types.ts'
import { errorMessage, ParseCode, parseError } from './errors.ts'
import { createParserRegistry, loadParserPlugins } from './registry.ts'
import type { ParserFn, ParserInput, ParserRegistry } from './registry.ts'
import { fileExtension } from './text-util.ts'

export type { ParserFn, ParserInput, ParserRegistry, ParserRegistrar } from './registry.ts'
export { ParseCode } from './errors.ts'

export interface ParseDocumentInput {
  bytes: Uint8Array
  filename: string
  contentType?: string
  policy: HtmlExtractionPolicy
  /** ingestion.parser_plugins, in order. */
  parserPlugins?: readonly string[]
}

/**
 * A parser loaded on first use. The module's promise is kept: an import() of a module already loaded still
 * goes through the loader, and through tsx's hooks thread in a pool worker (about 0.2 ms per document).
 */
export function lazy<M>(load: () => Promise<M>, pick: (m: M) => ParserFn): ParserFn {
  let loaded: Promise<ParserFn> | undefined
  return async (input) => {
    if (!loaded) {
      const p = load().then(pick)
      loaded = p
      // A module that fails to load is tried again by the next call.
      p.catch(() => { if (loaded === p) loaded = undefined })
    }
    return (await loaded)(input)
  }
}

const pdf = lazy(() => import('./pdf.ts'), (m) => m.parsePdf)
const docx = lazy(() => import('./docx.ts'), (m) => m.parseDocx)
const hwp = lazy(() => import('./hwp.ts'), (m) => m.parseHwp)
const hwpx = lazy(() => import('./hwpx.ts'), (m) => m.parseHwpx)
const html = lazy(() => import('./html.ts'), (m) => m.parseHtml)
const md = lazy(() => import('./md.ts'), (m) => m.parseMarkdown)
const rst = lazy(() => import('./rst.ts'), (m) => m.parseRst)
const txt = lazy(() => import('./txt.ts'), (m) => m.parseTxt)

export const DEFAULT_PARSERS: Readonly<Record<string, ParserFn>> = {
  pdf, docx, hwp, hwpx, html, htm: html, xhtml: html, md, markdown: md, rst, rest: rst, txt, text: txt,
}

const BY_CONTENT_TYPE: Record<string, string> = {
  'application/pdf': 'pdf',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document': 'docx',
  'application/x-hwp': 'hwp',
  'application/haansofthwp': 'hwp',
  'application/vnd.hancom.hwp': 'hwp',
  'application/hwp+zip': 'hwpx',
  'application/vnd.hancom.hwpx': 'hwpx',
  'text/html': 'html',
  'application/xhtml+xml': 'html',
  'text/markdown': 'md',
  'text/x-markdown': 'md',
  'text/x-rst': 'rst',
  'text/prs.fallenstein.rst': 'rst',
  'text/plain': 'txt',
}

const registries = new Map<string, Promise<ParserRegistry>>()

/** The registry for this plugin list, loaded once per thread (the first parse pays for the imports). */
export function parserRegistry(plugins: readonly string[] = []): Promise<ParserRegistry> {
  const key = JSON.stringify(plugins)
  let reg = registries.get(key)
  if (!reg) {
    reg = (async () => {
      const r = createParserRegistry({ ...DEFAULT_PARSERS })
      await loadParserPlugins(r, plugins)
      return r
    })()
    // A plugin that failed to load is tried again at the next parse (it may have been fixed).
    reg.catch(() => registries.delete(key))
    registries.set(key, reg)
  }
  return reg
}

function sniff(bytes: Uint8Array): string {
  const head = new TextDecoder('latin1').decode(bytes.subarray(0, 1024))
  if (head.includes('%PDF-')) return 'pdf'
  if (/^\s*(<!doctype html|<html)/i.test(head)) return 'html'
  return ''
}

function checkDocument(doc: unknown, ext: string): ParsedDocument {
  const d = doc as ParsedDocument
  const bad = (why: string) => parseError(ParseCode.PLUGIN, `the parser for .${ext} returned an invalid document: ${why}`)
  if (d === null || typeof d !== 'object') throw bad('not an object')
  if (typeof d.title !== 'string') throw bad('title is not a string')
  if (typeof d.doc_type !== 'string' || !d.doc_type) throw bad('doc_type is missing')
  if (!Array.isArray(d.pages) || d.pages.length === 0) throw bad('pages is not a non-empty array')
  const pages = d.pages.map((p, i) => {
    if (typeof p?.text !== 'string') throw bad(`pages[${i}].text is not a string`)
    const page_num = Number.isInteger(p.page_num) && p.page_num > 0 ? p.page_num : i + 1
    return { page_num, page_label: typeof p.page_label === 'string' && p.page_label ? p.page_label : String(page_num), text: p.text }
  })
  return { title: d.title, doc_type: d.doc_type, pages }
}

const DEFAULT_PARSER_SET = new Set<ParserFn>(Object.values(DEFAULT_PARSERS))
const STASHED_DECOMPRESSION_STREAM = Symbol.for('quarry.DecompressionStream')

/**
 * Runs a plugin's parser with the DecompressionStream global that compute/worker.mjs takes out of pool threads
 * (so that pdf.js uses its own, faster inflate) put back: a plugin sees the same globals in the pool as in its
 * own tests. A pool thread runs one task at a time, so nothing else runs meanwhile.
 */
async function withWebGlobals<T>(fn: () => Promise<T> | T): Promise<T> {
  const g = globalThis as Record<PropertyKey, unknown>
  const stashed = g[STASHED_DECOMPRESSION_STREAM] as PropertyDescriptor | undefined
  if (stashed === undefined || 'DecompressionStream' in g) return fn()
  Object.defineProperty(g, 'DecompressionStream', stashed)
  try {
    return await fn()
  } finally {
    delete g.DecompressionStream
  }
}

export async function parseDocument(req: ParseDocumentInput): Promise<ParsedDocument> {
  const registry = await parserRegistry(req.parserPlugins ?? [])
  let ext = fileExtension(req.filename)
  if (!registry.get(ext)) {
    const ct = req.contentType?.split(';')[0].trim().toLowerCase()
    ext = (ct && BY_CONTENT_TYPE[ct]) || sniff(req.bytes) || ext
  }
  const parser = registry.get(ext)
  if (!parser) {
    const what = ext ? `'.${ext}'` : `of '${req.filename}' (no extension)`
    throw parseError(ParseCode.UNSUPPORTED, `unsupported file type ${what}: supported types are ${registry.extensions().sort().join(', ')}`)
  }
  const input: ParserInput = { bytes: req.bytes, filename: req.filename, contentType: req.contentType, policy: req.policy, extension: ext }
  let doc: ParsedDocument
  try {
    doc = DEFAULT_PARSER_SET.has(parser) ? await parser(input) : await withWebGlobals(() => parser(input))
  } catch (err) {
    if (err instanceof AppError) throw err
    throw parseError(ParseCode.FAILED, `could not parse the .${ext} file: ${errorMessage(err)}`, err)
  }
  return checkDocument(doc, ext)
}
