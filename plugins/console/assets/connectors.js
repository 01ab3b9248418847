// Connectors: the list, create and edit forms for web, confluence and github built from their config schemas
// (/console/assets/connector-schemas.json, generated from the service's own), sync now and abort, the sync status
// with its counts and last_error, and the connector's documents.
import { api, get, query } from './api.js'
import { alertBox, badge, busy, confirm, dialog, field, fmtDate, h, notice } from './dom.js'
import { docTable, runAction } from './docs.js'
import { clearIssues, schemaForm, showIssues } from './forms.js'
import { kbHeader } from './kbs.js'
import { can, canById, canManageMembers, kbOf, loadKbs, session } from './session.js'

const POLL_MS = 3000
let schemas = null
const loadSchemas = async () => (schemas ??= await get('/console/assets/connector-schemas.json'))
const connectorPath = (id) => `/api/connectors/${encodeURIComponent(id)}`

/** Create (connector null) or edit form; resolves with the saved connector or undefined. */
async function connectorDialog(connector, kbIds, fixedKb) {
  const all = await loadSchemas()
  return dialog(connector ? `Edit ${connector.name}` : 'New connector', (close) => {
    const general = h('div')
    const fields = {}
    const creating = connector === null
    if (creating) {
      fields.kb_id = field('Knowledge base', h('select', { disabled: Boolean(fixedKb) }, kbIds.map((id) => h('option', { value: id, selected: id === fixedKb }, id))))
      fields.source_type = field('Source type', h('select', null, Object.keys(all).map((t) => h('option', { value: t }, t))), 'Cannot be changed later.')
    }
    fields.name = field('Name', h('input', { type: 'text', value: connector?.name ?? '', autocomplete: 'off' }))
    fields.sync_schedule = field('Schedule', h('input', { type: 'text', value: connector?.sync_schedule ?? '', placeholder: '0 3 * * *' }), '5-field cron expression, UTC; empty: no schedule.')
    fields.schedule_enabled = field('Run on schedule', h('input', { type: 'checkbox', checked: connector?.schedule_enabled ?? false }))
    if (!creating) {
      fields.status = field('Status', h('select', null,
        connector.status === 'error' ? h('option', { value: '' }, 'error (unchanged)') : null,
        ['active', 'paused'].map((s) => h('option', { value: s, selected: connector.status === s }, s))),
      connector.status === 'error' ? 'Choosing active or paused clears last_error.' : undefined)
    }
    const configBox = h('fieldset', null, h('legend', null, 'Configuration'))
    let config = null
    const renderConfig = () => {
      const type = creating ? fields.source_type.input.value : connector.source_type
      for (const k of Object.keys(fields)) if (k.startsWith('config.')) delete fields[k]
      config = schemaForm(all[type], creating ? undefined : connector.config, 'config')
      Object.assign(fields, config.fields)
      configBox.replaceChildren(h('legend', null, `Configuration (${type})`), config.node)
    }
    renderConfig()
    fields.source_type?.input.addEventListener('change', renderConfig)
    const submit = h('button', { type: 'submit', class: 'primary' }, creating ? 'Create' : 'Save')
    return h('form', {
      novalidate: true,
      onsubmit: async (e) => {
        e.preventDefault()
        clearIssues(fields, general)
        const body = {
          name: fields.name.input.value,
          config: config.read(),
          sync_schedule: fields.sync_schedule.input.value.trim() || null,
          schedule_enabled: fields.schedule_enabled.input.checked,
        }
        if (creating) Object.assign(body, { kb_id: fields.kb_id.input.value, source_type: fields.source_type.input.value })
        else if (fields.status.input.value !== '' && fields.status.input.value !== connector.status) body.status = fields.status.input.value
        try {
          const saved = await busy(submit, () => (creating ? api('POST', '/api/connectors', { json: body }) : api('PATCH', connectorPath(connector.connector_id), { json: body })))
          close(saved)
        } catch (err) {
          showIssues(fields, err, general)
        }
      },
    }, general, Object.entries(fields).filter(([k]) => !k.startsWith('config.')).map(([, f]) => f.wrap), configBox,
    h('div', { class: 'actions' }, h('button', { type: 'button', onclick: () => close() }, 'Cancel'), submit))
  }, { wide: true })
}

async function renderList(main, kbId) {
  await loadKbs()
  const area = h('div')
  const table = h('table', { class: 'grid' })
  const adminKbs = [...session.kbs.values()].filter((kb) => can(kb, 'admin') && (!kbId || kb.kb_id === kbId)).map((kb) => kb.kb_id)
  const create = adminKbs.length > 0 ? h('button', { type: 'button', class: 'primary' }, 'New connector') : null
  main.append(h('div', { class: 'toolbar' }, create), area, table)
  const load = async () => {
    const { items } = await get(`/api/connectors${query({ kb_id: kbId })}`)
    table.replaceChildren(
      h('caption', { class: 'sr-only' }, 'Connectors'),
      h('thead', null, h('tr', null, ['Name', 'Knowledge base', 'Type', 'Status', 'Sync', 'Last synced', 'Last error'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', null, items.length === 0
        ? h('tr', null, h('td', { colspan: 7, class: 'muted' }, 'No connector.'))
        : items.map((c) => h('tr', { 'data-connector': c.connector_id },
          h('th', { scope: 'row' }, h('a', { href: `#/connectors/${encodeURIComponent(c.connector_id)}` }, c.name)),
          h('td', null, c.kb_id), h('td', null, c.source_type), h('td', null, badge(c.status)), h('td', null, badge(c.sync_status)),
          h('td', null, fmtDate(c.last_synced_at)), h('td', { class: 'small' }, c.last_error ?? '')))))
  }
  create?.addEventListener('click', async () => {
    const saved = await connectorDialog(null, adminKbs, kbId)
    if (saved) {
      notice(area, `Created ${saved.name}.`)
      await load()
    }
  })
  await load()
}

export async function listView(main) {
  main.append(h('h1', null, 'Connectors'))
  await renderList(main, undefined)
}

export async function kbView(main, kbId) {
  const kb = await kbOf(kbId)
  main.append(...kbHeader(kb, 'connectors', { canMembers: canManageMembers(kb) }))
  await renderList(main, kb.kb_id)
}

export async function detailView(main, id) {
  let c = await get(connectorPath(id))
  await loadKbs()
  const kb = session.kbs.get(c.kb_id) ?? (await kbOf(c.kb_id))
  const messages = h('div')
  const title = h('h1', null, c.name)
  const statusBox = h('section', { 'aria-label': 'Sync status' })
  const buttons = h('div', { class: 'toolbar' })
  main.append(h('p', { class: 'crumbs' }, h('a', { href: '#/connectors' }, 'Connectors'), ' / ', h('a', { href: `#/kb/${encodeURIComponent(c.kb_id)}/connectors` }, c.kb_id)),
    title, messages, buttons, statusBox)

  const act = async (button, fn, text) => {
    try {
      await busy(button, fn)
      notice(messages, text)
      await refresh()
    } catch (err) {
      messages.replaceChildren(alertBox(err))
    }
  }
  const renderButtons = (s) => {
    const editor = canById(c.kb_id, 'editor')
    buttons.replaceChildren(
      editor && s.sync_status !== 'running' ? h('button', { type: 'button', class: 'primary', onclick: (e) => act(e.currentTarget, () => api('POST', `${connectorPath(id)}/sync`), 'Sync started.') }, 'Sync now') : null,
      editor && s.sync_status === 'running' ? h('button', { type: 'button', onclick: (e) => act(e.currentTarget, () => api('POST', `${connectorPath(id)}/sync/abort`), 'Abort requested.') }, 'Abort sync') : null,
      editor ? h('button', { type: 'button', onclick: onEdit }, 'Edit') : null,
      canById(c.kb_id, 'admin') ? h('button', { type: 'button', class: 'danger', onclick: (e) => onDelete(e.currentTarget, s) }, 'Delete') : null)
  }
  const renderStatus = (s) => {
    const counts = Object.entries(s.doc_counts).filter(([k, n]) => n > 0 || k === 'total')
    const last = s.last_sync
    statusBox.replaceChildren(h('h2', null, 'Status'),
      h('dl', { class: 'record' },
        h('dt', null, 'Type'), h('dd', null, c.source_type),
        h('dt', null, 'Status'), h('dd', null, badge(s.status)),
        h('dt', null, 'Sync'), h('dd', null, badge(s.sync_status), s.sync_started_at ? ` since ${fmtDate(s.sync_started_at)}` : ''),
        h('dt', null, 'Last synced'), h('dd', null, fmtDate(s.last_synced_at)),
        h('dt', null, 'Last error'), h('dd', { class: s.last_error ? 'error-text' : null }, s.last_error ?? '–'),
        h('dt', null, 'Documents'), h('dd', null, counts.map(([k, n]) => h('span', { class: 'tag', 'data-count': k }, `${k} ${n}`))),
        last ? [h('dt', null, 'Last run'), h('dd', null, `${last.outcome}: fetched ${last.fetched}, stored ${last.stored}, unchanged ${last.unchanged}, skipped ${last.skipped}, failed ${last.failed}, pruned ${last.pruned}${last.truncated ? ' (truncated)' : ''}`)] : null))
  }
  let lastKey = ''
  const refresh = async () => {
    const s = await get(`${connectorPath(id)}/sync/status`)
    const key = JSON.stringify(s)
    if (key !== lastKey) {
      renderStatus(s)
      renderButtons(s)
      if (lastKey !== '') void docs.load()
      lastKey = key
    }
    return s
  }
  const onEdit = async () => {
    const saved = await connectorDialog(c, [c.kb_id], c.kb_id)
    if (saved) {
      c = saved
      title.textContent = c.name
      notice(messages, `Saved ${c.name}.`)
      lastKey = ''
      await refresh()
    }
  }
  const onDelete = async (button, s) => {
    const n = s.doc_counts.total
    const ok = await confirm(`Delete ${c.name}?`, [
      h('p', null, 'This removes connector ', h('strong', null, c.name), ` and the ${n} document${n === 1 ? '' : 's'} it collected into ${c.kb_id} (in the background), with their search index entries.`),
      h('p', null, 'This cannot be undone.')], { action: 'Delete connector', danger: true })
    if (!ok) return
    try {
      await busy(button, () => api('DELETE', connectorPath(id)))
      location.hash = `#/kb/${encodeURIComponent(c.kb_id)}/connectors`
    } catch (err) {
      messages.replaceChildren(alertBox(err))
    }
  }

  const docs = docTable({
    caption: `Documents of connector ${c.name}`, kb, pageSize: 20,
    fetchPage: (st) => get(`${connectorPath(id)}/docs${query(st)}`),
    onAction: async (action, doc, button) => {
      try {
        const text = await busy(button, () => runAction(action, doc))
        if (text) notice(messages, text)
        if (text && action !== 'download') await docs.load()
      } catch (err) {
        messages.replaceChildren(alertBox(err))
      }
    },
  })
  main.append(h('section', { 'aria-label': 'Documents' }, h('h2', null, 'Documents'), docs.node))
  await refresh()
  await docs.load()
  let stopped = false
  let timer = null
  const poll = async () => {
    if (stopped) return
    try {
      if (!document.hidden) await refresh()
    } catch (err) {
      messages.replaceChildren(alertBox(err))
    }
    if (!stopped) timer = setTimeout(poll, POLL_MS)
  }
  timer = setTimeout(poll, POLL_MS)
  return () => {
    stopped = true
    clearTimeout(timer)
  }
}
