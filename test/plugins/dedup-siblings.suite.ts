// Issue 36 through HTTP, on either driver set: documents written from one template stay visible (siblings and
// overlaps), copies and revisions are still told, every verdict is explained on the record and counted, a
// verdict can be reversed (restore), a crawled site of one layout keeps every page, and screening a
// multi-megabyte near-copy does not hold other requests.
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { templateFamilies, type TemplatedDoc } from '../../bench/lib/templates.ts'
import { startApp, type StartOptions, type StartedApp } from '../helpers/app.ts'
import { listenLoopback } from '../helpers/web-site.ts'
import { waitFor } from '../helpers/wait.ts'
import { domainText } from './dedup-quality.suite.ts'
import { newKb, settle, status, upload } from './docs.suite.ts'

type Json = any

const FAMILIES = templateFamilies(8)
const family = (name: string) => FAMILIES.find((f) => f.name === name)!.members

async function uploadAll(svc: StartedApp, kb: string, docs: TemplatedDoc[]): Promise<string[]> {
  const ids: string[] = []
  // one after another, as the user did: each new page is screened against all indexed before it
  for (const d of docs) {
    const res = await upload(svc, kb, d.name.replace(/^.*\//, ''), d.content)
    assert.equal(res.status, 202, await res.clone().text())
    const id = ((await res.json()) as Json).doc_id as string
    await settle(svc, kb, id)
    ids.push(id)
  }
  return ids
}

async function search(svc: StartedApp, kb: string, query: string): Promise<Json[]> {
  const res = await svc.request('/api/search', { method: 'POST', json: { query, kb_ids: [kb], options: { top_k: 3 } } })
  assert.equal(res.status, 200)
  return ((await res.json()) as Json).results
}

export function dedupSiblingsSuite(label: string, opts: StartOptions): void {
  const fast = (settings: Record<string, unknown> = {}) => ({ ...opts, settings: { queue_poll: { poll_interval_sec: 0.2, retry_interval_sec: 0.2 }, embedding: { vector_size: 256 }, ...settings, ...opts.settings } })

  it(`${label}: a KB of templated siblings all end indexed, each found by its own marker; the verdicts are recorded`, async (t) => {
    const svc = await startApp(t, fast())
    const kb = await newKb(svc)
    const docs = [...family('fault pages'), ...family('release notes').slice(0, 6), ...family('one-line notes').slice(0, 3), ...family('API endpoints').slice(0, 6)]
    const ids = await uploadAll(svc, kb, docs)
    const records = await Promise.all(ids.map(async (id) => (await svc.request(`/api/kb/${kb}/docs/${id}/status`)).json() as Promise<Json>))
    const hidden = records.filter((r) => r.status !== 'indexed').map((r) => `${r.source}: ${r.status} (${r.dedup?.reason})`)
    assert.deepEqual(hidden, [], 'no sibling is hidden')
    // a sibling verdict names the page it was told apart from, and why
    const told = records.filter((r) => r.dedup !== null)
    assert.ok(told.length > 0, 'pages of one template are compared, and the verdict is kept')
    for (const r of told) {
      assert.ok(['sibling', 'overlap'].includes(r.dedup.verdict), JSON.stringify(r.dedup))
      assert.ok(ids.includes(r.dedup.matched_doc_id))
      assert.equal(typeof r.dedup.score, 'number')
      assert.ok([1, 3].includes(r.dedup.stage))
      assert.match(r.dedup.reason, /both stay indexed/)
    }
    // a hidden page's own fault code finds that page, not another fault's
    for (const [i, d] of docs.entries()) {
      if (!d.name.startsWith('fault-')) continue
      const hits = await search(svc, kb, `fault code ${d.marker}`)
      assert.equal(hits[0]?.doc_id, ids[i], `${d.marker} finds its own page`)
    }
    // the list carries the verdicts too, and /metrics counts them
    const list = (await (await svc.request(`/api/kb/${kb}/docs?page_size=100`)).json()) as Json
    assert.equal(list.items.filter((x: Json) => x.dedup?.verdict === 'sibling').length, told.filter((r) => r.dedup.verdict === 'sibling').length)
    const metrics = await (await svc.request('/metrics')).text()
    const sibling = /quarry_dedup_verdicts_total\{verdict="sibling"\} (\d+)/.exec(metrics)
    assert.ok(sibling && Number(sibling[1]) >= told.filter((r) => r.dedup.verdict === 'sibling').length, 'sibling verdicts counted')
  })

  it(`${label}: overlapping documents both stay indexed; a copy is skipped and a revision supersedes, both explained`, async (t) => {
    const svc = await startApp(t, fast())
    const kb = await newKb(svc)
    const shared = domainText(41, 2_500)
    const [a, b] = await uploadAll(svc, kb, [
      { name: 'report-north.txt', title: 'report-north', content: `${shared}\n\n${domainText(42, 3_500)}`, kind: 'txt', marker: '' },
      { name: 'report-south.txt', title: 'report-south', content: `${domainText(43, 3_500)}\n\n${shared}`, kind: 'txt', marker: '' },
    ])
    assert.equal((await settle(svc, kb, a)).status, 'indexed')
    assert.equal((await settle(svc, kb, b)).status, 'indexed')

    // a copy under another name: the same text, skipped, explained on its record
    const notes = family('release notes')[0]
    const [orig] = await uploadAll(svc, kb, [notes])
    const [copy] = await uploadAll(svc, kb, [{ ...notes, name: 'release-copy.md' }])
    const copied = await settle(svc, kb, copy)
    assert.equal(copied.status, 'outdated')
    assert.equal(copied.duplicate_of, orig)
    assert.equal(copied.dedup.verdict, 'identical')
    assert.equal(copied.dedup.matched_doc_id, orig)
    assert.match(copied.dedup.reason, /not indexed/)
    // MCP clients read the same verdict
    const client = new Client({ name: 'quarry-test', version: '0.0.0' })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${svc.url}/mcp`)))
    t.after(() => client.close())
    const viaMcp = (await client.callTool({ name: 'get_document_status', arguments: { kb_id: kb, doc_id: copy } })) as { structuredContent?: Json }
    assert.deepEqual(viaMcp.structuredContent?.dedup, copied.dedup)

    // a revision: the same title, a passage replaced; the older is superseded, and says by what
    const body = domainText(51, 6_000)
    const [v1] = await uploadAll(svc, kb, [{ name: 'handbook.md', title: 'Handbook', content: `# Handbook\n\n${body}\n`, kind: 'md', marker: '' }])
    const paragraphs = body.split('\n\n')
    paragraphs[2] = domainText(52, paragraphs[2].length).slice(0, paragraphs[2].length)
    const [v2] = await uploadAll(svc, kb, [{ name: 'handbook-2.md', title: 'Handbook', content: `# Handbook\n\n${paragraphs.join('\n\n')}\n`, kind: 'md', marker: '' }])
    const newer = await settle(svc, kb, v2)
    assert.equal(newer.status, 'indexed')
    assert.equal(newer.dedup.verdict, 'similar')
    assert.equal(newer.dedup.matched_doc_id, v1)
    const older = await settle(svc, kb, v1, ['outdated'])
    assert.equal(older.dedup.verdict, 'similar')
    assert.equal(older.dedup.matched_doc_id, v2)
    assert.match(older.dedup.reason, /superseded by/)
  })

  it(`${label}: restore indexes an outdated document again and the pair is never judged again; 409 and 404 otherwise`, async (t) => {
    const svc = await startApp(t, fast())
    const kb = await newKb(svc)
    const notes = family('release notes')[1]
    const [orig] = await uploadAll(svc, kb, [notes])
    const [copy] = await uploadAll(svc, kb, [{ ...notes, name: 'mirror.md' }])
    assert.equal((await settle(svc, kb, copy)).status, 'outdated')

    assert.equal((await svc.request(`/api/kb/${kb}/docs/${orig}/restore`, { method: 'POST' })).status, 409, 'an indexed document has nothing to restore')
    const missing = await svc.request(`/api/kb/${kb}/docs/0123456789abcdef/restore`, { method: 'POST' })
    assert.equal(missing.status, 404)
    const res = await svc.request(`/api/kb/${kb}/docs/${copy}/restore`, { method: 'POST' })
    assert.equal(res.status, 202)
    assert.deepEqual(await res.json(), { kb_id: kb, doc_id: copy, status: 'pending', distinct_from: orig })
    const restored = await settle(svc, kb, copy)
    assert.equal(restored.status, 'indexed')
    assert.equal(restored.duplicate_of, null)
    assert.equal(restored.dedup, null, 'not judged against the pair: unique')
    assert.equal((await settle(svc, kb, orig)).status, 'indexed', 'the other document keeps its state')
    assert.equal((await svc.request(`/api/kb/${kb}/docs/${copy}/restore`, { method: 'POST' })).status, 409)

    // neither side is judged against the other again: a forced reindex of either, a re-upload of the copy
    for (const id of [copy, orig]) {
      assert.equal((await svc.request(`/api/kb/${kb}/docs/${id}/reindex?force=true`, { method: 'POST' })).status, 202)
      assert.equal((await settle(svc, kb, id)).status, 'indexed')
    }
    const again = await upload(svc, kb, 'mirror.md', notes.content)
    assert.equal(again.status, 202)
    assert.equal(((await again.json()) as Json).doc_id, copy)
    await waitFor(async () => ((await settle(svc, kb, copy)).status === 'indexed' ? true : null), 'the re-uploaded copy indexed')
    assert.equal((await settle(svc, kb, orig)).status, 'indexed')
    // a third copy is still a copy of the original
    const [third] = await uploadAll(svc, kb, [{ ...notes, name: 'third.md' }])
    assert.equal((await settle(svc, kb, third)).status, 'outdated')
  })

  it(`${label}: a web connector crawling a templated site keeps every page indexed; a print view is a copy`, async (t) => {
    const pages = family('product datasheets').slice(0, 8)
    const server = createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0]
      if (path === '/robots.txt') return res.writeHead(404).end()
      if (path === '/catalogue' || path === '/catalogue/') {
        const links = pages.map((p) => `<li><a href="/catalogue/${p.marker.toLowerCase()}">${p.marker}</a></li>`).join('')
        return res.writeHead(200, { 'content-type': 'text/html' }).end(`<html><head><title>Catalogue</title></head><body><ul>${links}<li><a href="/catalogue/print/${pages[0].marker.toLowerCase()}">print</a></li></ul></body></html>`)
      }
      const page = pages.find((p) => path === `/catalogue/${p.marker.toLowerCase()}`)
      if (page) return res.writeHead(200, { 'content-type': 'text/html' }).end(page.content)
      if (path === `/catalogue/print/${pages[0].marker.toLowerCase()}`) return res.writeHead(200, { 'content-type': 'text/html' }).end(page0Print(pages[0]))
      res.writeHead(404).end()
    })
    const site = await listenLoopback(server)
    t.after(() => site.close())
    const svc = await startApp(t, fast({ connectors: { egress: { allow: ['127.0.0.1'] } } }))
    const kb = await newKb(svc)
    const created = await svc.request('/api/connectors', {
      method: 'POST', json: { kb_id: kb, name: 'Catalogue', source_type: 'web', config: { seed_urls: [`${site.url}/catalogue`], depth: 2, max_pages: 50, request_delay_ms: 0, min_content_chars: 50 } },
    })
    assert.equal(created.status, 201, await created.clone().text())
    const id = ((await created.json()) as Json).connector_id
    assert.equal((await svc.request(`/api/connectors/${id}/sync`, { method: 'POST' })).status, 202)
    await waitFor(async () => ((await (await svc.request(`/api/connectors/${id}/sync/status`)).json()) as Json).sync_status === 'idle' || null, 'the sync to end', 120_000, 200)
    const docs = ((await (await svc.request(`/api/connectors/${id}/docs?page_size=100`)).json()) as Json).items as Json[]
    const settled = await Promise.all(docs.map((d) => settle(svc, kb, d.doc_id)))
    const pagesOf = settled.filter((d) => !d.source.includes('/print/'))
    assert.equal(pagesOf.length, pages.length, JSON.stringify(settled.map((d) => d.source)))
    assert.deepEqual(pagesOf.filter((d) => d.status !== 'indexed').map((d) => `${d.source}: ${d.status} ${d.dedup?.reason}`), [], 'every datasheet stays indexed')
    for (const p of pages) {
      const hits = await search(svc, kb, `${p.marker} datasheet`)
      assert.ok(hits[0]?.source.endsWith(`/catalogue/${p.marker.toLowerCase()}`), `${p.marker} finds its own page: ${hits[0]?.source}`)
    }
    const print = settled.find((d) => d.source.includes('/print/'))
    assert.ok(print, 'the print view was crawled')
    assert.equal(print.status, 'outdated', 'a copy under another address is skipped')
    assert.equal(print.duplicate_of, pagesOf.find((d) => d.source.endsWith(`/catalogue/${pages[0].marker.toLowerCase()}`)).doc_id)
  })

  it(`${label}: copies and revisions uploaded together with their originals are still told: one of each pair stays indexed`, async (t) => {
    const svc = await startApp(t, fast())
    const kb = await newKb(svc)
    // Every file at once, no settling in between: the workers (max_workers 5) take a copy and its original together,
    // and neither was indexed when the other was screened.
    const notes = family('release notes').slice(0, 4)
    const copies = notes.map((n) => ({ ...n, name: `copy-of-${n.name}` }))
    const revisions = [71, 73].map((seed) => {
      const body = domainText(seed, 5_000)
      const paragraphs = body.split('\n\n')
      paragraphs[1] = domainText(seed + 1, paragraphs[1].length).slice(0, paragraphs[1].length)
      return [
        { name: `manual-${seed}.md`, content: `# Manual ${seed}\n\n${body}\n` },
        { name: `manual-${seed}-2.md`, content: `# Manual ${seed}\n\n${paragraphs.join('\n\n')}\n` },
      ]
    })
    const siblings = family('fault pages').slice(0, 4)
    const files = [...notes.flatMap((n, i) => [n, copies[i]]), ...revisions.flat(), ...siblings]
    const ids = await Promise.all(files.map(async (f) => {
      const res = await upload(svc, kb, f.name, f.content)
      assert.equal(res.status, 202, await res.clone().text())
      return ((await res.json()) as Json).doc_id as string
    }))
    await Promise.all(ids.map((id) => settle(svc, kb, id)))
    // read again once all have settled: a revision indexed last moved the other out of `indexed` after it settled
    const done = await Promise.all(ids.map((id) => status(svc, kb, id)))
    const at = (name: string) => done[files.findIndex((f) => f.name === name)]
    const pairs = [...notes.map((n, i) => [n.name, copies[i].name]), ...revisions.map(([a, b]) => [a.name, b.name])]
    for (const [a, b] of pairs) {
      const both = [at(a), at(b)]
      const kept = both.filter((d) => d.status === 'indexed')
      assert.equal(kept.length, 1, `one of ${a} and ${b} stays indexed: ${JSON.stringify(both.map((d) => [d.doc_id, d.source, d.status, d.duplicate_of, d.dedup]))}`)
      const other = both.find((d) => d !== kept[0])!
      assert.equal(other.status, 'outdated')
      assert.equal(other.duplicate_of, kept[0].doc_id, `${other.source} names the document that stays`)
      assert.ok(['identical', 'similar', 'title_changed'].includes(other.dedup?.verdict), JSON.stringify(other.dedup))
      assert.equal(other.dedup.matched_doc_id, kept[0].doc_id)
    }
    for (const s of siblings) assert.equal(at(s.name).status, 'indexed', `${s.name} (a sibling) stays indexed: ${at(s.name).dedup?.reason}`)
    // two newer revisions of one indexed document, uploaded together: one after the other, the third had superseded
    // the second, which had superseded the first; at once, the same (each was screened against the first alone)
    const base = domainText(81, 12_000).split('\n\n') // 12 paragraphs: each revision replaces one, so they differ from each other by two
    const revise = (i: number, seed: number) => base.map((p, k) => (k === i ? domainText(seed, p.length).slice(0, p.length) : p)).join('\n\n')
    const [first] = await uploadAll(svc, kb, [{ name: 'guide.md', title: 'Guide', content: `# Guide\n\n${base.join('\n\n')}\n`, kind: 'md', marker: '' }])
    const newer = await Promise.all([revise(2, 82), revise(8, 83)].map(async (text, i) => {
      const res = await upload(svc, kb, `guide-${i + 2}.md`, `# Guide\n\n${text}\n`)
      assert.equal(res.status, 202)
      return ((await res.json()) as Json).doc_id as string
    }))
    await Promise.all(newer.map((id) => settle(svc, kb, id)))
    const chain = await Promise.all([first, ...newer].map((id) => status(svc, kb, id)))
    assert.deepEqual(chain.filter((d) => d.status === 'indexed').length, 1, `one of the three revisions stays indexed: ${JSON.stringify(chain.map((d) => [d.source, d.status, d.dedup?.verdict, d.dedup?.matched_doc_id]))}`)
    for (const d of chain.filter((x) => x.status !== 'indexed')) assert.equal(d.status, 'outdated')
    // nothing of an outdated document is left for search to find
    const outdated = new Set(done.filter((d) => d.status === 'outdated').map((d) => d.doc_id))
    for (const n of notes) {
      const hits = await search(svc, kb, `${n.marker} release notes`)
      assert.ok(hits.length > 0)
      assert.deepEqual(hits.filter((h: Json) => outdated.has(h.doc_id)).map((h: Json) => h.source), [], 'no hit from an outdated document')
    }
  })

  it(`${label}: /health answers within a second while a multi-megabyte near-copy of an indexed document is screened`, async (t) => {
    const svc = await startApp(t, fast({ ingestion: { max_file_size_mb: 10 } }))
    const kb = await newKb(svc)
    const body = domainText(61, 2_500_000)
    const [a] = await uploadAll(svc, kb, [{ name: 'big.txt', title: 'big', content: body, kind: 'txt', marker: '' }])
    assert.equal((await settle(svc, kb, a)).status, 'indexed')
    const words = body.split(' ')
    for (let i = 7; i < words.length; i += 40) words[i] = 'zzyzx'
    const res = await upload(svc, kb, 'big-2.txt', words.join(' '))
    assert.equal(res.status, 202)
    const b = ((await res.json()) as Json).doc_id as string
    let worst = 0
    let probes = 0
    for (;;) {
      const started = performance.now()
      const health = await svc.request('/health')
      assert.equal(health.status, 200)
      worst = Math.max(worst, performance.now() - started)
      probes++
      const s = ((await (await svc.request(`/api/kb/${kb}/docs/${b}/status`)).json()) as Json).status
      if (!['pending', 'running'].includes(s)) break
      await new Promise((r) => setTimeout(r, 50))
    }
    assert.ok(probes > 3, 'the probe ran while the near-copy was processed')
    assert.ok(worst < 1000, `/health took ${worst.toFixed(0)} ms while the near-copy was screened`)
    const done = await settle(svc, kb, b)
    assert.ok(['outdated', 'indexed'].includes(done.status))
    assert.ok(done.dedup !== null, 'the near-copy was judged against the indexed one')
  })
}

function page0Print(p: TemplatedDoc): string {
  const main = /<main>([\s\S]*)<\/main>/.exec(p.content)?.[1] ?? p.content
  return `<!doctype html><html><head><title>${p.title}</title></head><body>${main}</body></html>`
}
