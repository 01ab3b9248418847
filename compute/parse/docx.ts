// docx: mammoth turns the document into semantic HTML (headings from Word's heading styles, lists, tables),
// and the block-keeping DOM walker turns that into text. The zip is size-checked before mammoth opens it.
import mammoth from 'mammoth'
import { parseHTML } from 'linkedom'
import type { ParsedDocument } from '../types.ts'
import { errorMessage, ParseCode, parseError } from './errors.ts'
import { domToText } from './html-text.ts'
import type { ParserInput } from './registry.ts'
import { collapseSpaces, decodeXmlEntities, fileStem } from './text-util.ts'
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
  if (!directory.has('word/document.xml') && ![...directory.keys()].some((n) => /^word\/document\d*\.xml$/.test(n))) {
    throw parseError(ParseCode.CORRUPT, 'corrupt docx: no word/document.xml (this zip is not a Word document)')
  }
  let html: string
  try {
    const result = await mammoth.convertToHtml(
      { buffer: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) },
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
  if (!text) throw parseError(ParseCode.NO_CONTENT, 'docx contains no text')
  const heading = document.querySelector('h1, h2, h3, h4, h5, h6')?.textContent
  const title = coreTitle(files.get('docProps/core.xml')) || (heading ? collapseSpaces(heading) : '') || fileStem(input.filename)
  return { title, doc_type: 'docx', pages: [{ page_num: 1, page_label: '1', text }] }
}
