// Writes settings.example.yaml from the settings schema, so the example documents every key with its
// default and never drifts: `tsx kernel/config/example.ts > settings.example.yaml` (a test compares).
import type { TSchema } from '@sinclair/typebox'
import { stringify } from 'yaml'
import { BUILTIN_FUSION_PROFILE } from './load.ts'
import { SettingsSchema } from './schema.ts'

/** Keys whose default depends on provider.name: written commented out, so that copying the example keeps that. */
export const PROFILED_KEYS: ReadonlySet<string> = new Set([
  ...Object.keys(BUILTIN_FUSION_PROFILE).map((k) => `retrieval.hybrid.${k}`),
  'embedding.vector_size',
])

const HEADER = `# Quarry settings: every key with its default value.
# Copy to settings.yaml (or point SETTINGS_PATH / --config at it) and change what you need.
# Secrets are not written here: they come from the environment variables named in the comments.
# An empty postgres.host, redis.host, s3.endpoint or qdrant.host selects the embedded engine for that part
# (PGlite, in-process queue, local files, embedded vector index), all under data_dir.
# Keys marked [ENT] belong to the access-controlled edition and are ignored by base deployments.
`

function scalar(value: unknown): string {
  const text = stringify(value, { flow: true }).trimEnd()
  return text === '' ? "''" : text
}

function render(schema: TSchema, indent: string, out: string[], prefix = ''): void {
  const props = (schema as { properties?: Record<string, TSchema> }).properties ?? {}
  for (const [key, child] of Object.entries(props)) {
    const c = child as { description?: string; default?: unknown; type?: string; properties?: unknown; enum?: unknown[]; minimum?: number; maximum?: number; overridable?: boolean }
    const notes: string[] = []
    if (c.description) notes.push(c.description)
    if (c.enum) notes.push(`One of: ${c.enum.join(', ')}.`)
    else if (c.minimum !== undefined && c.maximum !== undefined) notes.push(`Range ${c.minimum}..${c.maximum}.`)
    if (c.overridable === false) notes.push('Not overridable per KB.')
    if (c.type === 'object' && c.properties) {
      if (notes.length) out.push(`${indent}# ${notes.join(' ')}`)
      out.push(`${indent}${key}:`)
      render(child, `${indent}  `, out, `${prefix}${key}.`)
      continue
    }
    if (notes.length) out.push(`${indent}# ${notes.join(' ')}`)
    out.push(`${indent}${PROFILED_KEYS.has(prefix + key) ? '# ' : ''}${key}: ${scalar(c.default)}`)
  }
}

export function renderExample(): string {
  const out: string[] = [HEADER]
  render(SettingsSchema, '', out)
  out.push(`
# Example of pre-registered knowledge bases and rate-limit rules:
# knowledge_bases:
#   - { id: handbook, name: Handbook, description: Company handbook, tags: [hr] }
# rate_limit:
#   rules:
#     - { name: search, paths: [/api/search], limit: 10/second }
#     - { name: upload, paths: ['/api/kb/*/docs/upload', '/api/kb/*/docs/upload/batch'], limit: 30/minute, weights: { '/api/kb/*/docs/upload/batch': 10 } }
`)
  return out.join('\n')
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].replace(/^.*\//, ''))) process.stdout.write(renderExample())
