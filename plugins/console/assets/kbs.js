// Knowledge bases: the list with document counts by status, tags and the caller's role; create, edit, delete.
import { api, get, query } from './api.js'
import { alertBox, badge, busy, confirm, dialog, field, h, notice } from './dom.js'
import { clearIssues, showIssues } from './forms.js'
import { can, canCreateKb, ent, loadKbs, loadMe, roleOn, session, superAdmin } from './session.js'

const COUNT_COLUMNS = [
  ['indexed', 'Indexed'],
  ['active', 'In progress'],
  ['failed', 'Failed'],
  ['outdated', 'Outdated'],
  ['total', 'Total'],
]
const IN_PROGRESS = ['uploading', 'fetching', 'pending', 'running', 'deleting']
const POLL_MS = 5000

export const kbPath = (kbId) => `/api/kb/${encodeURIComponent(kbId)}`

/** The KB header and its tabs (documents, settings, connectors, members), shared by the KB's views. */
export function kbHeader(kb, current, { canMembers = false } = {}) {
  const tabs = [['docs', 'Documents'], ['settings', 'Settings'], ['connectors', 'Connectors']]
  if (canMembers) tabs.push(['members', 'Members'])
  return [
    h('p', { class: 'crumbs' }, h('a', { href: '#/kbs' }, 'Knowledge bases'), ' / ', kb.kb_id),
    h('h1', null, kb.kb_name || kb.kb_id, kb.status === 'frozen' ? h('span', { class: 'badge s-failed' }, 'frozen') : null),
    h('nav', { class: 'tabs', 'aria-label': 'Knowledge base' }, h('ul', null, tabs.map(([id, text]) =>
      h('li', null, h('a', { href: `#/kb/${encodeURIComponent(kb.kb_id)}/${id}`, 'aria-current': id === current ? 'page' : null }, text))))),
  ]
}

const countOf = (counts, key) => (key === 'active' ? IN_PROGRESS.reduce((a, s) => a + (counts[s] ?? 0), 0) : counts[key] ?? 0)

/** Count cells, updated in place by fillCounts (a poll never rebuilds the rows, so focus stays where it is). */
const countsCells = () => COUNT_COLUMNS.map(([key]) => h('td', { class: 'num muted', 'data-count': key }, '…'))

function fillCounts(cells, counts) {
  for (const td of cells) {
    const text = counts ? String(countOf(counts, td.dataset.count)) : '…'
    if (td.textContent !== text) td.textContent = text
    td.classList.toggle('muted', !counts)
  }
}

/** The KB form (create or edit): fields named as the API's, so a 422 lands at its field. */
function kbForm(kb, close) {
  const creating = kb === null
  const general = h('div')
  const fields = {}
  if (creating) fields.kb_id = field('ID', h('input', { type: 'text', required: true, autocomplete: 'off', spellcheck: 'false', pattern: '[a-z0-9][a-z0-9_-]{0,62}' }), 'Lowercase letters, digits, - and _; at most 63 characters.')
  fields.kb_name = field('Name', h('input', { type: 'text', value: kb?.kb_name ?? '' }))
  fields.description = field('Description', h('textarea', { rows: 3, value: kb?.description ?? '' }))
  fields.tags = field('Tags', h('input', { type: 'text', value: (kb?.tags ?? []).join(', ') }), 'Separated by commas.')
  fields.visibility = field('Visibility', h('select', null, ['private', 'public'].map((v) => h('option', { value: v, selected: (kb?.visibility ?? 'private') === v }, v))),
    ent() ? 'Public: every signed-in user reads it as viewer.' : 'Stored; it matters in the access-controlled edition.')
  const submit = h('button', { type: 'submit', class: 'primary' }, creating ? 'Create' : 'Save')
  const form = h('form', {
    novalidate: true,
    onsubmit: async (e) => {
      e.preventDefault()
      clearIssues(fields, general)
      const body = {
        kb_name: fields.kb_name.input.value,
        description: fields.description.input.value === '' ? null : fields.description.input.value,
        tags: fields.tags.input.value.split(',').map((t) => t.trim()).filter(Boolean),
        visibility: fields.visibility.input.value,
      }
      if (creating) body.kb_id = fields.kb_id.input.value.trim()
      try {
        await busy(submit, () => (creating ? api('POST', '/api/kb', { json: body }) : api('PATCH', kbPath(kb.kb_id), { json: body })))
        close(creating ? body.kb_id : kb.kb_id)
      } catch (err) {
        showIssues(fields, err, general)
      }
    },
  }, general, Object.values(fields).map((f) => f.wrap),
  h('div', { class: 'actions' }, h('button', { type: 'button', onclick: () => close() }, 'Cancel'), submit))
  return form
}

async function deleteKb(kb, counts, area) {
  let connectors = null
  try {
    connectors = (await get(`/api/connectors${query({ kb_id: kb.kb_id })}`)).items.length
  } catch {
    // The count is informative; the delete itself says what it refuses.
  }
  const docs = counts?.total ?? null
  const body = [
    h('p', null, 'This permanently removes knowledge base ', h('strong', null, kb.kb_id), ' and everything in it:'),
    h('ul', null,
      h('li', null, docs === null ? 'all its documents' : `${docs} document${docs === 1 ? '' : 's'}`, ', their stored original files and their search index'),
      h('li', null, 'its settings overrides'),
      h('li', null, connectors === null ? 'its connectors' : `${connectors} connector${connectors === 1 ? '' : 's'}`, ' and their sync history'),
      ent() ? h('li', null, 'its members and pending invites') : null),
    h('p', null, 'This cannot be undone.'),
  ]
  if (!(await confirm(`Delete ${kb.kb_id}?`, body, { action: 'Delete knowledge base', danger: true, typed: kb.kb_id }))) return false
  await api('DELETE', kbPath(kb.kb_id))
  notice(area, `Deleted ${kb.kb_id}.`)
  return true
}

export async function view(main) {
  const area = h('div')
  const table = h('table', { class: 'grid' })
  const createBtn = canCreateKb() ? h('button', { type: 'button', class: 'primary' }, 'New knowledge base') : null
  main.append(h('h1', null, 'Knowledge bases'), h('div', { class: 'toolbar' }, createBtn), area, table)
  const counts = new Map()
  const cells = new Map()
  let timer = null
  let stopped = false

  const renderTable = () => {
    const kbs = [...session.kbs.values()]
    cells.clear()
    const headers = ['Knowledge base', 'Tags', ent() ? 'My role' : null, 'Visibility', ...COUNT_COLUMNS.map(([, t]) => t), 'Actions'].filter(Boolean)
    table.replaceChildren(
      h('caption', { class: 'sr-only' }, 'Knowledge bases with their document counts by status'),
      h('thead', null, h('tr', null, headers.map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', null, kbs.length === 0
        ? h('tr', null, h('td', { colspan: headers.length, class: 'muted' }, 'No knowledge base yet.'))
        : kbs.map((kb) => {
          const edit = can(kb, 'admin') ? h('button', { type: 'button', onclick: () => onEdit(kb) }, 'Edit', h('span', { class: 'sr-only' }, ` ${kb.kb_id}`)) : null
          const del = can(kb, 'owner') ? h('button', { type: 'button', class: 'danger', onclick: (e) => onDelete(kb, e.currentTarget) }, 'Delete', h('span', { class: 'sr-only' }, ` ${kb.kb_id}`)) : null
          const row = countsCells()
          cells.set(kb.kb_id, row)
          fillCounts(row, counts.get(kb.kb_id))
          return h('tr', { 'data-kb': kb.kb_id },
            h('th', { scope: 'row' }, h('a', { href: `#/kb/${encodeURIComponent(kb.kb_id)}/docs` }, kb.kb_name || kb.kb_id),
              h('div', { class: 'muted small' }, kb.kb_id), kb.status === 'frozen' ? badge('frozen') : null),
            h('td', null, kb.tags.map((t) => h('span', { class: 'tag' }, t))),
            ent() ? h('td', null, roleOn(kb) ?? '–') : null,
            h('td', null, kb.visibility),
            row,
            h('td', { class: 'row-actions' }, edit, del))
        })))
  }

  const refreshCounts = async () => {
    if (!ent() || superAdmin()) {
      // One request for every KB (the route is the super-admin's; the base edition has no roles).
      const { knowledge_bases } = await get('/api/docs/status')
      for (const id of session.kbs.keys()) counts.set(id, knowledge_bases[id]?.doc_counts ?? {})
    } else {
      await Promise.all([...session.kbs.keys()].map(async (id) => {
        try {
          counts.set(id, (await get(`${kbPath(id)}/docs/status`)).doc_counts)
        } catch {
          counts.delete(id)
        }
      }))
    }
    if (!stopped) for (const [id, row] of cells) fillCounts(row, counts.get(id))
  }
  const poll = async () => {
    if (stopped) return
    if (!document.hidden) await refreshCounts()
    if (!stopped) timer = setTimeout(poll, POLL_MS)
  }
  const reload = async () => {
    await loadKbs()
    renderTable()
    await refreshCounts()
  }

  const onEdit = async (kb) => {
    const saved = await dialog(`Edit ${kb.kb_id}`, (close) => kbForm(kb, close))
    if (saved) {
      notice(area, `Saved ${kb.kb_id}.`)
      await reload()
    }
  }
  const onDelete = async (kb, button) => {
    try {
      if (await busy(button, () => deleteKb(kb, counts.get(kb.kb_id), area))) {
        if (ent()) await loadMe()
        await reload()
      }
    } catch (err) {
      area.replaceChildren(alertBox(err))
    }
  }
  createBtn?.addEventListener('click', async () => {
    const created = await dialog('New knowledge base', (close) => kbForm(null, close))
    if (created) {
      notice(area, `Created ${created}.`)
      if (ent()) await loadMe()
      await reload()
    }
  })

  await loadKbs()
  renderTable()
  await poll()
  return () => {
    stopped = true
    clearTimeout(timer)
  }
}
