// Search playground: every option of POST /api/search, results with scores, pages, highlighted matches and the
// merged flag, the latency split of the Server-Timing header with the cache status, and the request as curl.
import { api } from './api.js'
import { alertBox, busy, field, h, highlight, uid } from './dom.js'
import { clearIssues, showIssues } from './forms.js'
import { ent, loadKbs, session } from './session.js'

/** Server-Timing: 'embed;dur=1.2, kb;desc="a";dur=3.0, cache;desc="hit"' -> [{name, desc, dur}] */
export function parseServerTiming(header) {
  if (!header) return []
  return header.split(',').map((part) => {
    const [name, ...params] = part.trim().split(';')
    const out = { name: name.trim(), desc: null, dur: null }
    for (const p of params) {
      const [k, v = ''] = p.trim().split('=')
      if (k === 'dur') out.dur = Number(v)
      if (k === 'desc') out.desc = v.replace(/^"|"$/g, '')
    }
    return out
  }).filter((e) => e.name)
}

const shellQuote = (s) => `'${s.replace(/'/g, "'\\''")}'`

export function curlOf(body) {
  const lines = [`curl -sS -X POST ${shellQuote(`${location.origin}/api/search`)}`, "  -H 'content-type: application/json'"]
  if (ent()) lines.push('  -H "authorization: Bearer $QUARRY_TOKEN"')
  lines.push(`  --data-raw ${shellQuote(JSON.stringify(body))}`)
  return lines.join(' \\\n')
}

const list = (text) => {
  const items = text.split(',').map((s) => s.trim()).filter(Boolean)
  return items.length === 0 ? undefined : items.length === 1 ? items[0] : items
}

export async function view(main) {
  const kbs = await loadKbs()
  const general = h('div')
  const f = {
    query: field('Query', h('textarea', { rows: 2, required: true })),
    mode: field('Mode', h('select', null, h('option', { value: '' }, 'service default'), h('option', { value: 'hybrid' }, 'hybrid'), h('option', { value: 'similarity' }, 'similarity'))),
    'options.hybrid.alpha': field('Alpha (hybrid)', h('input', { type: 'number', min: 0, max: 1, step: 0.05 }), '1 = dense only, 0 = sparse only; empty: service default.'),
    'options.similarity.min_score': field('Minimum score (similarity)', h('input', { type: 'number', min: 0, max: 1, step: 0.05 })),
    'options.top_k': field('Top k', h('input', { type: 'number', min: 1, max: 100, step: 1 })),
    'options.rerank.enabled': field('Rerank (when the service has a reranker)', h('input', { type: 'checkbox', checked: true })),
    'options.rerank.top_n': field('Rerank top n', h('input', { type: 'number', min: 1, max: 100, step: 1 })),
    'options.filter.doc_type': field('Document types', h('input', { type: 'text', placeholder: 'pdf, md' }), 'Separated by commas.'),
    'options.filter.source_type': field('Source types', h('input', { type: 'text', placeholder: 'file, web' })),
    'options.filter.source_prefix': field('Source starts with', h('input', { type: 'text' })),
    'options.filter.tags': field('KB tags', h('input', { type: 'text' })),
    'options.filter.doc_ids': field('Document ids', h('input', { type: 'text' })),
    'options.filter.updated_after': field('Updated after', h('input', { type: 'text', placeholder: '2024-05-01' }), 'RFC 3339 date or date-time with zone.'),
    'options.filter.updated_before': field('Updated before', h('input', { type: 'text' })),
  }
  f['options.mode'] = f.mode
  delete f.mode
  const kbBoxes = kbs.map((kb) => h('input', { type: 'checkbox', id: uid('kb'), value: kb.kb_id, checked: kbs.length === 1 }))
  const kbError = h('p', { class: 'error', id: uid('err'), hidden: true })
  const kbSet = h('fieldset', { 'aria-describedby': kbError.id }, h('legend', null, 'Knowledge bases'),
    kbs.length === 0 ? h('p', { class: 'muted' }, 'No knowledge base to search.') : null,
    kbBoxes.map((box, i) => h('div', { class: 'field check' }, box, h('label', { for: box.id }, kbs[i].kb_name && kbs[i].kb_name !== kbs[i].kb_id ? `${kbs[i].kb_name} (${kbs[i].kb_id})` : kbs[i].kb_id))), kbError)
  f.kb_ids = { wrap: kbSet, input: kbSet, error: kbError }

  const submit = h('button', { type: 'submit', class: 'primary' }, 'Search')
  const results = h('section', { 'aria-label': 'Results', 'aria-live': 'polite' })
  const curlPre = h('pre', { class: 'curl', tabindex: '0' })
  const copyBtn = h('button', { type: 'button' }, 'Copy as curl')
  const copyState = h('span', { role: 'status', class: 'muted' })
  let lastBody = null

  const body = () => {
    const v = (k) => f[k].input.value.trim()
    const num = (k) => (v(k) === '' ? undefined : Number(v(k)))
    const options = {}
    if (v('options.mode')) options.mode = v('options.mode')
    if (num('options.top_k') !== undefined) options.top_k = num('options.top_k')
    if (num('options.hybrid.alpha') !== undefined) options.hybrid = { alpha: num('options.hybrid.alpha') }
    if (num('options.similarity.min_score') !== undefined) options.similarity = { min_score: num('options.similarity.min_score') }
    const rerank = {}
    if (!f['options.rerank.enabled'].input.checked) rerank.enabled = false
    if (num('options.rerank.top_n') !== undefined) rerank.top_n = num('options.rerank.top_n')
    if (Object.keys(rerank).length > 0) options.rerank = rerank
    const filter = {}
    for (const k of ['doc_type', 'source_type', 'tags']) if (list(v(`options.filter.${k}`)) !== undefined) filter[k] = list(v(`options.filter.${k}`))
    const ids = v('options.filter.doc_ids').split(/[\s,]+/).filter(Boolean)
    if (ids.length > 0) filter.doc_ids = ids
    for (const k of ['source_prefix', 'updated_after', 'updated_before']) if (v(`options.filter.${k}`)) filter[k] = v(`options.filter.${k}`)
    if (Object.keys(filter).length > 0) options.filter = filter
    const out = { query: f.query.input.value, kb_ids: kbBoxes.filter((b) => b.checked).map((b) => b.value) }
    if (Object.keys(options).length > 0) out.options = options
    return out
  }

  const showCurl = () => {
    lastBody = body()
    curlPre.textContent = curlOf(lastBody)
  }
  copyBtn.addEventListener('click', async () => {
    showCurl()
    try {
      await navigator.clipboard.writeText(curlPre.textContent)
      copyState.textContent = 'Copied.'
    } catch {
      getSelection()?.selectAllChildren(curlPre)
      copyState.textContent = 'Selected: copy it with your keyboard.'
    }
  })

  const renderResults = (data, timing) => {
    const m = data.meta
    const byName = (n) => timing.filter((t) => t.name === n)
    const ms = (t) => (t?.dur === null || t?.dur === undefined ? '–' : `${t.dur.toFixed(1)} ms`)
    const cache = byName('cache')[0]?.desc ?? m.cache_status
    const rows = [['Total', `${m.latency_ms} ms`], ['Cache', cache], ['Embed', ms(byName('embed')[0])],
      ...byName('kb').map((t) => [`Search ${t.desc}`, ms(t)]), ['Fusion', ms(byName('fusion')[0])], ['Rerank', ms(byName('rerank')[0])]]
    results.replaceChildren(
      h('h2', null, `${m.returned} result${m.returned === 1 ? '' : 's'}`),
      h('p', { class: 'muted' }, `${m.total_candidates} candidates, ${m.search_mode}`, m.reranked ? `, reranked by ${m.rerank_provider}` : '', m.rerank_fallback ? ' (reranker failed: fused order)' : ''),
      h('table', { class: 'grid timing' }, h('caption', null, 'Latency'),
        h('tbody', null, rows.map(([k, v]) => h('tr', { 'data-timing': k }, h('th', { scope: 'row' }, k), h('td', { class: 'num' }, v))))),
      h('ol', { class: 'results' }, data.results.map((r) => h('li', { class: 'result' },
        h('h3', null, r.title || r.source),
        h('p', { class: 'meta small' },
          h('span', null, 'KB ', h('code', null, r.kb_id)),
          h('span', null, `page ${r.page_label || r.page_num}`),
          h('span', null, `score ${r.score.toFixed(4)}`),
          r.rerank_score !== null ? h('span', null, `rerank ${r.rerank_score.toFixed(4)}`) : null,
          r.merged ? h('span', { class: 'badge s-merged' }, 'merged') : null),
        h('p', { class: 'snippet' }, highlight(r.text, data.query)),
        h('p', { class: 'small muted source' }, r.source)))))
  }

  const form = h('form', {
    novalidate: true, 'aria-label': 'Search',
    onsubmit: async (e) => {
      e.preventDefault()
      clearIssues(f, general)
      showCurl()
      try {
        const res = await busy(submit, () => api('POST', '/api/search', { json: lastBody, raw: true }))
        const data = await res.json()
        renderResults(data, parseServerTiming(res.headers.get('server-timing')))
      } catch (err) {
        results.replaceChildren()
        showIssues(f, err, general)
      }
    },
  }, general, f.query.wrap, kbSet,
  h('div', { class: 'row' }, f['options.mode'].wrap, f['options.hybrid.alpha'].wrap, f['options.similarity.min_score'].wrap, f['options.top_k'].wrap),
  h('div', { class: 'row' }, f['options.rerank.enabled'].wrap, f['options.rerank.top_n'].wrap),
  h('details', null, h('summary', null, 'Filters'),
    h('div', { class: 'row' }, ['doc_type', 'source_type', 'source_prefix', 'tags', 'doc_ids', 'updated_after', 'updated_before'].map((k) => f[`options.filter.${k}`].wrap))),
  h('div', { class: 'actions start' }, submit, copyBtn, copyState))
  main.append(h('h1', null, 'Search'), form, h('details', { class: 'curl-box' }, h('summary', null, 'Request as curl'), curlPre), results)
  if (session.kbs.size === 0) main.append(alertBox(new Error('Create a knowledge base first.')))
}
