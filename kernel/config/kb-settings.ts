// Per-KB settings overrides (spec 2.7, 4.3): the dot-key schema, the three validation steps, the effective view.
import type { TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { ValidationError, type ValidationIssue } from '../errors.ts'
import { issues } from '../validate.ts'
import { checkKbRules } from './load.ts'
import { KB_SECTIONS, type KbSettings, type Settings } from './schema.ts'
import { leafSchemas, setPath } from './tree.ts'

/**
 * The eight keys of the older service's entries, always present (enum, min and max are null when they do not
 * apply), and `help`. The older service's settings form shows `description` as the field's label and files
 * the field under `group`, the section the key lives in (`chunking`, `auto_merge`, `hybrid`); the longer text
 * that explains the setting is `help`.
 */
export interface SchemaEntry {
  type: string
  enum: readonly unknown[] | null
  default: unknown
  min: number | null
  max: number | null
  overridable: boolean
  description: string
  group: string
  help: string
}

export type Overrides = Record<string, unknown>

const PREFIXES = KB_SECTIONS.map((s) => `${s}.`)

const KB_LEAVES: Map<string, TSchema> = new Map(
  [...leafSchemas()].filter(([key]) => PREFIXES.some((p) => key.startsWith(p))),
)

/**
 * The form a settings form edits. A union of a scalar and other forms (chunking.chunk_size: an int, or the
 * hierarchical strategy's list of ints) is shown as its first member, with that member's bounds; the other
 * forms stay valid because validation checks the whole union.
 */
function formOf(schema: TSchema): TSchema {
  const s = schema as { enum?: unknown[]; anyOf?: TSchema[] }
  return !s.enum && s.anyOf?.length ? s.anyOf[0] : schema
}

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
    const form = formOf(schema) as Record<string, unknown>
    const path = key.split('.')
    out[key] = {
      type: typeName(form as TSchema),
      enum: (s.enum as unknown[] | undefined) ?? null,
      default: s.default,
      min: typeof form.minimum === 'number' ? form.minimum : null,
      max: typeof form.maximum === 'number' ? form.maximum : null,
      overridable: isOverridable(key, schema),
      description: labelOf(key),
      group: path[path.length - 2],
      help: String(s.description ?? ''),
    }
  }
  cachedSchema = Object.freeze(out)
  return cachedSchema
}

/** Labels the generic rule below gets wrong or leaves vague. */
const LABELS: Readonly<Record<string, string>> = {
  'dedup.enabled': 'Enable Dedup',
  'dedup.simhash.ngram': 'N-gram Size',
  'dedup.simhash.num_bands': 'LSH Bands',
  'dedup.simhash.simhash_bits': 'SimHash Bits',
  'ingestion.image_captioning.enabled': 'Enable Image Captioning',
  'ingestion.pdf_ocr_fallback.enabled': 'Enable PDF OCR Fallback',
  'ingestion.table_layout.enabled': 'Enable Table Layout',
  'retrieval.rerank.enabled': 'Enable Reranking',
  'retrieval.auto_merge.enabled': 'Enable Auto-Merge',
  'retrieval.hybrid.alpha': 'Alpha (Dense Weight)',
}

const WORDS: Readonly<Record<string, string>> = {
  mb: '(MB)', sec: '(s)', pt: '(pt)', pdf: 'PDF', ocr: 'OCR', html: 'HTML', url: 'URL', rrf: 'RRF', kb: 'KB', k: 'K', n: 'N',
  of: 'of', on: 'on', per: 'per', to: 'to',
}

/** A form label: the last key segment in title case ('chunk_size' -> 'Chunk Size'), units in brackets. */
function labelOf(key: string): string {
  const known = LABELS[key]
  if (known) return known
  return key.slice(key.lastIndexOf('.') + 1).split('_')
    .map((w, i) => WORDS[w] !== undefined && !(i === 0 && /^[a-z]+$/.test(WORDS[w])) ? WORDS[w] : w.charAt(0).toUpperCase() + w.slice(1))
    .join(' ')
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
