// Rate-limit rules ([ENT], spec 8, settings rate_limit.*): which rule a request path falls under and how much it
// weighs. Rules are tried in order and the first whose paths match wins; paths no rule matches share the default
// limit; exempt paths are never counted. In a pattern `*` matches exactly one path segment.
import type { Settings } from '../../kernel/config/schema.ts'

export const UNIT_MS = { second: 1000, minute: 60_000, hour: 3_600_000 } as const

export interface Limit {
  count: number
  windowMs: number
}

export interface Rule {
  name: string
  limit: Limit
  /** The counter of this rule; a rule's paths share it. */
  key: string
  weight(path: string): number
  matches(path: string): boolean
}

/** `<count>/<unit>` (the settings schema has checked the form). */
export function parseLimit(text: string): Limit {
  const m = /^(\d+)\/(second|minute|hour)$/.exec(text)
  if (!m) throw new Error(`rate_limit: '${text}' is not <count>/<second|minute|hour>`)
  return { count: Number(m[1]), windowMs: UNIT_MS[m[2] as keyof typeof UNIT_MS] }
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** A path pattern as an anchored regular expression: `*` is one segment (no `/`); a trailing `/` is ignored. */
export function pathPattern(pattern: string): RegExp {
  const segments = trimSlash(pattern).split('/').map((s) => (s === '*' ? '[^/]+' : escape(s)))
  return new RegExp(`^${segments.join('/')}$`)
}

const trimSlash = (path: string) => (path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path)

const anyOf = (patterns: readonly string[]) => {
  const res = patterns.map(pathPattern)
  return (path: string) => res.some((re) => re.test(path))
}

export interface RuleSet {
  /** The rule counting this path; null when the path is exempt. */
  ruleFor(path: string): Rule | null
}

export const DEFAULT_RULE = 'default'

export function compileRules(cfg: Settings['rate_limit']): RuleSet {
  const rules: Rule[] = cfg.rules.map((r, i) => {
    const weights = Object.entries(r.weights ?? {}).map(([p, w]) => [pathPattern(p), w] as const)
    return {
      name: r.name,
      limit: parseLimit(r.limit),
      key: `${i}:${encodeURIComponent(r.name)}`,
      matches: anyOf(r.paths),
      weight: (path) => weights.find(([re]) => re.test(path))?.[1] ?? 1,
    }
  })
  const fallback: Rule = { name: DEFAULT_RULE, limit: parseLimit(cfg.default), key: DEFAULT_RULE, matches: () => true, weight: () => 1 }
  const exempt = anyOf(cfg.exempt_paths)
  return {
    ruleFor(rawPath) {
      const path = trimSlash(rawPath)
      if (exempt(path)) return null
      return rules.find((r) => r.matches(path)) ?? fallback
    },
  }
}
