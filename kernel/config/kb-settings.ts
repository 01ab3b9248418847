// Per-KB settings overrides (spec 2.7, 4.3): the dot-key schema, the three validation steps, the effective view.
import type { TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { ValidationError, type ValidationIssue } from '../errors.ts'
import { issues } from '../validate.ts'
import { checkKbRules } from './load.ts'
import { KB_SECTIONS, type KbSettings, type Settings } from './schema.ts'
import { leafSchemas, setPath } from './tree.ts'

/** The eight keys of the older service's entries, always present: enum, min and max are null when they do not apply. */
export interface SchemaEntry {
  type: string
  enum: readonly unknown[] | null
  default: unknown
  min: number | null
  max: number | null
  overridable: boolean
  description: string
  group: string
}

export type Overrides = Record<string, unknown>

const PREFIXES = KB_SECTIONS.map((s) => `${s}.`)

const KB_LEAVES: Map<string, TSchema> = new Map(
  [...leafSchemas()].filter(([key]) => PREFIXES.some((p) => key.startsWith(p))),
)

function typeName(schema: TSchema): string {
  const s = schema as { type?: string; type_name?: string; enum?: unknown[]; items?: { type?: string } }
  if (s.type_name) return s.type_name
  if (s.enum) return 'enum'
  switch (s.type) {
    case 'boolean': return 'bool'
    case 'integer': return 'int'
    case 'number': return 'float'
    case 'string': return 'str'
    case 'array': return `list[${typeName(s.items as TSchema)}]`
    default: return String(s.type ?? 'any')
  }
}

let cachedSchema: Record<string, SchemaEntry> | null = null

/** Every dot-key of the four per-KB sections, the [ENT] extension keys included. */
export function kbSettingsSchema(): Record<string, SchemaEntry> {
  if (cachedSchema) return cachedSchema
  const out: Record<string, SchemaEntry> = {}
  for (const [key, schema] of KB_LEAVES) {
    const s = schema as Record<string, unknown>
    if (s.secret) continue
    out[key] = {
      type: typeName(schema),
      enum: (s.enum as unknown[] | undefined) ?? null,
      default: s.default,
      min: typeof s.minimum === 'number' ? s.minimum : null,
      max: typeof s.maximum === 'number' ? s.maximum : null,
      overridable: isOverridable(key, schema),
      description: String(s.description ?? ''),
      group: key.slice(0, key.lastIndexOf('.')),
    }
  }
  cachedSchema = Object.freeze(out)
  return cachedSchema
}

function isOverridable(key: string, schema: TSchema): boolean {
  // Of retrieval only auto_merge is overridable (spec 2.7): merge and rerank happen once across all KBs.
  if (key.startsWith('retrieval.') && !key.startsWith('retrieval.auto_merge.')) return false
  return (schema as { overridable?: boolean }).overridable !== false
}

/**
 * Checks overrides in the spec's order: (1) section prefix, (2) the key exists and is overridable,
 * (3) the value's type, range and enum; then the cross-key rules on the effective result.
 * `null` values are returned as deletions. Throws 422 with every problem found.
 */
export function validateOverrides(input: Overrides, global: Settings, current: Overrides = {}): Overrides {
  const problems: ValidationIssue[] = []
  const result: Overrides = { ...current }
  for (const [key, value] of Object.entries(input)) {
    const loc = ['body', 'overrides', key]
    if (!PREFIXES.some((p) => key.startsWith(p))) {
      problems.push({ loc, msg: `'${key}' cannot be overridden: only keys under ${PREFIXES.join(', ')} can be stored`, type: 'override_section' })
      continue
    }
    const schema = KB_LEAVES.get(key)
    if (!schema) {
      problems.push({ loc, msg: `unknown setting '${key}'`, type: 'override_unknown_key' })
      continue
    }
    if (!isOverridable(key, schema)) {
      problems.push({ loc, msg: `'${key}' is not overridable per knowledge base`, type: 'override_not_allowed' })
      continue
    }
    if (value === null) {
      delete result[key]
      continue
    }
    if (!Value.Check(schema, value)) {
      for (const issue of issues(Value.Errors(schema, value), 'body')) problems.push({ ...issue, loc: [...loc, ...issue.loc.slice(1)] })
      continue
    }
    result[key] = value
  }
  if (problems.length === 0) {
    const effective = effectiveKbSettings(global, result)
    for (const msg of checkKbRules(effective)) problems.push({ loc: ['body', 'overrides'], msg, type: 'value_error' })
  }
  if (problems.length > 0) throw new ValidationError(problems)
  return result
}

/** The effective settings without secrets: the older service leaves the key out (not even masked). */
export type KbSettingsView = Omit<KbSettings, 'retrieval'> & {
  retrieval: Omit<KbSettings['retrieval'], 'rerank'> & { rerank: Omit<KbSettings['retrieval']['rerank'], 'api_key'> }
}

/** What GET /api/kb/{kb_id}/settings shows. */
export function kbSettingsView(global: Settings, overrides: Overrides): KbSettingsView {
  const view = effectiveKbSettings(global, overrides)
  const { api_key: _secret, ...rerank } = view.retrieval.rerank
  return { ...view, retrieval: { ...view.retrieval, rerank } }
}

/** Global values of the four sections merged with the KB's overrides. */
export function effectiveKbSettings(global: Settings, overrides: Overrides): KbSettings {
  const view = structuredClone({
    ingestion: global.ingestion,
    chunking: global.chunking,
    dedup: global.dedup,
    retrieval: global.retrieval,
  }) as KbSettings
  for (const [key, value] of Object.entries(overrides)) {
    if (KB_LEAVES.has(key) && isOverridable(key, KB_LEAVES.get(key)!)) setPath(view as never, key, value)
  }
  return view
}
