// Small text helpers shared by the parsers.

/** File name without directories and its last extension ('a/b/Report.v2.pdf' -> 'Report.v2'). */
export function fileStem(filename: string): string {
  const base = filename.split(/[\\/]/).pop() ?? filename
  const dot = base.lastIndexOf('.')
  return (dot > 0 ? base.slice(0, dot) : base).trim() || base
}

/** Lowercase extension without the dot, or '' ('x.tar.gz' -> 'gz'). */
export function fileExtension(filename: string): string {
  const base = filename.split(/[\\/]/).pop() ?? filename
  const dot = base.lastIndexOf('.')
  return dot > 0 ? base.slice(dot + 1).toLowerCase() : ''
}

// C0 controls other than tab, newline and form feed, DEL, and the C1 block: never meaningful in extracted text.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000B\u000E-\u001F\u007F-\u009F]/g

/**
 * Canonical page text: LF line ends, no control characters, no trailing blanks on a line, at most one empty
 * line in a row, no leading or trailing empty lines.
 */
export function normalizeText(text: string): string {
  return text
    .replace(/\r\n?|\f/g, '\n')
    .replace(CONTROL, '')
    .replace(/[ \t\u00A0]+$/gm, '')
    .replace(/\n{3,}/g, '\n\n')
    .replace(/^\n+|\s+$/g, '')
}

/** First non-empty line, cut to a title's length. */
export function firstLine(text: string, max = 200): string {
  for (const line of text.split('\n')) {
    const t = line.trim()
    if (t) return t.length > max ? `${t.slice(0, max - 1)}…` : t
  }
  return ''
}

export const collapseSpaces = (s: string) => s.replace(/\s+/g, ' ').trim()

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00A0' }

/** XML character and the five predefined entity references (enough for OWPML and docProps). */
export function decodeXmlEntities(s: string): string {
  if (!s.includes('&')) return s
  return s.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-zA-Z]+);/g, (m, e: string) => {
    if (e[0] === '#') {
      const cp = e[1] === 'x' || e[1] === 'X' ? Number.parseInt(e.slice(2), 16) : Number.parseInt(e.slice(1), 10)
      return Number.isFinite(cp) && cp <= 0x10ffff ? String.fromCodePoint(cp) : m
    }
    return ENTITIES[e] ?? m
  })
}
