// docx: mammoth turns the document into semantic HTML (headings from Word's heading styles, lists, tables),
// and the block-keeping DOM walker turns that into text. The zip is size-checked before mammoth opens it.
//
// Pages: a docx stores no pages of its own; the layout is made by whoever renders it. Word records where its
// pages started when it last saved the file (<w:lastRenderedPageBreak/>), and that is what this parser reads:
// with those marks the text is split into Word's pages (hard page breaks start a page too, and a hard break
// followed by Word's mark counts once). A file with no such mark (written by a library, never laid out) is
// one page: numbering pages by its hard breaks alone would cite page 2 for text that may well be on page 9.
import mammoth from 'mammoth'
import { parseHTML } from 'linkedom'
import { unzipSync } from 'fflate'
import type { PageText, ParsedDocument } from '../types.ts'
import { errorMessage, ParseCode, parseError } from './errors.ts'
import { domToText } from './html-text.ts'
import type { ParserInput } from './registry.ts'
import { collapseSpaces, decodeXmlEntities, fileStem, normalizeText } from './text-util.ts'
import { isCfb, isZip, readZipGuarded } from './zip.ts'

/** True when a CFB (OLE) file holds an 'EncryptedPackage' stream: how Office stores a password-protected docx. */
function isEncryptedOoxml(bytes: Uint8Array): boolean {
  const marker = Buffer.from('EncryptedPackage', 'utf16le')
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).includes(marker)
}

export function coreTitle(coreXml: Uint8Array | undefined): string {
  if (!coreXml) return ''
  const m = /<dc:title>([\s\S]*?)<\/dc:title>/.exec(new TextDecoder().decode(coreXml))
  return m ? collapseSpaces(decodeXmlEntities(m[1])) : ''
}

/** A private-use character put where a page starts; it goes through mammoth and the DOM walker as text. */
const PAGE_MARK = '\uE000'
const MAIN_PART = /^word\/document\d*\.xml$/
const RENDERED_BREAK = /<w:lastRenderedPageBreak\s*\/>/g
const HARD_BREAK = /<w:br\b[^>]*\bw:type="page"[^>]*\/>/g

/**
 * The main document part with a page mark as run text at every page start Word recorded, or null when Word
 * recorded none (or the text already holds the mark character, which would then be ambiguous).
 */
export function markPages(xml: string): string | null {
  if (!xml.includes('<w:lastRenderedPageBreak') || xml.includes(PAGE_MARK)) return null
  const mark = `<w:t>${PAGE_MARK}</w:t>`
  return xml.replace(RENDERED_BREAK, mark).replace(HARD_BREAK, mark)
}

/** Pages of the text at its marks; marks with only blank text between them are one page start. */
export function splitPages(text: string): PageText[] {
  const parts = text.split(PAGE_MARK)
  const pages: PageText[] = [{ page_num: 1, page_label: '1', text: normalizeText(parts[0]) }]
  for (let i = 1; i < parts.length; i++) {
    const t = normalizeText(parts[i])
    if (t === '' && i < parts.length - 1) continue
    const n = pages.length + 1
    pages.push({ page_num: n, page_label: String(n), text: t })
  }
  return pages
}

/**
 * What mammoth reads a docx through (its `file` input, the interface it opens a buffer into): the parts inflated
 * here, the main part page-marked, any other part (media, which the image converter never reads) on demand.
 */
function markedDocx(bytes: Uint8Array, directory: Map<string, number>, files: Map<string, Uint8Array>, marked: Map<string, string>) {
  return {
    exists: (name: string) => directory.has(name),
    read: async (name: string, encoding?: string) => {
      const m = marked.get(name)
      if (m !== undefined) return encoding ? m : new TextEncoder().encode(m)
      const data = files.get(name) ?? unzipSync(bytes, { filter: (f) => f.name === name })[name]
      if (data === undefined) throw new Error(`no ${name} in the docx`)
      return encoding ? new TextDecoder(encoding).decode(data) : data
    },
  }
}

export async function parseDocx(input: ParserInput): Promise<ParsedDocument> {
  const { bytes } = input
  if (bytes.length === 0) throw parseError(ParseCode.EMPTY, 'file is empty')
  if (isCfb(bytes)) {
    if (isEncryptedOoxml(bytes)) throw parseError(ParseCode.ENCRYPTED, 'encrypted docx is not supported: it is protected by a password')
    throw parseError(ParseCode.UNSUPPORTED, 'legacy Word 97-2003 (.doc) file is not supported: save it as .docx')
  }
  if (!isZip(bytes)) throw parseError(ParseCode.CORRUPT, 'corrupt docx: not a zip archive')
  // Only the parts mammoth reads are inflated here (the checks count their real size); media stay packed.
  const { directory, files } = readZipGuarded(bytes, 'docx', (name) => name.endsWith('.xml') || name.endsWith('.rels'))
  if (![...directory.keys()].some((n) => MAIN_PART.test(n))) {
    throw parseError(ParseCode.CORRUPT, 'corrupt docx: no word/document.xml (this zip is not a Word document)')
  }
  const marked = new Map<string, string>()
  for (const [name, data] of files) {
    if (!MAIN_PART.test(name)) continue
    const xml = markPages(new TextDecoder().decode(data))
    if (xml !== null) marked.set(name, xml)
  }
  let html: string
  try {
    const result = await mammoth.convertToHtml(
      marked.size > 0 ? ({ file: markedDocx(bytes, directory, files, marked) } as never) : { buffer: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) },
      {
        externalFileAccess: false,
        // Images carry no text: do not inflate and base64 them into the HTML.
        convertImage: mammoth.images.imgElement(async () => ({ src: '' })),
      },
    )
    html = result.value
  } catch (err) {
    throw parseError(ParseCode.CORRUPT, `corrupt docx: ${errorMessage(err)}`, err)
  }
  const { document } = parseHTML(`<!doctype html><html><body>${html}</body></html>`)
  const text = domToText(document.body as never)
  const pages = marked.size > 0 ? splitPages(text) : [{ page_num: 1, page_label: '1', text }]
  if (!pages.some((p) => p.text)) throw parseError(ParseCode.NO_CONTENT, 'docx contains no text')
  const heading = document.querySelector('h1, h2, h3, h4, h5, h6')?.textContent?.replaceAll(PAGE_MARK, ' ')
  const title = coreTitle(files.get('docProps/core.xml')) || (heading ? collapseSpaces(heading) : '') || fileStem(input.filename)
  return { title, doc_type: 'docx', pages }
}
