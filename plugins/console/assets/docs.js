// Documents of a KB: a server-paged table (status filter, sort, search), counts that refresh by themselves,
// drag-and-drop upload of many files with progress and an error per file, and the document actions: download,
// reindex, recover, fail, restore (an outdated document, with its dedup verdict and reason) and delete.
import { api, download, get, query, upload } from './api.js'
import { alertBox, badge, busy, confirm, dialog, field, fmtBytes, fmtDate, h, notice, safeHref, uid } from './dom.js'
import { kbHeader, kbPath } from './kbs.js'
import { can, canManageMembers, kbOf } from './session.js'

export const STATUSES = ['uploading', 'fetching', 'pending', 'running', 'indexed', 'failed', 'deleting', 'deleted', 'outdated']
const FAILABLE = ['uploading', 'pending', 'running', 'deleting']
const ACTIVE = ['uploading', 'pending', 'fetching', 'running', 'deleting']
const SORTS = [['updated_at', 'Updated'], ['created_at', 'Created'], ['title', 'Title'], ['source', 'Source'], ['chunk_count', 'Chunks'], ['file_size', 'Size']]
const POLL_MS = 3000
const UPLOADS_AT_ONCE = 2

/** The dedup record of a document as a sentence: verdict, stage, score, the other document and the reason. */
export function dedupLine(d) {
  if (!d) return null
  return h('div', { class: 'dedup small' },
    h('strong', null, d.verdict), ` (stage ${d.stage}, score ${Number(d.score).toFixed(2)}) of `, h('code', null, d.matched_doc_id), ': ', d.reason)
}

function detailList(doc) {
  const row = (k, v) => [h('dt', null, k), h('dd', null, v ?? '–')]
  const src = safeHref(doc.source_uri)
  return h('dl', { class: 'record' },
    row('Document id', h('code', null, doc.doc_id)),
    row('Title', doc.title),
    row('Source', doc.source),
    row('Source URI', doc.source_uri ? (src ? h('a', { href: src, rel: 'noopener noreferrer', target: '_blank' }, doc.source_uri) : doc.source_uri) : null),
    row('Status', badge(doc.status)),
    row('Last error', doc.last_error),
    row('Dedup', dedupLine(doc.dedup)),
    row('Duplicate of', doc.duplicate_of),
    row('Type', doc.doc_type),
    row('Chunks', doc.chunk_count === null ? null : String(doc.chunk_count)),
    row('Size', fmtBytes(doc.file_size)),
    row('Connector', doc.connector_id),
    row('Sync run', doc.run_id),
    row('Embedding model', doc.embedding_model),
    row('Processed', doc.process_finished_at ? fmtDate(doc.process_finished_at) : null),
    row('Created', fmtDate(doc.created_at)),
    row('Updated', fmtDate(doc.updated_at)))
}

/** The buttons a document's status and the caller's role allow (each names the document for screen readers). */
function actionsFor(doc, kb, run) {
  const name = h('span', { class: 'sr-only' }, ` ${doc.title || doc.source}`)
  const btn = (action, text, cls) => h('button', { type: 'button', class: cls ?? null, 'data-action': action, 'data-doc': doc.doc_id, onclick: (e) => run(action, doc, e.currentTarget) }, text, name.cloneNode(true))
  const editor = can(kb, 'editor')
  return [
    doc.storage_key && doc.status !== 'deleted' ? btn('download', 'Download') : null,
    editor && doc.status === 'outdated' ? btn('restore', 'Restore') : null,
    editor && (doc.status === 'indexed' || doc.status === 'failed') ? btn('reindex', 'Reindex') : null,
    editor && doc.status === 'running' ? btn('recover', 'Recover') : null,
    editor && FAILABLE.includes(doc.status) ? btn('fail', 'Fail') : null,
    editor && doc.status !== 'running' && doc.status !== 'deleting' ? btn('delete', doc.status === 'deleted' ? 'Delete permanently' : 'Delete', 'danger') : null,
  ]
}

/**
 * The document table and pager for a list endpoint (a KB's documents, a connector's): `fetchPage(state)` returns
 * {items, total}. Returns { node, state, load() }.
 */
export function docTable({ caption, kb, fetchPage, onAction, onSort, sortable = true, pageSize = 50 }) {
  const state = { page: 1, page_size: pageSize, sort_by: 'updated_at', sort_order: 'desc', status: '', search: '' }
  const table = h('table', { class: 'grid docs' })
  const pager = h('nav', { class: 'pager', 'aria-label': `${caption}: pages` })
  const summary = h('p', { class: 'muted', 'aria-live': 'polite' })
  const node = h('div', null, table, h('div', { class: 'pager-row' }, summary, pager))
  let seq = 0
  let last = null

  const sortHeader = (key, text) => {
    if (!sortable || !SORTS.some(([k]) => k === key)) return h('th', { scope: 'col' }, text)
    const active = state.sort_by === key
    return h('th', { scope: 'col', 'aria-sort': active ? (state.sort_order === 'asc' ? 'ascending' : 'descending') : 'none' },
      h('button', {
        type: 'button', class: 'sort',
        onclick: () => {
          state.sort_order = active && state.sort_order === 'desc' ? 'asc' : 'desc'
          state.sort_by = key
          state.page = 1
          onSort?.(state)
          void load()
        },
      }, text, h('span', { 'aria-hidden': 'true' }, active ? (state.sort_order === 'asc' ? ' ▲' : ' ▼') : '')))
  }

  const render = ({ items, total }) => {
    const focused = document.activeElement
    const keep = table.contains(focused) ? [focused.dataset.action, focused.dataset.doc] : null
    table.replaceChildren(
      h('caption', { class: 'sr-only' }, caption),
      h('thead', null, h('tr', null, sortHeader('title', 'Title'), h('th', { scope: 'col' }, 'Status'), sortHeader('source', 'Source'),
        sortHeader('chunk_count', 'Chunks'), sortHeader('file_size', 'Size'), sortHeader('updated_at', 'Updated'), h('th', { scope: 'col' }, 'Actions'))),
      h('tbody', null, items.length === 0
        ? h('tr', null, h('td', { colspan: 7, class: 'muted' }, 'No documents.'))
        : items.map((doc) => h('tr', { 'data-doc': doc.doc_id },
          h('th', { scope: 'row' }, h('button', { type: 'button', class: 'link', 'data-action': 'details', 'data-doc': doc.doc_id, onclick: () => showDetails(doc) }, doc.title || doc.source)),
          h('td', null, badge(doc.status),
            doc.status === 'outdated' ? dedupLine(doc.dedup) : null,
            doc.status === 'failed' && doc.last_error ? h('div', { class: 'small error-text' }, doc.last_error) : null),
          h('td', { class: 'source' }, doc.source),
          h('td', { class: 'num' }, doc.chunk_count ?? '–'),
          h('td', { class: 'num' }, fmtBytes(doc.file_size)),
          h('td', null, fmtDate(doc.updated_at)),
          h('td', { class: 'row-actions' }, actionsFor(doc, kb, onAction))))))
    const pages = Math.max(1, Math.ceil(total / state.page_size))
    summary.textContent = `${total} document${total === 1 ? '' : 's'}, page ${state.page} of ${pages}`
    const go = (p) => () => {
      state.page = p
      void load()
    }
    pager.replaceChildren(
      h('button', { type: 'button', disabled: state.page <= 1, onclick: go(1) }, 'First'),
      h('button', { type: 'button', disabled: state.page <= 1, onclick: go(state.page - 1) }, 'Previous'),
      h('button', { type: 'button', disabled: state.page >= pages, onclick: go(state.page + 1) }, 'Next'),
      h('button', { type: 'button', disabled: state.page >= pages, onclick: go(pages) }, 'Last'))
    if (keep) table.querySelector(`[data-action="${keep[0]}"][data-doc="${keep[1]}"]`)?.focus()
  }

  const load = async () => {
    const mine = ++seq
    try {
      const data = await fetchPage(state)
      if (mine !== seq) return
      // A page past the end after deletions: go to the last one.
      const pages = Math.max(1, Math.ceil(data.total / state.page_size))
      if (state.page > pages) {
        state.page = pages
        return load()
      }
      last = data
      render(data)
    } catch (err) {
      if (mine === seq) table.replaceChildren(h('caption', null, alertBox(err)))
    }
  }
  return { node, state, load, get last() { return last } }
}

function showDetails(doc) {
  return dialog(doc.title || doc.source, (close) => h('div', null, detailList(doc),
    h('div', { class: 'actions' }, h('button', { type: 'button', onclick: () => close() }, 'Close'))), { wide: true })
}

/** Asks for the reason of a manual fail; null when cancelled. */
function askReason(doc) {
  return dialog(`Mark ${doc.title || doc.source} failed`, (close) => {
    const f = field('Reason (optional)', h('textarea', { rows: 3, maxlength: 10000 }))
    return h('form', { onsubmit: (e) => { e.preventDefault(); close({ reason: f.input.value }) } },
      h('p', null, 'The document stops where it is and is marked failed.'), f.wrap,
      h('div', { class: 'actions' }, h('button', { type: 'button', onclick: () => close(null) }, 'Cancel'), h('button', { type: 'submit', class: 'danger' }, 'Mark failed')))
  }).then((v) => v ?? null)
}

/** Runs one document action; returns a short result text, or null when the user cancelled. */
export async function runAction(action, doc) {
  const base = `${kbPath(doc.kb_id)}/docs/${encodeURIComponent(doc.doc_id)}`
  const name = doc.title || doc.source
  switch (action) {
    case 'download':
      return `Downloaded ${await download(`${base}/download`, doc.source.split('/').pop() || doc.doc_id)}.`
    case 'reindex': {
      const out = await api('POST', `${base}/reindex${query({ force: 'true' })}`)
      return out?.queued === 0 ? `${name}: nothing to reindex.` : `${name}: queued for reindexing.`
    }
    case 'restore':
      await api('POST', `${base}/restore`)
      return `${name}: restored, it is indexed again.`
    case 'recover':
      await api('POST', `${base}/recover`)
      return `${name}: recovered and queued again.`
    case 'fail': {
      const r = await askReason(doc)
      if (r === null) return null
      await api('POST', `${base}/fail${query({ reason: r.reason || undefined })}`)
      return `${name}: marked failed.`
    }
    case 'delete': {
      // Spec 3.1: an indexed document is soft-deleted; any other is removed entirely; force removes a soft-deleted one.
      const force = doc.status === 'deleted'
      const soft = doc.status === 'indexed'
      const ok = await confirm(`Delete ${name}?`, h('p', null, soft
        ? 'The document leaves the search index and is kept as deleted (it can be deleted permanently later).'
        : 'The document, its stored original and its record are removed for good.'),
      { action: force ? 'Delete permanently' : 'Delete', danger: true })
      if (!ok) return null
      await api('DELETE', `${base}${query({ force: force ? 'true' : undefined })}`)
      return `${name}: deleted.`
    }
    default:
      return null
  }
}

function uploader(kb, area, done) {
  const list = h('ul', { class: 'uploads', 'aria-label': 'Uploads' })
  const input = h('input', { type: 'file', multiple: true, id: uid('upload') })
  const zone = h('div', { class: 'dropzone' },
    h('p', null, h('label', { for: input.id }, 'Upload documents'), ' — drop files here or choose them:'), input,
    h('p', { class: 'help' }, 'pdf, docx, txt, md, hwp, hwpx, html, htm, rst. Each file is uploaded on its own, with its own progress and error.'))
  const queue = []
  let running = 0

  const next = () => {
    while (running < UPLOADS_AT_ONCE && queue.length > 0) {
      const job = queue.shift()
      running++
      job.state.textContent = 'uploading'
      upload(`${kbPath(kb.kb_id)}/docs/upload`, job.file, (p) => (job.progress.value = p))
        .then(() => {
          job.progress.value = 1
          job.state.textContent = 'stored, queued for indexing'
          job.li.classList.add('ok')
        }, (err) => {
          job.state.textContent = `error: ${err.message}`
          job.li.classList.add('failed')
        })
        .finally(() => {
          running--
          if (running === 0 && queue.length === 0) done(list)
          next()
        })
    }
  }
  const add = (files) => {
    for (const file of files) {
      const progress = h('progress', { max: 1, value: 0, 'aria-label': `Upload of ${file.name}` })
      const state = h('span', { class: 'state' }, 'queued')
      const li = h('li', null, h('span', { class: 'name' }, file.name), progress, state)
      list.append(li)
      queue.push({ file, progress, state, li })
    }
    next()
  }
  input.addEventListener('change', () => {
    add([...input.files])
    input.value = ''
  })
  zone.addEventListener('dragover', (e) => {
    e.preventDefault()
    zone.classList.add('over')
  })
  zone.addEventListener('dragleave', () => zone.classList.remove('over'))
  zone.addEventListener('drop', (e) => {
    e.preventDefault()
    zone.classList.remove('over')
    add([...(e.dataTransfer?.files ?? [])])
  })
  area.append(zone, list)
}

export async function view(main, kbId) {
  const kb = await kbOf(kbId)
  const messages = h('div')
  const countsBar = h('div', { class: 'counts', role: 'group', 'aria-label': 'Documents by status' })
  main.append(...kbHeader(kb, 'docs', { canMembers: canManageMembers(kb) }), messages, countsBar)

  const onAction = async (action, doc, button) => {
    try {
      const text = await busy(button, () => runAction(action, doc))
      if (text) notice(messages, text)
      if (action !== 'download' && text) await refresh(true)
    } catch (err) {
      messages.replaceChildren(alertBox(err))
    }
  }
  const docs = docTable({
    caption: `Documents of ${kb.kb_id}`, kb, onAction,
    fetchPage: (s) => get(`${kbPath(kb.kb_id)}/docs${query(s)}`),
    // A column header's sort shows in the sort fields, so that a later filter keeps it.
    onSort: (s) => {
      sort.input.value = s.sort_by
      order.input.value = s.sort_order
    },
  })

  if (can(kb, 'editor')) {
    const up = h('section', { 'aria-label': 'Upload' })
    uploader(kb, up, () => refresh(true))
    main.append(up)
  }

  const search = field('Search', h('input', { type: 'search', placeholder: 'title, source or id' }))
  const status = field('Status', h('select', null, h('option', { value: '' }, 'any (not deleted)'), STATUSES.map((s) => h('option', { value: s }, s))))
  const sort = field('Sort by', h('select', null, SORTS.map(([k, t]) => h('option', { value: k, selected: k === 'updated_at' }, t))))
  const order = field('Order', h('select', null, h('option', { value: 'desc' }, 'descending'), h('option', { value: 'asc' }, 'ascending')))
  const size = field('Per page', h('select', null, [20, 50, 100].map((n) => h('option', { value: n, selected: n === 50 }, String(n)))))
  const apply = () => {
    Object.assign(docs.state, { search: search.input.value.trim(), status: status.input.value, sort_by: sort.input.value, sort_order: order.input.value, page_size: Number(size.input.value), page: 1 })
    if (lastCountsObj) renderCounts(lastCountsObj)
    void docs.load()
  }
  let debounce = null
  search.input.addEventListener('input', () => {
    clearTimeout(debounce)
    debounce = setTimeout(apply, 250)
  })
  for (const f of [status, sort, order, size]) f.input.addEventListener('change', apply)
  main.append(h('div', { class: 'filters', role: 'search', 'aria-label': 'Filter documents' }, search.wrap, status.wrap, sort.wrap, order.wrap, size.wrap), docs.node)

  let lastCounts = ''
  let lastCountsObj = null
  const renderCounts = (counts) => {
    lastCountsObj = counts
    const focused = countsBar.contains(document.activeElement) ? document.activeElement.dataset.status : null
    countsBar.replaceChildren(...['total', ...STATUSES].map((s) => {
      const active = s === 'total' ? docs.state.status === '' : docs.state.status === s
      return h('button', {
        type: 'button', class: `count s-${s}`, 'aria-pressed': String(active), 'data-status': s,
        onclick: () => {
          status.input.value = s === 'total' ? '' : s
          apply()
        },
      }, h('span', { class: 'label' }, s === 'total' ? 'all' : s), ' ', h('span', { class: 'n' }, String(counts[s] ?? 0)))
    }))
    if (focused) countsBar.querySelector(`[data-status="${focused}"]`)?.focus()
  }
  /** Counts every POLL_MS; the page is read again when they changed (a document moved, arrived or left). */
  const refresh = async (force = false) => {
    const { doc_counts } = await get(`${kbPath(kb.kb_id)}/docs/status`)
    const key = JSON.stringify(doc_counts)
    if (key !== lastCounts) renderCounts(doc_counts)
    if (force || key !== lastCounts) await docs.load()
    lastCounts = key
  }
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
  await poll()
  return () => {
    stopped = true
    clearTimeout(timer)
    clearTimeout(debounce)
  }
}
