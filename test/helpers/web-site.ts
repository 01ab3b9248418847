// A generated web site on loopback for the web connector's tests and benchmark: an index under /docs with
// pagination (/docs/page/N), articles (ETag on even ones, Last-Modified on odd ones, both answering 304 to a
// matching conditional request), robots.txt, a redirect, a slow page, a 500 page, a binary page, a short page,
// a page outside the seed scope, and a basic-auth area (/members). A "directory" page /guide answers 301 to
// /guide/, whose relative links (intro/) only resolve right against the slash. Articles can be sent to a login
// page elsewhere (an expired credential), robots.txt can be moved. Every request is logged.
import { createHash } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface SiteRequest {
  path: string
  /** 0 until answered. */
  status: number
  ifNoneMatch: string | null
  ifModifiedSince: string | null
  userAgent: string | null
  authorization: string | null
  at: number
}

export interface WebSiteOptions {
  articles?: number
  perPage?: number
  /** Delay of /docs/slow, ms. */
  slowMs?: number
  basicUser?: string
  basicPassword?: string
}

export interface WebSite {
  url: string
  requests: SiteRequest[]
  articleCount: number
  /** Replaces an article's text (its ETag / Last-Modified change with it). */
  setArticle(i: number, text: string): void
  /** Removes an article: 404, and no longer listed. */
  removeArticle(i: number): void
  /** While set, every article request waits for the returned release function (abort tests). */
  hold(): () => void
  /** While set (not null), every article request answers 302 to this location: an SSO login, say. */
  redirectArticles(location: string | null): void
  /** While set (not null), /robots.txt answers 301 to this location; /robots-moved.txt serves the usual rules. */
  moveRobots(location: string | null): void
  articleText(i: number): string
  close(): Promise<void>
}

/** Listens on 127.0.0.1 on a free port (the test servers of the connectors); close() drops kept-alive connections too. */
export async function listenLoopback(server: Server): Promise<{ url: string; close(): Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

const LAST_MODIFIED_BASE = Date.parse('2026-01-01T00:00:00Z')

export function defaultArticle(i: number): string {
  return `Article ${i} explains topic number ${i} in detail. ` +
    'It has enough words to pass the minimum content length of the connector, with sentences about ' +
    `retrieval, indexing and crawling that differ by the number ${i}, so that no two pages are identical. ` +
    `Section ${i}.1 covers the background, section ${i}.2 the method and section ${i}.3 the results of experiment ${i * 7}.`
}

export async function startWebSite(opts: WebSiteOptions = {}): Promise<WebSite> {
  const articles = opts.articles ?? 200
  const perPage = opts.perPage ?? 20
  const slowMs = opts.slowMs ?? 400
  const user = opts.basicUser ?? 'reader'
  const password = opts.basicPassword ?? 'open-sesame'
  const texts = new Map<number, string>()
  const versions = new Map<number, number>()
  const removed = new Set<number>()
  const requests: SiteRequest[] = []
  let gate: Promise<void> | null = null
  let articleRedirect: string | null = null
  let robotsRedirect: string | null = null

  const text = (i: number) => texts.get(i) ?? defaultArticle(i)
  const etagOf = (i: number) => `"a${i}-${createHash('sha1').update(text(i)).digest('hex').slice(0, 12)}"`
  const lastModifiedOf = (i: number) => new Date(LAST_MODIFIED_BASE + (versions.get(i) ?? 0) * 86_400_000 + i * 1000).toUTCString()
  const pages = Math.ceil(articles / perPage)

  const html = (title: string, body: string, extraHead = '') =>
    `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title>${extraHead}</head><body><nav><a href="/docs">Home</a></nav><main>${body}</main></body></html>`

  function send(res: ServerResponse, status: number, body: string | Buffer, headers: Record<string, string> = {}) {
    res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', ...headers })
    res.end(body)
  }

  function article(req: IncomingMessage, res: ServerResponse, i: number) {
    if (i < 0 || i >= articles || removed.has(i)) return send(res, 404, html('Not found', '<p>gone</p>'))
    const headers: Record<string, string> = {}
    if (i % 2 === 0) {
      const etag = etagOf(i)
      headers.etag = etag
      if (req.headers['if-none-match'] === etag) return send(res, 304, '', headers)
    } else {
      const lm = lastModifiedOf(i)
      headers['last-modified'] = lm
      const since = req.headers['if-modified-since']
      if (since && Date.parse(since) >= Date.parse(lm)) return send(res, 304, '', headers)
    }
    const links = [`<a href="/docs/article/${(i + 1) % articles}">next</a>`, `<a href="/docs/article/${(i + 1) % articles}?utm_source=feed#top">next again</a>`]
    send(res, 200, html(`Article ${i}`, `<article><h1>Article ${i}</h1><p>${text(i)}</p>${links.join(' ')}</article>`,
      `<meta property="og:title" content="Open Graph ${i}">`), headers)
  }

  function route(req: IncomingMessage, res: ServerResponse): void | Promise<void> {
    const u = new URL(req.url ?? '/', 'http://x')
    const p = u.pathname
    if (p === '/robots.txt' && robotsRedirect !== null) return send(res, 301, '', { location: robotsRedirect })
    if (p === '/robots.txt' || p === '/robots-moved.txt') return send(res, 200, 'User-agent: *\nDisallow: /docs/private/\n\nUser-agent: BadBot\nDisallow: /\n', { 'content-type': 'text/plain' })
    if (p === '/docs') {
      const extra = ['/docs/page/1', '/docs/redirect', '/docs/slow', '/docs/broken', '/docs/binary', '/docs/short', '/docs/private/secret', '/other/outside', 'mailto:someone@example.com', 'https://elsewhere.invalid/x']
      return send(res, 200, html('Index', `<h1>Docs</h1><p>Welcome to the documentation index of the generated site.</p><ul>${extra.map((h) => `<li><a href="${h}">${h}</a></li>`).join('')}</ul>`))
    }
    const pageMatch = /^\/docs\/page\/(\d+)$/.exec(p)
    if (pageMatch) {
      const n = Number(pageMatch[1])
      if (n < 1 || n > pages) return send(res, 404, html('Not found', '<p>no such page</p>'))
      const ids = Array.from({ length: perPage }, (_, k) => (n - 1) * perPage + k).filter((i) => i < articles && !removed.has(i))
      const next = n < pages ? `<a href="/docs/page/${n + 1}">next page</a>` : ''
      return send(res, 200, html(`Page ${n}`, `<h1>Listing ${n}</h1><ul>${ids.map((i) => `<li><a href="/docs/article/${i}">Article ${i}</a></li>`).join('')}</ul>${next}`))
    }
    const articleMatch = /^\/docs\/article\/(\d+)$/.exec(p)
    if (articleMatch) {
      if (articleRedirect !== null) return send(res, 302, '', { location: articleRedirect })
      if (gate) return gate.then(() => article(req, res, Number(articleMatch[1])))
      return article(req, res, Number(articleMatch[1]))
    }
    if (p === '/guide') return send(res, 301, '', { location: '/guide/' })
    if (p === '/guide/') return send(res, 200, html('Guide', `<h1>Guide</h1><p>${defaultArticle(600_000)}</p><a href="intro/">Introduction</a>`))
    if (p === '/guide/intro/') return send(res, 200, html('Intro', `<h1>Introduction</h1><p>${defaultArticle(600_001)}</p><a href="../">up</a>`))
    if (p === '/docs/redirect') return send(res, 301, '', { location: '/docs/moved' })
    if (p === '/docs/moved') return send(res, 200, html('Moved', `<h1>Moved here</h1><p>${defaultArticle(100_000)}</p>`))
    if (p === '/docs/slow') {
      return new Promise((resolve) => setTimeout(() => {
        send(res, 200, html('Slow', `<h1>Slow page</h1><p>${defaultArticle(200_000)}</p>`))
        resolve()
      }, slowMs))
    }
    if (p === '/docs/broken') return send(res, 500, 'internal error', { 'content-type': 'text/plain' })
    if (p === '/docs/binary') return send(res, 200, Buffer.from([0, 1, 2, 3, 255, 254]), { 'content-type': 'application/octet-stream' })
    if (p === '/docs/short') return send(res, 200, html('Short', '<h1>Short</h1><p>Too short.</p>'))
    if (p === '/docs/private/secret') return send(res, 200, html('Secret', `<p>${defaultArticle(300_000)}</p>`))
    if (p === '/other/outside') return send(res, 200, html('Outside', `<p>${defaultArticle(400_000)}</p>`))
    if (p.startsWith('/members')) {
      const expected = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`
      if (req.headers.authorization !== expected) return send(res, 401, 'auth required', { 'www-authenticate': 'Basic realm="members"', 'content-type': 'text/plain' })
      if (p === '/members') return send(res, 200, html('Members', '<h1>Members</h1><a href="/members/guide">guide</a>'))
      if (p === '/members/guide') return send(res, 200, html('Member guide', `<h1>Member guide</h1><p>${defaultArticle(500_000)}</p>`))
    }
    return send(res, 404, html('Not found', '<p>nothing here</p>'))
  }

  const server = createServer((req, res) => {
    // Logged on arrival (a held request is visible while it waits); the status is filled in when it is answered.
    const entry: SiteRequest = {
      path: req.url ?? '', status: 0, ifNoneMatch: (req.headers['if-none-match'] as string) ?? null,
      ifModifiedSince: (req.headers['if-modified-since'] as string) ?? null, userAgent: req.headers['user-agent'] ?? null,
      authorization: req.headers.authorization ?? null, at: Date.now(),
    }
    requests.push(entry)
    res.on('finish', () => void (entry.status = res.statusCode))
    void Promise.resolve(route(req, res)).catch(() => res.destroy())
  })
  server.keepAliveTimeout = 1000
  const listening = await listenLoopback(server)

  return {
    url: listening.url,
    requests,
    articleCount: articles,
    setArticle(i, t) {
      texts.set(i, t)
      versions.set(i, (versions.get(i) ?? 0) + 1)
    },
    removeArticle: (i) => void removed.add(i),
    hold() {
      let release!: () => void
      gate = new Promise<void>((r) => (release = r))
      return () => {
        gate = null
        release()
      }
    },
    redirectArticles: (location) => void (articleRedirect = location),
    moveRobots: (location) => void (robotsRedirect = location),
    articleText: text,
    close: listening.close,
  }
}
