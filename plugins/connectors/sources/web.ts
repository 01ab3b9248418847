// Web crawler (spec 4.9 "web", notes.md "Connectors (decisions)"): breadth-first from the seeds within their
// scope, include/exclude patterns, depth, robots.txt, auth headers or basic auth, conditional requests.
// Seed pages (with skip_seed_pages), pagination pages and pages under min_content_chars are crawled for links
// only. Text is extracted by the service's HTML parser under ingestion.html_extraction_policy; the stored
// document is the page's HTML, which the pipeline parses the same way.
import { createHash } from 'node:crypto'
import type { parseHTML } from 'linkedom'
import type { SqlRunner } from '../../../adapters/ports.ts'
import { decodeText } from '../../../compute/parse/encoding.ts'
import { checkHtmlDepth } from '../../../compute/parse/html-depth.ts'
import { collapseSpaces } from '../../../compute/parse/text-util.ts'
import { crawlCapped, SyncFailure, SyncStopped, USER_AGENT, type Source, type SourceResponse, type SyncContext } from '../engine.ts'
import { ALLOW_ALL, parseRobots, type Robots } from '../robots.ts'
import { resolveSecret } from '../secrets.ts'
import { inScope, isPagination, normaliseUrl, passesPatterns, requestUrl } from '../url.ts'
import type { WebConfigT } from '../schemas.ts'

const MAX_REDIRECTS = 5
const ROBOTS_TOKEN = 'quarry-webconnector'
const ROBOTS_MAX_BYTES = 512 * 1024

/**
 * The HTML parsers (linkedom, Readability and what they import: about 300 modules, most of a second of CPU to load),
 * loaded with the first page a crawl fetches instead of with the connectors plugin at every start.
 */
let htmlParsers: Promise<[typeof import('linkedom'), typeof import('../../../compute/parse/html.ts')]> | undefined
const loadHtmlParsers = () => (htmlParsers ??= Promise.all([import('linkedom'), import('../../../compute/parse/html.ts')]))

interface PageState {
  etag: string | null
  last_modified: string | null
  content_hash: string | null
  /** Request URLs (requestUrl) of the page's links, resolved against the URL that answered. */
  links: string[]
  stored: boolean
}

/** A page to crawl: its identity (normaliseUrl) and the URL to request, which may keep a trailing slash. */
interface QueueItem {
  url: string
  raw: string
  depth: number
}

type Fetched =
  | { kind: 'page'; url: string; raw: string; res: SourceResponse }
  | { kind: 'not_modified'; url: string }
  | { kind: 'skip'; why: string }
  // The page could not be reached this time (a login redirect, a loop): not proof that it is gone.
  | { kind: 'lost'; why: string }

/** Stored title (notes.md): og:title, then h1, then <title>, then the URL. */
function titleOf(document: ReturnType<typeof parseHTML>['document'], url: string): string {
  const og = document.querySelector('meta[property="og:title"], meta[name="og:title"]')?.getAttribute('content')
  const h1 = document.querySelector('h1')?.textContent
  const title = document.querySelector('title')?.textContent
  for (const t of [og, h1, title]) {
    const c = t ? collapseSpaces(t) : ''
    if (c) return c.slice(0, 1000)
  }
  return url
}

/** `responseUrl` is the raw URL that answered: `intro/` on `/guide/` is `/guide/intro`, not `/intro`. */
function linksOf(document: ReturnType<typeof parseHTML>['document'], responseUrl: string): string[] {
  const baseHref = document.querySelector('base[href]')?.getAttribute('href')
  let base = responseUrl
  if (baseHref) {
    try {
      base = new URL(baseHref, responseUrl).toString()
    } catch { /* a broken <base> is ignored, as browsers do */ }
  }
  const out = new Set<string>()
  const anchors = document.querySelectorAll('a[href]') as unknown as ArrayLike<{ getAttribute(n: string): string | null }>
  for (let i = 0; i < anchors.length; i++) {
    const href = anchors[i].getAttribute('href')
    if (!href) continue
    const u = requestUrl(href.trim(), base)
    if (u) out.add(u)
  }
  return [...out]
}

const isHtml = (contentType: string | null) => /^\s*(text\/html|application\/xhtml\+xml)\b/i.test(contentType ?? '')

export function createWebSource(sql: SqlRunner): Source {
  return async (ctx: SyncContext) => {
    const cfg = ctx.config as WebConfigT & { min_content_chars: number; html_extraction_policy: 'strict' | 'balanced' | 'lenient' }
    const connectorId = ctx.connector.connector_id
    const seedItems = new Map<string, QueueItem>()
    for (const s of cfg.seed_urls) {
      const raw = requestUrl(s)
      const url = raw && normaliseUrl(raw)
      if (raw && url && !seedItems.has(url)) seedItems.set(url, { url, raw, depth: 0 })
    }
    const seeds = [...seedItems.keys()]
    if (seeds.length === 0) throw new SyncFailure('No valid seed URL')
    const headers = authHeaders(ctx, cfg)
    const maxBytes = ctx.settings.ingestion.max_file_size_mb * 1024 * 1024
    const queueCap = cfg.max_pages * 20

    const state = new Map<string, PageState>()
    for (const r of await sql.query<PageState & { url: string }>(
      'SELECT url, etag, last_modified, content_hash, links, stored FROM connector_pages WHERE connector_id = $1::uuid', [connectorId])) {
      state.set(r.url, r)
    }
    const saveState = async (url: string, s: PageState) => {
      const before = state.get(url)
      state.set(url, s)
      // An unchanged page answered in full (no validators) leaves its row as it is: no write per such page.
      if (before && before.etag === s.etag && before.last_modified === s.last_modified && before.content_hash === s.content_hash
        && before.stored === s.stored && before.links.length === s.links.length && before.links.every((l, i) => l === s.links[i])) return
      await sql.query(
        `INSERT INTO connector_pages (connector_id, url, etag, last_modified, content_hash, links, stored, fetched_at)
         VALUES ($1::uuid, $2, $3, $4, $5, $6::jsonb, $7, now())
         ON CONFLICT (connector_id, url) DO UPDATE SET etag = EXCLUDED.etag, last_modified = EXCLUDED.last_modified,
           content_hash = EXCLUDED.content_hash, links = EXCLUDED.links, stored = EXCLUDED.stored, fetched_at = now()`,
        [connectorId, url, s.etag, s.last_modified, s.content_hash, JSON.stringify(s.links), s.stored],
      )
    }

    // One request per origin and run, shared by the requests in flight (a failed one is asked again later).
    const robotsByOrigin = new Map<string, Promise<Robots>>()
    /**
     * The origin's rules. A missing file (4xx) allows everything; an unreachable one or a server error fails
     * the page being fetched instead of disallowing the site, so a site that is down counts as failed (its
     * documents are kept) rather than as emptied (and pruned).
     */
    const robotsFor = (url: string): Promise<Robots> => {
      if (!cfg.respect_robots_txt) return Promise.resolve(ALLOW_ALL)
      const origin = new URL(url).origin
      let r = robotsByOrigin.get(origin)
      if (!r) {
        r = (async () => {
          // Only ever asked for in-scope URLs, so the auth headers go to a seed's origin; redirects are followed
          // by hand and only on that origin (fetch's own following would carry custom headers to any host).
          let target = `${origin}/robots.txt`
          for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
            const res = await ctx.fetch(target, { headers: { ...headers, 'user-agent': USER_AGENT }, redirect: 'manual' }, { maxBytes: ROBOTS_MAX_BYTES })
            const location = res.status >= 300 && res.status < 400 ? res.headers.get('location') : null
            if (location !== null) {
              const next = requestUrl(location, target)
              // RFC 9309 2.3.1.2: a file that cannot be reached through redirects counts as unavailable (allow all).
              if (!next || new URL(next).origin !== origin) return ALLOW_ALL
              target = next
              continue
            }
            if (res.status >= 500) throw new Error(`robots.txt answered HTTP ${res.status}`)
            // RFC 9309: a file over the limit is read up to it; here an oversized one is treated as absent.
            return res.ok && res.body ? parseRobots(new TextDecoder().decode(res.body), ROBOTS_TOKEN) : ALLOW_ALL
          }
          return ALLOW_ALL
        })()
        robotsByOrigin.set(origin, r)
        r.catch(() => robotsByOrigin.delete(origin))
      }
      return r
    }

    /** Conditional validators only when the stored result can stand in for the page (a failed document is fetched again). */
    const conditional = (url: string): Record<string, string> => {
      const s = state.get(url)
      if (!s) return {}
      if (s.stored) {
        const doc = ctx.known(url)
        if (!doc || doc.status === 'failed' || doc.status === 'deleted') return {}
      }
      const h: Record<string, string> = {}
      if (s.etag) h['if-none-match'] = s.etag
      if (s.last_modified) h['if-modified-since'] = s.last_modified
      return h
    }

    const wanted = (url: string) => inScope(url, seeds) && passesPatterns(url, cfg.include_patterns, cfg.exclude_patterns)

    /**
     * One page, following redirects inside the scope by hand (custom auth headers never leave it). The identity
     * changes only when a redirect leads to another normalised URL: `/guide` -> `/guide/` is the same page.
     */
    const fetchPage = async (item: QueueItem): Promise<Fetched> => {
      let { url, raw } = item
      const hops = new Set([raw])
      for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
        if (!(await robotsFor(raw)).allowed(raw)) return { kind: 'skip', why: 'robots.txt' }
        const res = await ctx.fetch(raw, { headers: { ...headers, ...conditional(url), 'user-agent': USER_AGENT, accept: 'text/html,application/xhtml+xml;q=0.9,*/*;q=0.5' }, redirect: 'manual' },
          { maxBytes, wantBody: (status, h) => status >= 200 && status < 300 && isHtml(h.get('content-type')) })
        if (res.status === 304) return { kind: 'not_modified', url }
        const location = res.status >= 300 && res.status < 400 ? res.headers.get('location') : null
        if (location !== null) {
          const nextRaw = requestUrl(location, raw)
          const next = nextRaw && normaliseUrl(nextRaw)
          if (!nextRaw || !next || !wanted(next)) return { kind: 'lost', why: 'redirect out of scope' }
          if (hops.has(nextRaw)) return { kind: 'lost', why: 'redirect loop' }
          hops.add(nextRaw)
          if (next !== url) {
            if (seen.has(next)) return { kind: 'skip', why: 'redirect to a page already crawled' }
            seen.add(next)
            url = next
          }
          raw = nextRaw
          continue
        }
        return { kind: 'page', url, raw, res }
      }
      return { kind: 'lost', why: 'too many redirects' }
    }

    const queue: QueueItem[] = [...seedItems.values()]
    const seen = new Set(seeds)
    const seedSet = new Set(seeds)
    let seedFailures = 0
    let lastSeedError = ''

    const enqueueLinks = (links: readonly string[], depth: number) => {
      if (depth > cfg.depth) return
      for (const raw of links) {
        const url = normaliseUrl(raw)
        if (!url || seen.has(url) || !wanted(url)) continue
        if (queue.length >= queueCap) {
          ctx.truncate()
          return
        }
        seen.add(url)
        queue.push({ url, raw, depth })
      }
    }

    /** When every seed fails, the run fails instead of counting as complete (and pruning). */
    const noteSeedFailure = (url: string, why: string) => {
      if (!seedSet.has(url)) return
      seedFailures++
      lastSeedError = `${url}: ${why}`
    }

    /** A page that could not be reached: counted as failed, its document kept. */
    const failPage = (url: string, why: string, answeredAs = url) => {
      ctx.counters.failed++
      keepKnown(ctx, answeredAs, state)
      noteSeedFailure(url, why)
    }

    /** One page: fetched (or 304), stored when it qualifies, its links queued. */
    const processPage = async (item: QueueItem): Promise<void> => {
      const { url, depth } = item
      let got: Fetched
      try {
        got = await fetchPage(item)
      } catch (err) {
        if (err instanceof SyncStopped) throw err
        failPage(url, (err as Error).message)
        ctx.log.debug({ url, err }, 'page request failed')
        return
      }
      if (got.kind === 'skip') {
        ctx.counters.skipped++
        return
      }
      if (got.kind === 'lost') {
        // An expired credential sends every page to a login page: pruning them all would empty the KB.
        failPage(url, got.why)
        ctx.log.debug({ url, why: got.why }, 'page not reached')
        return
      }
      ctx.counters.fetched++
      const pageUrl = got.url
      if (got.kind === 'not_modified') {
        const s = state.get(pageUrl)
        if (s?.stored) ctx.keep(pageUrl)
        ctx.counters.unchanged++
        enqueueLinks(s?.links ?? [], depth + 1)
        return
      }
      const res = got.res
      if (!res.ok) {
        // 404 and 410 say the page is gone (pruned after a complete run); anything else may pass.
        if (res.status === 404 || res.status === 410) {
          ctx.counters.failed++
          noteSeedFailure(url, `HTTP ${res.status}`)
        } else failPage(url, `HTTP ${res.status}`, pageUrl)
        return
      }
      const bytes = res.body
      // Not HTML (only text/html pages are parsed), over the size limit, or empty.
      if (!bytes || bytes.byteLength === 0) {
        ctx.counters.skipped++
        return
      }
      const [{ parseHTML }, { extractHtmlText, sniffHtmlCharset }] = await loadHtmlParsers()
      const charset = /charset\s*=\s*"?([\w:.-]+)/i.exec(res.headers.get('content-type') ?? '')?.[1] ?? sniffHtmlCharset(bytes)
      const html = decodeText(bytes, { declaredCharset: charset }).text
      // Before any DOM is built: a page nested thousands deep costs minutes of CPU in the parsers (and would fail later).
      try {
        checkHtmlDepth(html)
      } catch (err) {
        failPage(url, (err as Error).message, pageUrl)
        return
      }
      const { document } = parseHTML(html)
      const links = linksOf(document, got.raw)
      const { text } = extractHtmlText(html, cfg.html_extraction_policy)
      const body = text.trim()
      const hash = `sha256:${createHash('sha256').update(body).digest('hex')}`
      const etag = res.headers.get('etag')
      const storable = !(depth === 0 && cfg.skip_seed_pages && seedSet.has(url)) && !isPagination(pageUrl) && body.length >= cfg.min_content_chars && body.length > 0
      if (storable) {
        await ctx.store({
          source: pageUrl, sourceUri: pageUrl, title: titleOf(document, pageUrl), version: etag ?? hash, fileName: 'page.html',
          docType: 'html', contentType: res.headers.get('content-type') ?? 'text/html', body: bytes,
        }).then((r) => {
          if (r === 'stored') ctx.counters.stored++
          else if (r === 'unchanged') ctx.counters.unchanged++
          else ctx.counters.skipped++
        })
      } else ctx.counters.skipped++
      await saveState(pageUrl, { etag, last_modified: res.headers.get('last-modified'), content_hash: hash, links, stored: storable })
      enqueueLinks(links, depth + 1)
    }

    await crawlCapped(queue, ctx, cfg.request_delay_ms, cfg.max_pages, processPage)
    if (seedFailures === seeds.length) throw new SyncFailure(`No seed URL could be fetched (${lastSeedError})`)
  }
}

/** A page that failed this time is not proof that it is gone: its document is kept. */
function keepKnown(ctx: SyncContext, url: string, state: Map<string, PageState>): void {
  if (state.get(url)?.stored || ctx.known(url)) ctx.keep(url)
}

/** auth_headers win over auth_basic; secrets resolved now, held only in this run's memory. */
function authHeaders(ctx: SyncContext, cfg: WebConfigT): Record<string, string> {
  const out: Record<string, string> = {}
  const entries = Object.entries(cfg.auth_headers ?? {})
  try {
    if (entries.length > 0) {
      for (const [name, value] of entries) out[name.toLowerCase()] = resolveSecret(ctx.secrets, value, `auth_headers.${name}`)
    } else if (cfg.auth_basic) {
      const password = resolveSecret(ctx.secrets, cfg.auth_basic.password, 'auth_basic.password')
      out.authorization = `Basic ${Buffer.from(`${cfg.auth_basic.username}:${password}`).toString('base64')}`
    }
  } catch (err) {
    throw new SyncFailure((err as Error).message)
  }
  return out
}
