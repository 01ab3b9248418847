// HWPX (OWPML, KS X 6101): a zip of XML parts. The text is read from Contents/section*.xml: <hp:t> runs make
// a paragraph (<hp:p>), table cells are joined with ' | ' per row, and paragraphs whose style is a bullet or
// numbering level (Contents/header.xml) get '- ' or 'n. ' markers. A manifest with encryption data means a
// password-protected document.
import type { ParsedDocument } from '../types.ts'
import { ParseCode, parseError } from './errors.ts'
import type { ParserInput } from './registry.ts'
import { collapseSpaces, decodeXmlEntities, fileStem, firstLine, normalizeText } from './text-util.ts'
import { isCfb, isZip, readZipGuarded } from './zip.ts'

interface ParaHeading {
  type: 'BULLET' | 'NUMBER' | 'OUTLINE'
  idRef: string
  level: number
}

/** paraPr id -> its list role, from header.xml. */
function paragraphHeadings(headerXml: string): Map<string, ParaHeading> {
  const out = new Map<string, ParaHeading>()
  const re = /<hh:paraPr\b[^>]*\bid="(\d+)"[^>]*>([\s\S]*?)<\/hh:paraPr>/g
  for (let m = re.exec(headerXml); m; m = re.exec(headerXml)) {
    const h = /<hh:heading\b[^>]*\btype="(BULLET|NUMBER|OUTLINE)"[^>]*>/.exec(m[2])
    if (!h) continue
    const idRef = /\bidRef="(\d+)"/.exec(h[0])?.[1] ?? '0'
    const level = Number(/\blevel="(\d+)"/.exec(h[0])?.[1] ?? '0')
    out.set(m[1], { type: h[1] as ParaHeading['type'], idRef, level })
  }
  return out
}

const TOKEN = /<(\/?)([A-Za-z_][\w:.-]*)([^>]*?)(\/?)>|([^<]+)|<[^>]*>/g
const INLINE_MARKS: Record<string, string> = { 'hp:tab': '\t', 'hp:lineBreak': '\n', 'hp:fwSpace': ' ', 'hp:nbSpace': ' ', 'hp:hyphen': '-' }

type Container = { kind: 'cell'; parts: string[] } | { kind: 'table'; row: string[] | null }

/** Text lines of one section's XML. */
export function owpmlSectionText(xml: string, headings: Map<string, ParaHeading>, counters: Map<string, number[]>): string[] {
  const lines: string[] = []
  const paras: { text: string; prRef: string }[] = []
  const containers: Container[] = []
  let inText = 0
  const topCell = () => {
    const top = containers.at(-1)
    return top?.kind === 'cell' ? top : null
  }
  const emit = (line: string) => {
    const cell = topCell()
    if (cell) cell.parts.push(line)
    else lines.push(line)
  }
  const marker = (prRef: string): string => {
    const h = headings.get(prRef)
    if (!h) return ''
    const indent = '  '.repeat(h.level)
    if (h.type === 'BULLET') return `${indent}- `
    const key = `${h.type}:${h.idRef}`
    const c = counters.get(key) ?? []
    c[h.level] = (c[h.level] ?? 0) + 1
    c.length = h.level + 1
    counters.set(key, c)
    return `${indent}${c[h.level]}. `
  }

  TOKEN.lastIndex = 0
  for (let m = TOKEN.exec(xml); m; m = TOKEN.exec(xml)) {
    const [, closing, name, attrs, selfClosing, text] = m
    if (text !== undefined) {
      if (inText > 0 && paras.length) paras[paras.length - 1].text += decodeXmlEntities(text)
      continue
    }
    if (!name) continue
    if (name === 'hp:t') {
      if (!selfClosing) inText += closing ? -1 : 1
      continue
    }
    if (inText > 0 && INLINE_MARKS[name] !== undefined && paras.length) {
      paras[paras.length - 1].text += INLINE_MARKS[name]
      continue
    }
    if (name === 'hp:p') {
      if (selfClosing) continue
      if (!closing) {
        paras.push({ text: '', prRef: /\bparaPrIDRef="(\d+)"/.exec(attrs)?.[1] ?? '' })
        continue
      }
      const p = paras.pop()
      if (!p) continue
      const body = p.text.replace(/[ \t]+$/gm, '')
      if (topCell()) emit(collapseSpaces(body))
      else emit(body.trim() ? `${marker(p.prRef)}${body.trim()}` : '')
      continue
    }
    if (name === 'hp:tbl' && !selfClosing) {
      if (!closing) containers.push({ kind: 'table', row: null })
      else {
        containers.pop()
        if (!topCell()) lines.push('')
      }
      continue
    }
    const table = containers.at(-1)
    if (name === 'hp:tr' && !selfClosing && table?.kind === 'table') {
      if (!closing) table.row = []
      else {
        const row = table.row ?? []
        table.row = null
        // A table nested in a cell adds its rows to that cell.
        const enclosing = containers.at(-2)
        if (row.some((c) => c)) (enclosing?.kind === 'cell' ? enclosing.parts : lines).push(row.join(' | '))
      }
      continue
    }
    if (name === 'hp:tc' && !selfClosing) {
      if (!closing) containers.push({ kind: 'cell', parts: [] })
      else {
        const cell = containers.pop()
        const owner = containers.at(-1)
        if (cell?.kind === 'cell' && owner?.kind === 'table') owner.row?.push(collapseSpaces(cell.parts.join(' ')))
      }
    }
  }
  return lines
}

export async function parseHwpx(input: ParserInput): Promise<ParsedDocument> {
  const { bytes } = input
  if (bytes.length === 0) throw parseError(ParseCode.EMPTY, 'file is empty')
  if (isCfb(bytes)) throw parseError(ParseCode.CORRUPT, 'corrupt HWPX: this is an HWP 5 (compound) file; name it .hwp')
  if (!isZip(bytes)) throw parseError(ParseCode.CORRUPT, 'corrupt HWPX: not a zip archive')
  const { directory, files } = readZipGuarded(bytes, 'HWPX', (n) => n.startsWith('Contents/') || n === 'META-INF/manifest.xml')
  const decode = (name: string) => {
    const f = files.get(name)
    return f ? new TextDecoder().decode(f) : ''
  }
  if (/<[\w:]*encryption-data\b/.test(decode('META-INF/manifest.xml'))) {
    throw parseError(ParseCode.ENCRYPTED, 'encrypted HWPX document is not supported: it is protected by a password')
  }
  const sections = [...directory.keys()]
    .filter((n) => /^Contents\/section\d+\.xml$/.test(n))
    .sort((a, b) => Number(/\d+/.exec(a.slice(9))![0]) - Number(/\d+/.exec(b.slice(9))![0]))
  if (sections.length === 0) throw parseError(ParseCode.CORRUPT, 'corrupt HWPX: no Contents/section*.xml (this zip is not an HWPX document)')
  const headings = paragraphHeadings(decode('Contents/header.xml'))
  const counters = new Map<string, number[]>()
  const lines: string[] = []
  for (const s of sections) lines.push(...owpmlSectionText(decode(s), headings, counters), '')
  const text = normalizeText(lines.join('\n'))
  if (!text) throw parseError(ParseCode.NO_CONTENT, 'HWPX document contains no text')
  const hpfTitle = /<opf:title>([\s\S]*?)<\/opf:title>/.exec(decode('Contents/content.hpf'))?.[1]
  const title = (hpfTitle ? collapseSpaces(decodeXmlEntities(hpfTitle)) : '') || firstLine(text) || fileStem(input.filename)
  return { title, doc_type: 'hwpx', pages: [{ page_num: 1, page_label: '1', text }] }
}
