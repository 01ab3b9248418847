// DOM to text that keeps block boundaries: paragraphs, headings, divs and list items start new lines, list
// items get '- ' or '1. ', table rows become cells joined with ' | ', <br> is a line break and <pre> stays
// verbatim. Used for HTML pages and for the HTML that mammoth makes of a docx. Works on linkedom nodes.
import { collapseSpaces, normalizeText } from './text-util.ts'

/** The subset of the DOM the walker needs (linkedom's nodes satisfy it). */
export interface DomNode {
  nodeType: number
  textContent: string | null
  childNodes: ArrayLike<DomNode>
  parentNode?: DomNode | null
}
export interface DomElement extends DomNode {
  localName: string
  getAttribute(name: string): string | null
  hasAttribute(name: string): boolean
}

const ELEMENT = 1
const TEXT = 3

const SKIP = new Set(['script', 'style', 'noscript', 'template', 'svg', 'math', 'iframe', 'object', 'embed', 'canvas', 'head', 'button', 'select', 'option', 'input', 'textarea', 'link', 'meta', 'title', 'img', 'video', 'audio', 'picture', 'source', 'map'])
const PARAGRAPH = new Set(['p', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'table', 'blockquote', 'pre', 'ul', 'ol', 'dl', 'figure', 'hr', 'address', 'details', 'fieldset'])
const BLOCK = new Set([
  'div', 'section', 'article', 'main', 'header', 'footer', 'aside', 'nav', 'li', 'dt', 'dd', 'figcaption', 'form',
  'summary', 'caption', 'center', 'body', 'html', 'tr', 'tbody', 'thead', 'tfoot', 'legend', 'label', 'hgroup', 'menu',
])

export const isElement = (n: DomNode): n is DomElement => n.nodeType === ELEMENT
export const tagOf = (el: DomElement) => el.localName.toLowerCase()

/** Collects text with pending line breaks, so that empty blocks never leave empty lines behind. */
class TextSink {
  private parts: string[] = []
  private pending = 0
  private space = false
  private started = false
  private afterPrefix = false

  text(s: string): void {
    const t = s.trim()
    if (!t) {
      if (s.length > 0 && this.started) this.space = true
      return
    }
    if (this.started) {
      if (this.pending > 0) this.parts.push('\n'.repeat(this.pending))
      else if ((this.space || /^\s/.test(s)) && !this.afterPrefix) this.parts.push(' ')
    }
    this.parts.push(t)
    this.started = true
    this.pending = 0
    this.space = /\s$/.test(s)
    this.afterPrefix = false
  }

  /** A list marker: starts the line as written, and the item's text follows it directly. */
  prefix(p: string): void {
    if (this.started && this.pending > 0) this.parts.push('\n'.repeat(this.pending))
    this.parts.push(p)
    this.started = true
    this.pending = 0
    this.space = false
    this.afterPrefix = true
  }

  /** Text whose line breaks and indentation matter (pre). */
  verbatim(s: string): void {
    const body = s.replace(/^\n/, '').replace(/\s+$/, '')
    if (!body.trim()) return
    if (this.started) this.parts.push('\n'.repeat(Math.max(this.pending, 1)))
    this.parts.push(body)
    this.started = true
    this.pending = 0
    this.space = false
  }

  /** Asks for at least n line breaks before the next text (1: new line, 2: new paragraph). */
  breakLine(n: 1 | 2): void {
    if (this.started) this.pending = Math.max(this.pending, n)
    this.space = false
  }

  toString(): string {
    return this.parts.join('')
  }
}

export interface DomTextOptions {
  /** Elements for which this returns true are left out with everything inside them. */
  drop?: (el: DomElement) => boolean
}

function listDepth(el: DomElement): number {
  let depth = 0
  for (let p = el.parentNode; p; p = p.parentNode) {
    if (isElement(p) && (tagOf(p) === 'ul' || tagOf(p) === 'ol')) depth++
  }
  return Math.max(0, depth - 1)
}

function listMarker(li: DomElement): string {
  const list = li.parentNode
  if (!list || !isElement(list) || tagOf(list) !== 'ol') return '- '
  let n = Number.parseInt(list.getAttribute('start') ?? '1', 10)
  if (!Number.isFinite(n)) n = 1
  const siblings = list.childNodes
  for (let i = 0; i < siblings.length; i++) {
    const s = siblings[i]
    if (s === li) break
    if (isElement(s) && tagOf(s) === 'li') n++
  }
  return `${n}. `
}

function rowCells(tr: DomElement, opts: DomTextOptions): string[] {
  const cells: string[] = []
  const kids = tr.childNodes
  for (let i = 0; i < kids.length; i++) {
    const c = kids[i]
    if (isElement(c) && (tagOf(c) === 'td' || tagOf(c) === 'th')) cells.push(collapseSpaces(domToText(c, opts)))
  }
  return cells
}

function walk(node: DomNode, sink: TextSink, opts: DomTextOptions): void {
  if (node.nodeType === TEXT) {
    sink.text((node.textContent ?? '').replace(/\s+/g, ' '))
    return
  }
  if (!isElement(node)) {
    // Documents and fragments: walk their children; comments and the rest: nothing.
    if (node.nodeType === 9 || node.nodeType === 11) for (let i = 0; i < node.childNodes.length; i++) walk(node.childNodes[i], sink, opts)
    return
  }
  const tag = tagOf(node)
  if (SKIP.has(tag) || node.hasAttribute('hidden') || opts.drop?.(node)) return
  if (tag === 'br') {
    sink.breakLine(1)
    return
  }
  if (tag === 'pre') {
    sink.breakLine(2)
    sink.verbatim(node.textContent ?? '')
    sink.breakLine(2)
    return
  }
  if (tag === 'tr') {
    const cells = rowCells(node, opts)
    if (cells.some((c) => c)) {
      sink.breakLine(1)
      sink.text(cells.join(' | '))
      sink.breakLine(1)
    }
    return
  }
  const paragraph = PARAGRAPH.has(tag)
  const block = paragraph || BLOCK.has(tag)
  if (block) sink.breakLine(paragraph ? 2 : 1)
  if (tag === 'li') sink.prefix(`${'  '.repeat(listDepth(node))}${listMarker(node)}`)
  for (let i = 0; i < node.childNodes.length; i++) walk(node.childNodes[i], sink, opts)
  if (block) sink.breakLine(paragraph ? 2 : 1)
}

/** Text of a node and its descendants, block boundaries kept, normalized (see normalizeText). */
export function domToText(root: DomNode, opts: DomTextOptions = {}): string {
  const sink = new TextSink()
  walk(root, sink, opts)
  return normalizeText(sink.toString())
}

/** Share of an element's text that sits inside links. */
export function linkDensity(el: DomElement & { querySelectorAll(sel: string): ArrayLike<DomNode> }): number {
  const total = collapseSpaces(el.textContent ?? '').length
  if (total === 0) return 0
  let linked = 0
  const links = el.querySelectorAll('a')
  for (let i = 0; i < links.length; i++) linked += collapseSpaces(links[i].textContent ?? '').length
  return Math.min(1, linked / total)
}
