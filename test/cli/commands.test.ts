// The CLI's other commands and its HTTP behaviour (retries, errors, usage), as a child process against the
// service in-process. Storage plays no part here beyond what ingest.suite.ts runs on both driver sets.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { startApp, uniqueId } from '../helpers/app.ts'
import { markdownFiles, runCli, setUpIngest, tempDir, writeFiles } from './helpers.ts'

const TIMEOUT = { timeout: 120_000 }

describe('quarry commands', () => {
  it('kb create, list and delete; search and status, as tables and as JSON', TIMEOUT, async (t) => {
    const svc = await startApp(t)
    const dir = tempDir(t)
    const kb = uniqueId()
    const cli = (...args: string[]) => runCli([...args, '--url', svc.url], { cwd: dir })

    let run = await cli('kb', 'create', kb, '--name', 'Handbook', '--description', 'HR policies', '--tag', 'hr', '--tag', 'policy')
    assert.equal(run.code, 0, run.stderr)
    assert.equal(run.stdout, `Knowledge base '${kb}' created.\n`)
    run = await cli('kb', 'create', kb)
    assert.equal(run.code, 1)
    assert.match(run.stderr, new RegExp(`answered 409: .*${kb}`))

    run = await cli('kb', 'list')
    assert.equal(run.code, 0)
    assert.match(run.stdout, /^kb_id\s+name\s+tags\s+created_at\s+description\n[- ]+\n/)
    assert.match(run.stdout, new RegExp(`^${kb}\\s+Handbook\\s+hr,policy\\s+\\d{4}-\\d\\d-\\d\\dT\\S+\\s+HR policies$`, 'm'))
    run = await cli('kb', 'list', '--json')
    const listed = (JSON.parse(run.stdout) as { knowledge_bases: { kb_id: string; tags: string[] }[] }).knowledge_bases.find((k) => k.kb_id === kb)
    assert.deepEqual(listed?.tags, ['hr', 'policy'])

    writeFiles(dir, {
      'leave.md': '# Leave policy\n\nEmployees request annual leave through their manager at least two weeks ahead.\n',
      'expenses.md': '# Expenses\n\nReceipts for travel expenses are submitted within thirty days of the trip.\n',
    })
    run = await cli('ingest', 'leave.md', 'expenses.md', '--kb', kb, '--wait', '--poll-ms', '50')
    assert.equal(run.code, 0, run.stderr)

    run = await cli('status', '--kb', kb)
    assert.equal(run.code, 0)
    assert.match(run.stdout, /^indexed\s+2$/m)
    assert.match(run.stdout, /^failed\s+0$/m)
    run = await cli('status', '--kb', kb, '--json')
    assert.equal((JSON.parse(run.stdout) as { doc_counts: { indexed: number } }).doc_counts.indexed, 2)

    run = await cli('search', 'how do I request annual leave', '--kb', kb, '--top-k', '1')
    assert.equal(run.code, 0, run.stderr)
    assert.match(run.stdout, new RegExp(`^1\\s+[\\d.]+\\s+${kb}\\s+leave\\.md\\s+Leave policy Employees request annual leave`, 'm'))
    assert.match(run.stdout, /^1 of \d+ candidates, hybrid, \d+ ms$/m)
    run = await cli('search', 'travel receipts', '--kb', kb, '--mode', 'similarity', '--json')
    const answer = JSON.parse(run.stdout) as { results: { source: string }[]; meta: { search_mode: string } }
    assert.equal(answer.meta.search_mode, 'similarity')
    assert.equal(answer.results[0].source, 'expenses.md')

    run = await cli('kb', 'delete', kb)
    assert.equal(run.code, 0)
    assert.match(run.stdout, new RegExp(`^Knowledge base '${kb}' deleted \\(2 stored file\\(s\\) removed\\)\\.$`, 'm'))
    run = await cli('status', '--kb', kb)
    assert.equal(run.code, 1)
    assert.match(run.stderr, new RegExp(`^quarry status: the service answered 404: .*${kb}`, 'm'))
  })

  it('retries 503, 502 and 429 (honouring Retry-After) and reports a file whose retries ran out', TIMEOUT, async (t) => {
    const { kb, proxy, dir } = await setUpIngest(t, {}, markdownFiles('in/r', 3))
    const args = ['ingest', 'in', '--kb', kb, '--url', proxy.url, '--concurrency', '1']

    proxy.failUploads(2, 503)
    proxy.failUploads(1, 502)
    proxy.failUploads(1, 429, { 'retry-after': '1' })
    let run = await runCli([...args, '--header', 'Authorization: Bearer t0k3n'], { cwd: dir })
    assert.equal(run.code, 0, run.stderr)
    assert.ok(proxy.authorizations.length > 7 && proxy.authorizations.every((a) => a === 'Bearer t0k3n'), 'every request, retries included, carries --header')
    assert.equal(proxy.uploadRequests(), 7, 'four refused attempts, then the three files')
    assert.deepEqual(proxy.accepted.sort(), ['r000.md', 'r001.md', 'r002.md'])
    assert.match(run.stderr, /POST \/api\/kb\/\S+\/docs\/upload: 503 proxy says 503; retry 1 in [\d.]+ s/)
    assert.match(run.stderr, /: 503 proxy says 503; retry 2 in/)
    assert.match(run.stderr, /: 502 proxy says 502; retry 3 in/)
    assert.match(run.stderr, /: 429 proxy says 429; retry 4 in 1\.0 s/, 'the delay is the one Retry-After asked for')

    writeFiles(dir, markdownFiles('in/s', 1))
    proxy.failUploads(3, 503)
    run = await runCli([...args, '--retries', '2'], { cwd: dir })
    assert.equal(run.code, 1)
    assert.match(run.stdout, /^in\/s000\.md\s+failed\s+proxy says 503$/m)
    assert.equal(proxy.uploadRequests(), 10, 'one attempt and two retries')
  })

  it('stops the job when the service cannot be reached, keeping it resumable', TIMEOUT, async (t) => {
    const { kb, proxy, dir } = await setUpIngest(t, {}, markdownFiles('in/c', 6))
    const args = ['ingest', 'in', '--kb', kb, '--url', proxy.url, '--concurrency', '1', '--retries', '1', '--state', 'job.jsonl']

    proxy.failUploads(2, 0)
    let run = await runCli(args, { cwd: dir })
    assert.equal(run.code, 1, run.stderr)
    assert.match(run.stdout, /^Stopped: cannot reach http:\/\/127\.0\.0\.1:\d+: .+ \(2 attempts\)\. 6 file\(s\) not attempted\./m)
    assert.equal(proxy.uploadRequests(), 2, 'one file tried twice, then the job stops instead of failing every file alike')
    run = await runCli(args, { cwd: dir })
    assert.equal(run.code, 0, run.stderr)
    assert.equal(proxy.accepted.length, 6)
  })

  it('takes an upload whose answer was lost, and whose retry the service refuses as active, for done', TIMEOUT, async (t) => {
    // No worker: the landed document stays pending, so the retry meets 409 every time.
    const { kb, proxy, dir } = await setUpIngest(t, { settings: { queue_worker: { enabled: false } } }, markdownFiles('in/l', 2))
    proxy.failUploads(1, -1)
    const run = await runCli(['ingest', 'in', '--kb', kb, '--url', proxy.url, '--concurrency', '1'], { cwd: dir })
    assert.equal(run.code, 0, run.stdout + run.stderr)
    assert.match(run.stderr, /docs\/upload: \S+; retry 1 in/)
    assert.match(run.stdout, /^uploaded \(queued for indexing\)\s+2\s/m)
    assert.deepEqual(proxy.accepted, ['l000.md', 'l001.md'], 'the retry did not store the file a second time')
  })

  it('refuses bad usage with exit status 64 and an unknown KB with 1', TIMEOUT, async (t) => {
    const svc = await startApp(t)
    const dir = tempDir(t)
    writeFiles(dir, { 'a.md': '# A\n\nSome text for the unknown knowledge base.\n' })
    const cases: [string[], RegExp][] = [
      [['ingest', 'a.md'], /--kb is required/],
      [['ingest', '--kb', 'x'], /expected one or more paths/],
      [['ingest', 'a.md', '--kb', 'x', '--concurrency', '0'], /--concurrency must be an integer of at least 1, got "0"/],
      [['search', 'q', '--kb', 'x', '--mode', 'fuzzy'], /--mode must be hybrid or similarity/],
      [['kb', 'rename', 'x'], /expected 'kb list', 'kb create <id>' or 'kb delete <id>', got 'kb rename'/],
      [['status', '--kb', 'x', '--bogus'], /Unknown option '--bogus'/],
      [['frobnicate'], /unknown command 'frobnicate'/],
      [['ingest', 'a.md', '--kb', 'x', '--header', 'no-colon'], /--header must read 'Name: value'/],
    ]
    for (const [args, message] of cases) {
      const run = await runCli([...args, '--url', svc.url], { cwd: dir })
      assert.equal(run.code, 64, `${args.join(' ')}: ${run.stderr}`)
      assert.match(run.stderr, message)
    }
    const run = await runCli(['ingest', 'a.md', 'missing/*.md', '--kb', 'no-such-kb', '--url', svc.url], { cwd: dir })
    assert.equal(run.code, 1)
    assert.match(run.stderr, /no file matches "missing\/\*\.md"/)
    assert.match(run.stderr, /the service answered 404: .*no-such-kb/)
  })
})
