// plugins/search/filter.ts on its own: the REST schema and the MCP argument accept and refuse the same filters,
// and resolveFilter turns a filter into the stores' terms, one form per meaning (the cache key depends on it).
// Through HTTP, on both driver sets: search-filter.suite.ts.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { Value } from '@sinclair/typebox/value'
import * as z from 'zod'
import type { SqlRunner } from '../../adapters/ports.ts'
import { ValidationError } from '../../kernel/errors.ts'
import { SearchFilterArg } from '../../plugins/mcp/filter-arg.ts'
import { FILTER_DOC_IDS_MAX, FILTER_LIST_MAX, planFilter, resolveFilter, SearchFilter, type SearchFilterInput } from '../../plugins/search/filter.ts'

type Json = any

const ID = '0123456789abcdef'

/** Filters both schemas must accept, and filters both must refuse. */
const VALID: Json[] = [
  {},
  { doc_ids: [ID] },
  { doc_ids: Array.from({ length: FILTER_DOC_IDS_MAX }, () => ID) },
  { source_type: 'web' },
  { source_type: ['web', 'github'] },
  { doc_type: Array.from({ length: FILTER_LIST_MAX }, (_, i) => `t${i}`) },
  { source_prefix: 'https://example.com/docs/' },
  { tags: 'hr' },
  { updated_after: '2024-05-01' },
  { updated_after: '2024-05-01T12:00Z', updated_before: '2024-05-01T12:00:00.5+09:00' },
]
const INVALID: Json[] = [
  { unknown: 1 },
  { doc_ids: [] },
  { doc_ids: ['0123456789ABCDEF'] },
  { doc_ids: Array.from({ length: FILTER_DOC_IDS_MAX + 1 }, () => ID) },
  { doc_ids: ID },
  { source_type: '' },
  { source_type: [] },
  { doc_type: Array.from({ length: FILTER_LIST_MAX + 1 }, (_, i) => `t${i}`) },
  { doc_type: [''] },
  { doc_type: 3 },
  { source_prefix: '' },
  { tags: [] },
  { updated_after: '2024-05-01T12:00:00' },
  { updated_after: '01/05/2024' },
  { updated_before: 1714521600000 },
]

describe('search filter: schemas', () => {
  it('the REST schema (TypeBox) and the MCP argument (zod) accept and refuse the same filters', () => {
    for (const f of VALID) {
      assert.ok(Value.Check(SearchFilter, f), `REST accepts ${JSON.stringify(f).slice(0, 80)}`)
      assert.ok(SearchFilterArg.safeParse(f).success, `MCP accepts ${JSON.stringify(f).slice(0, 80)}`)
    }
    for (const f of INVALID) {
      assert.ok(!Value.Check(SearchFilter, f), `REST refuses ${JSON.stringify(f).slice(0, 80)}`)
      assert.ok(!SearchFilterArg.safeParse(f).success, `MCP refuses ${JSON.stringify(f).slice(0, 80)}`)
    }
  })

  it('every field carries a description (OpenAPI and the MCP tool list show them)', () => {
    const props = SearchFilter.properties as Record<string, Json>
    for (const [name, p] of Object.entries(props)) assert.ok(typeof p.description === 'string' && p.description.length > 10, name)
    assert.match(SearchFilter.description!, /top_k is still filled/)
    const arg = z.toJSONSchema(SearchFilterArg) as Json
    assert.deepEqual(Object.keys(arg.properties).sort(), Object.keys(props).sort())
    for (const [name, p] of Object.entries(arg.properties)) assert.ok(typeof (p as Json).description === 'string', name)
    assert.equal(arg.additionalProperties, false, 'the MCP argument refuses unknown keys too')
  })
})

describe('search filter: resolveFilter', () => {
  it('no filter, or only tags: no condition on chunks', () => {
    assert.deepEqual(resolveFilter(undefined), { vector: undefined, tags: undefined })
    assert.deepEqual(resolveFilter({}), { vector: undefined, tags: undefined })
    assert.deepEqual(resolveFilter({ tags: 'hr' }), { vector: undefined, tags: ['hr'] })
  })

  it('lists deduplicated and sorted, one value as a list of one, times in epoch ms', () => {
    const r = resolveFilter({
      doc_ids: ['ffffffffffffffff', ID, ID], source_type: 'web', doc_type: ['pdf', 'md', 'pdf'], source_prefix: 'Docs/',
      tags: ['legal', 'hr', 'legal'], updated_after: '2024-05-01', updated_before: '2024-05-01T12:00:00+02:00',
    })
    assert.deepEqual(r, {
      vector: {
        docIds: [ID, 'ffffffffffffffff'], sourceTypes: ['web'], docTypes: ['md', 'pdf'], sourcePrefix: 'Docs/',
        updatedAfter: Date.UTC(2024, 4, 1), updatedBefore: Date.UTC(2024, 4, 1, 10),
      },
      tags: ['hr', 'legal'],
    })
    assert.deepEqual(resolveFilter({ doc_type: ['md', 'pdf'] }), resolveFilter({ doc_type: ['pdf', 'md', 'md'] }))
    assert.deepEqual(resolveFilter({ doc_type: 'md' }), resolveFilter({ doc_type: ['md'] }))
    assert.equal(resolveFilter({ updated_after: '2024-05-01T12:00:00.250Z' }).vector?.updatedAfter, Date.UTC(2024, 4, 1, 12, 0, 0, 250))
  })

  it('422 for a day not in the calendar and for an empty window, at the field\'s location', () => {
    const refused = (f: SearchFilterInput, field: string, msg: RegExp) => assert.throws(() => resolveFilter(f), (err: unknown) => {
      assert.ok(err instanceof ValidationError)
      assert.equal(err.status, 422)
      assert.deepEqual(err.issues.map((i) => [i.loc, i.type]), [[['body', 'options', 'filter', field], 'value_error']])
      assert.match(err.issues[0].msg, msg)
      return true
    })
    refused({ updated_after: '2024-02-30' }, 'updated_after', /updated_after is not a valid date: '2024-02-30'/)
    refused({ updated_before: '2023-02-29T00:00:00Z' }, 'updated_before', /not a valid date/)
    refused({ updated_after: '2024-13-01' }, 'updated_after', /not a valid date/)
    refused({ updated_after: '2024-05-01', updated_before: '2024-05-01' }, 'updated_after', /updated_after must be earlier than updated_before/)
    refused({ updated_after: '2024-05-01T02:00:00+02:00', updated_before: '2024-05-01T00:00:00Z' }, 'updated_after', /earlier than/)
    assert.equal(resolveFilter({ updated_after: '2024-02-29' }).vector?.updatedAfter, Date.UTC(2024, 1, 29), 'a leap day exists')
  })
})

describe('search filter: planFilter', () => {
  it('without tags the KB list is kept as it is and no query is sent', async () => {
    const sql = { query: () => Promise.reject(new Error('no query expected')) } as unknown as SqlRunner
    assert.deepEqual(await planFilter(sql, ['b', 'a'], undefined), { kbIds: ['b', 'a'], filter: undefined })
    assert.deepEqual(await planFilter(sql, ['b', 'a'], { doc_type: 'md' }), { kbIds: ['b', 'a'], filter: { docTypes: ['md'] } })
    await assert.rejects(planFilter(sql, ['a'], { updated_after: '2024-02-30' }), ValidationError)
  })
})
