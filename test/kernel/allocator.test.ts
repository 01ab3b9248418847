import { strict as assert } from 'node:assert'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { allocatorWarning, MALLOC_ARENA_MAX, onGlibc, serviceEnv } from '../../kernel/allocator.ts'
import { loadSettings } from '../../kernel/config/load.ts'

const scripts = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> }).scripts
const PREFIX = 'MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-' + MALLOC_ARENA_MAX + '} '

/** What a command started the way npm runs a script (sh -c) sees as MALLOC_ARENA_MAX. */
function arenaSeenBy(script: string, env: NodeJS.ProcessEnv): string {
  const prefix = script.slice(0, script.indexOf(' ') + 1)
  const r = spawnSync('sh', ['-c', `${prefix}${JSON.stringify(process.execPath)} -e 'process.stdout.write(String(process.env.MALLOC_ARENA_MAX))'`], { env, encoding: 'utf8' })
  assert.equal(r.status, 0, r.stderr)
  return r.stdout
}

describe('malloc arenas', () => {
  it('every npm script that starts the service sets MALLOC_ARENA_MAX, as kernel/allocator.ts says', () => {
    for (const name of ['start', 'worker', 'mcp', 'bench', 'eval']) {
      assert.ok(scripts[name].startsWith(PREFIX), `scripts.${name} = ${scripts[name]}`)
    }
  })

  it("a script's process gets the arena count, and a value the caller sets wins", () => {
    const { MALLOC_ARENA_MAX: _unset, ...env } = process.env
    assert.equal(arenaSeenBy(scripts.start, env), MALLOC_ARENA_MAX)
    assert.equal(arenaSeenBy(scripts.start, { ...env, MALLOC_ARENA_MAX: '4' }), '4')
  })

  it('serviceEnv adds the arena count and keeps one that is set', () => {
    assert.equal(serviceEnv({ PATH: '/bin' }).MALLOC_ARENA_MAX, MALLOC_ARENA_MAX)
    assert.equal(serviceEnv({ PATH: '/bin' }).PATH, '/bin')
    assert.equal(serviceEnv({ MALLOC_ARENA_MAX: '8' }).MALLOC_ARENA_MAX, '8')
  })

  it('warns on glibc when the arena count is left to glibc, and only then', () => {
    assert.match(allocatorWarning({}, true) ?? '', /MALLOC_ARENA_MAX is not set/)
    assert.equal(allocatorWarning({ MALLOC_ARENA_MAX: '2' }, true), null)
    assert.equal(allocatorWarning({ GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' }, true), null)
    assert.equal(allocatorWarning({}, false), null)
    // This machine's C library, as process.report tells it (Debian: glibc).
    assert.equal(onGlibc(), spawnSync('ldd', ['--version'], { encoding: 'utf8' }).stdout?.includes('GLIBC') ?? false)
  })

  it("is among the settings' warnings, which the service logs at start", (t) => {
    const cwd = mkdtempSync(join(tmpdir(), 'quarry-allocator-'))
    t.after(() => rmSync(cwd, { recursive: true, force: true }))
    const warned = (env: Record<string, string>) => loadSettings({ argv: [], env, cwd }).warnings.some((w) => w.startsWith('MALLOC_ARENA_MAX is not set'))
    assert.equal(warned({}), onGlibc())
    assert.equal(warned({ MALLOC_ARENA_MAX: MALLOC_ARENA_MAX }), false)
  })
})
