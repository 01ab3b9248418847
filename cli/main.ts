// `quarry`: the command line for a running Quarry service (bin/quarry.mjs starts it under tsx).
import { parseArgs, type ParseArgsConfig } from 'node:util'
import { checkLocal, checkRemote, printReport } from './check.ts'
import { ApiError, createClient, type Client } from './client.ts'
import { docsRestore, kbCreate, kbDelete, kbList, search, status } from './commands.ts'
import { ingest } from './ingest.ts'
import { exportCommand, importCommand, migrateCommand } from './transfer.ts'
import { defaultStateFile } from './state.ts'

export const EXIT_USAGE = 64

const USAGE = `Usage: quarry <command> [options]

Commands:
  ingest <paths, folders or globs...> --kb <id>   upload files to a knowledge base (folders: every file below)
  kb list                                          list the knowledge bases
  kb create <id> [--name <name>] [--description <text>] [--tag <tag>]...
  kb delete <id>                                   delete a knowledge base with its documents
  search "<query>" --kb <id> [--kb <id>]... [--top-k <n>] [--mode hybrid|similarity]
  status --kb <id>                                 document counts of a knowledge base, and why each outdated one is
  docs restore <doc_id> --kb <id>                  index an outdated document again; the pair is never judged again
  check [--repair]                                 does search agree with every document status? (after a crash)
  export --kb <id> --out <file>                    save a knowledge base as an archive (files, documents, vectors)
  import <file> [--kb <new id>] [--wait]           load an archive into a new knowledge base
  migrate --from <a.yaml> --to <b.yaml> [--kb <id>]... [--dry-run]
                                                   copy every knowledge base from one set of stores to another

Every command:
  --url <url>              the service (default: $QUARRY_URL, else http://localhost:8000)
  --header 'Name: value'   a request header, repeatable (e.g. 'Authorization: Bearer <token>')
  --retries <n>            retries of 429, 502, 503 and connection failures, with back-off (default 5)
  --json                   print the service's JSON answer (kb, search, status, check)
  -h, --help               this text

ingest:
  --concurrency <n>        uploads in flight (default 4)
  --wait                   follow indexing to the end: documents that fail to index count as failed
  --state <file>           resume state (default: $XDG_STATE_HOME/quarry/, else ~/.local/state/quarry/)
  --poll-ms <n>            pause between two status polls of --wait (default 1000)

  Files whose content the KB already holds (same etag) are skipped. Interrupted (Ctrl-C, a crash), the same
  command resumes where it stopped. Two files of one name cannot both be ingested: the service names
  documents by file name.

check:
  --repair                 mend what disagrees: vectors of documents that are not indexed (outdated, deleted,
                           failed) are deleted; indexed documents whose vectors are incomplete are queued again
  --local                  open the data of the settings here instead of asking the service at --url (a stopped
                           service; with the embedded engines it takes the data folder's lock, so it refuses while
                           a service runs on that folder: ask that service instead)
  --config <file>          the settings of --local (default: $SETTINGS_PATH, ./settings.yaml, /app/settings.yaml)

  Without --local the service at --url checks itself (POST /api/admin/check, super-admin). The service runs the
  same repair at every start. Exit status 1 when something disagrees and --repair was not given.

export:
  Writes <file>.partial and renames it <file> once whole. Interrupted (Ctrl-C, kill -9, a dropped connection), the
  same command goes on from the last whole document (a dropped connection is resumed at once, --retries times).

import:
  --kb <id>                the new knowledge base's id (default: the archive's); under another id the documents and
                           connectors get new ids
  --wait                   when the archive's embedding model is not the service's, the documents are indexed again:
                           follow that to the end
  --poll-ms <n>            pause between two status polls of --wait (default 1000)

  The archive is checked whole before anything is sent. Vectors are reused when the models match. The service
  verifies counts, checksums and that sample searches answer the same top 10 as the source KB; exit status 1 when
  they do not. Interrupted, the same command sends only what the service does not hold yet.

migrate (runs here, not against --url; stop the service first):
  --from <file>, --to <file>  the settings of the source and of the target (data_dir, postgres, redis, s3, the
                           vector store); environment variables the settings read apply to both, DATA_DIR and PORT
                           to neither
  --kb <id>                only this knowledge base (repeatable; default all)
  --dry-run                say what would be copied and what the target holds already; copy nothing

  Files, documents, vectors (the same model: nothing is embedded again), connectors, members and settings overrides,
  each KB verified as an import is. Killed (even kill -9), the same command goes on where it stopped and copies
  nothing twice; run after a complete migration it copies nothing.

Exit status: 0 done, 1 a file or request failed, 64 usage error, 130 interrupted (run again to resume).
`

class UsageError extends Error {}

const COMMON = {
  url: { type: 'string' },
  header: { type: 'string', multiple: true },
  retries: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies ParseArgsConfig['options']

const OPTIONS = {
  ingest: { ...COMMON, kb: { type: 'string' }, concurrency: { type: 'string' }, wait: { type: 'boolean' }, state: { type: 'string' }, 'poll-ms': { type: 'string' } },
  kb: { ...COMMON, name: { type: 'string' }, description: { type: 'string' }, tag: { type: 'string', multiple: true } },
  search: { ...COMMON, kb: { type: 'string', multiple: true }, 'top-k': { type: 'string' }, mode: { type: 'string' } },
  status: { ...COMMON, kb: { type: 'string' } },
  docs: { ...COMMON, kb: { type: 'string' } },
  check: { ...COMMON, repair: { type: 'boolean' }, local: { type: 'boolean' }, config: { type: 'string' } },
  export: { ...COMMON, kb: { type: 'string' }, out: { type: 'string' } },
  import: { ...COMMON, kb: { type: 'string' }, wait: { type: 'boolean' }, 'poll-ms': { type: 'string' } },
  migrate: { ...COMMON, from: { type: 'string' }, to: { type: 'string' }, kb: { type: 'string', multiple: true }, 'dry-run': { type: 'boolean' } },
} as const satisfies Record<string, ParseArgsConfig['options']>

type Command = keyof typeof OPTIONS

function integer(value: string | undefined, name: string, fallback: number, min: number): number {
  if (value === undefined) return fallback
  if (!/^\d+$/.test(value) || Number(value) < min) throw new UsageError(`--${name} must be an integer of at least ${min}, got ${JSON.stringify(value)}`)
  return Number(value)
}

function headers(list: readonly string[] | undefined): Record<string, string> {
  const out: Record<string, string> = {}
  for (const h of list ?? []) {
    const i = h.indexOf(':')
    if (i <= 0) throw new UsageError(`--header must read 'Name: value', got ${JSON.stringify(h)}`)
    out[h.slice(0, i).trim()] = h.slice(i + 1).trim()
  }
  return out
}

function required<T>(value: T | undefined, what: string): T {
  if (value === undefined || (Array.isArray(value) && value.length === 0)) throw new UsageError(`${what} is required`)
  return value
}

export async function main(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const [name, ...rest] = argv
  if (name === undefined || name === '-h' || name === '--help' || name === 'help') {
    process.stdout.write(USAGE)
    return name === undefined ? EXIT_USAGE : 0
  }
  if (!(name in OPTIONS)) {
    process.stderr.write(`quarry: unknown command '${name}'\n\n${USAGE}`)
    return EXIT_USAGE
  }
  const command = name as Command
  try {
    const { values: v, positionals } = parseArgs({ args: [...rest], options: OPTIONS[command], allowPositionals: true, strict: true })
    const values = v as Record<string, string | string[] | boolean | undefined>
    if (values.help) {
      process.stdout.write(USAGE)
      return 0
    }
    if (command === 'check' && (values.local || values.config !== undefined)) {
      if (positionals.length > 0) throw new UsageError('expected no argument (options only)')
      const config = values.config as string | undefined
      return printReport(await checkLocal(config === undefined ? [] : ['--config', config], Boolean(values.repair)), Boolean(values.json), process.stdout)
    }
    if (command === 'migrate') {
      if (positionals.length > 0) throw new UsageError('expected no argument (options only)')
      return await migrateCommand({
        from: required(values.from as string | undefined, '--from'), to: required(values.to as string | undefined, '--to'),
        kbs: values.kb as string[] | undefined, dryRun: Boolean(values['dry-run']), json: Boolean(values.json), env,
      })
    }
    const url = (values.url as string | undefined) ?? env.QUARRY_URL ?? 'http://localhost:8000'
    const client = createClient({
      url,
      headers: headers(values.header as string[] | undefined),
      retries: integer(values.retries as string | undefined, 'retries', 5, 0),
      onRetry: (e) => process.stderr.write(`quarry: ${e.method} ${e.path}: ${e.reason}; retry ${e.attempt} in ${(e.delayMs / 1000).toFixed(1)} s\n`),
    })
    const json = Boolean(values.json)
    return await run(command, client, values, positionals, json, env)
  } catch (err) {
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`quarry ${command}: ${(err as Error).message}\nSee 'quarry --help'.\n`)
      return EXIT_USAGE
    }
    process.stderr.write(`quarry ${command}: ${err instanceof ApiError ? `the service answered ${err.status}: ${err.detail}` : (err as Error).message}\n`)
    return 1
  }
}

async function run(command: Command, client: Client, values: Record<string, unknown>, positionals: string[], json: boolean, env: NodeJS.ProcessEnv): Promise<number> {
  const out = process.stdout
  const only = (n: number, usage: string) => {
    if (positionals.length !== n) throw new UsageError(`expected ${usage}`)
  }
  switch (command) {
    case 'ingest': {
      const kb = required(values.kb as string | undefined, '--kb')
      if (positionals.length === 0) throw new UsageError('expected one or more paths, folders or globs to ingest')
      return ingest({
        client,
        kb,
        inputs: positionals,
        concurrency: integer(values.concurrency as string | undefined, 'concurrency', 4, 1),
        wait: Boolean(values.wait),
        pollMs: integer(values['poll-ms'] as string | undefined, 'poll-ms', 1000, 10),
        stateFile: (values.state as string | undefined) ?? defaultStateFile({ url: client.url, kb, inputs: positionals, cwd: process.cwd() }, env),
      })
    }
    case 'kb': {
      const [sub, id] = positionals
      if (sub === 'list') {
        only(1, "'kb list' with no argument")
        await kbList(client, json, out)
      } else if (sub === 'create') {
        only(2, "'kb create <id>'")
        await kbCreate(client, { kb_id: id, kb_name: values.name as string | undefined, description: values.description as string | undefined, tags: values.tag as string[] | undefined }, json, out)
      } else if (sub === 'delete') {
        only(2, "'kb delete <id>'")
        await kbDelete(client, id, json, out)
      } else {
        throw new UsageError(`expected 'kb list', 'kb create <id>' or 'kb delete <id>'${sub ? `, got 'kb ${sub}'` : ''}`)
      }
      return 0
    }
    case 'search': {
      only(1, 'one query (quote it)')
      const mode = values.mode as string | undefined
      if (mode !== undefined && mode !== 'hybrid' && mode !== 'similarity') throw new UsageError(`--mode must be hybrid or similarity, got ${JSON.stringify(mode)}`)
      const topK = values['top-k'] === undefined ? undefined : integer(values['top-k'] as string, 'top-k', 0, 1)
      await search(client, { query: positionals[0], kb_ids: required(values.kb as string[] | undefined, '--kb'), top_k: topK, mode }, json, out)
      return 0
    }
    case 'status': {
      only(0, 'no argument besides --kb')
      await status(client, required(values.kb as string | undefined, '--kb'), json, out)
      return 0
    }
    case 'docs': {
      const [sub, id] = positionals
      if (sub !== 'restore') throw new UsageError(`expected 'docs restore <doc_id> --kb <id>'${sub ? `, got 'docs ${sub}'` : ''}`)
      only(2, "'docs restore <doc_id>'")
      await docsRestore(client, required(values.kb as string | undefined, '--kb'), id, json, out)
      return 0
    }
    case 'check': {
      // --local and --config run before a client is made (main).
      only(0, 'no argument (options only)')
      return printReport(await checkRemote(client, Boolean(values.repair)), json, out)
    }
    case 'export': {
      only(0, 'no argument besides --kb and --out')
      return exportCommand({
        client, kb: required(values.kb as string | undefined, '--kb'), out: required(values.out as string | undefined, '--out'),
        retries: integer(values.retries as string | undefined, 'retries', 5, 0),
      })
    }
    case 'import': {
      only(1, 'one archive file')
      return importCommand({
        client, file: positionals[0], kb: values.kb as string | undefined, wait: Boolean(values.wait), json,
        pollMs: integer(values['poll-ms'] as string | undefined, 'poll-ms', 1000, 10),
      })
    }
    case 'migrate':
      throw new UsageError('migrate runs before a client is made')
  }
}
