// The small commands: knowledge bases, search and document counts, each one request to the public API.
import type { CreateKb, KnowledgeBase } from '../plugins/kb/service.ts'
import { seg, type Client } from './client.ts'
import { cut, table } from './table.ts'

type Out = NodeJS.WritableStream

const print = (out: Out, value: unknown) => out.write(`${JSON.stringify(value, null, 2)}\n`)

export async function kbList(client: Client, json: boolean, out: Out): Promise<void> {
  const body = await client.json<{ knowledge_bases: KnowledgeBase[] }>('GET', '/api/kb')
  if (json) return void print(out, body)
  if (body.knowledge_bases.length === 0) return void out.write('No knowledge bases.\n')
  const rows = body.knowledge_bases.map((k) => [k.kb_id, k.kb_name, k.tags.join(','), k.created_at, cut(k.description ?? '', 60)])
  out.write(`${table(['kb_id', 'name', 'tags', 'created_at', 'description'], rows)}\n`)
}

export async function kbCreate(client: Client, kb: CreateKb, json: boolean, out: Out): Promise<void> {
  const body = await client.json<{ kb_id: string; status: string }>('POST', '/api/kb', kb)
  if (json) print(out, body)
  else out.write(`Knowledge base '${body.kb_id}' ${body.status}.\n`)
}

export async function kbDelete(client: Client, kbId: string, json: boolean, out: Out): Promise<void> {
  const body = await client.json<{ kb_id: string; status: string; s3_objects_deleted?: number }>('DELETE', `/api/kb/${seg(kbId)}`)
  if (json) print(out, body)
  else out.write(`Knowledge base '${body.kb_id}' ${body.status} (${body.s3_objects_deleted ?? 0} stored file(s) removed).\n`)
}

interface SearchAnswer {
  results: { kb_id: string; source: string; title: string; doc_type: string; page_num: number | null; score: number; rerank_score: number | null; text: string }[]
  meta: { returned: number; total_candidates: number; search_mode: string; latency_ms: number }
}

export interface SearchRequest {
  query: string
  kb_ids: string[]
  top_k?: number
  mode?: string
}

export async function search(client: Client, req: SearchRequest, json: boolean, out: Out): Promise<void> {
  const options: Record<string, unknown> = {}
  if (req.top_k !== undefined) options.top_k = req.top_k
  if (req.mode !== undefined) options.mode = req.mode
  const body = await client.json<SearchAnswer>('POST', '/api/search', { query: req.query, kb_ids: req.kb_ids, options })
  if (json) return void print(out, body)
  const rows = body.results.map((r, i) => [
    i + 1,
    String(r.rerank_score ?? r.score),
    r.kb_id,
    // Every document has a page 1; only a PDF's page number tells the reader where to look.
    r.doc_type === 'pdf' && r.page_num ? `${r.source} p.${r.page_num}` : r.source,
    cut(r.text, 100),
  ])
  out.write(`${rows.length > 0 ? table(['#', 'score', 'kb', 'source', 'text'], rows) : 'No results.'}\n`)
  out.write(`${body.meta.returned} of ${body.meta.total_candidates} candidates, ${body.meta.search_mode}, ${body.meta.latency_ms} ms\n`)
}

interface OutdatedDoc { doc_id: string; source: string; duplicate_of: string | null; dedup: { verdict: string; reason: string } | null }

/** Document counts, then every outdated document with the reason dedup gave (issue 36), 100 a page. */
export async function status(client: Client, kbId: string, json: boolean, out: Out): Promise<void> {
  const body = await client.json<{ kb_id: string; doc_counts: Record<string, number> }>('GET', `/api/kb/${seg(kbId)}/docs/status`)
  const outdated: OutdatedDoc[] = []
  for (let page = 1; outdated.length < (body.doc_counts.outdated ?? 0); page++) {
    const list = await client.json<{ items: OutdatedDoc[] }>('GET', `/api/kb/${seg(kbId)}/docs?status=outdated&page_size=100&page=${page}&sort_by=source&sort_order=asc`)
    if (list.items.length === 0) break
    outdated.push(...list.items)
  }
  if (json) return void print(out, { ...body, outdated: outdated.map((d) => ({ doc_id: d.doc_id, source: d.source, duplicate_of: d.duplicate_of, dedup: d.dedup })) })
  out.write(`${table(['status', 'documents'], Object.entries(body.doc_counts).map(([k, v]) => [k, v]))}\n`)
  if (outdated.length > 0) {
    out.write(`\noutdated (restore one with: quarry docs restore --kb ${kbId} <doc_id>)\n`)
    out.write(`${table(['doc_id', 'source', 'verdict', 'reason'], outdated.map((d) => [d.doc_id, d.source, d.dedup?.verdict ?? '', d.dedup?.reason ?? (d.duplicate_of ? `duplicate of ${d.duplicate_of}` : '')]))}\n`)
  }
}

/** POST .../restore: an outdated document indexed again, the pair recorded as distinct. */
export async function docsRestore(client: Client, kbId: string, docId: string, json: boolean, out: Out): Promise<void> {
  const body = await client.json<{ doc_id: string; status: string; distinct_from: string | null }>('POST', `/api/kb/${seg(kbId)}/docs/${seg(docId)}/restore`)
  if (json) return void print(out, body)
  out.write(`${body.doc_id}: ${body.status}, indexed again${body.distinct_from ? `; never judged against ${body.distinct_from} again` : ''}\n`)
}
