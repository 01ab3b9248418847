// --compare: each comparison of an earlier result against this one. Ratios are compared where both runs
// have a baseline (they carry the machine's speed in both terms, so they travel between runs and
// machines better than raw figures); values otherwise. A change is signed so that positive is better.
import type { Comparison, SuiteResult } from './types.ts'

export const DEFAULT_MARGIN = 0.1

export type CompareStatus = 'same' | 'improved' | 'regressed' | 'untracked' | 'sizes differ' | 'missing' | 'new'

export interface CompareRow {
  benchmark: string
  metric: string
  basis: 'ratio' | 'value'
  unit: string
  before: number | null
  after: number | null
  /** Relative change, positive = better; null when it cannot be expressed (from 0, or missing). */
  change: number | null
  status: CompareStatus
}

export interface CompareResult {
  margin: number
  rows: CompareRow[]
  regressions: CompareRow[]
  warnings: string[]
}

/**
 * Relative change of `after` against `before` in the metric's good direction: +0.2 is 20 % better.
 * From 0 it is +-Infinity (any move away from 0 is beyond every margin) or 0 when nothing moved.
 */
export function relativeChange(before: number, after: number, higherIsBetter: boolean): number {
  const delta = higherIsBetter ? after - before : before - after
  if (before === 0) return delta === 0 ? 0 : delta > 0 ? Infinity : -Infinity
  return delta / Math.abs(before)
}

function basisOf(before: Comparison, after: Comparison): { basis: 'ratio' | 'value'; b: number; a: number; higher: boolean } {
  if (before.ratio !== null && after.ratio !== null) return { basis: 'ratio', b: before.ratio, a: after.ratio, higher: true }
  return { basis: 'value', b: before.ours, a: after.ours, higher: after.higher_is_better }
}

const sameSizes = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b)

/** Compares the benchmarks the later run ran; a benchmark it did not run is left out, not missing. */
export function compareSuites(before: SuiteResult, after: SuiteResult, margin = DEFAULT_MARGIN): CompareResult {
  const rows: CompareRow[] = []
  const warnings: string[] = []
  if (before.format !== after.format) warnings.push(`the earlier file has format ${String(before.format)}, this run ${after.format}`)
  if (before.mode !== after.mode) warnings.push(`comparing a ${before.mode} run with a ${after.mode} run: sizes differ, nothing is gated`)
  const beforeCpu = before.machine?.cpu
  if (beforeCpu !== after.machine?.cpu) warnings.push(`different CPUs: ${String(beforeCpu)} then ${String(after.machine?.cpu)}`)
  for (const bench of after.benchmarks) {
    if (bench.status !== 'ok') continue
    const prev = before.benchmarks.find((b) => b.name === bench.name)
    if (!prev || prev.status !== 'ok') {
      warnings.push(`${bench.name}: nothing to compare with (${prev ? prev.status : 'not in the earlier file'})`)
      continue
    }
    const sizesDiffer = !sameSizes(prev.sizes, bench.sizes)
    if (sizesDiffer) warnings.push(`${bench.name}: sizes differ from the earlier run, its changes are shown but not gated`)
    const seen = new Set<string>()
    for (const c of bench.comparisons) {
      seen.add(c.metric)
      const p = prev.comparisons.find((x) => x.metric === c.metric)
      if (!p) {
        rows.push({ benchmark: bench.name, metric: c.metric, basis: c.ratio !== null ? 'ratio' : 'value', unit: c.ratio !== null ? 'x' : c.unit, before: null, after: c.ratio ?? c.ours, change: null, status: 'new' })
        continue
      }
      const { basis, b, a, higher } = basisOf(p, c)
      const change = relativeChange(b, a, higher)
      let status: CompareStatus
      if (c.tracked === false) status = 'untracked'
      else if (sizesDiffer || before.mode !== after.mode) status = 'sizes differ'
      else if (change < -margin) status = 'regressed'
      else if (change > margin) status = 'improved'
      else status = 'same'
      rows.push({ benchmark: bench.name, metric: c.metric, basis, unit: basis === 'ratio' ? 'x' : c.unit, before: b, after: a, change: Number.isFinite(change) ? +change.toFixed(4) : null, status })
    }
    for (const p of prev.comparisons) {
      if (!seen.has(p.metric)) rows.push({ benchmark: bench.name, metric: p.metric, basis: p.ratio !== null ? 'ratio' : 'value', unit: p.ratio !== null ? 'x' : p.unit, before: p.ratio ?? p.ours, after: null, change: null, status: 'missing' })
    }
  }
  return { margin, rows, regressions: rows.filter((r) => r.status === 'regressed'), warnings }
}

const num = (x: number | null) => (x === null ? '-' : String(+x.toPrecision(4)))

function changeText(r: CompareRow): string {
  if (r.change !== null) return `${r.change >= 0 ? '+' : ''}${(r.change * 100).toFixed(1)} %`
  if (r.before !== null && r.after !== null) return r.before === r.after ? '0 %' : 'from 0'
  return '-'
}

/** A plain-text table: one line per metric, the regressions marked. */
export function formatCompareTable(result: CompareResult): string {
  const head = ['benchmark', 'metric', 'basis', 'before', 'after', 'change (+ = better)', 'status']
  const body = result.rows.map((r) => [r.benchmark, r.metric, r.basis === 'ratio' ? 'ratio' : `value (${r.unit})`, num(r.before), num(r.after), changeText(r), r.status === 'regressed' ? 'REGRESSED' : r.status])
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((row) => row[i].length)))
  const line = (cells: string[]) => cells.map((c, i) => (i >= 3 && i <= 5 ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join('  ').trimEnd()
  const out = [line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)]
  for (const w of result.warnings) out.push(`note: ${w}`)
  const pct = `${+(result.margin * 100).toFixed(2)} %`
  out.push(result.regressions.length === 0
    ? `no tracked metric regressed by more than ${pct}`
    : `${result.regressions.length} tracked metric(s) regressed by more than ${pct}: ${result.regressions.map((r) => `${r.benchmark}: ${r.metric}`).join('; ')}`)
  return out.join('\n')
}
