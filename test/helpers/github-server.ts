// A local server speaking the parts of GitHub's REST API the git connector uses, in GitHub's published shapes
// (no GitHub can be reached from the build machines): branches, git trees (recursive, or truncated so the
// client must walk directories), git blobs (base64), error bodies, bearer auth, and the rate-limit answers
// (403 with X-RateLimit-Remaining 0 and X-RateLimit-Reset, 429 with Retry-After). Every request is logged.
import { createHash } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { listenLoopback } from './web-site.ts'

export interface GithubRequest {
  path: string
  status: number
  authorization: string | null
  accept: string | null
  apiVersion: string | null
}

export interface GithubServerOptions {
  owner?: string
  repo?: string
  branch?: string
  files: Record<string, string | Buffer>
  /** Answer recursive tree requests with truncated: true (a partial list). */
  truncateTree?: boolean
  /** Required bearer token; requests without it get 401. */
  token?: string
}

export interface GithubServer {
  url: string
  requests: GithubRequest[]
  setFile(path: string, content: string | Buffer): void
  removeFile(path: string): void
  /** The next `count` API requests answer with a rate limit: '403' (reset header) or '429' (Retry-After). */
  rateLimit(kind: '403' | '429', count: number, seconds: number): void
  blobSha(path: string): string
  close(): Promise<void>
}

const gitSha = (kind: string, body: Buffer) => createHash('sha1').update(`${kind} ${body.length}\0`).update(body).digest('hex')

export async function startGithubServer(opts: GithubServerOptions): Promise<GithubServer> {
  const owner = opts.owner ?? 'acme'
  const repo = opts.repo ?? 'handbook'
  const branch = opts.branch ?? 'main'
  const files = new Map<string, Buffer>(Object.entries(opts.files).map(([p, c]) => [p, Buffer.from(c)]))
  const requests: GithubRequest[] = []
  let limited: { kind: '403' | '429'; count: number; seconds: number } | null = null

  interface Dir { sha: string; entries: { path: string; type: 'blob' | 'tree'; sha: string; size?: number; full: string }[] }

  let cached: { dirs: Map<string, Dir>; blobs: Map<string, Buffer> } | null = null
  /** Trees of the current files (built again after a change): directory -> entries, SHAs from content as git has. */
  function trees(): { dirs: Map<string, Dir>; blobs: Map<string, Buffer> } {
    cached ??= buildTrees()
    return cached
  }

  function buildTrees(): { dirs: Map<string, Dir>; blobs: Map<string, Buffer> } {
    const blobs = new Map<string, Buffer>()
    const children = new Map<string, Set<string>>([['', new Set()]])
    for (const path of files.keys()) {
      const parts = path.split('/')
      for (let i = 0; i < parts.length; i++) {
        const dir = parts.slice(0, i).join('/')
        const full = parts.slice(0, i + 1).join('/')
        if (!children.has(dir)) children.set(dir, new Set())
        children.get(dir)!.add(full)
        if (i < parts.length - 1 && !children.has(full)) children.set(full, new Set())
      }
    }
    const dirs = new Map<string, Dir>()
    const build = (dir: string): string => {
      const entries: Dir['entries'] = []
      for (const full of [...children.get(dir)!].sort()) {
        const name = full.slice(dir ? dir.length + 1 : 0)
        if (files.has(full)) {
          const body = files.get(full)!
          const sha = gitSha('blob', body)
          blobs.set(sha, body)
          entries.push({ path: name, type: 'blob', sha, size: body.length, full })
        } else entries.push({ path: name, type: 'tree', sha: build(full), full })
      }
      const sha = gitSha('tree', Buffer.from(entries.map((e) => `${e.type} ${e.path} ${e.sha}`).join('\n')))
      dirs.set(sha, { sha, entries })
      dirs.set(`path:${dir}`, { sha, entries })
      return sha
    }
    build('')
    return { dirs, blobs }
  }

  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers })
    res.end(JSON.stringify(body))
  }

  function route(req: IncomingMessage, res: ServerResponse): void {
    const u = new URL(req.url ?? '/', 'http://x')
    const base = `/repos/${owner}/${repo}`
    if (opts.token && req.headers.authorization !== `Bearer ${opts.token}`) {
      return json(res, 401, { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest' })
    }
    if (limited && limited.count > 0) {
      limited.count--
      const seconds = limited.seconds
      if (limited.kind === '429') return json(res, 429, { message: 'You have exceeded a secondary rate limit.' }, { 'retry-after': String(seconds) })
      return json(res, 403, { message: 'API rate limit exceeded for 127.0.0.1.' }, {
        'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(Math.ceil(Date.now() / 1000) + seconds),
      })
    }
    if (!u.pathname.startsWith(`${base}/`)) return json(res, 404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' })
    const rest = u.pathname.slice(base.length + 1)
    const { dirs, blobs } = trees()
    const root = dirs.get('path:')!
    if (rest === `branches/${encodeURIComponent(branch)}` || rest === `branches/${branch}`) {
      const commitSha = gitSha('commit', Buffer.from(root.sha))
      return json(res, 200, { name: branch, commit: { sha: commitSha, commit: { tree: { sha: root.sha } } }, protected: false })
    }
    if (rest.startsWith('branches/')) return json(res, 404, { message: 'Branch not found', documentation_url: 'https://docs.github.com/rest/branches/branches#get-a-branch' })
    const tree = /^git\/trees\/([0-9a-f]{40})$/.exec(rest)
    if (tree) {
      const dir = dirs.get(tree[1])
      if (!dir) return json(res, 404, { message: 'Not Found' })
      const recursive = u.searchParams.get('recursive') === '1'
      const list: { path: string; mode: string; type: string; sha: string; size?: number }[] = []
      const walk = (d: Dir, prefix: string) => {
        for (const e of d.entries) {
          const path = prefix ? `${prefix}/${e.path}` : e.path
          list.push({ path, mode: e.type === 'blob' ? '100644' : '040000', type: e.type, sha: e.sha, ...(e.type === 'blob' ? { size: e.size } : {}) })
          if (recursive && e.type === 'tree') walk(dirs.get(e.sha)!, path)
        }
      }
      walk(dir, '')
      const truncated = recursive && opts.truncateTree === true
      return json(res, 200, { sha: dir.sha, url: `http://x${u.pathname}`, tree: truncated ? list.slice(0, Math.ceil(list.length / 3)) : list, truncated })
    }
    const blob = /^git\/blobs\/([0-9a-f]{40})$/.exec(rest)
    if (blob) {
      const body = blobs.get(blob[1])
      if (!body) return json(res, 404, { message: 'Not Found' })
      const content = body.toString('base64').replace(/.{60}/g, '$&\n')
      return json(res, 200, { sha: blob[1], node_id: 'x', size: body.length, url: `http://x${u.pathname}`, content, encoding: 'base64' })
    }
    return json(res, 404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' })
  }

  const server = createServer((req, res) => {
    res.on('finish', () => requests.push({
      path: req.url ?? '', status: res.statusCode, authorization: req.headers.authorization ?? null,
      accept: req.headers.accept ?? null, apiVersion: (req.headers['x-github-api-version'] as string) ?? null,
    }))
    route(req, res)
  })
  const listening = await listenLoopback(server)
  return {
    url: listening.url,
    requests,
    setFile(path, content) {
      files.set(path, Buffer.from(content))
      cached = null
    },
    removeFile(path) {
      files.delete(path)
      cached = null
    },
    rateLimit: (kind, count, seconds) => void (limited = { kind, count, seconds }),
    blobSha: (path) => gitSha('blob', files.get(path)!),
    close: listening.close,
  }
}
