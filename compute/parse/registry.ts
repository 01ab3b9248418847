// The parser registry: extension -> parser. The defaults are registered first; ingestion.parser_plugins
// entries ('module.path:register_func') are loaded lazily, in order, at the first parse that uses them,
// and each may register parsers for extensions, overriding the defaults and earlier plugins.
import { statSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import type { HtmlExtractionPolicy, ParsedDocument } from '../types.ts'
import { errorMessage, ParseCode, parseError } from './errors.ts'

export interface ParserInput {
  bytes: Uint8Array
  filename: string
  contentType?: string
  policy: HtmlExtractionPolicy
  /** Lowercase extension without the dot that selected this parser ('' when none). */
  extension: string
}

export type ParserFn = (input: ParserInput) => ParsedDocument | Promise<ParsedDocument>

/** What a plugin's register function receives. */
export interface ParserRegistry {
  /** Registers parser for each extension ('pdf' or '.pdf', any case); replaces what was there. */
  register(extensions: string | readonly string[], parser: ParserFn): void
  /** The parser currently registered for an extension, e.g. to wrap a default one. */
  get(extension: string): ParserFn | undefined
  extensions(): string[]
}

export type ParserRegistrar = (registry: ParserRegistry) => void | Promise<void>

export const normalizeExtension = (ext: string) => ext.trim().replace(/^\./, '').toLowerCase()

export function createParserRegistry(defaults: Record<string, ParserFn>): ParserRegistry {
  const parsers = new Map<string, ParserFn>(Object.entries(defaults))
  return {
    register(extensions, parser) {
      if (typeof parser !== 'function') throw new TypeError('registry.register(extensions, parser): parser must be a function')
      for (const ext of typeof extensions === 'string' ? [extensions] : extensions) {
        const e = normalizeExtension(ext)
        if (!e) throw new TypeError('registry.register(extensions, parser): an extension is empty')
        parsers.set(e, parser)
      }
    },
    get: (extension) => parsers.get(normalizeExtension(extension)),
    extensions: () => [...parsers.keys()],
  }
}

const SCRIPT_EXTENSIONS = ['.ts', '.mts', '.js', '.mjs', '.cjs']

/**
 * Where 'module.path' points. A path-looking module ('./x', '/abs/x', 'a/b') is taken as a file path; a
 * dotted one ('plugins_local.my_parser') as directories under the working directory, Python style. Either
 * may omit the extension or name a folder with an index file. Anything else is a package name.
 */
export function resolvePluginModule(modulePath: string, cwd = process.cwd()): string {
  const looksLikePath = modulePath.startsWith('.') || modulePath.includes('/') || modulePath.includes('\\') || path.isAbsolute(modulePath)
  const bases = looksLikePath ? [path.resolve(cwd, modulePath)] : [path.resolve(cwd, ...modulePath.split('.'))]
  for (const base of bases) {
    const candidates = [base, ...SCRIPT_EXTENSIONS.map((e) => base + e), ...SCRIPT_EXTENSIONS.map((e) => path.join(base, `index${e}`))]
    for (const c of candidates) {
      if (statSync(c, { throwIfNoEntry: false })?.isFile()) return pathToFileURL(c).href
    }
  }
  if (looksLikePath) throw new Error(`no file found for '${modulePath}' (looked for ${bases[0]}{${SCRIPT_EXTENSIONS.join(',')}})`)
  try {
    return pathToFileURL(createRequire(path.join(cwd, 'package.json')).resolve(modulePath)).href
  } catch {
    // An ESM-only package without a require condition: let import() resolve it from here.
    return modulePath
  }
}

/**
 * Set by the compute pool's worker (compute/worker.mjs), which runs compiled tasks without tsx: registers tsx in
 * that thread, for a plugin written in TypeScript. Elsewhere the process already runs under tsx.
 */
const TSX_HOOK = Symbol.for('quarry.registerTsx')

export function parsePluginEntry(entry: string): { modulePath: string; funcName: string } {
  const i = entry.lastIndexOf(':')
  // 'C:\\x\\y:register' has a drive colon too: only the last colon separates the function name.
  if (i <= 0 || i === entry.length - 1) {
    throw parseError(ParseCode.PLUGIN, `parser plugin '${entry}' must look like 'module.path:register_func'`)
  }
  return { modulePath: entry.slice(0, i).trim(), funcName: entry.slice(i + 1).trim() }
}

/** Loads each entry in order and lets it register its parsers. */
export async function loadParserPlugins(registry: ParserRegistry, entries: readonly string[]): Promise<void> {
  for (const entry of entries) {
    const { modulePath, funcName } = parsePluginEntry(entry)
    let mod: Record<string, unknown>
    try {
      const url = resolvePluginModule(modulePath)
      if (/\.[cm]?ts$/.test(url)) await ((globalThis as Record<symbol, unknown>)[TSX_HOOK] as (() => Promise<void>) | undefined)?.()
      mod = (await import(url)) as Record<string, unknown>
    } catch (err) {
      throw parseError(ParseCode.PLUGIN, `parser plugin '${entry}' could not be loaded: ${errorMessage(err)}`, err)
    }
    const fn = mod[funcName] ?? (mod.default as Record<string, unknown> | undefined)?.[funcName]
    if (typeof fn !== 'function') {
      throw parseError(ParseCode.PLUGIN, `parser plugin '${entry}': module '${modulePath}' exports no function '${funcName}'`)
    }
    try {
      await (fn as ParserRegistrar)(registry)
    } catch (err) {
      throw parseError(ParseCode.PLUGIN, `parser plugin '${entry}' failed to register: ${errorMessage(err)}`, err)
    }
  }
}
