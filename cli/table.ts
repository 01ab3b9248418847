// Plain text tables for the terminal and for logs: columns padded to their widest cell, numbers right-aligned.
export function table(header: readonly string[], rows: ReadonlyArray<ReadonlyArray<string | number>>): string {
  const cells = [header, ...rows].map((r) => r.map((c) => String(c).replace(/\s+/g, ' ')))
  const numeric = header.map((_, i) => rows.length > 0 && rows.every((r) => typeof r[i] === 'number'))
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)))
  const render = (r: readonly string[]) =>
    r.map((c, i) => (numeric[i] ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join('  ').trimEnd()
  return [render(cells[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.slice(1).map(render)].join('\n')
}

/** Cuts a long value for a table cell, marking the cut. */
export const cut = (s: string, max: number): string => (s.length > max ? `${s.slice(0, max - 1)}…` : s)
