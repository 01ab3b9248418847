// Markdown to plain text that keeps the structure a chunker and a reader need: headings and list items on
// their own lines, tables as rows of cells, code blocks verbatim; emphasis, link and image syntax removed
// (link and alt text kept).
import type { ParsedDocument } from '../types.ts'
import { decodeText } from './encoding.ts'
import { ParseCode, parseError } from './errors.ts'
import type { ParserInput } from './registry.ts'
import { collapseSpaces, decodeXmlEntities, fileStem, normalizeText } from './text-util.ts'

const FENCE = /^(\s{0,3})(`{3,}|~{3,})(.*)$/
const ATX = /^\s{0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/
const SETEXT = /^\s{0,3}(=+|-+)\s*$/
const HR = /^\s{0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/
const QUOTE = /^\s{0,3}>[ \t]?/
const BULLET = /^(\s*)([-*+])[ \t]+(\[[ xX]\][ \t]+)?(.*)$/
const ORDERED = /^(\s*)(\d{1,9})([.)])[ \t]+(.*)$/
const TABLE_SEP = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/
const REF_DEF = /^\s{0,3}\[[^\]]+\]:\s*\S+/
const FRONT_TITLE = /^title:\s*(.+?)\s*$/m

/** Markdown inline syntax to text. Code spans are protected first so their content is kept as written. */
export function stripInline(s: string): string {
  const codes: string[] = []
  let out = s.replace(/(`+)(.+?)\1(?!`)/g, (_m, _t, code: string) => {
    codes.push(code.length > 2 && code.startsWith(' ') && code.endsWith(' ') ? code.slice(1, -1) : code)
    return `\u0000${codes.length - 1}\u0000`
  })
  out = out
    .replace(/!\[([^\]]*)\]\((?:[^()\s]|\([^)]*\))*(?:\s+"[^"]*")?\)/g, '$1')
    .replace(/!\[([^\]]*)\]\[[^\]]*\]/g, '$1')
    .replace(/\[([^\]]+)\]\((?:[^()\s]|\([^)]*\))*(?:\s+"[^"]*")?\)/g, '$1')
    .replace(/\[([^\]]+)\]\[[^\]]*\]/g, '$1')
    .replace(/<((?:https?|ftp|mailto):[^>\s]+)>/g, '$1')
    .replace(/<br\s*\/?>/gi, ' ')
    .replace(/<\/?[a-zA-Z][^>]*>/g, '')
    .replace(/(\*\*|__)(?=\S)(.+?)(?<=\S)\1/g, '$2')
    .replace(/~~(?=\S)(.+?)(?<=\S)~~/g, '$1')
    .replace(/\*(?=[^\s*])(.+?)(?<=[^\s*])\*/g, '$1')
    .replace(/(?<![\p{L}\p{N}_])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![\p{L}\p{N}_])/gu, '$1')
    .replace(/\\([\\`*_{}[\]()#+\-.!|>~<])/g, '$1')
  out = decodeXmlEntities(out)
  return out.replace(/\u0000(\d+)\u0000/g, (_m, i: string) => codes[Number(i)])
}

function splitRow(line: string): string[] {
  const cells = line.trim().replace(/^\|/, '').replace(/(?<!\\)\|$/, '').split(/(?<!\\)\|/)
  return cells.map((c) => collapseSpaces(stripInline(c.trim())))
}

export interface MarkdownText {
  text: string
  /** Text of the first heading, if any. */
  firstHeading?: string
  /** title: from a YAML front matter block, if any. */
  frontTitle?: string
}

export function markdownToText(src: string): MarkdownText {
  let lines = src.replace(/\r\n?/g, '\n').split('\n')
  let frontTitle: string | undefined
  if (lines[0]?.trim() === '---') {
    const end = lines.findIndex((l, i) => i > 0 && (l.trim() === '---' || l.trim() === '...'))
    if (end > 0 && end < 200) {
      const m = FRONT_TITLE.exec(lines.slice(1, end).join('\n'))
      if (m) frontTitle = m[1].replace(/^(['"])(.*)\1$/, '$2').trim() || undefined
      lines = lines.slice(end + 1)
    }
  }
  const out: string[] = []
  let firstHeading: string | undefined
  let fence: { char: string; len: number; indent: number } | null = null
  let inComment = false
  let lastBlock: 'blank' | 'list' | 'para' | 'other' = 'blank'
  let lastList: 'bullet' | 'ordered' | null = null
  const heading = (text: string) => {
    const t = collapseSpaces(stripInline(text))
    if (!t) return
    firstHeading ??= t
    out.push('', t, '')
    lastBlock = 'other'
  }

  for (let i = 0; i < lines.length; i++) {
    let line = lines[i]
    if (fence) {
      const close = FENCE.exec(line)
      if (close && close[2][0] === fence.char && close[2].length >= fence.len && close[3].trim() === '') {
        fence = null
        out.push('')
      } else {
        out.push(line.slice(Math.min(fence.indent, line.length - line.trimStart().length)))
      }
      continue
    }
    if (inComment) {
      if (line.includes('-->')) inComment = false
      continue
    }
    const open = FENCE.exec(line)
    if (open && !(open[2][0] === '`' && open[3].includes('`'))) {
      fence = { char: open[2][0], len: open[2].length, indent: open[1].length }
      out.push('')
      lastBlock = 'other'
      continue
    }
    if (line.trimStart().startsWith('<!--')) {
      if (!line.includes('-->')) inComment = true
      continue
    }
    if (line.trim() === '') {
      out.push('')
      if (lastBlock !== 'list') lastBlock = 'blank'
      else lastBlock = 'list'
      continue
    }
    // Indented code: four spaces after a blank line, outside a list.
    if (/^( {4}|\t)/.test(line) && (lastBlock === 'blank' || lastBlock === 'other') && out.at(-1) === '') {
      out.push(line.replace(/^( {4}|\t)/, ''))
      lastBlock = 'other'
      continue
    }
    while (QUOTE.test(line)) line = line.replace(QUOTE, '')
    if (REF_DEF.test(line)) continue
    const atx = ATX.exec(line)
    if (atx) {
      heading(atx[2] ?? '')
      continue
    }
    const next = lines[i + 1]
    if (next !== undefined && SETEXT.test(next) && lastBlock !== 'para' && !BULLET.test(line) && !ORDERED.test(line) && !HR.test(line)) {
      heading(line)
      i++
      continue
    }
    if (HR.test(line)) {
      out.push('')
      lastBlock = 'other'
      continue
    }
    if (line.includes('|') && next !== undefined && TABLE_SEP.test(next) && next.includes('-')) {
      const row = (l: string) => {
        const cells = splitRow(l)
        if (cells.some((c) => c)) out.push(cells.join(' | '))
      }
      out.push('')
      row(line)
      i++
      while (i + 1 < lines.length && lines[i + 1].includes('|') && lines[i + 1].trim() !== '') row(lines[++i])
      out.push('')
      lastBlock = 'other'
      continue
    }
    const bullet = BULLET.exec(line)
    // Items of one list stay on consecutive lines even when the source puts blank lines between them.
    const kind = bullet ? 'bullet' : ORDERED.test(line) ? 'ordered' : null
    if (kind && lastBlock === 'list' && kind === lastList) while (out.at(-1) === '') out.pop()
    if (kind) lastList = kind
    if (bullet) {
      const level = Math.floor(bullet[1].replace(/\t/g, '    ').length / 2)
      const task = bullet[3] ? `[${bullet[3].trim()[1] === ' ' ? ' ' : 'x'}] ` : ''
      out.push(`${'  '.repeat(level)}- ${task}${stripInline(bullet[4]).trim()}`)
      lastBlock = 'list'
      continue
    }
    const ordered = ORDERED.exec(line)
    if (ordered) {
      const level = Math.floor(ordered[1].replace(/\t/g, '    ').length / 2)
      out.push(`${'  '.repeat(level)}${ordered[2]}. ${stripInline(ordered[4]).trim()}`)
      lastBlock = 'list'
      continue
    }
    if (lastBlock === 'list' && /^\s+\S/.test(line)) {
      // Continuation of a list item: keep it under the item.
      out.push(`  ${stripInline(line.trim())}`)
      continue
    }
    out.push(stripInline(line.trim()))
    lastBlock = 'para'
  }
  return { text: normalizeText(out.join('\n')), firstHeading, frontTitle }
}

export function parseMarkdown(input: ParserInput): ParsedDocument {
  const { text: src } = decodeText(input.bytes)
  const md = markdownToText(src)
  if (!md.text) throw parseError(ParseCode.EMPTY, 'file is empty: the Markdown has no text')
  return {
    title: md.frontTitle ?? md.firstHeading ?? fileStem(input.filename),
    doc_type: 'md',
    pages: [{ page_num: 1, page_label: '1', text: md.text }],
  }
}
