// Sign-in of the access-controlled edition: the OAuth 2.0 authorization-code flow with PKCE (RFC 7636), run by the
// browser against the issuer, as a public client (no secret). The access token is kept in this module's memory
// only: no storage another page of the origin could read, never in a URL. sessionStorage holds the PKCE verifier
// and state while the browser is at the issuer (removed on return), and a "signed in" flag without any secret, so
// that a reload signs in again at once (the issuer's own session answers without a login page).

const PENDING = 'quarry.console.pkce'
const SIGNED_IN = 'quarry.console.signed-in'

let token = null
let idToken = null
let expiresAt = 0

export const accessToken = () => (token !== null && Date.now() < expiresAt ? token : null)
export const wasSignedIn = () => sessionStorage.getItem(SIGNED_IN) === '1'
const redirectUri = () => `${location.origin}/console`

const b64url = (bytes) => btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
const random = (n) => b64url(crypto.getRandomValues(new Uint8Array(n)))

/** Leaves for the issuer's authorization endpoint; the view to come back to is the current hash. */
export async function signIn(oidc) {
  const verifier = random(32)
  const challenge = b64url(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)))
  const state = random(16)
  sessionStorage.setItem(PENDING, JSON.stringify({ state, verifier, hash: location.hash }))
  const url = new URL(oidc.authorization_endpoint)
  for (const [k, v] of Object.entries({
    client_id: oidc.client_id, response_type: 'code', redirect_uri: redirectUri(), scope: oidc.scope,
    state, code_challenge: challenge, code_challenge_method: 'S256',
  })) url.searchParams.set(k, v)
  location.assign(url.href)
}

/**
 * Back from the issuer (?code=&state= or ?error=): the code and state leave the address bar before anything
 * else, then the code is exchanged at the token endpoint. False when this load is not a return from the issuer.
 */
export async function completeSignIn(oidc) {
  const params = new URLSearchParams(location.search)
  if (!params.has('code') && !params.has('error')) return false
  const pending = JSON.parse(sessionStorage.getItem(PENDING) ?? 'null')
  sessionStorage.removeItem(PENDING)
  history.replaceState(null, '', `${location.pathname}${pending?.hash ?? ''}`)
  if (params.has('error')) {
    sessionStorage.removeItem(SIGNED_IN)
    throw new Error(`The identity provider refused the sign-in: ${params.get('error_description') || params.get('error')}`)
  }
  if (!pending || params.get('state') !== pending.state) {
    sessionStorage.removeItem(SIGNED_IN)
    throw new Error('The sign-in answer does not belong to a sign-in started here (state mismatch): sign in again.')
  }
  const res = await fetch(oidc.token_endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: new URLSearchParams({
      grant_type: 'authorization_code', code: params.get('code'), redirect_uri: redirectUri(),
      client_id: oidc.client_id, code_verifier: pending.verifier,
    }),
    credentials: 'omit',
  })
  const body = await res.json().catch(() => ({}))
  if (!res.ok || typeof body.access_token !== 'string') {
    sessionStorage.removeItem(SIGNED_IN)
    throw new Error(`The token endpoint refused the code: ${body.error_description ?? body.error ?? `HTTP ${res.status}`}`)
  }
  token = body.access_token
  idToken = typeof body.id_token === 'string' ? body.id_token : null
  // A little early, so that a request is never sent with a token about to expire on the way.
  expiresAt = Date.now() + Math.max(30, Number(body.expires_in) || 300) * 1000 - 15_000
  sessionStorage.setItem(SIGNED_IN, '1')
  return true
}

/** Forgets the token, then ends the issuer's session when it offers that (RP-initiated logout). */
export function signOut(oidc) {
  const hint = idToken
  token = null
  idToken = null
  expiresAt = 0
  sessionStorage.removeItem(SIGNED_IN)
  if (oidc.end_session_endpoint) {
    const url = new URL(oidc.end_session_endpoint)
    url.searchParams.set('client_id', oidc.client_id)
    url.searchParams.set('post_logout_redirect_uri', redirectUri())
    if (hint) url.searchParams.set('id_token_hint', hint)
    location.assign(url.href)
  } else {
    location.assign(redirectUri())
  }
}
