// robots.txt (RFC 9309): the group for our product token, else the `*` group; the longest matching rule
// wins, Allow over Disallow on a tie; `*` and a trailing `$` in paths. A missing file (4xx) allows all;
// what an unreachable file or a server error means is the caller's decision (sources/web.ts).

interface Rule {
  allow: boolean
  pattern: RegExp
  length: number
}

export interface Robots {
  allowed(url: string): boolean
}

export const ALLOW_ALL: Robots = { allowed: () => true }

function compileRule(path: string): RegExp {
  const anchored = path.endsWith('$')
  const body = (anchored ? path.slice(0, -1) : path).split('*').map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')
  return new RegExp(`^${body}${anchored ? '$' : ''}`)
}

/** `product` is the user-agent token to match, lower-case (`quarry-webconnector`). */
export function parseRobots(text: string, product: string): Robots {
  const groups: { agents: string[]; rules: Rule[] }[] = []
  let current: { agents: string[]; rules: Rule[] } | null = null
  let lastWasAgent = false
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/#.*$/, '').trim()
    const m = /^([A-Za-z-]+)\s*:\s*(.*)$/.exec(line)
    if (!m) continue
    const key = m[1].toLowerCase()
    const value = m[2].trim()
    if (key === 'user-agent') {
      if (!current || !lastWasAgent) groups.push((current = { agents: [], rules: [] }))
      current.agents.push(value.toLowerCase())
      lastWasAgent = true
      continue
    }
    lastWasAgent = false
    if (!current || (key !== 'allow' && key !== 'disallow')) continue
    if (value === '') continue
    current.rules.push({ allow: key === 'allow', pattern: compileRule(value), length: value.length })
  }
  const mine = groups.filter((g) => g.agents.some((a) => a !== '*' && product.startsWith(a)))
  const chosen = mine.length > 0 ? mine : groups.filter((g) => g.agents.includes('*'))
  const rules = chosen.flatMap((g) => g.rules)
  if (rules.length === 0) return ALLOW_ALL
  return {
    allowed(url) {
      const u = new URL(url)
      const path = u.pathname + u.search
      let best: Rule | null = null
      for (const r of rules) {
        if (!r.pattern.test(path)) continue
        if (!best || r.length > best.length || (r.length === best.length && r.allow && !best.allow)) best = r
      }
      return best === null || best.allow
    },
  }
}
