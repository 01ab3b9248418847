// Forms generated from schemas (a connector's config JSON Schema; the per-KB settings schema) and the 422 issues
// of the API shown at the field they name (loc ['body', 'config', 'depth'] -> the field 'config.depth').
import { ApiError } from './api.js'
import { alertBox, field, h, setError } from './dom.js'

/**
 * Shows an error: each 422 issue at its field (key = loc without 'body', joined by '.'), anything else in
 * `general`. Returns true when every issue found its field.
 */
export function showIssues(fields, err, general) {
  for (const f of Object.values(fields)) setError(f, null)
  general.replaceChildren()
  const issues = err instanceof ApiError ? err.issues : []
  const unplaced = []
  for (const issue of issues) {
    const path = (issue.loc ?? []).filter((p, i) => !(i === 0 && p === 'body'))
    let key = null
    for (let n = path.length; n > 0 && key === null; n--) {
      const k = path.slice(0, n).join('.')
      if (fields[k]) key = k
    }
    if (key === null) unplaced.push(issue)
    else setError(fields[key], [fields[key].error.textContent, issue.msg].filter(Boolean).join('; '))
  }
  if (issues.length === 0) general.append(alertBox(err))
  else if (unplaced.length > 0) general.append(alertBox(new Error(unplaced.map((i) => `${(i.loc ?? []).join('.')}: ${i.msg}`).join('; '))))
  const first = Object.values(fields).find((f) => f.input.getAttribute('aria-invalid') === 'true')
  ;(first?.input ?? general.querySelector('[role=alert]'))?.focus?.()
  return unplaced.length === 0 && issues.length > 0
}

export const clearIssues = (fields, general) => {
  for (const f of Object.values(fields)) setError(f, null)
  general.replaceChildren()
}

const humanise = (key) => key.replace(/_/g, ' ').replace(/^./, (c) => c.toUpperCase())
const lines = (text) => text.split('\n').map((s) => s.trim()).filter(Boolean)

/** The one type of a property: a union with null counts as its other member (nullable). */
function shapeOf(prop) {
  const members = prop.anyOf ?? prop.oneOf
  if (members) {
    const nonNull = members.filter((m) => m.type !== 'null')
    const literals = nonNull.every((m) => m.const !== undefined)
    if (literals) return { kind: 'enum', values: nonNull.map((m) => m.const), nullable: nonNull.length < members.length }
    return { ...shapeOf(nonNull[0]), nullable: nonNull.length < members.length }
  }
  if (prop.type === 'array') return { kind: 'list' }
  if (prop.type === 'object' && prop.patternProperties) return { kind: 'map' }
  if (prop.type === 'object') return { kind: 'object' }
  if (prop.type === 'integer' || prop.type === 'number') return { kind: 'number', integer: prop.type === 'integer' }
  if (prop.type === 'boolean') return { kind: 'bool' }
  return { kind: 'string' }
}

/**
 * Fields for a JSON Schema object (connector config): strings, numbers, booleans, lists (one a line), maps (one
 * 'Name: value' a line), nested objects (a fieldset). Returns { node, fields, read() } with field keys prefixed.
 */
export function schemaForm(schema, value, prefix) {
  const fields = {}
  const readers = []
  const required = new Set(schema.required ?? [])
  const node = h('div', { class: 'schema-form' })
  for (const [key, prop] of Object.entries(schema.properties ?? {})) {
    const path = `${prefix}.${key}`
    const shape = shapeOf(prop)
    const current = value?.[key] ?? prop.default
    const label = `${humanise(key)}${required.has(key) ? ' (required)' : ''}`
    if (shape.kind === 'object') {
      const sub = schemaForm(prop, value?.[key], path)
      const enabled = h('input', { type: 'checkbox', checked: value?.[key] !== undefined })
      const toggle = field(`Set ${humanise(key).toLowerCase()}`, enabled, prop.description)
      const set = h('fieldset', null, h('legend', null, humanise(key)), toggle.wrap, sub.node)
      Object.assign(fields, sub.fields)
      fields[path] = toggle
      readers.push((out) => {
        if (enabled.checked) out[key] = sub.read()
      })
      node.append(set)
      continue
    }
    let input
    let read
    if (shape.kind === 'bool') {
      input = h('input', { type: 'checkbox', checked: current === true })
      read = () => input.checked
    } else if (shape.kind === 'enum') {
      input = h('select', null, shape.values.map((v) => h('option', { value: v, selected: v === current }, v)))
      read = () => input.value
    } else if (shape.kind === 'number') {
      input = h('input', { type: 'number', inputmode: 'numeric', step: shape.integer ? '1' : 'any', min: prop.minimum, max: prop.maximum, value: current ?? '' })
      read = () => (input.value === '' ? undefined : Number(input.value))
    } else if (shape.kind === 'list') {
      input = h('textarea', { rows: 3, value: (current ?? []).join('\n') })
      read = () => lines(input.value)
    } else if (shape.kind === 'map') {
      input = h('textarea', { rows: 2, value: Object.entries(current ?? {}).map(([k, v]) => `${k}: ${v}`).join('\n') })
      read = () => Object.fromEntries(lines(input.value).map((l) => {
        const i = l.indexOf(':')
        return i < 0 ? [l, ''] : [l.slice(0, i).trim(), l.slice(i + 1).trim()]
      }))
    } else {
      input = h('input', { type: 'text', value: current ?? '', autocomplete: 'off', spellcheck: 'false' })
      read = () => (input.value === '' && shape.nullable ? null : input.value === '' && !required.has(key) ? undefined : input.value)
    }
    const help = [prop.description, shape.kind === 'list' ? 'One a line.' : null, shape.kind === 'map' ? "One 'Name: value' a line." : null].filter(Boolean).join(' ')
    const f = field(label, input, help || undefined)
    if (required.has(key) && shape.kind !== 'bool') input.setAttribute('aria-required', 'true')
    fields[path] = f
    node.append(f.wrap)
    readers.push((out) => {
      const v = read()
      if (v !== undefined) out[key] = v
    })
  }
  return {
    node, fields,
    read() {
      const out = {}
      for (const r of readers) r(out)
      return out
    },
  }
}

/**
 * One per-KB setting (GET /api/kb/{kb}/settings/schema entry) as a field. Empty means "not overridden": the
 * global value, shown as the placeholder, applies. read() gives the override or undefined.
 */
export function settingField(key, entry, override, effective) {
  const inherited = `Default: ${JSON.stringify(effective ?? entry.default)}`
  let input
  let read
  if (entry.type === 'bool' || entry.type === 'enum') {
    const values = entry.type === 'bool' ? [true, false] : entry.enum
    input = h('select', null,
      h('option', { value: '' }, `${inherited.replace('Default: ', 'Default (')})`),
      values.map((v) => h('option', { value: JSON.stringify(v), selected: override !== undefined && JSON.stringify(override) === JSON.stringify(v) }, String(v))))
    read = () => (input.value === '' ? undefined : JSON.parse(input.value))
  } else if (entry.type === 'int' || entry.type === 'float') {
    input = h('input', { type: 'number', step: entry.type === 'int' ? '1' : 'any', min: entry.min, max: entry.max, placeholder: String(effective ?? entry.default), value: override ?? '' })
    // Sent as typed: the service's own check (and its 422 at this field) decides, not the browser's.
    read = () => (input.value === '' ? undefined : Number(input.value))
  } else if (entry.type.startsWith('list')) {
    input = h('input', { type: 'text', placeholder: JSON.stringify(effective ?? entry.default), value: override === undefined ? '' : JSON.stringify(override) })
    read = () => {
      if (input.value.trim() === '') return undefined
      try {
        return JSON.parse(input.value)
      } catch {
        return input.value.split(',').map((s) => s.trim()).filter(Boolean)
      }
    }
  } else {
    input = h('input', { type: 'text', placeholder: String(effective ?? entry.default), value: override ?? '' })
    read = () => (input.value === '' ? undefined : input.value)
  }
  const range = entry.min !== null && entry.max !== null ? ` Range ${entry.min} to ${entry.max}.` : ''
  const f = field(entry.description || key, input, `${entry.help}${range} ${inherited}. (${key})`)
  input.dataset.key = key
  return { ...f, read }
}
