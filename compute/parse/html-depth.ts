// How deeply an HTML text nests its elements, read from the markup in one linear pass, before any DOM is built.
// The HTML stack costs time in the square of the nesting: htmlparser2 (under linkedom) grows its open-element
// stack at the front, and Readability walks every subtree from every element. A 1 MB page of 100,000 nested
// <div>s kept a worker busy for minutes, so such a page is refused before it reaches them.
import { ParseCode, parseError } from './errors.ts'

/** Deeper than this, a page is refused. Real pages nest a few dozen levels; Chromium's parser stops at 512. */
export const MAX_HTML_DEPTH = 512

/** Elements that never hold content. */
const VOID = new Set(['area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'keygen', 'link', 'meta', 'param', 'source', 'track', 'wbr'])
/** Elements whose end tag may be left out (the parser closes them itself): not counted, so an omitted end tag never adds depth. */
const OPTIONAL_END = new Set(['p', 'li', 'dt', 'dd', 'tr', 'td', 'th', 'option', 'optgroup', 'thead', 'tbody', 'tfoot', 'colgroup', 'caption', 'rb', 'rt', 'rtc', 'rp', 'html', 'head', 'body'])
/** Elements whose content is text, not markup: a `<div>` inside a script is no element. */
const RAW_TEXT = new Set(['script', 'style', 'textarea', 'title', 'xmp', 'iframe', 'noembed', 'noframes', 'noscript'])

/**
 * A comment, or a tag: its slash, its name, the rest up to `>`. The rest must start where the name cannot go on
 * and stops at a `<` too, so no part of the text is scanned twice (a hostile page is one long unclosed tag).
 */
const TOKEN = /<!--[\s\S]*?(?:-->|$)|<(\/?)([a-z][^\s/<>]*)([\s/][^<>]*)?>/g

/**
 * The deepest nesting of the elements that need an end tag, as markup writes it; the count stops once it is
 * past `limit`. An upper bound of the DOM's depth as far as end tags go, never a false alarm for omitted ones.
 */
export function markupDepth(html: string, limit = MAX_HTML_DEPTH): number {
  // Lower-cased once: names compare as HTML's are (case-insensitively), and a raw-text end tag is one indexOf.
  const text = html.toLowerCase()
  let depth = 0
  let max = 0
  TOKEN.lastIndex = 0
  for (let m = TOKEN.exec(text); m; m = TOKEN.exec(text)) {
    const name = m[2]
    if (!name || VOID.has(name) || OPTIONAL_END.has(name)) continue
    if (m[1]) {
      if (depth > 0) depth--
      continue
    }
    if (RAW_TEXT.has(name)) {
      // Jump to its end tag; without one, the rest of the page is its text.
      const end = text.indexOf(`</${name}`, TOKEN.lastIndex)
      if (end < 0) break
      TOKEN.lastIndex = end
      continue
    }
    if (m[3]?.endsWith('/')) continue
    if (++depth > max && (max = depth) > limit) break
  }
  return max
}

/** Throws the parse error of a page nested deeper than MAX_HTML_DEPTH. */
export function checkHtmlDepth(html: string): void {
  const depth = markupDepth(html)
  if (depth > MAX_HTML_DEPTH) {
    throw parseError(ParseCode.TOO_LARGE, `HTML is nested too deeply: more than ${MAX_HTML_DEPTH} levels of elements (no real page nests that deep)`)
  }
}
