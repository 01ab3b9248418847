// [Access-controlled edition] Members, pending invites and ownership transfer of a KB, for its admins and owner
// (and super-admins): add by e-mail (granted at once, or invited), change a role, remove, revoke, transfer.
import { api, get } from './api.js'
import { alertBox, busy, confirm, field, fmtDate, h, notice } from './dom.js'
import { clearIssues, showIssues } from './forms.js'
import { kbHeader, kbPath } from './kbs.js'
import { canManageMembers, canTransfer, loadKbs, loadMe, session, superAdmin } from './session.js'

const GRANTABLE = ['viewer', 'editor', 'admin']

export async function view(main, kbId) {
  await loadKbs()
  let kb = session.kbs.get(kbId) ?? (await get(kbPath(kbId)))
  const messages = h('div')
  const body = h('div')
  main.append(...kbHeader(kb, 'members', { canMembers: canManageMembers(kb) }), messages, body)
  if (!canManageMembers(kb)) {
    body.append(h('p', null, 'Only the admins and the owner of this knowledge base can see and change its members.'))
    return
  }
  const path = `${kbPath(kb.kb_id)}`
  const fail = (err) => messages.replaceChildren(alertBox(err))

  const render = async () => {
    const { members, pending_invites } = await get(`${path}/members`)
    const who = (m) => [m.display_name ?? m.email ?? m.user_id, m.email && m.display_name ? h('div', { class: 'small muted' }, m.email) : null, h('div', { class: 'small muted' }, m.user_id)]
    const roleCell = (m) => {
      if (m.role === 'owner') return 'owner'
      const sel = h('select', { 'aria-label': `Role of ${m.email ?? m.user_id}` }, GRANTABLE.map((r) => h('option', { value: r, selected: r === m.role }, r)))
      sel.addEventListener('change', async () => {
        try {
          await api('PATCH', `${path}/members/${encodeURIComponent(m.user_id)}`, { json: { role: sel.value } })
          notice(messages, `${m.email ?? m.user_id} is now ${sel.value}.`)
        } catch (err) {
          sel.value = m.role
          fail(err)
        }
      })
      return sel
    }
    const removable = (m) => m.role !== 'owner' || superAdmin()
    const onRemove = async (m, button) => {
      const ok = await confirm(`Remove ${m.email ?? m.user_id}?`, h('p', null, `They lose their ${m.role} role on ${kb.kb_id}.`,
        m.role === 'owner' ? ' The oldest admin becomes owner; with no admin the knowledge base is frozen.' : ''), { action: 'Remove member', danger: true })
      if (!ok) return
      try {
        await busy(button, () => api('DELETE', `${path}/members/${encodeURIComponent(m.user_id)}`))
        notice(messages, `Removed ${m.email ?? m.user_id}.`)
        await render()
      } catch (err) {
        fail(err)
      }
    }
    const onRevoke = async (inv, button) => {
      try {
        await busy(button, () => api('DELETE', `${path}/invites/${encodeURIComponent(inv.invite_id)}`))
        notice(messages, `Invite of ${inv.email} revoked.`)
        await render()
      } catch (err) {
        fail(err)
      }
    }

    const general = h('div')
    const email = field('E-mail', h('input', { type: 'email', autocomplete: 'off' }))
    const role = field('Role', h('select', null, GRANTABLE.map((r) => h('option', { value: r }, r))))
    const fields = { email, role }
    const add = h('button', { type: 'submit', class: 'primary' }, 'Add member')
    const addForm = h('form', {
      novalidate: true, 'aria-label': 'Add a member',
      onsubmit: async (e) => {
        e.preventDefault()
        clearIssues(fields, general)
        try {
          const out = await busy(add, () => api('POST', `${path}/members`, { json: { email: email.input.value.trim(), role: role.input.value } }))
          notice(messages, out.status === 'granted' ? `${email.input.value} is now ${role.input.value}.` : `Invited ${email.input.value}: the role is granted at their first sign-in.`)
          await render()
        } catch (err) {
          showIssues(fields, err, general)
        }
      },
    }, h('h2', null, 'Add a member'), general, h('div', { class: 'row' }, email.wrap, role.wrap), h('div', { class: 'actions start' }, add))

    const transfer = canTransfer(kb) ? transferForm(members) : null
    body.replaceChildren(
      h('h2', null, 'Members'),
      h('table', { class: 'grid' }, h('caption', { class: 'sr-only' }, `Members of ${kb.kb_id}`),
        h('thead', null, h('tr', null, ['Member', 'Role', 'Granted', 'Actions'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', null, members.map((m) => h('tr', { 'data-user': m.user_id },
          h('th', { scope: 'row' }, who(m)), h('td', null, roleCell(m)), h('td', null, fmtDate(m.granted_at)),
          h('td', { class: 'row-actions' }, removable(m) ? h('button', { type: 'button', class: 'danger', onclick: (e) => onRemove(m, e.currentTarget) }, 'Remove', h('span', { class: 'sr-only' }, ` ${m.email ?? m.user_id}`)) : null))))),
      h('h2', null, 'Pending invites'),
      pending_invites.length === 0 ? h('p', { class: 'muted' }, 'No pending invite.') : h('table', { class: 'grid' },
        h('caption', { class: 'sr-only' }, 'Pending invites'),
        h('thead', null, h('tr', null, ['E-mail', 'Role', 'Expires', 'Actions'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', null, pending_invites.map((inv) => h('tr', { 'data-invite': inv.invite_id },
          h('th', { scope: 'row' }, inv.email), h('td', null, inv.role), h('td', null, fmtDate(inv.expires_at)),
          h('td', null, h('button', { type: 'button', onclick: (e) => onRevoke(inv, e.currentTarget) }, 'Revoke', h('span', { class: 'sr-only' }, ` invite of ${inv.email}`))))))),
      addForm, transfer)
  }

  const transferForm = (members) => {
    const candidates = members.filter((m) => m.role !== 'owner')
    const general = h('div')
    const to = field('New owner', h('select', null, candidates.map((m) => h('option', { value: m.user_id }, `${m.email ?? m.user_id} (${m.role})`))),
      'The current owner becomes admin.')
    const go = h('button', { type: 'submit', class: 'danger', disabled: candidates.length === 0 }, 'Transfer ownership')
    return h('form', {
      'aria-label': 'Transfer ownership',
      onsubmit: async (e) => {
        e.preventDefault()
        const m = candidates.find((x) => x.user_id === to.input.value)
        if (!m) return
        if (!(await confirm(`Make ${m.email ?? m.user_id} owner of ${kb.kb_id}?`, h('p', null, 'The current owner becomes admin. Only the new owner (or a super-admin) can transfer it again.'), { action: 'Transfer ownership', danger: true }))) return
        try {
          await busy(go, () => api('POST', `${path}/transfer-owner`, { json: { new_owner_user_id: m.user_id } }))
          notice(messages, `${m.email ?? m.user_id} now owns ${kb.kb_id}.`)
          await loadMe()
          await loadKbs()
          kb = session.kbs.get(kb.kb_id) ?? kb
          if (!canManageMembers(kb)) {
            location.hash = `#/kb/${encodeURIComponent(kb.kb_id)}/docs`
            return
          }
          await render()
        } catch (err) {
          clearIssues({}, general)
          general.append(alertBox(err))
        }
      },
    }, h('h2', null, 'Transfer ownership'), general, candidates.length === 0 ? h('p', { class: 'muted' }, 'Add the future owner as a member first.') : to.wrap,
    h('div', { class: 'actions start' }, go))
  }

  try {
    await render()
  } catch (err) {
    fail(err)
  }
}
