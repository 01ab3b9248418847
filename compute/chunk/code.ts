// Language-aware splitting of source files (the git connector's code extensions). Without tree-sitter
// grammars, a lexical scan gives each line its nesting depth: brackets for C-family languages (strings,
// comments, char literals, raw strings, template literals and regex literals skipped), indentation for
// Python, keywords (def/class/do ... end, if ... fi) plus brackets for Ruby and shell. A boundary between two
// lines is better the shallower it is, so the window-based splitter keeps top-level functions and classes
// whole when they fit code_max_chars and otherwise cuts at nested blocks, then blank lines, then lines.
import type { Chunk } from '../types.ts'
import { arrayFinder, isWs } from './breaks.ts'
import { splitByPage, toChunks, type DocumentText } from './document.ts'
import { splitRanges } from './ranges.ts'

type Family = 'c' | 'python' | 'ruby' | 'shell'

export interface LanguageSpec {
  name: string
  family: Family
  lineComments: string[]
  blockComment?: [string, string]
  nestedComments?: boolean
  /** 'char': 'x' and '\n' are literals, any other quote is a lifetime or symbol (Rust, Scala). */
  singleQuote: 'string' | 'raw' | 'char' | 'none'
  backtick: 'template' | 'raw' | 'string' | 'none'
  tripleQuotes: boolean
  regexLiterals?: boolean
  rawStrings?: 'rust' | 'cpp' | 'csharp'
  /** First tokens of lines that belong to the line before (decorators, annotations, attributes). */
  attachPrefixes: string[]
}

const C_COMMENTS = { lineComments: ['//'], blockComment: ['/*', '*/'] as [string, string] }

const JS: LanguageSpec = { name: 'javascript', family: 'c', ...C_COMMENTS, singleQuote: 'string', backtick: 'template', tripleQuotes: false, regexLiterals: true, attachPrefixes: ['@'] }
const TS: LanguageSpec = { ...JS, name: 'typescript' }

export const LANGUAGES: Record<string, LanguageSpec> = {
  py: { name: 'python', family: 'python', lineComments: ['#'], singleQuote: 'string', backtick: 'none', tripleQuotes: true, attachPrefixes: ['@'] },
  ts: TS, tsx: TS, mts: TS, cts: TS,
  js: JS, jsx: JS, mjs: JS, cjs: JS,
  go: { name: 'go', family: 'c', ...C_COMMENTS, singleQuote: 'char', backtick: 'raw', tripleQuotes: false, attachPrefixes: [] },
  java: { name: 'java', family: 'c', ...C_COMMENTS, singleQuote: 'char', backtick: 'none', tripleQuotes: true, attachPrefixes: ['@'] },
  rs: { name: 'rust', family: 'c', ...C_COMMENTS, nestedComments: true, singleQuote: 'char', backtick: 'none', tripleQuotes: false, rawStrings: 'rust', attachPrefixes: ['#['] },
  c: { name: 'c', family: 'c', ...C_COMMENTS, singleQuote: 'char', backtick: 'none', tripleQuotes: false, attachPrefixes: [] },
  h: { name: 'c', family: 'c', ...C_COMMENTS, singleQuote: 'char', backtick: 'none', tripleQuotes: false, attachPrefixes: [] },
  cpp: { name: 'cpp', family: 'c', ...C_COMMENTS, singleQuote: 'char', backtick: 'none', tripleQuotes: false, rawStrings: 'cpp', attachPrefixes: ['template', '[['] },
  cs: { name: 'csharp', family: 'c', ...C_COMMENTS, singleQuote: 'char', backtick: 'none', tripleQuotes: false, rawStrings: 'csharp', attachPrefixes: ['['] },
  rb: { name: 'ruby', family: 'ruby', lineComments: ['#'], blockComment: ['=begin', '=end'], singleQuote: 'string', backtick: 'string', tripleQuotes: false, attachPrefixes: [] },
  php: { name: 'php', family: 'c', lineComments: ['//', '#'], blockComment: ['/*', '*/'], singleQuote: 'string', backtick: 'string', tripleQuotes: false, attachPrefixes: ['#['] },
  swift: { name: 'swift', family: 'c', ...C_COMMENTS, nestedComments: true, singleQuote: 'none', backtick: 'none', tripleQuotes: true, attachPrefixes: ['@'] },
  kt: { name: 'kotlin', family: 'c', ...C_COMMENTS, nestedComments: true, singleQuote: 'char', backtick: 'none', tripleQuotes: true, attachPrefixes: ['@'] },
  scala: { name: 'scala', family: 'c', ...C_COMMENTS, nestedComments: true, singleQuote: 'char', backtick: 'none', tripleQuotes: true, attachPrefixes: ['@'] },
  sh: { name: 'shell', family: 'shell', lineComments: ['#'], singleQuote: 'raw', backtick: 'string', tripleQuotes: false, attachPrefixes: [] },
}
for (const [alias, ext] of [['cc', 'cpp'], ['cxx', 'cpp'], ['hpp', 'cpp'], ['kts', 'kt'], ['bash', 'sh'], ['zsh', 'sh']] as const) LANGUAGES[alias] = LANGUAGES[ext]
const BY_NAME = new Map(Object.values(LANGUAGES).map((l) => [l.name, l]))

/** The spec for an extension ('.py', 'py') or a language name ('python'); undefined when unknown. */
export function languageFor(language: string | undefined): LanguageSpec | undefined {
  if (!language) return undefined
  const key = language.toLowerCase().replace(/^.*\./, '')
  return LANGUAGES[key] ?? BY_NAME.get(key)
}

/** What the scan knows about each line. */
export interface LineInfo {
  start: number[]
  /** Bracket depth (plus keyword depth for Ruby and shell) at the start of the line. */
  depth: number[]
  /** The line starts inside a string or block comment. */
  inside: boolean[]
}

const S_CODE = 0
const S_LINE_COMMENT = 1
const S_BLOCK_COMMENT = 2
const S_STRING = 3 // closed by `close`, backslash escapes
const S_RAW = 4 // closed by `close`, no escapes
const S_TEMPLATE = 5

function isIdent(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c === 0x5f || c === 0x24 || c > 0x7f
}

const RUBY_OPENERS = new Set(['def', 'class', 'module', 'begin', 'case'])
const RUBY_STATEMENT_OPENERS = new Set(['if', 'unless', 'while', 'until', 'for'])
const SHELL_DELTA: Record<string, number> = { if: 1, fi: -1, case: 1, esac: -1, do: 1, done: -1 }
const REGEX_PRECEDERS = new Set('(,=:[!&|?{};+-*%<>~^'.split('').map((c) => c.charCodeAt(0)))

/** Previous non-blank character on the same line before `i`, or -1. */
function prevOnLine(text: string, i: number): number {
  for (let j = i - 1; j >= 0; j--) {
    const c = text.charCodeAt(j)
    if (c === 10) return -1
    if (c !== 32 && c !== 9 && c !== 13) return c
  }
  return -1
}

export function scanLines(text: string, lang: LanguageSpec): LineInfo {
  const n = text.length
  const info: LineInfo = { start: [0], depth: [0], inside: [false] }
  let state = S_CODE
  let close = ''
  let commentDepth = 0
  let depth = 0
  let lastSig = -1 // last non-blank code character, for regex detection
  const templates: number[] = [] // bracket depth to return to a template literal at
  let loopOnLine = false // Ruby: `while x do` opens one block, not two
  const block = lang.blockComment
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i)
    if (c === 10) {
      if (state === S_LINE_COMMENT) state = S_CODE
      info.start.push(i + 1)
      info.depth.push(depth)
      info.inside.push(state !== S_CODE)
      loopOnLine = false
      continue
    }
    switch (state) {
      case S_LINE_COMMENT:
        continue
      case S_BLOCK_COMMENT:
        if (block && lang.nestedComments && text.startsWith(block[0], i)) { commentDepth++; i += block[0].length - 1 }
        else if (block && text.startsWith(block[1], i)) {
          i += block[1].length - 1
          if (--commentDepth === 0) state = S_CODE
        }
        continue
      case S_STRING:
        if (c === 92) { if (text.charCodeAt(i + 1) !== 10) i++; continue }
        if (c === close.charCodeAt(0) && (close.length === 1 || text.startsWith(close, i))) { i += close.length - 1; state = S_CODE }
        continue
      case S_RAW:
        if (c === close.charCodeAt(0) && (close.length === 1 || text.startsWith(close, i))) { i += close.length - 1; state = S_CODE }
        continue
      case S_TEMPLATE:
        if (c === 92) { i++; continue }
        if (c === 96) state = S_CODE
        else if (c === 36 && text.charCodeAt(i + 1) === 123) { templates.push(depth); depth++; i++; state = S_CODE }
        continue
    }
    // S_CODE
    if (c === 32 || c === 9 || c === 13) continue
    let comment = false
    for (const lc of lang.lineComments) {
      if (c === lc.charCodeAt(0) && text.startsWith(lc, i)) {
        if (lc === '#' && lang.family === 'shell' && i > 0 && !isWs(text.charCodeAt(i - 1)) && text.charCodeAt(i - 1) !== 59) continue
        if (lc === '#' && lang.name === 'php' && text.charCodeAt(i + 1) === 91) continue
        comment = true
        break
      }
    }
    if (comment) { state = S_LINE_COMMENT; continue }
    if (block && c === block[0].charCodeAt(0) && text.startsWith(block[0], i)) {
      state = S_BLOCK_COMMENT
      commentDepth = 1
      i += block[0].length - 1
      continue
    }
    const sig = c
    switch (c) {
      case 40: case 91: case 123: // ( [ {
        depth++
        break
      case 41: case 93: case 125: // ) ] }
        if (depth > 0) depth--
        if (c === 125 && templates.length > 0 && depth === templates[templates.length - 1]) { templates.pop(); state = S_TEMPLATE }
        break
      case 34: // "
        if (lang.tripleQuotes && text.startsWith('"""', i)) { state = S_STRING; close = '"""'; i += 2 }
        else if (lang.rawStrings === 'csharp' && i > 0 && text.charCodeAt(i - 1) === 64) { state = S_RAW; close = '"' }
        else { state = S_STRING; close = '"' }
        break
      case 39: // '
        if (lang.singleQuote === 'string') {
          if (lang.tripleQuotes && text.startsWith("'''", i)) { state = S_STRING; close = "'''"; i += 2 }
          else { state = S_STRING; close = "'" }
        } else if (lang.singleQuote === 'raw') {
          state = S_RAW; close = "'"
        } else if (lang.singleQuote === 'char') {
          if (text.charCodeAt(i + 1) === 92) { // '\n', '\u{1F600}'
            const end = text.indexOf("'", i + 3)
            if (end > 0 && end - i < 12) i = end
          } else if (text.charCodeAt(i + 2) === 39) i += 2
          else if (text.charCodeAt(i + 3) === 39 && text.charCodeAt(i + 1) >= 0xd800 && text.charCodeAt(i + 1) <= 0xdbff) i += 3
          // otherwise a Rust lifetime or a Scala symbol: nothing to skip
        }
        break
      case 96: // `
        if (lang.backtick === 'template') state = S_TEMPLATE
        else if (lang.backtick === 'raw') { state = S_RAW; close = '`' }
        else if (lang.backtick === 'string') { state = S_STRING; close = '`' }
        break
      case 47: // / (regex literal?)
        if (lang.regexLiterals && (lastSig < 0 || REGEX_PRECEDERS.has(lastSig) || /\b(?:return|typeof|case|in|of|yield|await)$/.test(text.slice(Math.max(0, i - 8), i).trimEnd()))) {
          const end = regexEnd(text, i)
          if (end > 0) i = end
        }
        break
      default:
        if (lang.rawStrings === 'rust' && c === 114 && (i === 0 || !isIdent(text.charCodeAt(i - 1)) || text.charCodeAt(i - 1) === 98)) {
          let h = i + 1
          while (text.charCodeAt(h) === 35) h++
          if (text.charCodeAt(h) === 34) { state = S_RAW; close = '"' + '#'.repeat(h - i - 1); i = h; break }
        }
        if (lang.rawStrings === 'cpp' && c === 82 && text.charCodeAt(i + 1) === 34) {
          const open = text.indexOf('(', i + 2)
          if (open > 0 && open - i < 20) { state = S_RAW; close = ')' + text.slice(i + 2, open) + '"'; i = open; break }
        }
        if ((lang.family === 'ruby' || lang.family === 'shell') && isIdent(c) && (i === 0 || !isIdent(text.charCodeAt(i - 1)))) {
          let j = i + 1
          while (j < n && isIdent(text.charCodeAt(j))) j++
          const prev = i > 0 ? text.charCodeAt(i - 1) : -1
          if (prev !== 46 && prev !== 58 && prev !== 64 && prev !== 36 && j - i <= 6) {
            depth = Math.max(0, depth + keywordDelta(text, i, j, lang.family, loopOnLine))
            const w = text.slice(i, j)
            if (lang.family === 'ruby' && (w === 'while' || w === 'until' || w === 'for') && isStatementStart(text, i)) loopOnLine = true
          }
          i = j - 1
        }
    }
    lastSig = sig
  }
  return info
}

function isStatementStart(text: string, i: number): boolean {
  const p = prevOnLine(text, i)
  return p === -1 || p === 59 || p === 61 || p === 40 || p === 44 || p === 91 || p === 123 || p === 124 || p === 38
}

function keywordDelta(text: string, i: number, j: number, family: Family, loopOnLine: boolean): number {
  const w = text.slice(i, j)
  if (family === 'ruby') {
    if (w === 'end') return -1
    if (RUBY_OPENERS.has(w)) return 1
    if (RUBY_STATEMENT_OPENERS.has(w)) return isStatementStart(text, i) ? 1 : 0
    if (w === 'do') return loopOnLine ? 0 : 1
    return 0
  }
  const d = SHELL_DELTA[w]
  if (d === undefined) return 0
  if (d > 0 && w !== 'do') {
    // `if` and `case` open a block only in command position
    const p = prevOnLine(text, i)
    if (!(p === -1 || p === 59 || p === 38 || p === 124 || p === 40 || p === 123 || /(?:then|else|do)\s+$/.test(text.slice(Math.max(0, i - 6), i)))) return 0
  }
  return d
}

/** End (index of the closing '/') of a regex literal starting at `i`, or -1 when it is not one. */
function regexEnd(text: string, i: number): number {
  const next = text.charCodeAt(i + 1)
  if (next === 47 || next === 42) return -1
  let inClass = false
  for (let j = i + 1; j < text.length; j++) {
    const c = text.charCodeAt(j)
    if (c === 10) return -1
    if (c === 92) { j++; continue }
    if (c === 91) inClass = true
    else if (c === 93) inClass = false
    else if (c === 47 && !inClass) return j
  }
  return -1
}

const DECLARATION = /^(?:(?:export|public|private|protected|internal|static|async|abstract|final|override|open|sealed|data|inline|suspend|pub(?:\([^)]*\))?|unsafe|extern|default|virtual|partial|readonly|declare)\s+)*(?:function\*?|class|interface|enum|struct|trait|impl|fn|func|def|module|object|type|namespace|fun|template|extension|protocol|union|record|package|val|var|let|const|import|from|use|using|#include)\b/
const CONTINUATIONS = /^(?:[}\])]|end\b|fi\b|done\b|esac\b|else\b|elif\b|elsif\b|except\b|finally\b|catch\b|rescue\b|ensure\b|when\b|then\b|;;)/

const LEVEL_INSIDE = 200
const LEVEL_SEMICOLON = 220
const LEVEL_SPACE = 230

/** Break levels for source code (see breaks.ts): line boundaries by depth, then spaces inside long lines. */
export function codeBreaks(text: string, lang: LanguageSpec): Uint8Array {
  const n = text.length
  const breaks = new Uint8Array(n + 1)
  // Inside a long line: after ';' or ',' then at spaces.
  for (let i = 1; i < n; i++) {
    const c = text.charCodeAt(i)
    if ((c === 32 || c === 9) && !isWs(text.charCodeAt(i - 1))) breaks[i] = text.charCodeAt(i - 1) === 59 || text.charCodeAt(i - 1) === 44 ? LEVEL_SEMICOLON : LEVEL_SPACE
  }
  const info = scanLines(text, lang)
  const lines = info.start.length
  const lineEnd = (l: number) => (l + 1 < lines ? info.start[l + 1] - 1 : n)
  const firstCode = (l: number) => {
    let p = info.start[l]
    const e = lineEnd(l)
    while (p < e && isWs(text.charCodeAt(p))) p++
    return p
  }
  const comment = (p: number) => lang.lineComments.some((c) => text.startsWith(c, p)) || (lang.blockComment !== undefined && text.startsWith(lang.blockComment[0], p))
  const attached = (p: number) => comment(p) || lang.attachPrefixes.some((a) => text.startsWith(a, p))

  // Python: indentation depth (brackets and strings make continuation lines).
  let indentDepth: number[] | undefined
  if (lang.family === 'python') {
    indentDepth = new Array<number>(lines).fill(0)
    const stack = [0]
    for (let l = 0; l < lines; l++) {
      const p = firstCode(l)
      if (p >= lineEnd(l) || info.inside[l] || info.depth[l] > 0) { indentDepth[l] = stack.length - 1; continue }
      const indent = indentWidth(text, info.start[l], p)
      if (comment(p)) {
        let d = 0
        while (d + 1 < stack.length && stack[d + 1] <= indent) d++
        indentDepth[l] = d
        continue
      }
      while (stack.length > 1 && stack[stack.length - 1] > indent) stack.pop()
      if (stack[stack.length - 1] < indent) stack.push(indent)
      indentDepth[l] = stack.length - 1
    }
  }

  let prevLine = -1 // last non-blank line
  let blankBetween = false
  for (let l = 0; l < lines; l++) {
    const p = firstCode(l)
    if (p >= lineEnd(l) && !info.inside[l]) { blankBetween = true; continue }
    if (prevLine >= 0) {
      let level: number
      if (info.inside[l] || (indentDepth && info.depth[l] > 0)) level = LEVEL_INSIDE
      else {
        const depth = Math.min(indentDepth ? indentDepth[l] : info.depth[l], 40)
        const lineText = text.slice(p, Math.min(lineEnd(l), p + 80))
        let sub: number
        if (CONTINUATIONS.test(lineText) || (!blankBetween && attached(firstCode(prevLine)))) sub = 3
        else if (blankBetween) sub = 0
        else if (DECLARATION.test(lineText) || (!indentDepth && info.depth[prevLine] > info.depth[l])) sub = 1
        else sub = 2
        level = 1 + depth * 4 + sub
      }
      let mark = info.start[l]
      while (mark > 0 && isWs(text.charCodeAt(mark - 1))) mark--
      breaks[mark] = level
    }
    prevLine = l
    blankBetween = false
  }
  return breaks
}

function indentWidth(text: string, from: number, to: number): number {
  let w = 0
  for (let i = from; i < to; i++) w = text.charCodeAt(i) === 9 ? (w + 8) & ~7 : w + 1
  return w
}

export interface CodeOptions {
  maxChars: number
  minChars: number
  /** Extension or language name; unknown or missing falls back to C-family rules. */
  language?: string
}

const GENERIC: LanguageSpec = { name: 'generic', family: 'c', lineComments: ['//', '#'], blockComment: ['/*', '*/'], singleQuote: 'string', backtick: 'none', tripleQuotes: false, attachPrefixes: [] }

export function chunkCode(doc: DocumentText, o: CodeOptions): Chunk[] {
  const lang = languageFor(o.language) ?? GENERIC
  const finder = arrayFinder(codeBreaks(doc.text, lang))
  return toChunks(doc, splitByPage(doc, (from, to, paged) => splitRanges(doc.text, finder, from, to, { size: o.maxChars, overlap: 0, minChars: o.minChars, code: true, keepRemainder: paged })))
}
