// A segment trie: static segments win over parameters (`:name`), which win over a trailing wildcard (`*`).
// Lookup walks the path once without building an array of segments or a regex.

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'HEAD' | 'OPTIONS'

interface Node<T> {
  statics: Map<string, Node<T>>
  param: { name: string; node: Node<T> } | null
  wildcard: Map<Method, T> | null
  handlers: Map<Method, T>
}

export type RouteLookup<T> =
  | { kind: 'found'; value: T; params: Record<string, string> }
  | { kind: 'method_not_allowed'; allowed: Method[] }
  | { kind: 'not_found' }
  | { kind: 'bad_path' }

const newNode = <T>(): Node<T> => ({ statics: new Map(), param: null, wildcard: null, handlers: new Map() })

export class Router<T> {
  private readonly root: Node<T> = newNode()

  add(method: Method, path: string, value: T): void {
    if (!path.startsWith('/')) throw new Error(`route path must start with '/': ${path}`)
    let node = this.root
    const segments = path.split('/').slice(1)
    for (let i = 0; i < segments.length; i++) {
      const seg = segments[i]
      if (seg === '*') {
        if (i !== segments.length - 1) throw new Error(`'*' must be the last segment: ${path}`)
        node.wildcard ??= new Map()
        if (node.wildcard.has(method)) throw new Error(`duplicate route ${method} ${path}`)
        node.wildcard.set(method, value)
        return
      }
      if (seg.startsWith(':')) {
        const name = seg.slice(1)
        if (node.param && node.param.name !== name) {
          throw new Error(`conflicting parameter names ':${node.param.name}' and ':${name}' at ${path}`)
        }
        node.param ??= { name, node: newNode() }
        node = node.param.node
      } else {
        let next = node.statics.get(seg)
        if (!next) node.statics.set(seg, (next = newNode()))
        node = next
      }
    }
    if (node.handlers.has(method)) throw new Error(`duplicate route ${method} ${path}`)
    node.handlers.set(method, value)
  }

  find(method: Method, path: string): RouteLookup<T> {
    const params: Record<string, string> = {}
    const node = this.walk(this.root, path, 1, params)
    if (node === 'bad_path') return { kind: 'bad_path' }
    if (!node) return { kind: 'not_found' }
    const { handlers, params: found } = node
    const value = handlers.get(method) ?? (method === 'HEAD' ? handlers.get('GET') : undefined)
    if (value !== undefined) return { kind: 'found', value, params: found }
    if (handlers.size === 0) return { kind: 'not_found' }
    return { kind: 'method_not_allowed', allowed: [...handlers.keys()] }
  }

  /** Depth-first with backtracking: a static branch that dead-ends falls back to the parameter branch. */
  private walk(node: Node<T>, path: string, from: number, params: Record<string, string>):
    | { handlers: Map<Method, T>; params: Record<string, string> }
    | null
    | 'bad_path' {
    if (from > path.length) return node.handlers.size > 0 ? { handlers: node.handlers, params } : null
    let end = path.indexOf('/', from)
    if (end === -1) end = path.length
    const seg = path.slice(from, end)
    const next = node.statics.get(seg)
    if (next) {
      const hit = this.walk(next, path, end + 1, params)
      if (hit) return hit
    }
    if (node.param && seg.length > 0) {
      let value: string
      try {
        value = seg.includes('%') ? decodeURIComponent(seg) : seg
      } catch {
        return 'bad_path'
      }
      const hit = this.walk(node.param.node, path, end + 1, { ...params, [node.param.name]: value })
      if (hit) return hit
    }
    if (node.wildcard) {
      return { handlers: node.wildcard, params: { ...params, '*': path.slice(from) } }
    }
    return null
  }
}
