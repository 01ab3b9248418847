// Retrieval quality on BEIR-layout data sets, through Quarry's public API (see bench/eval/run.ts).
//
//   npm run eval -- --dataset ../shared/datasets/scifact
//   npm run eval -- --dataset ../shared/datasets/autorag-ko --limit-docs 100 --limit-queries 20   (smoke)
//   npm run eval -- --dataset <folder> --url http://127.0.0.1:8000 [--header 'Authorization: Bearer ...']
//
// Options: --limit-docs N, --limit-queries M, --modes sparse,dense,hybrid,similarity, --alpha A (hybrid),
// --top-k K (<= 100), --dedup (keep near-duplicate detection on), --kb ID, --split N (the corpus spread over N
// KBs searched together: multi-KB quality), --keep, --skip-ingest,
// --data-dir DIR (in-process service), --set key=value (in-process settings, repeatable),
// --concurrency C, --format txt|md (upload format), --json FILE (the result object).
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { machine } from './lib/machine.ts'
import { formatReport, MODES, runEval, type EvalOptions, type EvalResult, type ModeName } from './eval/run.ts'

const DATASETS = process.env.QUARRY_DATASETS ?? join(import.meta.dirname, '..', '..', 'shared', 'datasets')

function setPath(target: Record<string, unknown>, key: string, raw: string): void {
  const parts = key.split('.')
  let node = target
  for (const p of parts.slice(0, -1)) node = (node[p] ??= {}) as Record<string, unknown>
  let value: unknown = raw
  try {
    value = JSON.parse(raw)
  } catch {
    // a bare string
  }
  node[parts[parts.length - 1]] = value
}

const int = (name: string, v: string | undefined): number | undefined => {
  if (v === undefined) return undefined
  const n = Number(v)
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, got '${v}'`)
  return n
}

export function parseCli(argv: readonly string[]): EvalOptions & { json?: string } {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      dataset: { type: 'string' },
      url: { type: 'string' },
      header: { type: 'string', multiple: true },
      'limit-docs': { type: 'string' },
      'limit-queries': { type: 'string' },
      modes: { type: 'string' },
      alpha: { type: 'string' },
      'top-k': { type: 'string' },
      dedup: { type: 'boolean' },
      kb: { type: 'string' },
      split: { type: 'string' },
      keep: { type: 'boolean' },
      'skip-ingest': { type: 'boolean' },
      'data-dir': { type: 'string' },
      set: { type: 'string', multiple: true },
      concurrency: { type: 'string' },
      format: { type: 'string' },
      json: { type: 'string' },
    },
    strict: true,
  })
  if (!values.dataset) throw new Error('--dataset <folder> is required (a BEIR layout folder: corpus.jsonl, queries.jsonl, qrels/test.tsv)')
  const modes = values.modes?.split(',').map((m) => m.trim()).filter(Boolean)
  for (const m of modes ?? []) if (!(MODES as readonly string[]).includes(m)) throw new Error(`--modes: unknown mode '${m}' (${MODES.join(', ')})`)
  const alpha = values.alpha === undefined ? undefined : Number(values.alpha)
  if (alpha !== undefined && !(alpha >= 0 && alpha <= 1)) throw new Error(`--alpha must be between 0 and 1, got '${values.alpha}'`)
  const topK = int('top-k', values['top-k'])
  if (topK !== undefined && topK > 100) throw new Error('--top-k is at most 100 (the API limit)')
  const headers: Record<string, string> = {}
  for (const h of values.header ?? []) {
    const at = h.indexOf(':')
    if (at < 1) throw new Error(`--header must be 'Name: value', got '${h}'`)
    headers[h.slice(0, at).trim()] = h.slice(at + 1).trim()
  }
  const settings: Record<string, unknown> = {}
  for (const s of values.set ?? []) {
    const at = s.indexOf('=')
    if (at < 1) throw new Error(`--set must be key=value, got '${s}'`)
    setPath(settings, s.slice(0, at), s.slice(at + 1))
  }
  if (values.format !== undefined && values.format !== 'txt' && values.format !== 'md') throw new Error(`--format must be txt or md, got '${values.format}'`)
  if (values.url && (values.set?.length || values['data-dir'])) throw new Error('--set and --data-dir apply to the in-process service only, not with --url')
  return {
    dataset: values.dataset,
    url: values.url,
    headers,
    limitDocs: int('limit-docs', values['limit-docs']),
    limitQueries: int('limit-queries', values['limit-queries']),
    modes: modes as ModeName[] | undefined,
    alpha,
    topK,
    dedup: values.dedup ?? false,
    kbId: values.kb,
    split: int('split', values.split),
    keep: values.keep ?? false,
    skipIngest: values['skip-ingest'] ?? false,
    dataDir: values['data-dir'],
    settings,
    concurrency: int('concurrency', values.concurrency),
    format: values.format as 'txt' | 'md' | undefined,
    json: values.json,
  }
}

/** Suite entry: both shared data sets (quick: a slice of each). */
export async function run(opts: { quick: boolean }): Promise<Record<string, unknown>> {
  const results: Record<string, EvalResult | { skipped: string }> = {}
  for (const name of ['scifact', 'autorag-ko']) {
    const dir = join(DATASETS, name)
    if (!existsSync(join(dir, 'corpus.jsonl'))) {
      results[name] = { skipped: `no data set at ${dir}` }
      continue
    }
    const r = await runEval({ dataset: dir, ...(opts.quick ? { limitDocs: 300, limitQueries: 30 } : {}) })
    console.log(formatReport(r))
    results[name] = r
  }
  return { name: 'eval', machine: machine(), results }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  let opts: ReturnType<typeof parseCli>
  try {
    opts = parseCli(process.argv.slice(2))
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`)
    process.exit(2)
  }
  const result = await runEval(opts)
  console.log(formatReport(result))
  if (opts.json) writeFileSync(opts.json, `${JSON.stringify({ machine: machine(), ...result }, null, 2)}\n`)
}
