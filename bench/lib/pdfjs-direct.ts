// The parse benchmark's baseline: open with pdf.js (the build the parser uses, via unpdf) and read every
// page's text items, one PDF after another, in the calling thread. Shared by the benchmark's main thread and
// its plain worker threads (pdfjs-thread.mjs), so both run the same work.
import { getDocumentProxy } from 'unpdf'

export async function directPdfjs(pdfs: readonly Uint8Array[]): Promise<number> {
  let pages = 0
  for (const bytes of pdfs) {
    const pdf = await getDocumentProxy(bytes.slice(), { verbosity: 0, isEvalSupported: false })
    for (let n = 1; n <= pdf.numPages; n++) {
      const page = await pdf.getPage(n)
      const content = await page.getTextContent()
      let text = ''
      for (const it of content.items) if ('str' in it) text += it.str + (it.hasEOL ? '\n' : '')
      if (text.length === 0) throw new Error('no text extracted')
      page.cleanup()
      pages++
    }
    await pdf.destroy()
  }
  return pages
}
