// Start-up and navigation: reads /console/config.json, signs in (access-controlled edition), then shows the view
// the address's hash names (#/kbs, #/kb/<id>/docs, #/search, ...). Views other than the first are loaded on use.
import { configureApi, get } from './api.js'
import * as auth from './auth.js'
import { $, alertBox, clear, h } from './dom.js'
import { ent, loadMe, session, superAdmin } from './session.js'

const main = $('#main')
let dispose = null
let firstView = true

const ROUTES = [
  [/^#?\/?$|^#\/kbs$/, () => import('./kbs.js'), 'view'],
  [/^#\/kb\/([^/]+)(?:\/docs)?$/, () => import('./docs.js'), 'view'],
  [/^#\/kb\/([^/]+)\/settings$/, () => import('./settings.js'), 'view'],
  [/^#\/kb\/([^/]+)\/members$/, () => import('./members.js'), 'view'],
  [/^#\/kb\/([^/]+)\/connectors$/, () => import('./connectors.js'), 'kbView'],
  [/^#\/search$/, () => import('./search.js'), 'view'],
  [/^#\/connectors$/, () => import('./connectors.js'), 'listView'],
  [/^#\/connectors\/([^/]+)$/, () => import('./connectors.js'), 'detailView'],
]

function renderNav() {
  const nav = $('#nav')
  const here = location.hash || '#/kbs'
  const link = (href, text, active) => h('a', { href, 'aria-current': active ? 'page' : null }, text)
  clear(nav).append(h('ul', null,
    h('li', null, link('#/kbs', 'Knowledge bases', here === '#/kbs' || here.startsWith('#/kb/'))),
    h('li', null, link('#/search', 'Search', here === '#/search')),
    h('li', null, link('#/connectors', 'Connectors', here.startsWith('#/connectors')))))
}

function renderUser() {
  const box = clear($('#user'))
  if (!ent() || !session.me) return
  const me = session.me
  box.append(
    h('span', { class: 'who' }, me.email ?? me.preferred_username ?? me.user_id, superAdmin() ? ' (super-admin)' : ''),
    h('button', { type: 'button', onclick: () => auth.signOut(session.oidc) }, 'Sign out'))
}


async function route() {
  const hash = location.hash
  // An in-page anchor (not a view) keeps the current view.
  if (hash && !hash.startsWith('#/') && dispose !== null) return
  renderNav()
  if (typeof dispose === 'function') dispose()
  dispose = null
  clear(main)
  const found = ROUTES.map(([re, load, name]) => [re.exec(hash), load, name]).find(([m]) => m)
  if (!found) {
    main.append(h('h1', null, 'Not found'), h('p', null, 'No view at this address. ', h('a', { href: '#/kbs' }, 'Knowledge bases')))
    dispose = () => {}
    return
  }
  const [m, load, name] = found
  const token = {}
  dispose = token
  try {
    const mod = await load()
    if (dispose !== token) return
    const out = await mod[name](main, ...m.slice(1).map(decodeURIComponent))
    if (dispose !== token) {
      if (typeof out === 'function') out()
      return
    }
    dispose = typeof out === 'function' ? out : () => {}
  } catch (err) {
    if (dispose === token) dispose = () => {}
    main.append(alertBox(err))
  }
  // After a navigation (not the first load) focus goes to the new view's heading, so that a screen reader reads it.
  const heading = main.querySelector('h1')
  if (heading && !firstView && (document.activeElement === document.body || !main.contains(document.activeElement))) {
    heading.setAttribute('tabindex', '-1')
    heading.focus({ preventScroll: true })
  }
  firstView = false
}

function signInScreen(message) {
  renderNav()
  clear($('#nav'))
  clear(main).append(
    h('h1', null, 'Sign in'),
    message ? h('div', { class: 'alert', role: 'alert' }, message) : null,
    h('p', null, 'This Quarry service requires a sign-in at its identity provider.'),
    h('button', { type: 'button', class: 'primary', onclick: () => auth.signIn(session.oidc) }, 'Sign in'))
}

function sessionEnded() {
  if ($('#session-ended')) return
  main.prepend(h('div', { id: 'session-ended', class: 'alert', role: 'alert' },
    'Your session has ended. ', h('button', { type: 'button', onclick: () => auth.signIn(session.oidc) }, 'Sign in again')))
}

async function boot() {
  $('.skip')?.addEventListener('click', (e) => {
    e.preventDefault()
    main.focus()
  })
  let config
  try {
    config = await get('/console/config.json')
  } catch (err) {
    clear(main)
    main.append(alertBox(err))
    return
  }
  session.edition = config.edition
  session.oidc = config.oidc
  if (ent()) {
    configureApi({ token: auth.accessToken, unauthorized: sessionEnded })
    try {
      await auth.completeSignIn(session.oidc)
    } catch (err) {
      signInScreen(err.message)
      return
    }
    if (!auth.accessToken()) {
      if (auth.wasSignedIn()) return auth.signIn(session.oidc)
      signInScreen()
      return
    }
    try {
      await loadMe()
    } catch (err) {
      signInScreen(err.message)
      return
    }
  }
  renderUser()
  window.addEventListener('hashchange', route)
  await route()
}

void boot()