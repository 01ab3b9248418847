// A local server speaking the parts of Confluence's REST API the wiki connector uses, in Atlassian's published
// shapes (no Confluence can run on the build machines): space content paged by `start`/`limit`, expanded version,
// labels and rendered body, child attachments with their download links, basic (cloud: email:api_token) or
// bearer (server: personal token) auth. As Atlassian documents it, the site lives under a context path (`/wiki`
// on Cloud, a server's own such as `/confluence`, or none): `_links.base` is the site with that path, and the
// `next`, `webui` and `download` links are relative to it; a listing may hold fewer results than the `limit`
// asked (`bodyLimit`: Cloud caps listings that expand bodies), so only an absent `_links.next` ends it. Only
// paths under the context are answered, so a client that drops it gets 404s. Every request is logged.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { listenLoopback } from './web-site.ts'

export interface WikiAttachment {
  title: string
  body: string | Buffer
  version?: number
  mediaType?: string
  /** `_links.download` as the server sends it (default: this server's download path). */
  download?: string
}

export interface WikiPage {
  id: string
  title: string
  html: string
  version?: number
  labels?: string[]
  attachments?: WikiAttachment[]
}

export interface ConfluenceServerOptions {
  spaceKey?: string
  pages: WikiPage[]
  authorization?: string
  /** The site's context path: '' (default), '/wiki' (Cloud), '/confluence' (a server). */
  context?: string
  /** Largest `limit` answered (default 50). */
  maxLimit?: number
  /** Largest `limit` answered when the request expands a body (`expand=...body.view`); default maxLimit. */
  bodyLimit?: number
}

export interface ConfluenceServer {
  url: string
  /** url + context: what `_links.base` says. */
  site: string
  requests: { path: string; status: number; authorization: string | null }[]
  pages: Map<string, WikiPage>
  setPage(page: WikiPage): void
  removePage(id: string): void
  close(): Promise<void>
}

export async function startConfluenceServer(opts: ConfluenceServerOptions): Promise<ConfluenceServer> {
  const spaceKey = opts.spaceKey ?? 'ENG'
  const context = (opts.context ?? '').replace(/\/+$/, '')
  const maxLimit = opts.maxLimit ?? 50
  const pages = new Map(opts.pages.map((p) => [p.id, p]))
  const requests: ConfluenceServer['requests'] = []

  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' })
    res.end(JSON.stringify(body))
  }

  function route(req: IncomingMessage, res: ServerResponse): void {
    const u = new URL(req.url ?? '/', 'http://x')
    if (opts.authorization && req.headers.authorization !== opts.authorization) {
      return json(res, 401, { statusCode: 401, message: 'Client must be authenticated to access this resource.' })
    }
    if (!u.pathname.startsWith(`${context}/`)) return json(res, 404, { statusCode: 404, message: 'Not found' })
    const path = u.pathname.slice(context.length)
    const m = /^\/rest\/api\/(.*)$/.exec(path)
    const download = /^\/download\/attachments\/(\d+)\/([^/]+)$/.exec(path)
    const webui = /^\/spaces\/([^/]+)\/pages\/(\d+)(\/[^/]*)?$/.exec(path)
    if (webui) {
      const p = webui[1] === spaceKey ? pages.get(webui[2]) : undefined
      if (!p) return json(res, 404, { statusCode: 404, message: 'Page not found' })
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
      res.end(`<!doctype html><title>${p.title}</title>${p.html}`)
      return
    }
    if (download) {
      const att = pages.get(download[1])?.attachments?.find((a) => a.title === decodeURIComponent(download[2]))
      if (!att) return json(res, 404, { statusCode: 404, message: 'No attachment' })
      res.writeHead(200, { 'content-type': att.mediaType ?? 'application/octet-stream' })
      res.end(Buffer.from(att.body))
      return
    }
    if (!m) return json(res, 404, { statusCode: 404, message: 'Not found' })
    const api = m[1]
    const start = Number(u.searchParams.get('start') ?? 0)
    const cap = /(^|,)body\./.test(u.searchParams.get('expand') ?? '') ? Math.min(opts.bodyLimit ?? maxLimit, maxLimit) : maxLimit
    const limit = Math.min(Number(u.searchParams.get('limit') ?? 25), cap)
    const base = `http://${req.headers.host}${context}`
    // The next link repeats the request with the limit answered and the following start, relative to base.
    const next = (s: number) => {
      const q = new URLSearchParams(u.searchParams)
      q.set('limit', String(limit))
      q.set('start', String(s))
      return `/rest/api/${api}?${q}`
    }
    const page = <T>(all: T[]) => ({
      results: all.slice(start, start + limit), start, limit, size: all.slice(start, start + limit).length,
      _links: { base, context, self: `${base}${path}`, ...(start + limit < all.length ? { next: next(start + limit) } : {}) },
    })
    if (api === 'content') {
      if (u.searchParams.get('spaceKey') !== spaceKey) return json(res, 200, page([]))
      const all = [...pages.values()].map((p) => ({
        id: p.id, type: 'page', status: 'current', title: p.title, version: { number: p.version ?? 1 },
        metadata: { labels: { results: (p.labels ?? []).map((name) => ({ prefix: 'global', name, id: name })), start: 0, limit: 200, size: (p.labels ?? []).length } },
        body: { view: { value: p.html, representation: 'view' } },
        _links: { webui: `/spaces/${spaceKey}/pages/${p.id}/${encodeURIComponent(p.title).replace(/%20/g, '+')}`, self: `${base}/rest/api/content/${p.id}` },
      }))
      return json(res, 200, page(all))
    }
    const att = /^content\/(\d+)\/child\/attachment$/.exec(api)
    if (att) {
      const p = pages.get(att[1])
      if (!p) return json(res, 404, { statusCode: 404, message: `No content found with id: ${att[1]}` })
      const all = (p.attachments ?? []).map((a, i) => ({
        id: `att${p.id}${i}`, type: 'attachment', status: 'current', title: a.title, version: { number: a.version ?? 1 },
        extensions: { mediaType: a.mediaType ?? 'application/octet-stream', fileSize: Buffer.from(a.body).length },
        _links: { download: a.download ?? `/download/attachments/${p.id}/${encodeURIComponent(a.title)}?version=${a.version ?? 1}&api=v2` },
      }))
      return json(res, 200, page(all))
    }
    return json(res, 404, { statusCode: 404, message: 'Not found' })
  }

  const server = createServer((req, res) => {
    res.on('finish', () => requests.push({ path: req.url ?? '', status: res.statusCode, authorization: req.headers.authorization ?? null }))
    route(req, res)
  })
  const listening = await listenLoopback(server)
  return {
    url: listening.url,
    site: listening.url + context,
    requests,
    pages,
    setPage: (p) => void pages.set(p.id, p),
    removePage: (id) => void pages.delete(id),
    close: listening.close,
  }
}
