// The verified-token cache of authn.ts: a token is checked once and then served from memory, but never past its
// expiry, and never past a re-read of the issuer's keys (a key retired meanwhile refuses it). Nothing is stored,
// so the embedded driver set is enough.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { startApp } from '../../helpers/app.ts'
import { startOidc } from '../../helpers/oidc.ts'

const now = () => Math.floor(Date.now() / 1000)

describe('authz: verified-token cache', () => {
  it('a cached token is refused once its key is retired and the keys are re-read, and once it expires', async (t) => {
    const oidc = await startOidc({ clients: [] })
    t.after(() => oidc.close())
    const s = await startApp(t, { settings: { oidc: { issuer_url: oidc.issuer, audience: oidc.audience } } })
    const get = (token: string) => s.request('/api/me', { headers: { authorization: `Bearer ${token}` } })
    const claims = (sub: string, exp: number) => ({ sub, iss: oidc.issuer, aud: oidc.audience, exp })

    const old = await oidc.sign(claims('u-1', now() + 3600))
    assert.equal((await get(old)).status, 200)
    assert.equal((await get(old)).status, 200, 'from the cache')
    const oldKid = oidc.kids()[0]
    await oidc.rotate()
    oidc.retire(oldKid)
    assert.equal((await get(old)).status, 200, 'still cached: the keys were not re-read yet')
    // A token signed by the new key makes the service re-read the keys: the cached one is checked again.
    assert.equal((await get(await oidc.sign(claims('u-2', now() + 3600)))).status, 200)
    const res = await get(old)
    assert.equal(res.status, 401)
    assert.deepEqual(await res.json(), { detail: 'Token signing key is unknown' })

    // Expiry: a token cached a moment before its exp is refused after it (beyond the 30 s clock tolerance).
    const soon = await oidc.sign(claims('u-3', now() - 28))
    assert.equal((await get(soon)).status, 200, 'within the clock tolerance')
    await new Promise((r) => setTimeout(r, 3000))
    const late = await get(soon)
    assert.equal(late.status, 401)
    assert.deepEqual(await late.json(), { detail: 'Token has expired' })
  })
})
