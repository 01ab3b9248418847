// A local server speaking the parts of Confluence's REST API the wiki connector uses, in Atlassian's published
// shapes (no Confluence can run on the build machines): space content paged by `start`/`limit` with
// `_links.next`, expanded version, labels and rendered body, child attachments with their download links,
// basic (cloud: email:api_token) or bearer (server: personal token) auth. It answers under /rest/api (server)
// and under any path ending in /wiki/rest/api (cloud), so a base URL containing `.atlassian.net` can be
// pointed at it. Every request is logged.
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

export interface ConfluenceServer {
  url: string
  requests: { path: string; status: number; authorization: string | null }[]
  pages: Map<string, WikiPage>
  setPage(page: WikiPage): void
  removePage(id: string): void
  close(): Promise<void>
}

export async function startConfluenceServer(opts: { spaceKey?: string; pages: WikiPage[]; authorization?: string }): Promise<ConfluenceServer> {
  const spaceKey = opts.spaceKey ?? 'ENG'
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
    const m = /^(.*?)(\/wiki)?\/rest\/api\/(.*)$/.exec(u.pathname)
    const download = /^(.*?)\/download\/attachments\/(\d+)\/([^/]+)$/.exec(u.pathname)
    if (download) {
      const att = pages.get(download[2])?.attachments?.find((a) => a.title === decodeURIComponent(download[3]))
      if (!att) return json(res, 404, { statusCode: 404, message: 'No attachment' })
      res.writeHead(200, { 'content-type': att.mediaType ?? 'application/octet-stream' })
      res.end(Buffer.from(att.body))
      return
    }
    if (!m) return json(res, 404, { statusCode: 404, message: 'Not found' })
    const prefix = m[1] + (m[2] ?? '')
    const api = m[3]
    const start = Number(u.searchParams.get('start') ?? 0)
    const limit = Math.min(Number(u.searchParams.get('limit') ?? 25), 50)
    const base = `http://${req.headers.host}${prefix}`
    const page = <T>(all: T[], next: (s: number) => string) => ({
      results: all.slice(start, start + limit), start, limit, size: all.slice(start, start + limit).length,
      _links: { base, context: prefix, ...(start + limit < all.length ? { next: next(start + limit) } : {}) },
    })
    if (api === 'content') {
      if (u.searchParams.get('spaceKey') !== spaceKey) return json(res, 200, page([], () => ''))
      const all = [...pages.values()].map((p) => ({
        id: p.id, type: 'page', status: 'current', title: p.title, version: { number: p.version ?? 1 },
        metadata: { labels: { results: (p.labels ?? []).map((name) => ({ prefix: 'global', name, id: name })), start: 0, limit: 200, size: (p.labels ?? []).length } },
        body: { view: { value: p.html, representation: 'view' } },
        _links: { webui: `/spaces/${spaceKey}/pages/${p.id}/${encodeURIComponent(p.title).replace(/%20/g, '+')}`, self: `${base}/rest/api/content/${p.id}` },
      }))
      return json(res, 200, page(all, (s) => `/rest/api/content?spaceKey=${spaceKey}&type=page&limit=${limit}&start=${s}`))
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
      return json(res, 200, page(all, (s) => `/rest/api/content/${p.id}/child/attachment?limit=${limit}&start=${s}`))
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
    requests,
    pages,
    setPage: (p) => void pages.set(p.id, p),
    removePage: (id) => void pages.delete(id),
    close: listening.close,
  }
}
