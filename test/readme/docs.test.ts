// README.md and docs/*.md name only what exists (issue 38): the files their commands run, the npm scripts, the
// `quarry` commands, the settings keys; their relative links and anchors lead somewhere; their YAML examples are
// settings the service accepts. What the commands do is the walkthrough test's business (walkthrough.test.ts).
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join, normalize } from 'node:path'
import { describe, it } from 'node:test'
import { parse } from 'yaml'
import { resolveSettings } from '../../kernel/config/load.ts'
import { leafSchemas } from '../../kernel/config/tree.ts'
import { codeSpans, fences, headings, pages, prose, ROOT, slug } from './markdown.ts'

const PAGES = pages()

/** Commands as written: every line of the shell fences and every code span of the prose. */
function commands(text: string): string[] {
  const shell = fences(text).filter((f) => f.lang === 'sh').flatMap((f) => f.body.split('\n').filter((l) => !l.startsWith('#')))
  return [...shell, ...codeSpans(text)]
}

function each(check: (page: string, text: string) => string[]): void {
  const problems = PAGES.flatMap(([page, text]) => check(page, text).map((p) => `${page}: ${p}`))
  assert.deepEqual(problems, [])
}

describe('README.md and docs/', () => {
  it('are there, the README under 250 lines', () => {
    const names = PAGES.map(([p]) => p)
    for (const topic of ['configuration', 'operations', 'connectors', 'access-control', 'mcp', 'benchmarks', 'architecture']) {
      assert.ok(names.includes(`docs/${topic}.md`), `docs/${topic}.md is missing`)
    }
    const readme = PAGES.find(([p]) => p === 'README.md')![1]
    assert.ok(readme.split('\n').length < 250, `README.md has ${readme.split('\n').length} lines`)
  })

  it('run files that exist (npx tsx, node, bash)', () => {
    each((page, text) => {
      const out: string[] = []
      for (const c of commands(text)) {
        const m = /^(?:.*?\s)?(?:npx tsx|node|bash)\s+(.*)$/.exec(c)
        if (!m) continue
        for (const token of m[1].split(/\s+/)) {
          if (token.startsWith('-') || token.includes('<') || !/^[\w./-]+\.(?:ts|mts|mjs|js|sh)$/.test(token)) continue
          if (!existsSync(join(ROOT, token))) out.push(`\`${c}\` runs ${token}, which does not exist`)
        }
      }
      return out
    })
  })

  it('name npm scripts that package.json has', () => {
    const scripts = Object.keys(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts)
    each((_, text) => commands(text).flatMap((c) =>
      [...c.matchAll(/\bnpm\s+(?:run\s+(?:--silent\s+)?([\w:-]+)|(start|test))\b/g)]
        .map((m) => m[1] ?? m[2])
        .filter((s) => !scripts.includes(s))
        .map((s) => `\`${c}\`: no npm script '${s}'`)))
  })

  it('name quarry commands the CLI has', () => {
    const help = spawnSync(process.execPath, [join(ROOT, 'bin/quarry.mjs'), '--help'], { encoding: 'utf8' })
    assert.equal(help.status, 0, help.stderr)
    const section = help.stdout.split('Commands:\n')[1].split('\n\n')[0]
    const known = new Set(section.split('\n').map((l) => /^ {2}([a-z]+)(?: ([a-z]+))?/.exec(l)).filter((m) => m !== null).flatMap((m) => [m[1], `${m[1]} ${m[2] ?? ''}`.trim()]))
    assert.ok(known.has('ingest') && known.has('kb list'), section)
    each((_, text) => commands(text).flatMap((c) =>
      [...c.matchAll(/(?:^|[\s(])quarry\s+([a-z]+)(?:\s+([a-z]+))?/g)].flatMap((m) => {
        const [, command, sub] = m
        if (!known.has(command)) return [`\`${c}\`: no quarry command '${command}'`]
        const withSub = [...known].some((k) => k.startsWith(`${command} `))
        return withSub && sub !== undefined && !known.has(`${command} ${sub}`) ? [`\`${c}\`: no quarry command '${command} ${sub}'`] : []
      })))
  })

  it('name settings keys the settings schema has', () => {
    const leaves = [...leafSchemas().keys()]
    const sections = new Set(leaves.map((k) => k.split('.')[0]))
    const known = (key: string) => leaves.some((l) => l === key || l.startsWith(`${key}.`))
    each((_, text) => codeSpans(text).flatMap((span) => {
      // `a.b.c`, `a.b: value`, `a.b.*`; file names (`mcp.ts`) are not keys.
      const m = /^([a-z_]+(?:\.[a-z0-9_]+)+)(\.\*)?(?::\s.*)?$/.exec(span)
      if (!m || !sections.has(m[1].split('.')[0]) || /\.(?:ts|mjs|js|md|json|jsonl|yaml|png|svg|tar|txt|f32)$/.test(m[1])) return []
      return known(m[1]) ? [] : [`\`${span}\`: no setting '${m[1]}'`]
    }))
  })

  it('give YAML examples of settings the service accepts', () => {
    each((page, text) => fences(text).filter((f) => f.lang === 'yaml').flatMap((f) => {
      try {
        const { warnings } = resolveSettings(parse(f.body), {}, `${page} line ${f.line}`)
        return warnings.map((w) => `line ${f.line}: ${w}`)
      } catch (err) {
        return [`line ${f.line}: ${(err as Error).message}`]
      }
    }))
  })

  it('link to files and headings that exist', () => {
    each((page, text) => [...prose(text).matchAll(/\]\(([^)\s]+)\)/g)].flatMap((m) => {
      const target = m[1]
      if (/^[a-z]+:/.test(target)) return []
      const [path, anchor] = target.split('#')
      const file = path === '' ? join(ROOT, page) : normalize(join(ROOT, dirname(page), path))
      if (!existsSync(file)) return [`link ${target}: no file ${file}`]
      if (anchor !== undefined && file.endsWith('.md') && !headings(readFileSync(file, 'utf8')).has(anchor)) {
        return [`link ${target}: no heading '${anchor}' (headings: ${[...headings(readFileSync(file, 'utf8'))].join(', ')})`]
      }
      return []
    }))
  })

  it('slug headings as GitHub does', () => {
    assert.equal(slug('Crash recovery and `quarry check`'), 'crash-recovery-and-quarry-check')
    assert.equal(slug('Where connectors may connect (`connectors.egress`)'), 'where-connectors-may-connect-connectorsegress')
    assert.equal(slug('One KB at a time, over HTTP'), 'one-kb-at-a-time-over-http')
  })
})
