// Corpus entries as uploadable files. Names are positional (doc-000042.txt), not the corpus ids: BEIR ids
// may hold spaces, slashes or Hangul ("finance - 지방은행 ... .pdf - 4"), and search results name their
// document by the uploaded file name (`source`), which maps back to the id through this table.
//
// Plain text by default, not markdown: the markdown parser drops emphasis and link syntax, and scientific
// abstracts are full of `*`, `_` and `[...]` that carry meaning (p*, gene_names). The title goes first, as a
// line of its own, so it is searched with the body as BEIR's baselines do (title + text). `md` writes the
// title as a heading instead, so the parser reports it as the document title (a .txt file's title is its
// file name).
import type { CorpusDoc } from './beir.ts'
import type { UploadFile } from './client.ts'

const enc = new TextEncoder()

export type CorpusFormat = 'txt' | 'md'

export function corpusText(doc: CorpusDoc, format: CorpusFormat = 'txt'): string {
  const title = doc.title.trim()
  if (!title) return doc.text
  // A heading is one line.
  return format === 'md' ? `# ${title.replace(/\s+/g, ' ')}\n\n${doc.text}` : `${title}\n\n${doc.text}`
}

export interface CorpusFiles {
  files: UploadFile[]
  /** Uploaded file name -> corpus id. */
  idBySource: Map<string, string>
}

export function corpusFiles(corpus: readonly CorpusDoc[], format: CorpusFormat = 'txt'): CorpusFiles {
  const width = Math.max(6, String(corpus.length).length)
  const idBySource = new Map<string, string>()
  const files = corpus.map((doc, i) => {
    const name = `doc-${String(i).padStart(width, '0')}.${format}`
    idBySource.set(name, doc.id)
    return { name, bytes: enc.encode(corpusText(doc, format)) }
  })
  return { files, idBySource }
}
