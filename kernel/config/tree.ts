// Walking the settings tree: dot-keys of leaves, their schemas, and setting a value by dot-key.
import type { TSchema } from '@sinclair/typebox'
import { SettingsSchema } from './schema.ts'

type Obj = Record<string, unknown>

export const isPlainObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)

/** Schema of every leaf setting by dot-key (objects are walked; arrays and unions are leaves). */
export function leafSchemas(schema: TSchema = SettingsSchema, prefix = ''): Map<string, TSchema> {
  const out = new Map<string, TSchema>()
  const props = (schema as { properties?: Record<string, TSchema> }).properties
  for (const [key, child] of Object.entries(props ?? {})) {
    const path = prefix ? `${prefix}.${key}` : key
    if ((child as { type?: string }).type === 'object' && (child as { properties?: unknown }).properties) {
      for (const [k, v] of leafSchemas(child, path)) out.set(k, v)
    } else {
      out.set(path, child)
    }
  }
  return out
}

/** Dot-keys of every leaf of a plain object (arrays are leaves). */
export function flatten(value: unknown, prefix = '', out: Map<string, unknown> = new Map()): Map<string, unknown> {
  if (!isPlainObject(value)) {
    if (prefix) out.set(prefix, value)
    return out
  }
  for (const [k, v] of Object.entries(value)) flatten(v, prefix ? `${prefix}.${k}` : k, out)
  return out
}

export function getPath(obj: unknown, dotKey: string): unknown {
  let cur: unknown = obj
  for (const part of dotKey.split('.')) {
    if (!isPlainObject(cur)) return undefined
    cur = cur[part]
  }
  return cur
}

export function setPath(obj: Obj, dotKey: string, value: unknown): void {
  const parts = dotKey.split('.')
  let cur = obj
  for (const part of parts.slice(0, -1)) {
    if (!isPlainObject(cur[part])) cur[part] = {}
    cur = cur[part] as Obj
  }
  cur[parts[parts.length - 1]] = value
}

export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const v of Object.values(value)) deepFreeze(v)
  }
  return value
}
