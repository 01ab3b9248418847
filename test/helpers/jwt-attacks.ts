// Forged and broken bearer tokens against a real OpenID provider (test/helpers/oidc.ts), each with the 401
// detail the service answers (plugins/authz/authn.ts). Shared by the authentication tests and the security
// suite, which sends every one of them to every protected operation.
import { base64url, generateKeyPair, SignJWT } from 'jose'
import type { OidcServer } from './oidc.ts'

export interface JwtAttack {
  name: string
  token: string
  /** The `detail` of the 401, also the challenge's error_description. */
  detail: string
}

const now = () => Math.floor(Date.now() / 1000)

/**
 * Every kind of bad token: `oidc` is the issuer the service trusts; `real` a genuine token of it (tampered with
 * and doubled here); `foreign` a token from the token endpoint of a second real provider.
 */
export async function jwtAttacks(oidc: OidcServer, real: string, foreign: string): Promise<JwtAttack[]> {
  const good = { sub: 'u1', iss: oidc.issuer, aud: oidc.audience, exp: now() + 60 }
  const [h, , sig] = real.split('.')
  const tampered = `${h}.${base64url.encode(JSON.stringify({ ...good, sub: 'svc-admin', groups: ['rag-super-admin'] }))}.${sig}`
  const none = `${base64url.encode(JSON.stringify({ alg: 'none', typ: 'JWT' }))}.${base64url.encode(JSON.stringify(good))}.`
  // The classic confusion attack: HS256 keyed with the issuer's public key, which anyone can read.
  const jwks = (await (await fetch(`${oidc.issuer}/jwks`)).json()) as { keys: unknown[] }
  const hsWithPublicKey = await new SignJWT(good).setProtectedHeader({ alg: 'HS256', kid: oidc.kids()[0] })
    .sign(new TextEncoder().encode(JSON.stringify(jwks.keys[0])))
  const stranger = await generateKeyPair('RS256')
  const unknownKid = await new SignJWT(good).setProtectedHeader({ alg: 'RS256', kid: 'not-published' }).sign(stranger.privateKey)
  const wrongKeyKnownKid = await new SignJWT(good).setProtectedHeader({ alg: 'RS256', kid: oidc.kids()[0] }).sign(stranger.privateKey)
  const { sub: _, ...noSub } = good
  const attacks: [string, string, string][] = [
    ['alg none', none, 'Token signing algorithm is not accepted'],
    ['HS256 with the public key', hsWithPublicKey, 'Token signing algorithm is not accepted'],
    ['RS384', await new SignJWT(good).setProtectedHeader({ alg: 'RS384', kid: oidc.kids()[0] }).sign((await generateKeyPair('RS384')).privateKey), 'Token signing algorithm is not accepted'],
    ['expired', await oidc.sign({ ...good, exp: now() - 120 }), 'Token has expired'],
    ['not yet valid', await oidc.sign({ ...good, nbf: now() + 120 }), 'Token is not yet valid'],
    ['wrong issuer', await oidc.sign({ ...good, iss: 'https://evil.example' }), 'Token issuer is not accepted'],
    ['wrong audience', await oidc.sign({ ...good, aud: 'someone-else' }), 'Token audience is not accepted'],
    ['no audience', await oidc.sign({ sub: 'u1', iss: oidc.issuer, exp: now() + 60 }), 'Token audience is not accepted'],
    ['unknown kid', unknownKid, 'Token signing key is unknown'],
    ['published kid, other key', wrongKeyKnownKid, 'Token signature is invalid'],
    ['tampered payload', tampered, 'Token signature is invalid'],
    // Its key is not among ours: refused at the key look-up, before its iss is read.
    ['token of another issuer', foreign, 'Token signing key is unknown'],
    ['missing sub', await oidc.sign(noSub), 'Token has no subject'],
    ['empty sub', await oidc.sign({ ...good, sub: '' }), 'Token has no subject'],
    ['no exp: a token that never expires', await oidc.sign({ sub: 'u1', iss: oidc.issuer, aud: oidc.audience }), 'Token has no expiry'],
    ['not a JWT', 'abc.def', 'Malformed token'],
    ['empty bearer', '', 'Malformed token'],
    ['two tokens', `${real} ${real}`, 'Malformed token'],
  ]
  return attacks.map(([name, token, detail]) => ({ name, token, detail }))
}
