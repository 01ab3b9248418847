// Reading README.md and docs/*.md as the tests in this folder need them: the shell blocks the README marks as a
// walkthrough (`<!-- readme-test: scratch|repo -->` on the line before the fence), split into commands with the
// output each is documented to print, and the code spans, fences and links of every page.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const ROOT = fileURLToPath(new URL('../../', import.meta.url))

/** README.md and every docs/*.md, as [path relative to the root, text]. */
export function pages(): [string, string][] {
  const docs = readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)
  return ['README.md', ...docs].map((p) => [p, readFileSync(join(ROOT, p), 'utf8')])
}

export interface Fence {
  lang: string
  body: string
  /** 1-based line of the opening fence. */
  line: number
  /** The `readme-test` marker on the line before the fence, if any. */
  marker?: string
}

export function fences(text: string): Fence[] {
  const lines = text.split('\n')
  const out: Fence[] = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i])
    if (!open) continue
    const end = lines.findIndex((l, j) => j > i && /^```\s*$/.test(l))
    if (end < 0) throw new Error(`unclosed fence at line ${i + 1}`)
    const marker = /^<!--\s*readme-test:\s*(\S+)\s*-->\s*$/.exec(lines[i - 1] ?? '')?.[1]
    out.push({ lang: open[1], body: lines.slice(i + 1, end).join('\n'), line: i + 1, marker })
    i = end
  }
  return out
}

/** Text outside fences (prose, tables, headings). */
export function prose(text: string): string {
  return text.replace(/^```[^\n]*\n[\s\S]*?^```\s*$/gm, '')
}

/** Inline code spans of the prose. */
export function codeSpans(text: string): string[] {
  return [...prose(text).matchAll(/`([^`\n]+)`/g)].map((m) => m[1])
}

export interface Step {
  /** The command as written, continuation lines included. */
  command: string
  /** The `# ` lines right after the command: what it prints, `…` standing for any text. */
  expected: string[]
  /** 1-based line in the page. */
  line: number
}

/**
 * A shell block as commands, each with the comment lines that follow it directly (its documented output). A comment
 * after a blank line, or at the start, is an explanation and belongs to no command.
 */
export function steps(block: Fence): Step[] {
  const lines = block.body.split('\n')
  const out: Step[] = []
  let current: Step | null = null
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]
    if (line.trim() === '') {
      current = null
    } else if (line.startsWith('#')) {
      if (current) current.expected.push(line.replace(/^#\s?/, ''))
    } else {
      let command = line
      const start = i
      while (command.endsWith('\\') && i + 1 < lines.length) command = `${command}\n${lines[++i]}`
      current = { command, expected: [], line: block.line + 1 + start }
      out.push(current)
    }
  }
  return out
}

const squeeze = (s: string) => s.replace(/\s+/g, ' ').trim()

/** A documented output line as a pattern over one output line: `…` is any text, runs of blanks are one. */
export function linePattern(expected: string): RegExp {
  const parts = squeeze(expected).split('…').map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
  return new RegExp(`^${parts.join('.*')}$`)
}

/**
 * Whether every expected line matches an output line, in order (other output lines may come between them).
 * Returns the first expected line that found no match, or null.
 */
export function unmatched(expected: readonly string[], output: string): string | null {
  const lines = output.split('\n').map(squeeze).filter((l) => l !== '')
  let at = 0
  for (const e of expected) {
    const re = linePattern(e)
    while (at < lines.length && !re.test(lines[at])) at++
    if (at === lines.length) return e
    at++
  }
  return null
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, blanks to hyphens. */
export function slug(heading: string): string {
  return heading.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').trim().replace(/\s/g, '-')
}

export function headings(text: string): Set<string> {
  return new Set([...prose(text).matchAll(/^#{1,6}\s+(.+?)\s*$/gm)].map((m) => slug(m[1])))
}
