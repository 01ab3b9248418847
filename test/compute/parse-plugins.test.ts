// ingestion.parser_plugins: plugin files written in a temp dir, loaded by parseDocument in this thread
// (parse-pool.test.ts loads one inside a worker).
import { describe, it, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { AppError } from '../../kernel/errors.ts'
import { parseDocument } from '../../compute/parse/index.ts'
import { resolvePluginModule } from '../../compute/parse/registry.ts'
import { utf8 } from '../fixtures/make-text.ts'

const UPPER = `
export function register(registry) {
  registry.register(['txt', '.Text'], async (input) => ({
    title: 'upper',
    doc_type: 'txt',
    pages: [{ page_num: 1, page_label: '1', text: new TextDecoder().decode(input.bytes).toUpperCase() }],
  }))
}
`
const SECOND = `
import type { ParserRegistry } from '${path.resolve('compute/parse/registry.ts')}'
export function register(registry: ParserRegistry): void {
  const markdown = registry.get('md')!
  registry.register('txt', () => ({ title: 'second', doc_type: 'txt', pages: [{ page_num: 1, page_label: '1', text: 'from the second plugin' }] }))
  registry.register('CSV', (input) => {
    const rows = new TextDecoder().decode(input.bytes).trim().split('\\n').map((l) => l.split(',').join(' | '))
    return { title: input.filename, doc_type: 'txt', pages: [{ page_num: 1, page_label: '', text: rows.join('\\n') }] }
  })
  registry.register('md', async (input) => {
    const doc = await markdown(input)
    return { ...doc, title: 'wrapped: ' + doc.title }
  })
}
`
const BROKEN = `
export const register = (registry) => registry.register('txt', () => ({ title: 'x', doc_type: 'txt', pages: 'nope' }))
export const explode = () => { throw new Error('cannot register today') }
`

describe('parser plugins', () => {
  let dir: string
  let cwd: string
  before(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'quarry-plugins-'))
    cwd = process.cwd()
    writeFileSync(path.join(dir, 'upper.mjs'), UPPER)
    writeFileSync(path.join(dir, 'second.ts'), SECOND)
    writeFileSync(path.join(dir, 'broken.mjs'), BROKEN)
    mkdirSync(path.join(dir, 'plugins_local'))
    writeFileSync(path.join(dir, 'plugins_local', 'my_parser.mjs'), UPPER)
  })
  after(() => {
    process.chdir(cwd)
    rmSync(dir, { recursive: true, force: true })
  })

  const parse = (filename: string, text: string, parserPlugins: string[]) =>
    parseDocument({ bytes: utf8(text), filename, policy: 'balanced', parserPlugins })

  it('a plugin overrides a default parser and registers extra extensions', async () => {
    const plugins = [`${dir}/upper.mjs:register`]
    assert.equal((await parse('a.txt', 'shout', plugins)).pages[0].text, 'SHOUT')
    assert.equal((await parse('a.text', 'also', plugins)).pages[0].text, 'ALSO')
    assert.equal((await parse('a.md', '# Kept\n\nthe default', plugins)).title, 'Kept', 'other defaults stay')
  })

  it('later entries override earlier ones; a TypeScript plugin can wrap a default parser', async () => {
    const plugins = [`${dir}/upper.mjs:register`, `${dir}/second:register`]
    assert.equal((await parse('a.txt', 'shout', plugins)).pages[0].text, 'from the second plugin')
    const md = await parse('a.md', '# Heading\n\nbody', plugins)
    assert.equal(md.title, 'wrapped: Heading')
    assert.equal(md.pages[0].text, 'Heading\n\nbody')
    const csv = await parse('t.csv', 'a,b\n1,2\n', plugins)
    assert.deepEqual(csv.pages, [{ page_num: 1, page_label: '1', text: 'a | b\n1 | 2' }], 'an empty page_label is filled in')
  })

  it("resolves 'package.module' from the working directory, Python style", async () => {
    process.chdir(dir)
    try {
      assert.equal(resolvePluginModule('plugins_local.my_parser'), `file://${path.join(dir, 'plugins_local', 'my_parser.mjs')}`)
      assert.equal((await parse('a.txt', 'dotted', ['plugins_local.my_parser:register'])).pages[0].text, 'DOTTED')
    } finally {
      process.chdir(cwd)
    }
  })

  it('reports unusable plugins with the entry in the message', async () => {
    const cases: [string, RegExp][] = [
      ['no-colon-here', /parser plugin 'no-colon-here' must look like 'module\.path:register_func'/],
      [`${dir}/missing:register`, /parser plugin '.*missing:register' could not be loaded: no file found/],
      [`${dir}/upper.mjs:nope`, /module '.*upper\.mjs' exports no function 'nope'/],
      [`${dir}/broken.mjs:explode`, /failed to register: cannot register today/],
      [`${dir}/broken.mjs:register`, /the parser for \.txt returned an invalid document: pages is not a non-empty array/],
    ]
    for (const [entry, message] of cases) {
      await assert.rejects(parse('a.txt', 'x', [entry]), (err: unknown) => {
        assert.ok(err instanceof AppError)
        assert.equal(err.code, 'PARSE_PLUGIN')
        assert.match(err.message, message)
        return true
      })
    }
  })
})
