// Wiki space on Confluence's REST API (spec 4.9 "confluence", notes.md): pages of a space (rendered HTML stored
// as .html), their attachments of supported formats under max_attachment_mb, pages with an excluded label skipped
// with their attachments. content_version is the version number: an unchanged page or attachment is not
// downloaded again, but attachments are always listed. Listings follow `_links.next` until it is absent, and every
// relative link is joined to `_links.base`, as Atlassian documents them (confluenceLink).
import type { DocType } from '../../../compute/types.ts'
import { baseName, CONTENT_TYPES, docTypeOf, extensionOf } from '../../docs/formats.ts'
import { SyncFailure, USER_AGENT, type Source, type SyncContext } from '../engine.ts'
import type { ConfluenceConfigT } from '../schemas.ts'
import { createApiClient, RateLimited, tokenFrom } from './http.ts'

export const ATTACHMENT_EXTENSIONS = ['pdf', 'docx', 'txt', 'md', 'html', 'htm', 'rst', 'hwp'] as const
const PAGE_SIZE = 50

interface Links {
  /** The site with its context path: `https://acme.atlassian.net/wiki` (Cloud), `https://host/confluence` (a server). */
  base?: string
  context?: string
  /** The next page of the listing, relative to base; absent on the last page. */
  next?: string
}

interface Paged<T> {
  results: T[]
  size?: number
  _links?: Links
}

interface Page {
  id: string
  title: string
  version?: { number?: number }
  metadata?: { labels?: { results?: { name: string }[] } }
  body?: { view?: { value?: string } }
  _links?: { webui?: string }
}

interface Attachment {
  id: string
  title: string
  version?: { number?: number }
  extensions?: { fileSize?: number; mediaType?: string }
  _links?: { download?: string }
}

const escapeHtml = (s: string) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!)

/**
 * A link of an answer made absolute. Confluence's links (`next`, `webui`, `download`) are relative to
 * `_links.base`, the site with its context path, so they are appended to it: resolved as a URL reference,
 * `/download/...` would drop the `/wiki` or `/confluence` of the base. A link that already starts with the
 * context path (the shape of the v2 API's links) goes on the origin; an absolute one is kept as it is.
 */
export function confluenceLink(link: string, base: string): string {
  if (/^[A-Za-z][A-Za-z0-9+.-]*:/.test(link)) return link
  const b = new URL(base)
  const context = b.pathname.replace(/\/+$/, '')
  const path = link.startsWith('/') ? link : `/${link}`
  return context !== '' && (path === context || path.startsWith(`${context}/`)) ? b.origin + path : b.origin + context + path
}

/** Cloud sites (`.atlassian.net`) serve the API under /wiki/rest/api, servers under /rest/api. */
export function confluenceApiBase(baseUrl: string): string {
  const base = baseUrl.replace(/\/+$/, '')
  return base.includes('.atlassian.net') ? `${base.replace(/\/wiki$/, '')}/wiki/rest/api` : `${base}/rest/api`
}

export function createConfluenceSource(): Source {
  return async (ctx: SyncContext) => {
    const cfg = ctx.config as ConfluenceConfigT
    const credential = tokenFrom(ctx, cfg.auth_token_secret, 'Confluence')
    // notes.md: a credential with ':' is email:api_token (basic), anything else a personal token (bearer).
    const authorization = credential === null ? null
      : credential.includes(':') ? `Basic ${Buffer.from(credential).toString('base64')}` : `Bearer ${credential}`
    const api = createApiClient(ctx, {
      name: 'Confluence',
      headers: { accept: 'application/json', 'user-agent': USER_AGENT, ...(authorization ? { authorization } : {}) },
      maxWaitMs: cfg.request_timeout_sec * 10 * 1000,
      // Listings of 50 pages with their rendered bodies, or one attachment (at most max_attachment_mb).
      maxBytes: Math.max(cfg.max_attachment_mb * 1024 * 1024, 64 * 1024 * 1024),
    })
    const apiBase = confluenceApiBase(cfg.base_url)
    const siteBase = apiBase.replace(/\/rest\/api$/, '')
    // Links come from the server: only the configured site's origin receives the credential.
    const siteOrigin = new URL(cfg.base_url).origin
    /**
     * The base an answer's links are relative to: its `_links.base`, on the configured origin. A server whose base
     * URL setting names another address (its public name behind a proxy) keeps its context path on ours.
     */
    const baseOf = (links: Links | undefined): string => {
      try {
        if (links?.base) return siteOrigin + new URL(links.base).pathname.replace(/\/+$/, '')
      } catch { /* not a URL: the configured site's */ }
      return siteBase
    }

    /**
     * Every result of a listing with the base its links are relative to: the first page, then `_links.next`
     * until it is absent. A page may hold fewer results than the limit asked (Cloud caps it when bodies are
     * expanded), so its size says nothing about the end.
     */
    async function* listing<T>(first: string, what: string): AsyncGenerator<{ item: T; base: string }> {
      const seen = new Set<string>()
      for (let url = first; ;) {
        seen.add(url)
        const list = await api.json<Paged<T>>(url, what)
        const base = baseOf(list._links)
        const results = Array.isArray(list.results) ? list.results : []
        for (const item of results) yield { item, base }
        if (!list._links?.next || results.length === 0) return
        url = confluenceLink(list._links.next, base)
        if (new URL(url).origin !== siteOrigin) throw new SyncFailure(`Confluence's next link for ${what} leaves ${siteOrigin}`)
        if (seen.has(url)) throw new SyncFailure(`Confluence answered a next link already followed for ${what}`)
      }
    }
    const excluded = new Set(cfg.exclude_labels)
    const maxAttachment = cfg.max_attachment_mb * 1024 * 1024
    let pagesSeen = 0

    const tally = (outcome: string) => {
      if (outcome === 'stored') ctx.counters.stored++
      else if (outcome === 'unchanged') ctx.counters.unchanged++
      else ctx.counters.skipped++
    }

    const unchanged = (source: string, version: string) => {
      const k = ctx.known(source)
      return k !== undefined && k.content_version === version && k.status !== 'failed' && k.status !== 'deleted'
    }

    async function attachments(page: Page): Promise<void> {
      const first = `${apiBase}/content/${encodeURIComponent(page.id)}/child/attachment?expand=version&limit=${PAGE_SIZE}&start=0`
      for await (const { item: a, base } of listing<Attachment>(first, `the attachments of page ${page.id}`)) {
        const ext = extensionOf(a.title)
        const docType = docTypeOf(a.title)
        if (!(ATTACHMENT_EXTENSIONS as readonly string[]).includes(ext) || !docType || !a._links?.download) {
          ctx.counters.skipped++
          continue
        }
        if ((a.extensions?.fileSize ?? 0) > maxAttachment) {
          ctx.counters.skipped++
          continue
        }
        const downloadUrl = confluenceLink(a._links.download, base)
        // The link carries ?version=N: without it the URL names the attachment across versions (same doc_id).
        const source = downloadUrl.replace(/\?.*$/, '')
        // The title becomes part of an object key: a path in it ('../x.md') must not reach the store.
        const fileName = baseName(a.title)
        const refused = new URL(downloadUrl).origin !== siteOrigin ? `its download link leaves ${siteOrigin}`
          : fileName === '' || fileName === '.' || fileName === '..' ? 'its title has no usable file name' : null
        if (refused) {
          // One attachment is counted as failed; the sync goes on, and a known document is not pruned for it.
          ctx.counters.failed++
          if (ctx.known(source)) ctx.keep(source)
          ctx.log.warn({ connector_id: ctx.connector.connector_id, page_id: page.id, attachment_id: a.id, reason: refused }, 'Confluence attachment skipped')
          continue
        }
        const version = String(a.version?.number ?? 1)
        if (unchanged(source, version)) {
          ctx.keep(source)
          ctx.counters.unchanged++
          continue
        }
        let body: Uint8Array
        try {
          body = await api.bytes(downloadUrl, `attachment ${a.title}`, '*/*')
          ctx.counters.fetched++
        } catch (err) {
          if (!(err instanceof SyncFailure) || err instanceof RateLimited) throw err
          ctx.counters.failed++
          if (ctx.known(source)) ctx.keep(source)
          continue
        }
        if (body.byteLength === 0 || body.byteLength > maxAttachment) {
          ctx.counters.skipped++
          continue
        }
        tally(await ctx.store({
          source, sourceUri: downloadUrl, title: fileName.replace(/\.[^.]+$/, ''), version, fileName, docType: docType as DocType,
          contentType: CONTENT_TYPES[docType as DocType], body,
        }))
      }
    }

    const firstPages = `${apiBase}/content?spaceKey=${encodeURIComponent(cfg.space_key)}&type=page&expand=version,metadata.labels,body.view&limit=${PAGE_SIZE}&start=0`
    for await (const { item: page, base } of listing<Page>(firstPages, `the pages of space ${cfg.space_key}`)) {
      const labels = page.metadata?.labels?.results?.map((l) => l.name) ?? []
      if (labels.some((l) => excluded.has(l))) {
        ctx.counters.skipped++
        continue
      }
      if (pagesSeen >= cfg.max_pages) {
        ctx.truncate()
        return
      }
      pagesSeen++
      ctx.counters.fetched++
      const source = confluenceLink(page._links?.webui ?? `/pages/viewpage.action?pageId=${encodeURIComponent(page.id)}`, base)
      const version = String(page.version?.number ?? 1)
      if (unchanged(source, version)) {
        ctx.keep(source)
        ctx.counters.unchanged++
      } else {
        const html = `<!doctype html><html><head><meta charset="utf-8"><title>${escapeHtml(page.title)}</title></head><body><h1>${escapeHtml(page.title)}</h1>\n${page.body?.view?.value ?? ''}</body></html>`
        tally(await ctx.store({
          source, sourceUri: source, title: page.title, version, fileName: `${page.id}.html`, docType: 'html',
          contentType: 'text/html; charset=utf-8', body: new TextEncoder().encode(html),
        }))
      }
      await attachments(page)
    }
  }
}
