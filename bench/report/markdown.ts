// The Markdown report and its SVG charts, from a suite result: <stem>.md next to <stem>-*.svg.
import { barChart, formatValue, ratioChart } from './svg.ts'
import type { Comparison, NormalisedBench, Series, SuiteResult } from './types.ts'

export interface ReportFile {
  /** File name, relative to the report's folder. */
  name: string
  content: string
}

const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ')

function table(head: string[], rows: string[][]): string {
  return [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.map(cell).join(' | ')} |`)].join('\n')
}

function withRange(v: number, range: [number, number] | undefined): string {
  return range ? `${formatValue(v)} (${formatValue(range[0])}–${formatValue(range[1])})` : formatValue(v)
}

/** The target as the issue states it: '≥ 0.95x', '≤ 1.5x the baseline (now 1.59x)', '≤ 450 MB at 5,000 documents'. */
export function targetText(c: Comparison): string {
  if (c.target === undefined) return ''
  const dir = c.target_of === 'ratio' || c.higher_is_better ? '≥' : '≤'
  let text: string
  if (c.target_of === 'ratio') text = `${dir} ${formatValue(c.target)}x`
  else if (c.target_of === 'factor') {
    const f = c.baseline === null ? null : c.ours / c.baseline
    text = `${dir} ${formatValue(c.target)}x the baseline${f === null || !Number.isFinite(f) ? '' : ` (now ${formatValue(+f.toPrecision(4))}x)`}`
  } else text = `${dir} ${formatValue(c.target)} ${c.unit}`
  return c.target_at === undefined ? text : `${text} ${c.target_at}`
}

/** Whether the target was met; a target defined at another size than the run's is shown but not judged. */
export function metText(c: Comparison): string {
  if (c.met !== undefined) return c.met ? 'yes' : '**no**'
  return c.target === undefined ? '' : 'not judged at this size'
}

/** A target on the ratio chart's scale (above 1 = ours ahead): a factor turned round when lower is better. */
function ratioTarget(c: Comparison): number | undefined {
  if (c.target === undefined) return undefined
  if (c.target_of === 'ratio') return c.target
  if (c.target_of === 'factor') return c.higher_is_better ? c.target : +(1 / c.target).toPrecision(4)
  return undefined
}

function seriesChart(s: Series): string {
  return barChart({ title: s.title, unit: s.unit, groups: s.groups })
}

function seriesTable(s: Series): string {
  const keys = [...new Set(s.groups.flatMap((g) => Object.keys(g.values)))]
  return table([s.kind === 'percentiles' ? 'scenario' : 'stage', ...keys.map((k) => `${k} (${s.unit})`)],
    s.groups.map((g) => [g.label, ...keys.map((k) => (g.values[k] === undefined ? '' : formatValue(g.values[k])))]))
}

function statusText(b: NormalisedBench): string {
  if (b.status === 'ok') return 'ok'
  return `${b.status}: ${(b.error ?? '').split('\n')[0].slice(0, 160)}`
}

/** The ratio chart's rows: every comparison with a baseline, labelled with its benchmark. */
export function ratioBars(suite: SuiteResult) {
  return suite.benchmarks.flatMap((b) => b.comparisons.filter((c) => c.ratio !== null).map((c) => ({
    label: `${b.name}: ${c.metric}`,
    ratio: c.ratio!,
    target: ratioTarget(c),
  })))
}

/** The report's files: `<stem>.md` and one SVG per chart, linked from it by relative name. */
export function renderReport(suite: SuiteResult, stem: string): ReportFile[] {
  const files: ReportFile[] = []
  const m = suite.machine
  const out: string[] = []
  out.push(`# Quarry benchmarks, ${suite.started_at} (${suite.mode})`, '')
  out.push(`- machine: ${String(m.cpu)}, ${String(m.cores)} cores, ${String(m.memory_gb)} GB, Node ${String(m.node)}, ${String(m.platform)}`)
  out.push(`- load average at start: ${JSON.stringify(m.load_average)}; the benchmarks ran one after another, each in its own process`)
  out.push(`- revision: ${suite.git_revision ?? 'unknown'}; whole run ${formatValue(suite.seconds)} s`)
  out.push(`- ratio = ours / baseline when higher is better, baseline / ours when lower is better: above 1 means ours is ahead; a target written 'Nx the baseline' is on ours / baseline, as the issue states it`, '')

  out.push('## Summary', '')
  out.push(table(['benchmark', 'status', 'time (s)', 'load avg 1 min, start → end', 'comparisons', 'targets met'], suite.benchmarks.map((b) => {
    const withTarget = b.comparisons.filter((c) => c.met !== undefined)
    const load = b.load_average ? `${b.load_average.before[0]} → ${b.load_average.after[0]}` : ''
    return [b.name, statusText(b), formatValue(b.seconds), load, String(b.comparisons.length), withTarget.length ? `${withTarget.filter((c) => c.met).length}/${withTarget.length}` : '']
  })), '')

  // Every figure with a target in one table, where it stands and against what (the ceilings are measured in the same run).
  const targeted = suite.benchmarks.flatMap((b) => b.comparisons.filter((c) => c.target !== undefined).map((c) => [b, c] as const))
  if (targeted.length > 0) {
    out.push('## Targets', '')
    out.push(table(['benchmark', 'metric', 'ours', 'against', 'target', 'met'], targeted.map(([b, c]) => [
      b.name, c.metric, `${formatValue(c.ours)} ${c.unit}`,
      // A ratio target is read on the ratio; a factor target says its factor in the target column.
      c.baseline === null ? '' : `${formatValue(c.baseline)} ${c.unit} (${c.baseline_name ?? 'baseline'})${c.target_of === 'ratio' ? `: ${c.ratio === null ? '-' : `${formatValue(c.ratio)}x`}` : ''}`,
      targetText(c), metText(c),
    ])), '')
  }

  const bars = ratioBars(suite)
  if (bars.length > 0) {
    const name = `${stem}-ratios.svg`
    files.push({ name, content: ratioChart({ title: 'Ours against the baselines (same run)', bars, width: 940 }) })
    out.push('## Against the baselines', '', `![Ratios against baselines](${name})`, '')
  }
  const withBase = suite.benchmarks.flatMap((b) => b.comparisons.filter((c) => c.baseline !== null).map((c) => [b, c] as const))
  if (withBase.length > 0) {
    out.push(table(['benchmark', 'metric', 'ours', 'baseline', 'unit', 'ratio', 'target', 'met'], withBase.map(([b, c]) => [
      b.name, c.metric, withRange(c.ours, c.ours_range), `${withRange(c.baseline!, c.baseline_range)}${c.baseline_name ? ` (${c.baseline_name})` : ''}`,
      c.unit, c.ratio === null ? '' : `${formatValue(c.ratio)}x`, targetText(c), metText(c),
    ])), '')
  }
  const alone = suite.benchmarks.flatMap((b) => b.comparisons.filter((c) => c.baseline === null).map((c) => [b, c] as const))
  if (alone.length > 0) {
    out.push('## Figures without a baseline', '')
    out.push(table(['benchmark', 'metric', 'value', 'unit', 'better', 'target', 'met'], alone.map(([b, c]) => [
      b.name, c.metric, withRange(c.ours, c.ours_range), c.unit, c.higher_is_better ? 'higher' : 'lower', targetText(c), metText(c),
    ])), '')
  }

  for (const b of suite.benchmarks) {
    for (const s of b.series) {
      if (s.groups.length === 0) continue
      const name = `${stem}-${s.id}.svg`
      files.push({ name, content: seriesChart(s) })
      out.push(`## ${s.title}`, '', `![${s.title}](${name})`, '', seriesTable(s), '')
    }
  }

  out.push('## Sizes', '')
  for (const b of suite.benchmarks) out.push(`- **${b.name}**: \`${JSON.stringify(b.sizes)}\``)
  out.push('')
  const notes = suite.benchmarks.filter((b) => b.notes.length > 0 || b.status !== 'ok')
  if (notes.length > 0) {
    out.push('## Notes', '')
    for (const b of notes) {
      if (b.status !== 'ok') out.push(`- **${b.name}** ${b.status}:`, '', '```', (b.error ?? '').slice(0, 2000), '```', '')
      for (const n of b.notes) out.push(`- **${b.name}**: ${n}`)
    }
    out.push('')
  }
  out.push(`Raw results of every benchmark: \`${stem}.json\` (field \`raw\`).`, '')
  files.unshift({ name: `${stem}.md`, content: out.join('\n') })
  return files
}
