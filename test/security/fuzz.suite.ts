// Issue 12, part 4: bad input never answers 5xx. Every operation of /openapi.json is fuzzed (routes added
// later are picked up by themselves); the run must get no 5xx and leave the service answering /health and a
// real search. Run on both driver sets (fuzz.test.ts).
//
// The seed is printed and read from QUARRY_FUZZ_SEED (random when unset), the request count from
// QUARRY_FUZZ_COUNT (default 5,000); QUARRY_FUZZ_TRACE=<file> appends each request to that file as it goes out. The access-controlled edition extends the run through FuzzSuiteOptions:
// one identity per role (headers with its token), a check of its own for each answer, and a first run of
// identities every write refuses, after which the KBs and their document counts must be unchanged (fuzz-ent.test.ts).
import { it, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { randomInt } from 'node:crypto'
import { appendFileSync } from 'node:fs'
import { startApp, uniqueId, type StartedApp, type StartOptions } from '../helpers/app.ts'
import { waitFor } from '../helpers/wait.ts'
import { describeFailures, generateRequests, operationsFrom, send, timeByOperation, type FuzzAnswer, type Fixtures } from './fuzz-engine.ts'

type Json = any

/** One seed per process, so that both driver sets replay with the one printed. */
export const FUZZ_SEED = process.env.QUARRY_FUZZ_SEED ? Number(process.env.QUARRY_FUZZ_SEED) : randomInt(2 ** 31)
export const FUZZ_COUNT = Number(process.env.QUARRY_FUZZ_COUNT ?? 5_000)

export interface FuzzSuiteOptions {
  /** Requests of the main run (default QUARRY_FUZZ_COUNT). */
  count?: number
  /** Starts the service instead of startApp(t, opts) (the access-controlled edition starts its provider too). */
  start?: (t: TestContext) => Promise<StartedApp>
  /** Headers of each identity requests are spread over; default one identity without credentials. */
  identities?: (svc: StartedApp) => Promise<Record<string, string>[]>
  /** A finding of its own for an answer (e.g. a viewer's write must be 403), or null. */
  check?: (answer: FuzzAnswer) => string | null
  /** Headers the suite's own set-up and checks send (a KB owner's token); default none. */
  adminHeaders?: (svc: StartedApp) => Promise<Record<string, string>>
  /** Called after the suite (re)creates its fixture KB (to add its members). */
  onKbCreated?: (kbId: string) => Promise<void>
  /** Called between batches, before the fixtures are put back (to undo valid changes of runtime config). */
  between?: () => Promise<void>
  /**
   * Before the main run, `count` requests from identities every KB write refuses (no token, a forged one, a
   * user with no role and no right to create KBs): the KB list and every KB's document counts must be the same after.
   */
  refused?: { count: number; identities: (svc: StartedApp) => Promise<Record<string, string>[]>; countsHeaders: (svc: StartedApp) => Promise<Record<string, string>> }
}

const TEXT = '# Leave policy\n\nEmployees request annual leave through their manager at least two weeks ahead. ' +
  'Sick leave needs a note from a doctor after three days.\n'

async function uploadText(svc: StartedApp, kbId: string, name: string, headers: Record<string, string>): Promise<string> {
  const form = new FormData()
  form.append('file', new Blob([TEXT], { type: 'text/markdown' }), name)
  const res = await svc.request(`/api/kb/${kbId}/docs/upload`, { method: 'POST', body: form, headers })
  assert.equal(res.status, 202, `fixture upload: ${await res.clone().text()}`)
  return ((await res.json()) as Json).doc_id
}

async function createKb(svc: StartedApp, kbId: string, headers: Record<string, string>): Promise<void> {
  const res = await svc.request('/api/kb', { method: 'POST', json: { kb_id: kbId, kb_name: 'Fuzz fixture' }, headers })
  assert.ok(res.status === 201 || res.status === 409, `fixture KB: ${res.status} ${await res.text()}`)
}

/**
 * The KB and document that valid requests name. The fuzzer deletes them now and then (a valid DELETE is a
 * valid request); between batches they are put back, so later requests still reach the handlers' depths.
 */
function fixtures(svc: StartedApp, headers: Record<string, string>, onKbCreated?: (kbId: string) => Promise<void>) {
  const current: Record<string, string> = { kb_id: uniqueId('fuzz'), doc_id: '', connector_id: '00000000-0000-4000-8000-000000000000' }
  return {
    current: (): Fixtures => current,
    async ensure(): Promise<void> {
      if ((await svc.request(`/api/kb/${current.kb_id}`, { headers })).status === 404) {
        await createKb(svc, current.kb_id, headers)
        await onKbCreated?.(current.kb_id)
      }
      const doc = current.doc_id ? await svc.request(`/api/kb/${current.kb_id}/docs/${current.doc_id}/status`, { headers }) : null
      if (!doc || doc.status === 404) current.doc_id = await uploadText(svc, current.kb_id, 'fixture.md', headers)
      else await doc.body?.cancel()
    },
  }
}

export function fuzzSuite(label: string, opts: StartOptions, extend: FuzzSuiteOptions = {}): void {
  const count = extend.count ?? FUZZ_COUNT
  it(`${label}: ${count} fuzzed requests over every operation of /openapi.json answer no 5xx; the service still works after`, async (t) => {
    const svc = extend.start ? await extend.start(t) : await startApp(t, opts)
    t.diagnostic(`QUARRY_FUZZ_SEED=${FUZZ_SEED} QUARRY_FUZZ_COUNT=${count}`)
    const admin = (await extend.adminHeaders?.(svc)) ?? {}

    // A KB the fuzzer never names: after the run it must still answer a real search.
    const probe = uniqueId('probe')
    await createKb(svc, probe, admin)
    const probeDoc = await uploadText(svc, probe, 'leave.md', admin)
    await waitFor(async () => ((await (await svc.request(`/api/kb/${probe}/docs/${probeDoc}/status`, { headers: admin })).json()) as Json).status === 'indexed', 'probe document indexed', 60_000)

    const operations = operationsFrom((await (await svc.request('/openapi.json')).json()) as Json)
    assert.ok(operations.length >= 20, `only ${operations.length} operations in /openapi.json`)
    const identities = (await extend.identities?.(svc)) ?? [{}]
    const requests = generateRequests(operations, { seed: FUZZ_SEED, count, identities: identities.length })
    const fx = fixtures(svc, admin, extend.onKbCreated)
    await fx.ensure()
    // An exception nothing caught would end a real server: one found here is a failure of its own.
    const uncaught: string[] = []
    const onUncaught = (err: unknown) => void uncaught.push(err instanceof Error ? err.stack ?? err.message : String(err))
    process.prependListener('uncaughtException', onUncaught)
    t.after(() => void process.off('uncaughtException', onUncaught))
    const trace = process.env.QUARRY_FUZZ_TRACE ? (line: string) => appendFileSync(process.env.QUARRY_FUZZ_TRACE!, `${line}\n`) : undefined
    const isFailure = (a: FuzzAnswer) => a.status >= 500 || a.status === 0

    if (extend.refused) {
      // Refused identities only, and no fixture put back in between: whatever they did must have changed nothing.
      const countsHeaders = await extend.refused.countsHeaders(svc)
      const counts = async () => {
        const res = await svc.request('/api/docs/status', { headers: countsHeaders })
        assert.equal(res.status, 200)
        // Rows and deletions per KB: statuses move on their own (the worker indexes the fixture meanwhile).
        const all = ((await res.json()) as Json).knowledge_bases as Record<string, { doc_counts: Json }>
        return Object.fromEntries(Object.entries(all).map(([kb, { doc_counts: c }]) => [kb, { total: c.total, deleted: c.deleted }]))
      }
      const before = await counts()
      const refusedIds = await extend.refused.identities(svc)
      const refusedRequests = generateRequests(operations, { seed: FUZZ_SEED + 1, count: extend.refused.count, identities: refusedIds.length })
      const refused = await send(refusedRequests, { baseUrl: svc.url, operations, fixtures: fx.current, identities: refusedIds, concurrency: 4, trace })
      const failedRefused = refused.filter(isFailure)
      assert.equal(failedRefused.length, 0, `refused identities: ${failedRefused.length} answered 5xx (QUARRY_FUZZ_SEED=${FUZZ_SEED}):\n${describeFailures(refused, isFailure)}`)
      const passed = refused.filter((a) => a.status < 300 && a.request.method !== 'GET' && !['/api/search', '/mcp'].includes(operations.find((o) => o.id === a.request.operation)!.path))
      assert.deepEqual(passed.slice(0, 10).map((a) => `${a.status} ${a.line}`), [], 'a write of a refused identity succeeded')
      assert.deepEqual(await counts(), before, 'KBs and document counts unchanged by refused requests')
      t.diagnostic(`${refused.length} requests of refused identities changed nothing`)
    }
    const answers = await send(requests, { baseUrl: svc.url, operations, fixtures: fx.current, identities, concurrency: 4, between: async () => { await extend.between?.(); await fx.ensure() }, trace })

    assert.deepEqual(uncaught.slice(0, 5), [], `uncaught exceptions during the run (QUARRY_FUZZ_SEED=${FUZZ_SEED})`)
    assert.equal(answers.length, count)
    const sent = new Set(answers.map((a) => a.request.operation))
    assert.deepEqual(operations.filter((o) => !sent.has(o.id)).map((o) => o.id), [], 'every operation is fuzzed')
    const byStatus = new Map<number, number>()
    for (const a of answers) byStatus.set(a.status, (byStatus.get(a.status) ?? 0) + 1)
    t.diagnostic(`time by operation: ${timeByOperation(answers)}`)
    t.diagnostic(`${operations.length} operations, statuses: ${[...byStatus].sort(([a], [b]) => a - b).map(([s, n]) => `${s}: ${n}`).join(', ')}`)

    const failed = answers.filter(isFailure)
    assert.equal(failed.length, 0, `${failed.length} of ${answers.length} requests answered 5xx or nothing (QUARRY_FUZZ_SEED=${FUZZ_SEED}):\n${describeFailures(answers, isFailure)}`)
    if (extend.check) {
      const findings = answers.flatMap((a) => {
        const finding = extend.check!(a)
        return finding ? [`${finding}: ${a.status} ${a.line}`] : []
      })
      assert.deepEqual(findings.slice(0, 40), [], `QUARRY_FUZZ_SEED=${FUZZ_SEED}`)
    }

    const health = await svc.request('/health')
    assert.equal(health.status, 200)
    assert.deepEqual(await health.json(), { status: 'ok' })
    const search = await svc.request('/api/search', { method: 'POST', json: { query: 'how do I request annual leave', kb_ids: [probe] }, headers: admin })
    assert.equal(search.status, 200, await search.clone().text())
    const results = ((await search.json()) as Json).results as Json[]
    assert.ok(results.some((r) => r.doc_id === probeDoc), `the probe document is found after the run: ${JSON.stringify(results).slice(0, 300)}`)
  })
}
