// TypeBox schemas drive request validation (here) and the API description (kernel/openapi.ts).
// Errors come out in the FastAPI shape old clients parse: {detail: [{loc, msg, type}]}.
import { type TSchema, type Static } from '@sinclair/typebox'
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler'
import { Value } from '@sinclair/typebox/value'
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors'
import { ValidationError, type ValidationIssue } from './errors.ts'

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

export function compile<T extends TSchema>(schema: T): CompiledSchema<T> {
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
