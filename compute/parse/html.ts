// HTML: main-content extraction with Readability over linkedom, shaped by ingestion.html_extraction_policy.
//   strict   Readability's article only, minus its link-dense blocks; no article -> no content (exclude when unsure).
//   balanced Readability's article as it is; when it finds none, the page's blocks without navigation,
//            asides, sidebars, comments and link-dense blocks.
//   lenient  Readability's article (lower threshold), then every other block of the page that only page chrome
//            (nav, footer, banner) would exclude: asides, sidebars, comments and link lists are kept (include when unsure).
// So what strict keeps, balanced keeps, and what balanced keeps, lenient keeps.
import { Readability } from '@mozilla/readability'
import { parseHTML } from 'linkedom'
import type { HtmlExtractionPolicy, ParsedDocument } from '../types.ts'
import { decodeText } from './encoding.ts'
import { ParseCode, parseError } from './errors.ts'
import { checkHtmlDepth } from './html-depth.ts'
import { domToText, isElement, linkDensity, tagOf } from './html-text.ts'
import type { DomElement } from './html-text.ts'
import type { ParserInput } from './registry.ts'
import { collapseSpaces, fileStem } from './text-util.ts'

type Doc = ReturnType<typeof parseHTML>['document']
type El = DomElement & { querySelectorAll(sel: string): ArrayLike<El>; textContent: string | null; remove(): void }

const CHROME_TAGS = new Set(['nav', 'footer'])
const CHROME_ROLES = new Set(['navigation', 'contentinfo', 'banner', 'search', 'menubar'])
const BOILERPLATE_ROLES = new Set(['complementary', 'dialog', 'alertdialog'])
const BOILERPLATE_HINT = /(^|[\s_-])(sidebar|side-bar|comments?|disqus|related|share|sharing|social|advert|ads?|sponsor|promo|newsletter|subscribe|cookie|banner|breadcrumbs?|pagination|pager|widget|popup|modal|footer|menu|nav)([\s_-]|$)/i

const POLICY: Record<HtmlExtractionPolicy, { charThreshold: number }> = {
  strict: { charThreshold: 500 },
  balanced: { charThreshold: 500 },
  lenient: { charThreshold: 100 },
}

/** Charset declared by a <meta> in the first bytes, read as Latin-1 (the declaration is ASCII). */
export function sniffHtmlCharset(bytes: Uint8Array): string | undefined {
  const head = new TextDecoder('latin1').decode(bytes.subarray(0, 4096))
  const m = /<meta[^>]+charset\s*=\s*["']?\s*([\w:.-]+)/i.exec(head)
  return m?.[1]
}

function isHidden(el: DomElement): boolean {
  if (el.hasAttribute('hidden') || el.getAttribute('aria-hidden') === 'true') return true
  const style = el.getAttribute('style')
  return style !== null && /(display\s*:\s*none|visibility\s*:\s*hidden)/i.test(style)
}

function isChrome(el: DomElement): boolean {
  const tag = tagOf(el)
  if (CHROME_TAGS.has(tag)) return true
  const role = el.getAttribute('role')
  if (role && CHROME_ROLES.has(role)) return true
  // A page-level <header> (not one inside an article or section) is the site banner, unless it holds the
  // page's heading and no navigation (some pages put the article title there).
  if (tag === 'header') {
    for (let p = el.parentNode; p; p = p.parentNode) {
      if (isElement(p) && ['article', 'section', 'main'].includes(tagOf(p))) return false
    }
    const q = el as unknown as { querySelector(sel: string): unknown }
    return !(q.querySelector('h1, h2') && !q.querySelector('nav, [role="navigation"], ul, ol'))
  }
  return isHidden(el)
}

function isBoilerplate(el: DomElement): boolean {
  if (isChrome(el) || tagOf(el) === 'aside') return true
  const role = el.getAttribute('role')
  if (role && BOILERPLATE_ROLES.has(role)) return true
  const hint = `${el.getAttribute('class') ?? ''} ${el.getAttribute('id') ?? ''}`
  return BOILERPLATE_HINT.test(hint)
}

const LINK_DENSE_TAGS = new Set(['ul', 'ol', 'p', 'div', 'table', 'dl', 'section'])

function isLinkDense(el: DomElement): boolean {
  return LINK_DENSE_TAGS.has(tagOf(el)) && linkDensity(el as El) > 0.5
}

function pageTitle(doc: Doc, filename: string): string {
  const og = doc.querySelector('meta[property="og:title"], meta[name="og:title"], meta[name="twitter:title"]')?.getAttribute('content')
  const title = doc.querySelector('title')?.textContent
  const h1 = doc.querySelector('h1')?.textContent
  for (const t of [og, title, h1]) {
    const c = t ? collapseSpaces(t) : ''
    if (c) return c
  }
  return fileStem(filename)
}

function readabilityArticle(doc: Doc, charThreshold: number): El | null {
  const clone = doc.cloneNode(true) as unknown as Doc
  const article = new Readability(clone as never, { charThreshold, serializer: (el: unknown) => el }).parse()
  return (article?.content as unknown as El | undefined) ?? null
}

/** Lines of `extra` that are not already in `main`, in their page order. */
function linesNotIn(main: string, extra: string): string[] {
  const mainLines = new Set(main.split('\n').map(collapseSpaces))
  const mainFlat = collapseSpaces(main)
  const out: string[] = []
  for (const line of extra.split('\n')) {
    const key = collapseSpaces(line.replace(/^\s*(?:- |\d+\. )/, ''))
    if (!key || mainLines.has(collapseSpaces(line)) || (key.length >= 12 && mainFlat.includes(key))) continue
    out.push(line)
  }
  return out
}

export function extractHtmlText(html: string, policy: HtmlExtractionPolicy, filename = 'page.html'): { title: string; text: string } {
  const { document } = parseHTML(html)
  const title = pageTitle(document, filename)
  // Page chrome is never content, whatever the policy: without it, a page of menus has no article to find.
  const all = document.querySelectorAll('body *') as unknown as ArrayLike<El>
  for (let i = all.length - 1; i >= 0; i--) if (isChrome(all[i])) all[i].remove()
  const body = (document.body ?? document.documentElement) as unknown as El
  const { charThreshold } = POLICY[policy]
  const article = readabilityArticle(document, charThreshold)
  let text = ''
  if (policy === 'strict') {
    if (article) text = domToText(article, { drop: (el) => isHidden(el) || isLinkDense(el) || tagOf(el) === 'aside' })
  } else if (policy === 'balanced') {
    text = article ? domToText(article) : ''
    if (!text) text = domToText(body, { drop: (el) => isBoilerplate(el) || isLinkDense(el) })
  } else {
    const main = article ? domToText(article) : ''
    const page = domToText(body, { drop: isChrome })
    const extras = main ? linesNotIn(main, page) : []
    text = main ? (extras.length ? `${main}\n\n${extras.join('\n')}` : main) : page
  }
  return { title, text }
}

export function parseHtml(input: ParserInput): ParsedDocument {
  const { text: html } = decodeText(input.bytes, { declaredCharset: sniffHtmlCharset(input.bytes) })
  checkHtmlDepth(html)
  const { title, text } = extractHtmlText(html, input.policy, input.filename)
  if (!text.trim()) throw parseError(ParseCode.NO_CONTENT, 'no main content found in HTML')
  return { title, doc_type: 'html', pages: [{ page_num: 1, page_label: '1', text }] }
}
