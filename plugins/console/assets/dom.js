// The console's whole rendering layer: elements are built with createElement and filled with text nodes, never
// with markup, so a title, a file name or a crawled snippet is shown as the characters it holds and can run
// nothing. No HTML-parsing sink is used anywhere in the console (a test checks every module for them).

const PROPS = new Set(['value', 'checked', 'selected', 'indeterminate'])

/** h('button', {class: 'x', onclick: fn, 'aria-label': 'Close'}, 'text', child, [more]) */
export function h(tag, props, ...children) {
  const el = document.createElement(tag)
  if (props) {
    for (const [k, v] of Object.entries(props)) {
      if (v === undefined || v === null || v === false) continue
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v)
      else if (k === 'class') el.className = v
      else if (PROPS.has(k)) el[k] = v
      else el.setAttribute(k, v === true ? '' : String(v))
    }
  }
  append(el, children)
  return el
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue
    el.append(c instanceof Node ? c : String(c))
  }
  return el
}

export const clear = (el) => {
  el.replaceChildren()
  return el
}

export const $ = (sel, root = document) => root.querySelector(sel)

let ids = 0
export const uid = (prefix = 'f') => `${prefix}-${++ids}`

/** Only http(s) links are followed: a crawled source could say javascript:. */
export const safeHref = (url) => (typeof url === 'string' && /^https?:\/\//i.test(url) ? url : null)

/** Polite announcement for screen readers (the live region of index.html). */
export function announce(text) {
  const live = $('#live')
  if (!live) return
  live.textContent = ''
  setTimeout(() => (live.textContent = text), 30)
}

export const fmtDate = (iso) => {
  if (!iso) return '–'
  const d = new Date(iso)
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString()
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return '–'
  if (n < 1024) return `${n} B`
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`
  return `${(n / 1024 / 1024).toFixed(1)} MB`
}

/** A text with the query's words marked (<mark> elements around text nodes). */
export function highlight(text, query) {
  const words = [...new Set(String(query).toLowerCase().match(/[\p{L}\p{N}]{2,}/gu) ?? [])]
  if (words.length === 0) return [text]
  const escaped = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).sort((a, b) => b.length - a.length)
  const re = new RegExp(`(${escaped.join('|')})`, 'giu')
  return String(text).split(re).map((part, i) => (i % 2 === 1 ? h('mark', null, part) : part))
}

/**
 * A modal dialog (native <dialog>: focus stays inside, Escape closes it). `build(close)` returns the content;
 * resolves with what close() was given (undefined when dismissed).
 */
export function dialog(title, build, { wide = false } = {}) {
  return new Promise((resolve) => {
    const titleId = uid('dlg')
    const d = h('dialog', { class: wide ? 'wide' : null, 'aria-labelledby': titleId })
    let result
    const close = (value) => {
      result = value
      d.close()
    }
    d.addEventListener('close', () => {
      d.remove()
      resolve(result)
    })
    append(d, [h('h2', { id: titleId }, title), build(close)])
    document.body.append(d)
    d.showModal()
  })
}

/** Yes/no question; the confirming button names the action. `typed`: the user must type this text first. */
export function confirm(title, body, { action = 'Confirm', danger = false, typed = null } = {}) {
  return dialog(title, (close) => {
    const yes = h('button', { type: 'submit', class: danger ? 'danger' : 'primary', disabled: typed !== null }, action)
    const input = typed === null ? null : h('input', { id: uid(), autocomplete: 'off', spellcheck: 'false', oninput: (e) => (yes.disabled = e.target.value !== typed) })
    return h('form', { onsubmit: (e) => { e.preventDefault(); close(true) } },
      body,
      input && h('p', null, h('label', { for: input.id }, 'Type ', h('code', null, typed), ' to confirm'), input),
      h('div', { class: 'actions' }, h('button', { type: 'button', onclick: () => close(false) }, 'Cancel'), yes))
  }).then((v) => v === true)
}

/** A labelled form field: returns {wrap, input, error}; the error text is tied to the input for assistive tech. */
export function field(label, input, help) {
  input.id ||= uid()
  const error = h('p', { class: 'error', id: `${input.id}-err`, hidden: true })
  const helpEl = help ? h('p', { class: 'help', id: `${input.id}-help` }, help) : null
  input.setAttribute('aria-describedby', [helpEl?.id, error.id].filter(Boolean).join(' '))
  const isCheck = input.type === 'checkbox'
  const wrap = h('div', { class: isCheck ? 'field check' : 'field' },
    isCheck ? [input, h('label', { for: input.id }, label)] : [h('label', { for: input.id }, label), input], helpEl, error)
  return { wrap, input, error }
}

export function setError(f, message) {
  f.error.textContent = message ?? ''
  f.error.hidden = !message
  if (message) f.input.setAttribute('aria-invalid', 'true')
  else f.input.removeAttribute('aria-invalid')
}

/** A status word as a badge (the word is the text: colour is never the only signal). */
export const badge = (status) => h('span', { class: `badge s-${String(status).replace(/[^a-z_]/g, '')}` }, status)

/** Disables a button while an action runs; errors are shown through `report`. */
export async function busy(button, fn) {
  button.disabled = true
  button.setAttribute('aria-busy', 'true')
  try {
    return await fn()
  } finally {
    button.disabled = false
    button.removeAttribute('aria-busy')
  }
}

/** An error as an alert (announced at once). */
export const alertBox = (err) => h('div', { class: 'alert', role: 'alert' }, err?.message ?? String(err))

/** A short confirmation that stays visible a while and is announced. */
export function notice(container, text) {
  const el = h('div', { class: 'notice', role: 'status' }, text)
  container.prepend(el)
  setTimeout(() => el.remove(), 6000)
}
