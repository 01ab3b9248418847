// Issue 15, security suite: the fuzz run of fuzz.suite.ts on the access-controlled edition, on both driver sets.
// First, requests of identities every write refuses (no token, a forged and an expired token, a user with no
// role and no right to create KBs) must leave the KBs and their document counts as they were; then the main
// run spreads its requests over valid tokens of every role (viewer, editor, admin, owner, super-admin, and an
// outsider with no role). No answer may be 5xx; the service must answer /health and a real search after.
// Size per driver set: QUARRY_FUZZ_ENT_COUNT (default 8,000) + QUARRY_FUZZ_ENT_REFUSED (default 2,000), so the
// two driver sets together send 20,000.
import { describe } from 'node:test'
import { startAuthzFixture, type AuthzFixture } from '../helpers/authz-fixture.ts'
import { skipUnless } from '../helpers/services.ts'
import { fuzzSuite } from './fuzz.suite.ts'

const COUNT = Number(process.env.QUARRY_FUZZ_ENT_COUNT ?? 8_000)
const REFUSED = Number(process.env.QUARRY_FUZZ_ENT_REFUSED ?? 2_000)
const now = () => Math.floor(Date.now() / 1000)
const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

function entFuzz(label: string, services: boolean): void {
  let fx: AuthzFixture
  const asSuper = async (path: string, json: unknown) => {
    const res = await fx.as('super_admin', path, { method: 'PATCH', json })
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`)
  }
  fuzzSuite(label, {}, {
    count: COUNT,
    start: async (t) => {
      fx = await startAuthzFixture(t, {
        services,
        // KB creation needs the creator group the fixture's tokens carry (/staff); the refused stranger has none.
        settings: { queue_worker: { enabled: true }, queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 }, authz: { kb_creator_roles: ['staff'] } },
      })
      return fx.svc
    },
    adminHeaders: async () => bearer(await fx.token('u-owner')),
    onKbCreated: async (kbId) => {
      for (const role of ['viewer', 'editor', 'admin'] as const) await fx.addMember(kbId, `u-${role}`, role)
    },
    // A valid request of the super-admin may switch role checks off or cap documents: put the run's config back.
    between: () => asSuper('/api/admin/config', { kb_authz_enabled: true, max_docs_count: 0 }),
    identities: async () => Promise.all(
      (['viewer', 'editor', 'admin', 'owner', 'super_admin', 'outsider'] as const).map(async (who) =>
        bearer(await fx.token(`u-${who === 'super_admin' ? 'super' : who}`, { superAdmin: who === 'super_admin' })))),
    refused: {
      count: REFUSED,
      countsHeaders: async () => bearer(await fx.token('u-super', { superAdmin: true })),
      identities: async () => {
        const claims = { iss: fx.oidc.issuer, aud: fx.oidc.audience, email: 'stranger@example.com' }
        const owner = await fx.token('u-owner')
        return [
          {},
          bearer(`${owner.slice(0, -6)}AAAAAA`),
          bearer(await fx.oidc.sign({ ...claims, sub: 'u-owner', exp: now() - 600, groups: ['/staff'] })),
          bearer(await fx.oidc.sign({ ...claims, sub: 'u-stranger', exp: now() + 3600, groups: [] })),
        ]
      },
    },
  })
}

describe('fuzz on the access-controlled edition, embedded', () => entFuzz('ENT embedded', false))

describe('fuzz on the access-controlled edition, PostgreSQL + Redis + S3', { skip: skipUnless('postgres') || skipUnless('redis') }, () =>
  entFuzz('ENT services', true))
