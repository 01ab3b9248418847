// The identity of a text (compute/dedup/identity.ts), the relation rule built on it (plugins/docs/dedup.ts relate)
// and stage 3's bounded chunk comparison (compute/dedup/chunks.ts): issue 36.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { chunkPairs, packRows } from '../../compute/dedup/chunks.ts'
import { identityDiff, identityOf, packIdentity, unpackIdentity } from '../../compute/dedup/identity.ts'
import { resolveSettings } from '../../kernel/config/load.ts'
import { localPairs, relate, type FinalVerdict, type RelationSide } from '../../plugins/docs/dedup.ts'
import { mulberry32 } from '../../bench/lib/rng.ts'
import { templateFamilies } from '../../bench/lib/templates.ts'

const cfg = resolveSettings({}).settings.dedup
const side = (text: string, title: string, extra: Partial<RelationSide> = {}): RelationSide =>
  ({ identity: packIdentity(identityOf(text, title)), title: title.toLowerCase(), connector_id: null, source: `${title}.txt`, ...extra })
const similar: FinalVerdict = { verdict: 'similar', match: 'old', score: 0.85, stage: 3 }
const identical: FinalVerdict = { verdict: 'identical', match: 'old', score: 0.97, stage: 3 }

describe('identity', () => {
  it('keeps the identity-bearing tokens (digits, names, inner capitals, title words) with their neighbours; packs and unpacks', () => {
    const id = identityOf('Fault code E042 stops the unit. Call Alice at 555-0100. The fan runs.', 'fault-e042')
    // E042, Alice, 555-0100 and the title word "fault" (twice: "Fault" opens the text) are slots; "The" opens a sentence
    assert.equal(id.slots.length / 3, 4)
    assert.equal(id.words, 13)
    const back = unpackIdentity(packIdentity(id))
    assert.ok(back)
    assert.deepEqual([...back.slots], [...id.slots])
    assert.deepEqual([...back.types], [...id.types])
    assert.equal(unpackIdentity(new Uint8Array(7)), null, 'damaged bytes are no identity')
    assert.equal(unpackIdentity(null), null)
  })

  it('counts substitutions in the same slots, adjacent ones too, and not a replaced passage or a scattered edit', () => {
    const a = identityOf('Model X200 (12 kg) is compact. The X200 runs at 40 W in every workshop.', 'Acme X200 datasheet')
    const b = identityOf('Model Z350 (15 kg) is compact. The Z350 runs at 65 W in every workshop.', 'Acme Z350 datasheet')
    const d = identityDiff(b, a)
    assert.equal(d.substitutions, 4, 'X200 twice, 12 -> 15 beside it, 40 -> 65')
    assert.equal(d.titleSubstituted, true)
    // a passage replaced by another (its names at other neighbours) and a word edited: no substitution
    const base = 'The board met in Geneva on Monday and approved the budget. Members asked for a review of travel costs.'
    const revised = 'The board met in Geneva on Monday and approved the plan. Staff from Oslo presented figures of 2025 first.'
    assert.equal(identityDiff(identityOf(revised, 'Minutes'), identityOf(base, 'Minutes')).substitutions, 0)
    assert.equal(identityDiff(identityOf(base, 'Minutes'), identityOf(base, 'Minutes')).substitutions, 0)
  })
})

describe('relation rule', () => {
  it('a sibling stays indexed; a revision of the same identity supersedes; a copy is skipped', () => {
    const fault = (code: string, what: string) => `Fault code ${code} indicates ${what}. Restart the unit and check the cable. If ${code} returns, call support.`
    const v = relate(similar, side(fault('E017', 'a blocked fan'), 'fault-e017'), side(fault('E042', 'overheating'), 'fault-e042'), cfg)
    assert.equal(v.verdict, 'sibling')
    assert.match((v as { reason: string }).reason, /same template/)
    // one-line notes that differ only in a name
    assert.equal(relate(identical, side('Contact Bob Smith for payroll questions.', 'note'), side('Contact Alice Moreau for payroll questions.', 'note'), cfg).verdict, 'sibling')
    // the same text: a copy; edited: a revision
    const text = fault('E042', 'overheating')
    assert.equal(relate(identical, side(text, 'fault-e042'), side(text, 'fault-e042'), cfg).verdict, 'identical')
    assert.equal(relate(similar, side(text.replace('check the cable', 'inspect the power cable first'), 'fault-e042'), side(text, 'fault-e042'), cfg).verdict, 'similar')
  })

  it('an overlap under titles of their own stays indexed; a similar page of the same connector never supersedes; a copy under another URL is skipped', () => {
    const body = 'Shared passage about the quarterly plan and its budget. '.repeat(8)
    assert.equal(relate(similar, side(`${body} South region notes.`, 'report-south'), side(`${body} North region notes.`, 'report-north'), cfg).verdict, 'overlap')
    assert.equal(relate(similar, side(body, 'plan (final)'), side(body, 'plan'), cfg).verdict, 'similar', 'a title kept (extended) is a revision')
    const c = { connector_id: 'c1' }
    const page = (src: string) => side(body, 'plan', { ...c, source: src })
    assert.equal(relate(similar, page('https://x.test/a'), page('https://x.test/b'), cfg).verdict, 'overlap')
    const v = relate({ verdict: 'title_changed', match: 'old', score: 1, stage: 1 }, page('https://x.test/print/a'), page('https://x.test/a'), cfg)
    assert.equal(v.verdict, 'identical', 'a print view is skipped: duplicate_of names the visible page')
    // an older row without an identity: the title rule alone
    assert.equal(relate(similar, side(body, 'plan'), { ...side(body, 'plan'), identity: null }, cfg).verdict, 'similar')
  })

  it('tells every member of the generated template families apart from its family (and stages 1-3 alone did not)', () => {
    for (const f of templateFamilies(6)) {
      const sides = f.members.map((m) => side(m.content, m.title))
      for (let i = 1; i < sides.length; i++) {
        const v = relate(similar, sides[i], sides[0], cfg)
        assert.ok(v.verdict === 'sibling' || v.verdict === 'overlap', `${f.name} ${f.members[i].name}: ${v.verdict}`)
      }
    }
  })
})

describe('stage 3 chunk comparison', () => {
  const r = mulberry32(5)
  const unit = (dims: number) => {
    const v = Float32Array.from({ length: dims }, () => r() - 0.5)
    const n = Math.hypot(...v)
    return v.map((x) => x / n)
  }

  it('bounded: past maxPairs an even sample of the new chunks stands for all, within a few hundredths', async () => {
    const dims = 256
    const older = Array.from({ length: 400 }, () => unit(dims))
    // half the new chunks are near-copies of the older ones, half unrelated
    const fresh = older.map((v, i) => (i % 2 === 0 ? v.map((x) => x + (r() - 0.5) * 0.01) : unit(dims)))
    const a = packRows(fresh)
    const b = packRows(older)
    const full = chunkPairs(a.flat, b.flat, dims, 0.5, Infinity)
    const bounded = chunkPairs(a.flat, b.flat, dims, 0.5, 64 * 400)
    assert.deepEqual(full.compared, [400, 400])
    assert.deepEqual(bounded.compared, [64, 400])
    assert.ok(Math.abs(full.score - 0.5) < 0.05, `full score ${full.score}`)
    assert.ok(Math.abs(bounded.score - full.score) < 0.06, `bounded ${bounded.score} against ${full.score}`)
    assert.equal((await localPairs(fresh, older, 0.5)).score, chunkPairs(a.flat, b.flat, dims, 0.5).score)
  })
})
