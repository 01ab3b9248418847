// URL rules of the web connector (notes.md "Connectors (decisions)"): normalisation, seed scope, fnmatch
// patterns and pagination URLs.

const TRACKING = /^(utm_.*|fbclid|gclid|ref)$/i

/**
 * The URL to request for `raw`: no fragment, no credentials, tracking keys dropped, remaining query keys sorted,
 * the scheme as given. Unlike the identity (normaliseUrl) it keeps the trailing slash: `/guide/` and `/guide`
 * are one document, but a server may answer only one of them, and relative links resolve differently against
 * each. Null for anything that is not an absolute http(s) URL.
 */
export function requestUrl(raw: string, base?: string): string | null {
  let u: URL
  try {
    u = base === undefined ? new URL(raw) : new URL(raw, base)
  } catch {
    return null
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return null
  u.hash = ''
  u.username = ''
  u.password = ''
  const keys = [...u.searchParams.keys()]
  if (keys.length > 0) {
    const kept = [...u.searchParams.entries()].filter(([k]) => !TRACKING.test(k))
    kept.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    u.search = new URLSearchParams(kept).toString()
  }
  const out = u.toString()
  return out.endsWith('?') ? out.slice(0, -1) : out
}

/**
 * The identity of a page (notes.md): requestUrl without the trailing slash; WHATWG URL already lower-cases the
 * host. Null for anything that is not an absolute http(s) URL.
 */
export function normaliseUrl(raw: string, base?: string): string | null {
  const url = requestUrl(raw, base)
  if (url === null) return null
  const q = url.indexOf('?')
  let path = q === -1 ? url : url.slice(0, q)
  while (path.endsWith('/') && !path.endsWith('://')) path = path.slice(0, -1)
  return path + (q === -1 ? '' : url.slice(q))
}

/** scheme://host/path of a normalised URL, without query and trailing slash: what the scope compares. */
function scopeBase(url: string): string {
  const q = url.indexOf('?')
  const base = q === -1 ? url : url.slice(0, q)
  return base.endsWith('/') ? base.slice(0, -1) : base
}

/** In scope: equal to a seed's scheme+host+path, or below it (a `/` after it). */
export function inScope(url: string, seeds: readonly string[]): boolean {
  const b = scopeBase(url)
  return seeds.some((s) => {
    const sb = scopeBase(s)
    return b === sb || b.startsWith(`${sb}/`)
  })
}

const globCache = new Map<string, RegExp>()

/** Python's fnmatch (case-sensitive, as fnmatchcase): `*` and `?` cross `/`, `[seq]` and `[!seq]` classes. */
export function fnmatch(value: string, pattern: string): boolean {
  let re = globCache.get(pattern)
  if (!re) {
    let src = ''
    for (let i = 0; i < pattern.length; i++) {
      const c = pattern[i]
      if (c === '*') src += '.*'
      else if (c === '?') src += '.'
      else if (c === '[') {
        const end = pattern.indexOf(']', i + 2)
        if (end === -1) src += '\\['
        else {
          let cls = pattern.slice(i + 1, end).replace(/\\/g, '\\\\')
          if (cls.startsWith('!')) cls = `^${cls.slice(1)}`
          else if (cls.startsWith('^')) cls = `\\${cls}`
          src += `[${cls}]`
          i = end
        }
      } else src += c.replace(/[.+^${}()|\\/]/g, '\\$&')
    }
    re = new RegExp(`^${src}$`, 's')
    if (globCache.size > 1000) globCache.clear()
    globCache.set(pattern, re)
  }
  return re.test(value)
}

/** exclude_patterns first (highest priority), then include_patterns narrow when any are given. */
export function passesPatterns(url: string, include: readonly string[], exclude: readonly string[]): boolean {
  if (exclude.some((p) => fnmatch(url, p))) return false
  return include.length === 0 || include.some((p) => fnmatch(url, p))
}

/** Pagination URLs (path /page/N, or query page=N / p=N) are crawled for links but never stored. */
export function isPagination(url: string): boolean {
  let u: URL
  try {
    u = new URL(url)
  } catch {
    return false
  }
  if (/\/page\/\d+(\/|$)/.test(u.pathname)) return true
  for (const key of ['page', 'p']) {
    const v = u.searchParams.get(key)
    if (v !== null && /^\d+$/.test(v)) return true
  }
  return false
}
