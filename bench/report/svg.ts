// Small SVG charts for the benchmark report: horizontal bars (one or more values per row) and a ratio chart
// on a log scale centred on parity. Text widths are estimated (no font metrics without a browser), so label
// columns are sized generously and long labels are cut, with the full text in a <title> tooltip.

const FONT = 'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"'
const CHAR_W = 7 // average width of a 12 px sans-serif character, slightly over-estimated
const ROW = 22
const PALETTE = ['#3b6fb6', '#e08a2c', '#5a9e4b', '#8c5ab0', '#c4483e', '#4aa3a2']
const GOOD = '#3f8f4f'
const BAD = '#c4483e'

export function escapeXml(s: string): string {
  return s.replace(/[<>&'"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', "'": '&apos;', '"': '&quot;' })[c]!)
}

const f = (x: number) => String(+x.toFixed(2))

/** A number short enough for a label: 3 significant digits without trailing zeros, thousands grouped. */
export function formatValue(x: number): string {
  if (Math.abs(x) >= 1000) return Math.round(x).toLocaleString('en-US')
  return String(+x.toPrecision(3))
}

/** A linear axis from 0 past `max`: a step of 1, 2, 2.5 or 5 times a power of ten, about 5 steps in all. */
export function niceAxis(max: number): { end: number; step: number } {
  if (!(max > 0)) return { end: 1, step: 0.2 }
  const raw = max / 5
  const p = 10 ** Math.floor(Math.log10(raw))
  const step = [1, 2, 2.5, 5, 10].map((m) => m * p).find((s) => s >= raw * (1 - 1e-9))!
  return { end: +(Math.ceil(max / step - 1e-9) * step).toPrecision(12), step }
}

const cut = (s: string, max: number) => (s.length <= max ? s : `${s.slice(0, max - 1)}…`)

function text(x: number, y: number, s: string, attrs = ''): string {
  return `<text x="${f(x)}" y="${f(y)}" ${attrs}>${escapeXml(s)}</text>`
}

function frame(width: number, height: number, title: string, body: string[]): string {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${f(width)}" height="${f(height)}" viewBox="0 0 ${f(width)} ${f(height)}" ${FONT} font-size="12">`,
    `<title>${escapeXml(title)}</title>`,
    `<rect x="0" y="0" width="${f(width)}" height="${f(height)}" fill="#ffffff"/>`,
    text(12, 22, title, 'font-size="14" font-weight="600" fill="#222"'),
    ...body,
    '</svg>',
    '',
  ].join('\n')
}

export interface BarGroup {
  label: string
  values: Record<string, number>
}

export interface BarChartOptions {
  title: string
  unit: string
  groups: BarGroup[]
  width?: number
}

/**
 * Horizontal bars on a linear axis from 0: one row per group, one bar per key (a legend when there are
 * several keys, e.g. p50 and p99). Bar length is value / axis end * plot width.
 */
export function barChart(o: BarChartOptions): string {
  const width = o.width ?? 760
  const keys = [...new Set(o.groups.flatMap((g) => Object.keys(g.values)))]
  const labelChars = Math.min(44, Math.max(6, ...o.groups.map((g) => g.label.length)))
  const left = 16 + labelChars * CHAR_W
  const right = 70
  const plot = Math.max(120, width - left - right)
  // Legend entries flow left to right from the plot's edge, wrapping at the chart's width.
  const legend: { key: string; x: number; row: number }[] = []
  let lx = left
  let row = 0
  for (const k of keys) {
    const w = 17 + k.length * CHAR_W + 14
    if (lx + w > width && lx > left) {
      lx = left
      row++
    }
    legend.push({ key: k, x: lx, row })
    lx += w
  }
  const top = keys.length > 1 ? 58 + row * 18 : 40
  const barH = keys.length > 1 ? 14 : 16
  const groupH = Math.max(ROW, keys.length * (barH + 3) + 8)
  const height = top + o.groups.length * groupH + 40
  const axis = niceAxis(Math.max(0, ...o.groups.flatMap((g) => Object.values(g.values)).filter(Number.isFinite)))
  const max = axis.end
  const x = (v: number) => left + (Math.max(0, v) / max) * plot
  const body: string[] = []
  if (keys.length > 1) {
    for (const [i, l] of legend.entries()) {
      const ly = 34 + l.row * 18
      body.push(`<rect x="${f(l.x)}" y="${ly}" width="12" height="12" fill="${PALETTE[i % PALETTE.length]}"/>`, text(l.x + 17, ly + 10.5, l.key, 'fill="#333"'))
    }
  }
  const axisY = top + o.groups.length * groupH
  for (let i = 0; i * axis.step <= max * (1 + 1e-9); i++) {
    const v = i * axis.step
    body.push(`<line x1="${f(x(v))}" y1="${f(top - 4)}" x2="${f(x(v))}" y2="${f(axisY)}" stroke="#e3e3e3"/>`)
    body.push(text(x(v), axisY + 16, formatValue(v), 'text-anchor="middle" fill="#666" font-size="11"'))
  }
  body.push(text(left + plot / 2, axisY + 32, o.unit, 'text-anchor="middle" fill="#444" font-size="11"'))
  o.groups.forEach((g, gi) => {
    const gy = top + gi * groupH
    body.push(`<g><title>${escapeXml(g.label)}</title>${text(left - 8, gy + groupH / 2 + 4, cut(g.label, labelChars + 1), 'text-anchor="end" fill="#222"')}</g>`)
    keys.forEach((k, ki) => {
      const v = g.values[k]
      if (v === undefined || !Number.isFinite(v)) return
      const y = gy + (groupH - keys.length * (barH + 3) + 3) / 2 + ki * (barH + 3)
      const w = x(v) - left
      body.push(`<rect class="bar" data-group="${escapeXml(g.label)}" data-key="${escapeXml(k)}" data-value="${v}" x="${f(left)}" y="${f(y)}" width="${f(w)}" height="${barH}" fill="${PALETTE[ki % PALETTE.length]}"/>`)
      body.push(text(left + w + 4, y + barH / 2 + 4, formatValue(v), 'fill="#333" font-size="11"'))
    })
  })
  body.push(`<line x1="${f(left)}" y1="${f(top - 4)}" x2="${f(left)}" y2="${f(axisY)}" stroke="#888"/>`)
  return frame(width, height, o.title, body)
}

export interface RatioBar {
  label: string
  ratio: number
  /** A target ratio, drawn as a mark on the row. */
  target?: number
}

export interface RatioChartOptions {
  title: string
  bars: RatioBar[]
  width?: number
}

/**
 * Ratios against baselines on a log2 axis from parity (1x): a bar to the right means ours is ahead, to the
 * left behind; 2x and 0.5x are equally long. Bar length is |log2(ratio)| * plot width / axis span in powers of 2.
 */
export function ratioChart(o: RatioChartOptions): string {
  const width = o.width ?? 760
  const labelChars = Math.min(60, Math.max(6, ...o.bars.map((b) => b.label.length)))
  const left = 16 + labelChars * CHAR_W
  const right = 60
  const plot = Math.max(160, width - left - right)
  const top = 58
  const height = top + o.bars.length * ROW + 40
  const logs = o.bars.flatMap((b) => [b.ratio, b.target ?? 1]).filter((r) => r > 0 && Number.isFinite(r)).map((r) => Math.log2(r))
  // Whole powers of two at the ends, and at least one on each side of parity so that 1x is never an edge.
  const lo = Math.min(-1, Math.floor(Math.min(0, ...logs)))
  const hi = Math.max(1, Math.ceil(Math.max(0, ...logs)))
  const x = (r: number) => left + ((Math.max(lo, Math.min(hi, Math.log2(r))) - lo) / (hi - lo)) * plot
  const mid = x(1)
  const body: string[] = []
  body.push(
    `<rect x="${f(left)}" y="34" width="12" height="12" fill="${GOOD}"/>`, text(left + 17, 44.5, 'ours ahead', 'fill="#333"'),
    `<rect x="${f(left + 100)}" y="34" width="12" height="12" fill="${BAD}"/>`, text(left + 117, 44.5, 'ours behind', 'fill="#333"'),
    `<line x1="${f(left + 210)}" y1="33" x2="${f(left + 210)}" y2="47" stroke="#111" stroke-width="2.5"/>`, text(left + 217, 44.5, 'target', 'fill="#333"'),
  )
  const axisY = top + o.bars.length * ROW
  const step = Math.ceil((hi - lo) / 8)
  for (let e = lo; e <= hi; e += step) {
    const r = 2 ** e
    body.push(`<line x1="${f(x(r))}" y1="${f(top - 4)}" x2="${f(x(r))}" y2="${f(axisY)}" stroke="${e === 0 ? '#555' : '#e3e3e3'}"/>`)
    body.push(text(x(r), axisY + 16, e < 0 ? `1/${2 ** -e}x` : `${2 ** e}x`, 'text-anchor="middle" fill="#666" font-size="11"'))
  }
  if ((0 - lo) % step !== 0) body.push(`<line x1="${f(mid)}" y1="${f(top - 4)}" x2="${f(mid)}" y2="${f(axisY)}" stroke="#555"/>`)
  body.push(text(left + plot / 2, axisY + 32, 'ratio vs baseline (log scale; 1x = parity)', 'text-anchor="middle" fill="#444" font-size="11"'))
  o.bars.forEach((b, i) => {
    const y = top + i * ROW
    body.push(`<g><title>${escapeXml(b.label)}</title>${text(left - 8, y + ROW / 2 + 4, cut(b.label, labelChars + 1), 'text-anchor="end" fill="#222"')}</g>`)
    if (!(b.ratio > 0) || !Number.isFinite(b.ratio)) return
    const end = x(b.ratio)
    const x0 = Math.min(mid, end)
    const ahead = b.ratio >= 1
    body.push(`<rect class="bar" data-label="${escapeXml(b.label)}" data-value="${b.ratio}" x="${f(x0)}" y="${f(y + 3)}" width="${f(Math.abs(end - mid))}" height="${ROW - 6}" fill="${ahead ? GOOD : BAD}"/>`)
    const label = `${formatValue(b.ratio)}x`
    const tx = b.target !== undefined && b.target > 0 ? x(b.target) : undefined
    // Right of the bar, the parity line and the target mark, where the row is free (a bar behind grows left).
    body.push(text(Math.max(end, mid, tx ?? mid) + 5, y + ROW / 2 + 4, label, 'fill="#222" font-size="11"'))
    if (tx !== undefined) {
      body.push(`<line class="target" data-value="${b.target}" x1="${f(tx)}" y1="${f(y + 1)}" x2="${f(tx)}" y2="${f(y + ROW - 1)}" stroke="#111" stroke-width="2.5"/>`)
    }
  })
  return frame(width, height, o.title, body)
}
