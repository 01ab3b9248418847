// Git repository on GitHub's REST API (spec 4.9 "github", notes.md): the branch's tree (recursive; a
// truncated tree is walked directory by directory), files under path_prefix with the extensions of 4.9 up to
// max_file_size_mb, blobs fetched only when their SHA changed. Source-code files are stored as doc_type
// `code`, which the pipeline chunks with the code splitter (chunking.code_max_chars).
import type { DocType } from '../../../compute/types.ts'
import { crawlCapped, SyncFailure, USER_AGENT, type Source, type SyncContext } from '../engine.ts'
import type { GithubConfigT } from '../schemas.ts'
import { createApiClient, RateLimited, tokenFrom } from './http.ts'

export const GITHUB_EXTENSIONS = ['py', 'ts', 'tsx', 'js', 'jsx', 'go', 'java', 'rs', 'cpp', 'cc', 'c', 'cs', 'rb', 'php', 'swift', 'kt', 'scala', 'sh', 'md', 'txt', 'rst'] as const
const TEXT_TYPES: Record<string, DocType> = { md: 'md', txt: 'txt', rst: 'rst' }
const CONTENT_TYPES: Record<string, string> = { md: 'text/markdown; charset=utf-8', rst: 'text/x-rst; charset=utf-8' }

interface TreeEntry {
  path: string
  type: 'blob' | 'tree' | 'commit'
  sha: string
  size?: number
}

const extensionOf = (path: string) => {
  const name = path.slice(path.lastIndexOf('/') + 1)
  const dot = name.lastIndexOf('.')
  return dot > 0 ? name.slice(dot + 1).toLowerCase() : ''
}

export function createGithubSource(): Source {
  return async (ctx: SyncContext) => {
    const cfg = ctx.config as GithubConfigT
    const token = tokenFrom(ctx, cfg.auth_token_secret, 'GitHub')
    const api = createApiClient(ctx, {
      name: 'GitHub',
      headers: {
        accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28', 'user-agent': USER_AGENT,
        ...(token ? { authorization: `Bearer ${token}` } : {}),
      },
      maxWaitMs: cfg.request_timeout_sec * 10 * 1000,
      // A blob comes base64-encoded in JSON: a third larger than the file, which is at most max_file_size_mb.
      maxBytes: Math.max(cfg.max_file_size_mb * 1024 * 1024 * 1.4 + 65536, 64 * 1024 * 1024),
    })
    const base = `${cfg.api_url.replace(/\/+$/, '')}/repos/${encodeURIComponent(cfg.owner)}/${encodeURIComponent(cfg.repo)}`
    const repoName = `${cfg.owner}/${cfg.repo}`

    const branchRes = await api.get(`${base}/branches/${encodeURIComponent(cfg.branch)}`)
    if (branchRes.status === 404) throw new SyncFailure(`GitHub repository or branch not found: ${repoName}@${cfg.branch}`)
    if (!branchRes.ok || !branchRes.body) {
      throw new SyncFailure(`GitHub answered HTTP ${branchRes.status} for branch ${repoName}@${cfg.branch}${branchRes.status === 401 ? ' (check the credential in auth_token_secret)' : ''}`)
    }
    const branch = JSON.parse(new TextDecoder().decode(branchRes.body)) as { commit?: { sha?: string; commit?: { tree?: { sha?: string } } } }
    const rootSha = branch.commit?.commit?.tree?.sha ?? branch.commit?.sha
    if (!rootSha) throw new SyncFailure(`GitHub branch answer for ${repoName}@${cfg.branch} has no commit`)

    const prefix = cfg.path_prefix.replace(/^\/+|\/+$/g, '')
    const under = (path: string) => prefix === '' || path === prefix || path.startsWith(`${prefix}/`)
    // A directory is worth opening when it leads to, or lies below, the prefix.
    const worthOpening = (dir: string) => prefix === '' || under(dir) || prefix.startsWith(`${dir}/`)

    const files: TreeEntry[] = []
    const root = await api.json<{ tree: TreeEntry[]; truncated?: boolean }>(`${base}/git/trees/${rootSha}?recursive=1`, 'the repository tree')
    if (!root.truncated) {
      for (const e of root.tree) if (e.type === 'blob') files.push(e)
    } else {
      // GitHub cut the recursive listing: walk the tree one directory at a time from the root.
      const dirs: { sha: string; path: string }[] = [{ sha: rootSha, path: '' }]
      while (dirs.length > 0) {
        const dir = dirs.shift()!
        const listing = await api.json<{ tree: TreeEntry[] }>(`${base}/git/trees/${dir.sha}`, `directory '${dir.path || '/'}'`)
        for (const e of listing.tree) {
          const path = dir.path ? `${dir.path}/${e.path}` : e.path
          if (e.type === 'tree' && worthOpening(path)) dirs.push({ sha: e.sha, path })
          else if (e.type === 'blob') files.push({ ...e, path })
        }
      }
    }

    const maxBytes = cfg.max_file_size_mb * 1024 * 1024
    const wanted = files
      .filter((f) => under(f.path) && (GITHUB_EXTENSIONS as readonly string[]).includes(extensionOf(f.path)))
      .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
    const fitting = wanted.filter((f) => {
      if ((f.size ?? 0) <= maxBytes) return true
      ctx.counters.skipped++
      return false
    })
    const fetchFile = async (f: TreeEntry): Promise<void> => {
      const source = `github://${cfg.owner}/${cfg.repo}/${cfg.branch}/${f.path}`
      const known = ctx.known(source)
      if (known && known.content_version === f.sha && known.status !== 'failed' && known.status !== 'deleted') {
        // Equal blob SHA: no blob request at all.
        ctx.keep(source)
        ctx.counters.unchanged++
        return
      }
      let body: Uint8Array
      try {
        const blob = await api.json<{ content?: string; encoding?: string }>(`${base}/git/blobs/${f.sha}`, `blob of ${f.path}`)
        body = blob.encoding === 'base64' ? Buffer.from(blob.content ?? '', 'base64') : Buffer.from(blob.content ?? '', 'utf8')
        ctx.counters.fetched++
      } catch (err) {
        if (!(err instanceof SyncFailure) || err instanceof RateLimited) throw err
        ctx.counters.failed++
        if (known) ctx.keep(source)
        ctx.log.debug({ path: f.path, err }, 'blob request failed')
        return
      }
      if (body.byteLength === 0) {
        ctx.counters.skipped++
        return
      }
      const ext = extensionOf(f.path)
      const outcome = await ctx.store({
        source, sourceUri: `${cfg.api_url.replace(/\/+$/, '')}/repos/${cfg.owner}/${cfg.repo}/contents/${f.path}?ref=${encodeURIComponent(cfg.branch)}`,
        title: f.path, version: f.sha, fileName: f.path.slice(f.path.lastIndexOf('/') + 1), docType: TEXT_TYPES[ext] ?? 'code',
        contentType: CONTENT_TYPES[ext] ?? 'text/plain; charset=utf-8', body,
      })
      if (outcome === 'stored') ctx.counters.stored++
      else if (outcome === 'unchanged') ctx.counters.unchanged++
      else ctx.counters.skipped++
    }
    await crawlCapped(fitting, ctx, cfg.request_delay_ms, cfg.max_files, fetchFile)
  }
}
