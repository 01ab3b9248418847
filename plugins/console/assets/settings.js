// Per-KB overrides: a form generated from GET /api/kb/{kb}/settings/schema (overridable keys, grouped by section),
// saved whole with PUT (an emptied field goes back to the global value); the service's 422 shows at the field.
import { api, get } from './api.js'
import { alertBox, busy, confirm, h, notice } from './dom.js'
import { clearIssues, settingField, showIssues } from './forms.js'
import { kbHeader, kbPath } from './kbs.js'
import { can, canManageMembers, kbOf } from './session.js'

/** settings (nested, GET /settings) at a dotted key. */
const at = (obj, key) => key.split('.').reduce((o, k) => (o === undefined || o === null ? undefined : o[k]), obj)

export async function view(main, kbId) {
  const kb = await kbOf(kbId)
  const path = kbPath(kb.kb_id)
  const [{ schema }, { overrides }, effective] = await Promise.all([get(`${path}/settings/schema`), get(`${path}/settings/overrides`), get(`${path}/settings`)])
  const writable = can(kb, 'owner')
  const general = h('div')
  const messages = h('div')
  main.append(...kbHeader(kb, 'settings', { canMembers: canManageMembers(kb) }), messages,
    h('p', null, 'Values left empty use the service-wide setting (shown as the default). ',
      writable ? 'Saving replaces every override of this knowledge base.' : 'Only the owner of this knowledge base can change them.'))

  const fields = {}
  const groups = new Map()
  for (const [key, entry] of Object.entries(schema)) {
    if (!entry.overridable) continue
    const f = settingField(key, entry, overrides[key], at(effective, key))
    // The 422 names the key under overrides: ['body', 'overrides', 'chunking.chunk_size'].
    fields[`overrides.${key}`] = f
    if (!groups.has(entry.group)) groups.set(entry.group, [])
    groups.get(entry.group).push(f.wrap)
  }
  const save = h('button', { type: 'submit', class: 'primary' }, 'Save overrides')
  const reset = h('button', { type: 'button', class: 'danger' }, 'Clear all overrides')
  const set = h('fieldset', { disabled: !writable, class: 'plain' },
    [...groups].map(([group, wraps]) => h('fieldset', { class: 'group' }, h('legend', null, group.replace(/_/g, ' ')), wraps)),
    h('div', { class: 'actions' }, reset, save))
  const form = h('form', {
    novalidate: true, 'aria-label': 'Overrides',
    onsubmit: async (e) => {
      e.preventDefault()
      clearIssues(fields, general)
      const next = {}
      for (const [k, f] of Object.entries(fields)) {
        const v = f.read()
        if (v !== undefined) next[k.slice('overrides.'.length)] = v
      }
      try {
        await busy(save, () => api('PUT', `${path}/settings/overrides`, { json: { overrides: next } }))
        notice(messages, `Saved ${Object.keys(next).length} override${Object.keys(next).length === 1 ? '' : 's'}.`)
      } catch (err) {
        showIssues(fields, err, general)
      }
    },
  }, general, set)
  reset.addEventListener('click', async () => {
    if (!(await confirm('Clear all overrides?', h('p', null, `Every setting of ${kb.kb_id} goes back to the service-wide value.`), { action: 'Clear overrides', danger: true }))) return
    try {
      await busy(reset, () => api('DELETE', `${path}/settings/overrides`))
      for (const f of Object.values(fields)) f.input.value = ''
      clearIssues(fields, general)
      notice(messages, 'Overrides cleared.')
    } catch (err) {
      general.replaceChildren(alertBox(err))
    }
  })
  main.append(form)
}
