// reStructuredText to plain text: underlined (and overlined) section titles become heading lines, lists and
// field lists keep their markers, tables become rows of cells joined with ' | ', literal and code blocks stay
// verbatim, and directive markup is dropped while their prose is kept (admonitions as 'Note: ...',
// figures by caption); comments, targets, toctrees and other text-free directives are dropped entirely.
import type { ParsedDocument } from '../types.ts'
import { decodeText } from './encoding.ts'
import { ParseCode, parseError } from './errors.ts'
import type { ParserInput } from './registry.ts'
import { collapseSpaces, fileStem, normalizeText } from './text-util.ts'

const ADORNMENT = /^([!-/:-@[-`{-~])\1+$/
const SIMPLE_TABLE_BORDER = /^\s*=+(?: +=+)+\s*$/
const SIMPLE_TABLE_RULE = /^\s*-+(?: +-+)+\s*$/
const GRID_BORDER = /^\s*\+(?:[-=]+\+)+\s*$/
const GRID_ROW = /^\s*\|.*\|\s*$/
const EXPLICIT = /^(\s*)\.\.(?:\s+|$)/
const DIRECTIVE = /^\s*\.\.\s+([\w][\w:+-]*)::(?:\s+(.*))?$/
const SUBSTITUTION_DEF = /^\s*\.\.\s+\|[^|]+\|/
const TARGET = /^\s*\.\.\s+(?:_|__:)/
const FOOTNOTE = /^\s*\.\.\s+\[([^\]]+)\]\s*(.*)$/
const BULLET = /^(\s*)([-*+•‣⁃])\s+(.*)$/
const ENUMERATED = /^(\s*)(\(?(?:\d+|#|[a-zA-Z]|[ivxlcdm]+|[IVXLCDM]+)[.)])\s+(.*)$/
const FIELD = /^(\s*):([^:\s][^:]*?):(?:\s+(.*))?$/
const LINE_BLOCK = /^(\s*)\|(?:\s+(.*))?$/
const OPTION_LINE = /^\s*:[\w-][^:]*:(?:\s|$)/

const CODE_DIRECTIVES = new Set(['code-block', 'code', 'sourcecode', 'parsed-literal', 'math', 'doctest', 'testcode', 'testoutput', 'ipython', 'jupyter-execute', 'prompt'])
const SKIP_DIRECTIVES = new Set([
  'toctree', 'contents', 'include', 'literalinclude', 'raw', 'meta', 'index', 'highlight', 'sectnum', 'section-numbering',
  'default-role', 'role', 'class', 'rst-class', 'cssclass', 'target-notes', 'header', 'footer', 'autosummary', 'automodule',
  'autoclass', 'autofunction', 'automethod', 'autodata', 'autoattribute', 'autoexception', 'currentmodule', 'module',
  'tabularcolumns', 'graphviz', 'digraph', 'uml', 'replace', 'unicode', 'date',
])
const ADMONITIONS: Record<string, string> = {
  note: 'Note', warning: 'Warning', tip: 'Tip', important: 'Important', caution: 'Caution', danger: 'Danger',
  attention: 'Attention', hint: 'Hint', error: 'Error', seealso: 'See also', todo: 'To do',
  versionadded: 'New in version', versionchanged: 'Changed in version', deprecated: 'Deprecated since version',
}

const indentOf = (line: string) => line.length - line.trimStart().length

/** Display width: CJK characters take two columns, as docutils counts them for underlines. */
function width(s: string): number {
  let w = 0
  for (const ch of s) w += /[\u1100-\u115f\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6]/.test(ch) ? 2 : 1
  return w
}

const isAdornment = (line: string) => indentOf(line) === 0 && line.trimEnd().length >= 2 && ADORNMENT.test(line.trimEnd())

/** RST inline markup to text. */
export function stripRstInline(s: string): string {
  const literals: string[] = []
  let out = s.replace(/``(.+?)``/g, (_m, lit: string) => {
    literals.push(lit)
    return `\u0000${literals.length - 1}\u0000`
  })
  out = out
    .replace(/:[\w:+-]+:`([^`]*?)\s*<[^>`]*>`/g, '$1')
    .replace(/:[\w:+-]+:`([^`]*)`/g, (_m, c: string) => c.replace(/^[~!]/, ''))
    .replace(/`([^`]*?)\s*<[^>`]*>`__?/g, '$1')
    .replace(/`([^`]+)`(?::[\w:+-]+:|__?)?/g, '$1')
    .replace(/\[(#?[\w-]*|\*)\]_/g, '[$1]')
    .replace(/\|([^|\s][^|]*?)\|__?/g, '$1')
    .replace(/(?<=(?:^|[\s(])[A-Za-z0-9][\w.-]*?)__?(?=[\s.,;:!?)\]'"]|$)/g, '')
    .replace(/\*\*(?=\S)(.+?)(?<=\S)\*\*/g, '$1')
    .replace(/(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])/g, '$1')
    .replace(/\\ /g, '')
    .replace(/\\(.)/g, '$1')
  return out.replace(/\u0000(\d+)\u0000/g, (_m, i: string) => literals[Number(i)])
}

/** The lines of an indented block starting at `from`, ending before the first non-blank line at or left of `indent`. */
function blockEnd(lines: string[], from: number, indent: number): number {
  let j = from
  while (j < lines.length && (lines[j].trim() === '' || indentOf(lines[j]) > indent)) j++
  // Trailing blank lines belong to what follows.
  while (j > from && lines[j - 1].trim() === '') j--
  return j
}

function dedent(lines: string[]): string[] {
  const indents = lines.filter((l) => l.trim()).map(indentOf)
  const min = indents.length ? Math.min(...indents) : 0
  return lines.map((l) => l.slice(Math.min(min, indentOf(l))))
}

function splitCsvLine(line: string): string[] {
  const cells: string[] = []
  let cur = ''
  let quoted = false
  for (let i = 0; i < line.length; i++) {
    const c = line[i]
    if (c === '"') {
      if (quoted && line[i + 1] === '"') {
        cur += '"'
        i++
      } else quoted = !quoted
    } else if (c === ',' && !quoted) {
      cells.push(cur)
      cur = ''
    } else cur += c
  }
  cells.push(cur)
  return cells.map((c) => collapseSpaces(stripRstInline(c)))
}

/** list-table content: '* - a' starts a row, '  - b' adds a cell. */
function listTableRows(content: string[]): string[] {
  const rows: string[][] = []
  for (const line of content) {
    const row = /^\*\s+-\s+(.*)$/.exec(line.trim())
    const cell = /^-\s+(.*)$/.exec(line.trim())
    if (row) rows.push([row[1]])
    else if (cell && rows.length) rows.at(-1)!.push(cell[1])
    else if (line.trim() && rows.length) {
      const r = rows.at(-1)!
      r[r.length - 1] += ` ${line.trim()}`
    }
  }
  return rows.map((r) => r.map((c) => collapseSpaces(stripRstInline(c))).join(' | '))
}

interface RstContext {
  firstTitle?: string
  docTitle?: string
}

function convert(lines: string[], ctx: RstContext): string[] {
  const out: string[] = []
  const heading = (t: string) => {
    const text = collapseSpaces(stripRstInline(t))
    if (!text) return
    ctx.firstTitle ??= text
    out.push('', text, '')
  }
  let simpleTable = false
  let i = 0
  while (i < lines.length) {
    const line = lines[i]
    const trimmed = line.trim()
    if (!trimmed) {
      out.push('')
      i++
      continue
    }
    const indent = indentOf(line)
    const prevBlank = i === 0 || lines[i - 1].trim() === ''

    if (!simpleTable && isAdornment(line) && i + 2 < lines.length && lines[i + 1].trim() && isAdornment(lines[i + 2]) && lines[i + 2].trim()[0] === trimmed[0]) {
      heading(lines[i + 1])
      i += 3
      continue
    }
    if (!simpleTable && indent === 0 && prevBlank && !isAdornment(line) && i + 1 < lines.length && isAdornment(lines[i + 1])) {
      const under = lines[i + 1].trim()
      if (under.length >= Math.min(3, width(trimmed)) && !SIMPLE_TABLE_BORDER.test(lines[i + 1])) {
        heading(line)
        i += 2
        continue
      }
    }
    if (SIMPLE_TABLE_BORDER.test(line)) {
      const next = lines[i + 1]
      // A border opens a table; a border followed by a blank line (or the end) closes it.
      simpleTable = !simpleTable || (next !== undefined && next.trim() !== '')
      i++
      continue
    }
    if (simpleTable) {
      if (!SIMPLE_TABLE_RULE.test(line)) out.push(trimmed.split(/\s{2,}/).map((c) => stripRstInline(c)).join(' | '))
      i++
      continue
    }
    if (isAdornment(line) && prevBlank) {
      // A transition.
      out.push('')
      i++
      continue
    }
    if (GRID_BORDER.test(line)) {
      i++
      continue
    }
    if (GRID_ROW.test(line)) {
      const cells = trimmed.slice(1, -1).split('|').map((c) => collapseSpaces(stripRstInline(c)))
      if (cells.some((c) => c)) out.push(cells.join(' | '))
      i++
      continue
    }
    const explicit = EXPLICIT.exec(line)
    if (explicit) {
      const end = blockEnd(lines, i + 1, indent)
      const block = lines.slice(i + 1, end)
      i = end
      if (TARGET.test(line) || SUBSTITUTION_DEF.test(line)) continue
      const foot = FOOTNOTE.exec(line)
      if (foot) {
        out.push(`[${foot[1]}] ${stripRstInline(foot[2])}`.trimEnd(), ...convert(dedent(block), ctx))
        continue
      }
      const dir = DIRECTIVE.exec(line)
      if (dir) out.push(...directive(dir[1].toLowerCase(), dir[2]?.trim() ?? '', block, ctx))
      // Anything else after '..' is a comment.
      continue
    }
    const bullet = BULLET.exec(line)
    if (bullet) {
      out.push(`${'  '.repeat(Math.floor(indent / 2))}- ${stripRstInline(bullet[3])}`)
      i++
      continue
    }
    const en = ENUMERATED.exec(line)
    if (en) {
      const marker = en[2].startsWith('#') ? '-' : en[2].replace(/^\((.*)\)$/, '$1.')
      out.push(`${'  '.repeat(Math.floor(indent / 2))}${marker} ${stripRstInline(en[3])}`)
      i++
      continue
    }
    const field = FIELD.exec(line)
    if (field) {
      out.push(`${stripRstInline(field[2])}: ${stripRstInline(field[3] ?? '')}`.trimEnd())
      i++
      continue
    }
    const lb = LINE_BLOCK.exec(line)
    if (lb) {
      out.push(stripRstInline(lb[2] ?? ''))
      i++
      continue
    }
    if (trimmed.endsWith('::')) {
      // A literal block follows: '::' alone disappears, 'text ::' loses it, 'text::' keeps one colon.
      const text = trimmed === '::' ? '' : trimmed.endsWith(' ::') ? trimmed.slice(0, -3) : trimmed.slice(0, -1)
      if (text) out.push(stripRstInline(text))
      let j = i + 1
      while (j < lines.length && lines[j].trim() === '') j++
      if (j < lines.length && indentOf(lines[j]) > indent) {
        const end = blockEnd(lines, j, indent)
        out.push('', ...dedent(lines.slice(j, end)), '')
        i = end
      } else i++
      continue
    }
    out.push(stripRstInline(trimmed))
    i++
  }
  return out
}

function directive(name: string, args: string, block: string[], ctx: RstContext): string[] {
  let k = 0
  const options: Record<string, string> = {}
  while (k < block.length && OPTION_LINE.test(block[k])) {
    const m = /^\s*:([\w-][^:]*):\s*(.*)$/.exec(block[k])
    if (m) options[m[1].toLowerCase()] = m[2]
    k++
  }
  const content = dedent(block.slice(k))
  while (content.length && content[0].trim() === '') content.shift()

  if (name === 'title') {
    ctx.docTitle ??= collapseSpaces(stripRstInline(args)) || undefined
    return []
  }
  if (SKIP_DIRECTIVES.has(name)) return []
  if (CODE_DIRECTIVES.has(name)) return ['', ...content, '']
  if (name === 'image') return options.alt ? [stripRstInline(options.alt)] : []
  if (name === 'figure') return ['', ...(options.alt && content.length === 0 ? [stripRstInline(options.alt)] : []), ...convert(content, ctx), '']
  if (name === 'list-table') return ['', ...(args ? [stripRstInline(args)] : []), ...listTableRows(content), '']
  if (name === 'csv-table') {
    const header = options.header ? [splitCsvLine(options.header).join(' | ')] : []
    const rows = content.filter((l) => l.trim()).map((l) => splitCsvLine(l).join(' | '))
    return ['', ...(args ? [stripRstInline(args)] : []), ...header, ...rows, '']
  }
  const label = ADMONITIONS[name]
  if (label !== undefined || name === 'admonition') {
    const head = name === 'admonition' ? stripRstInline(args) : `${label}${args ? (label.endsWith('version') ? ` ${args}` : `: ${stripRstInline(args)}`) : ''}`
    const body = convert(content, ctx)
    // 'Note: first line' when the body is a plain paragraph; the heading on its own line otherwise.
    if (!args && body.length > 0 && body[0].trim() && !/^\s*(?:- |\d+\. )/.test(body[0])) return ['', `${head}: ${body[0].trim()}`, ...body.slice(1), '']
    return ['', head, ...body, '']
  }
  // Unknown and container-like directives (topic, sidebar, rubric, only, py:function, ...): their argument
  // as a line, then their content.
  return ['', ...(args ? [stripRstInline(args)] : []), ...convert(content, ctx), '']
}

export interface RstText {
  text: string
  /** `.. title::` if given, else the first section title. */
  title?: string
}

export function rstToText(src: string): RstText {
  const lines = src.replace(/\r\n?/g, '\n').replace(/\t/g, '        ').split('\n')
  const ctx: RstContext = {}
  const text = normalizeText(convert(lines, ctx).join('\n'))
  return { text, title: ctx.docTitle ?? ctx.firstTitle }
}

export function parseRst(input: ParserInput): ParsedDocument {
  const rst = rstToText(decodeText(input.bytes).text)
  if (!rst.text) throw parseError(ParseCode.EMPTY, 'file is empty: the reStructuredText has no text')
  return { title: rst.title ?? fileStem(input.filename), doc_type: 'rst', pages: [{ page_num: 1, page_label: '1', text: rst.text }] }
}
