// TypeBox schemas drive request validation (here) and the API description (kernel/openapi.ts).
// Errors come out in the FastAPI shape old clients parse: {detail: [{loc, msg, type}]}.
import { type TSchema, type Static } from '@sinclair/typebox'
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler'
import { Value } from '@sinclair/typebox/value'
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors'
import { clip, ValidationError, type ValidationIssue } from './errors.ts'

const TYPE_NAMES: Partial<Record<ValueErrorType, string>> = {
  [ValueErrorType.ObjectRequiredProperty]: 'missing',
  [ValueErrorType.String]: 'string_type',
  [ValueErrorType.StringMinLength]: 'string_too_short',
  [ValueErrorType.StringMaxLength]: 'string_too_long',
  [ValueErrorType.StringPattern]: 'string_pattern_mismatch',
  [ValueErrorType.Integer]: 'int_type',
  [ValueErrorType.Number]: 'float_type',
  [ValueErrorType.Boolean]: 'bool_type',
  [ValueErrorType.Array]: 'list_type',
  [ValueErrorType.Object]: 'dict_type',
  [ValueErrorType.NumberMinimum]: 'greater_than_equal',
  [ValueErrorType.IntegerMinimum]: 'greater_than_equal',
  [ValueErrorType.NumberMaximum]: 'less_than_equal',
  [ValueErrorType.IntegerMaximum]: 'less_than_equal',
  [ValueErrorType.ArrayMinItems]: 'too_short',
  [ValueErrorType.ArrayMaxItems]: 'too_long',
  [ValueErrorType.Union]: 'union_type',
  [ValueErrorType.Literal]: 'literal_error',
  [ValueErrorType.ObjectAdditionalProperties]: 'extra_forbidden',
}

function message(error: ValueError): string {
  const s = error.schema as Record<string, unknown>
  if (typeof s.errorMessage === 'string' && error.type !== ValueErrorType.ObjectRequiredProperty) return s.errorMessage
  switch (error.type) {
    case ValueErrorType.ObjectRequiredProperty: return 'Field required'
    case ValueErrorType.StringPattern: return `String should match pattern '${String(s.pattern)}'`
    case ValueErrorType.IntegerMinimum:
    case ValueErrorType.NumberMinimum: return `Input should be greater than or equal to ${String(s.minimum)}`
    case ValueErrorType.IntegerMaximum:
    case ValueErrorType.NumberMaximum: return `Input should be less than or equal to ${String(s.maximum)}`
    case ValueErrorType.Union: {
      const options = (s.anyOf as Record<string, unknown>[] | undefined)?.map((o) => o.const).filter((c) => c !== undefined)
      return options && options.length > 0 ? `Input should be ${options.map((o) => `'${String(o)}'`).join(', ')}` : error.message
    }
    default: return error.message.replace(/^Expected/, 'Input should be')
  }
}

/** '/a/0/b' -> ['a', 0, 'b'] */
function pointerToLoc(pointer: string): (string | number)[] {
  if (pointer === '') return []
  return pointer.slice(1).split('/').map((p) => {
    const key = p.replace(/~1/g, '/').replace(/~0/g, '~')
    return /^\d+$/.test(key) ? Number(key) : key
  })
}

export interface CompiledSchema<T extends TSchema> {
  schema: T
  /** Returns the value with defaults filled (and, for query/params, strings converted), or throws 422. */
  parse(value: unknown, where: 'body' | 'query' | 'path'): Static<T>
}

/** Whether any part of the schema declares a default (Value.Default is a generic walker: skip it when useless). */
function hasDefaults(schema: unknown): boolean {
  if (typeof schema !== 'object' || schema === null) return false
  if ('default' in schema) return true
  return Object.values(schema).some((v) => typeof v === 'object' && v !== null && hasDefaults(v))
}

const INT_MIN = -2147483648
const INT_MAX = 2147483647

/**
 * A copy of the schema in which every integer without a bound of its own is held to PostgreSQL's integer
 * range: a page of 1e20 is an integer to JSON Schema but overflows an OFFSET. TypeBox's Kind symbols are
 * copied along (object spread copies symbol keys).
 */
export function boundIntegers<T>(schema: T): T {
  if (Array.isArray(schema)) return schema.map(boundIntegers) as T
  if (typeof schema !== 'object' || schema === null) return schema
  const out: Record<string | symbol, unknown> = { ...(schema as Record<string | symbol, unknown>) }
  for (const key of Object.keys(out)) out[key] = boundIntegers(out[key])
  if (out.type === 'integer') {
    if (out.maximum === undefined && out.exclusiveMaximum === undefined) out.maximum = INT_MAX
    if (out.minimum === undefined && out.exclusiveMinimum === undefined) out.minimum = INT_MIN
  }
  return out as T
}

export function compile<T extends TSchema>(routeSchema: T): CompiledSchema<T> {
  const schema = boundIntegers(routeSchema)
  const check: TypeCheck<T> = TypeCompiler.Compile(schema)
  const defaults = hasDefaults(schema)
  return {
    schema,
    parse(value, where) {
      let v = value
      if (where !== 'body') v = Value.Convert(schema, v)
      if (defaults) v = Value.Default(schema, v)
      if (check.Check(v)) return v as Static<T>
      throw new ValidationError(issues(check.Errors(v), where))
    },
  }
}

export function issues(errors: Iterable<ValueError>, where: string): ValidationIssue[] {
  const out: ValidationIssue[] = []
  const seen = new Set<string>()
  for (const error of errors) {
    const loc = [where, ...pointerToLoc(error.path)]
    const key = loc.join('\u0000')
    // TypeBox reports a union failure once per branch as well; the first error per location is the useful one.
    if (seen.has(key)) continue
    seen.add(key)
    out.push({ loc, msg: message(error), type: TYPE_NAMES[error.type] ?? 'value_error' })
    if (out.length >= 50) break
  }
  return out
}

// Strings PostgreSQL cannot store: text never holds NUL, and a UTF-16 surrogate without its pair has no
// UTF-8 form (jsonb refuses its escape outright). The fast path is one regex test, since nearly every string
// has neither.
const SUSPECT = /[\u0000\ud800-\udfff]/
const NUL_MSG = 'Input should not contain the NUL character (\\u0000)'
const SURROGATE_MSG = 'Input should not contain an unpaired UTF-16 surrogate'

/** Why a string cannot be stored, or null when it can. */
export function unstorable(s: string): string | null {
  if (!SUSPECT.test(s)) return null
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c === 0) return NUL_MSG
    if (c < 0xd800 || c > 0xdfff) continue
    const next = s.charCodeAt(i + 1)
    if (c > 0xdbff || !(next >= 0xdc00 && next <= 0xdfff)) return SURROGATE_MSG
    i++
  }
  return null
}

/** One 422 issue for a string that cannot be stored (FastAPI's type for a string it cannot decode). */
export const unstorableIssue = (loc: (string | number)[], msg: string): ValidationIssue => ({ loc, msg, type: 'string_unicode' })

/**
 * Deeper than any body of this API; the limit keeps the recursive walkers after us (schema checks,
 * JSON.stringify on the way to storage) from exhausting the stack on a crafted body.
 */
export const MAX_JSON_DEPTH = 64

interface Visit {
  value: unknown
  key: string | number
  parent: Visit | null
  depth: number
}

const locOf = (visit: Visit): (string | number)[] => {
  const loc: (string | number)[] = []
  for (let v: Visit | null = visit; v; v = v.parent) loc.push(v.key)
  return loc.reverse()
}

/**
 * Every string and key of a parsed JSON body, walked without recursion: the issues for values that cannot be
 * stored and for nesting past MAX_JSON_DEPTH (at most 50, as for schema errors). Keys in a loc are clipped.
 */
export function jsonIssues(value: unknown, where: string): ValidationIssue[] {
  const out: ValidationIssue[] = []
  const stack: Visit[] = [{ value, key: where, parent: null, depth: 0 }]
  while (stack.length > 0 && out.length < 50) {
    const visit = stack.pop()!
    const v = visit.value
    if (typeof v === 'string') {
      const msg = unstorable(v)
      if (msg) out.push(unstorableIssue(locOf(visit), msg))
      continue
    }
    if (typeof v !== 'object' || v === null) continue
    if (visit.depth >= MAX_JSON_DEPTH) {
      out.push({ loc: locOf(visit), msg: `JSON nested deeper than ${MAX_JSON_DEPTH} levels`, type: 'value_error' })
      continue
    }
    const depth = visit.depth + 1
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], key: i, parent: visit, depth })
      continue
    }
    const keys = Object.keys(v)
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i]
      const msg = unstorable(key)
      if (msg) out.push(unstorableIssue([...locOf(visit), clip(key)], msg))
      else stack.push({ value: (v as Record<string, unknown>)[key], key: clip(key), parent: visit, depth })
    }
  }
  return out
}
