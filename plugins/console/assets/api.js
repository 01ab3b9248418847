// The public API, same origin only. The bearer token (access-controlled edition) comes from auth.js's memory.

let tokenOf = () => null
let onUnauthorized = () => {}

export function configureApi({ token, unauthorized }) {
  tokenOf = token
  onUnauthorized = unauthorized
}

export class ApiError extends Error {
  constructor(status, body) {
    super(describe(status, body))
    this.status = status
    this.body = body
  }

  /** The 422 issues ({loc, msg, type}), or []. */
  get issues() {
    return Array.isArray(this.body?.detail) ? this.body.detail : []
  }
}

function describe(status, body) {
  const d = body?.detail
  if (typeof d === 'string') return d
  if (Array.isArray(d)) return d.map((i) => `${(i.loc ?? []).filter((p) => p !== 'body').join('.')}: ${i.msg}`).join('; ')
  return `HTTP ${status}`
}

export const query = (params) => {
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(params ?? {})) if (v !== undefined && v !== null && v !== '') q.set(k, String(v))
  const s = q.toString()
  return s ? `?${s}` : ''
}

export function authHeaders(extra = {}) {
  const t = tokenOf()
  return t ? { ...extra, authorization: `Bearer ${t}` } : extra
}

/** JSON in, JSON out; `raw: true` returns the Response (headers, blobs). Errors throw ApiError. */
export async function api(method, path, { json, body, raw = false, signal } = {}) {
  const headers = authHeaders({ accept: 'application/json' })
  if (json !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(path, { method, headers, body: json !== undefined ? JSON.stringify(json) : body, signal, credentials: 'same-origin', cache: 'no-store' })
  if (res.ok && raw) return res
  const text = await res.text()
  let data = null
  try {
    data = text ? JSON.parse(text) : null
  } catch {
    data = { detail: text.slice(0, 300) }
  }
  if (!res.ok) {
    const err = new ApiError(res.status, data)
    if (res.status === 401) onUnauthorized(err)
    throw err
  }
  return data
}

export const get = (path, opts) => api('GET', path, opts)

/** One file to POST {path} as multipart field `file`, with upload progress (fetch has none): resolves the JSON. */
export function upload(path, file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest()
    xhr.open('POST', path)
    for (const [k, v] of Object.entries(authHeaders({ accept: 'application/json' }))) xhr.setRequestHeader(k, v)
    xhr.upload.addEventListener('progress', (e) => e.lengthComputable && onProgress(e.loaded / e.total))
    xhr.addEventListener('load', () => {
      let data = null
      try {
        data = JSON.parse(xhr.responseText)
      } catch {
        data = { detail: xhr.responseText.slice(0, 300) }
      }
      if (xhr.status >= 200 && xhr.status < 300) resolve(data)
      else {
        const err = new ApiError(xhr.status, data)
        if (xhr.status === 401) onUnauthorized(err)
        reject(err)
      }
    })
    xhr.addEventListener('error', () => reject(new Error('Network error')))
    xhr.addEventListener('abort', () => reject(new Error('Upload aborted')))
    const form = new FormData()
    form.append('file', file, file.name)
    xhr.send(form)
  })
}

/** Downloads a response body under its file name (the API needs the bearer header, so no plain link). */
export async function download(path, fallbackName) {
  const res = await api('GET', path, { raw: true })
  const cd = res.headers.get('content-disposition') ?? ''
  const star = /filename\*=UTF-8''([^;]+)/i.exec(cd)
  const plain = /filename="?([^";]+)"?/i.exec(cd)
  let name = fallbackName
  try {
    name = star ? decodeURIComponent(star[1]) : plain ? plain[1] : fallbackName
  } catch {
    // keep the fallback
  }
  const url = URL.createObjectURL(await res.blob())
  const a = document.createElement('a')
  a.href = url
  a.download = name
  document.body.append(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(url), 10_000)
  return name
}
