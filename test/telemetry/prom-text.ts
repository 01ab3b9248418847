// A parser of the Prometheus text format (0.0.4) for tests: every sample with its labels, and the TYPE of each
// family. It refuses what Prometheus would refuse (a malformed line, a sample without a TYPE declared before it),
// so a test that parses a scrape also checks that the scrape is valid.
export interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

export interface Scrape {
  samples: Sample[]
  types: Map<string, string>
  /** Samples of one name whose labels include `labels`. */
  find(name: string, labels?: Record<string, string>): Sample[]
  /** The value of the one sample that matches; throws when none or several match. */
  value(name: string, labels?: Record<string, string>): number
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \d+)?$/
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/gy
const FAMILY_SUFFIXES = ['_bucket', '_sum', '_count', '_total', '_created', '']

function parseLabels(text: string, line: string): Record<string, string> {
  const out: Record<string, string> = {}
  LABEL.lastIndex = 0
  while (LABEL.lastIndex < text.length) {
    const m = LABEL.exec(text)
    if (!m) throw new Error(`malformed labels in: ${line}`)
    out[m[1]] = m[2].replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c))
  }
  return out
}

function parseValue(raw: string, line: string): number {
  if (raw === '+Inf') return Infinity
  if (raw === '-Inf') return -Infinity
  if (raw === 'NaN') return NaN
  const v = Number(raw)
  if (Number.isNaN(v)) throw new Error(`malformed value in: ${line}`)
  return v
}

export function parsePrometheus(text: string): Scrape {
  const samples: Sample[] = []
  const types = new Map<string, string>()
  for (const line of text.split('\n')) {
    if (line === '') continue
    if (line.startsWith('#')) {
      const m = /^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/.exec(line)
      if (m) {
        if (types.has(m[1])) throw new Error(`family declared twice: ${m[1]}`)
        types.set(m[1], m[2])
      }
      continue
    }
    const m = SAMPLE.exec(line)
    if (!m) throw new Error(`malformed sample line: ${line}`)
    const [, name, labels, value] = m
    const family = FAMILY_SUFFIXES.map((s) => (s && name.endsWith(s) ? name.slice(0, -s.length) : s ? '' : name)).find((f) => f && types.has(f))
    if (!family) throw new Error(`sample without a TYPE: ${line}`)
    samples.push({ name, labels: labels ? parseLabels(labels, line) : {}, value: parseValue(value, line) })
  }
  const find = (name: string, labels: Record<string, string> = {}) =>
    samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
  return {
    samples,
    types,
    find,
    value(name, labels) {
      const hits = find(name, labels)
      if (hits.length !== 1) throw new Error(`${hits.length} samples match ${name} ${JSON.stringify(labels ?? {})}`)
      return hits[0].value
    },
  }
}
