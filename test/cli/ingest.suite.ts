// `quarry ingest` end to end: the CLI as a child process against the service in-process, through a counting
// proxy; run on both driver sets (the skip-by-etag check depends on the etag the object store records).
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { StartOptions } from '../helpers/app.ts'
import { waitFor } from '../helpers/wait.ts'
import { duplicates, listDocs, markdownFiles, runCli, setUpIngest, startCli, waitForHeld, writeFiles } from './helpers.ts'

const TIMEOUT = { timeout: 120_000 }

/** The rows of the summary table: label -> file count. */
function summaryCounts(stdout: string): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const m of stdout.matchAll(/^(uploaded|indexed|skipped|failed|outdated|still indexing|not attempted)\b[^\n]*?\s(\d+)\s/gm)) counts[m[1]] = Number(m[2])
  return counts
}

export function cliIngestSuite(label: string, opts: StartOptions): void {
  it(`${label}: ingests a folder, skips unchanged files on a re-run, reports a failing file and exits 1`, TIMEOUT, async (t) => {
    const { svc, kb, proxy, dir } = await setUpIngest(t, opts, { ...markdownFiles('docs/a', 4), ...markdownFiles('docs/nested/b', 2), 'docs/logo.png': 'not an image', 'docs/.hidden.md': '# hidden' })
    const args = ['ingest', 'docs', '--kb', kb, '--url', proxy.url, '--concurrency', '3']

    const first = await runCli(args, { cwd: dir })
    assert.equal(first.code, 1, first.stderr)
    assert.deepEqual(summaryCounts(first.stdout), { uploaded: 6, skipped: 0, failed: 1 })
    assert.match(first.stdout, /docs\/logo\.png\s+failed\s+Unsupported file format/)
    // Not a terminal: plain lines, no carriage returns or escape codes, the last one complete.
    assert.match(first.stderr, /^uploading: 100% 7\/7 files {2}[\d.]+ files\/s {2}[\d.]+ (B|KiB)\/[\d.]+ (B|KiB) {2}[\d.]+ (B|KiB)\/s/m)
    assert.doesNotMatch(first.stderr, /[\r\x1b]/)
    assert.equal(proxy.accepted.length, 6)
    assert.ok(!proxy.accepted.includes('.hidden.md'), 'hidden files are not part of a folder')
    const docs = await listDocs(svc.url, kb)
    assert.equal(docs.length, 6)
    assert.deepEqual(readdirSync(join(dir, '.state', 'quarry')), [], 'a finished job leaves no state file')
    // The run does not wait for indexing, and replacing a document that is still being indexed answers 409
    // (spec): let the service finish before the re-run replaces a001.md.
    await waitFor(async () => (await listDocs(svc.url, kb)).every((d) => d.status === 'indexed'), 'the first run\'s documents to be indexed', 60_000)

    // Changed to content the KB holds under another name: still sent, or a001.md would keep its old text.
    writeFileSync(join(dir, 'docs/a001.md'), readFileSync(join(dir, 'docs/a002.md')))
    writeFiles(dir, markdownFiles('docs/c', 1))
    // A new name for content the KB holds: skipped, and said so.
    writeFileSync(join(dir, 'docs/copy.md'), readFileSync(join(dir, 'docs/a000.md')))
    const second = await runCli(args, { cwd: dir })
    assert.equal(second.code, 1)
    assert.deepEqual(summaryCounts(second.stdout), { uploaded: 2, skipped: 6, failed: 1 })
    assert.match(second.stdout, /^docs\/copy\.md\s+skipped\s+same content as a000\.md$/m)
    assert.deepEqual(proxy.accepted.slice(6).sort(), ['a001.md', 'c000.md'], 'only the changed and the new file are sent')
    assert.equal((await listDocs(svc.url, kb)).length, 7)
  })

  it(`${label}: --wait follows indexing to the end and counts a document that fails to index as failed`, TIMEOUT, async (t) => {
    const { svc, kb, proxy, dir } = await setUpIngest(t, opts, { ...markdownFiles('in/n', 3), 'in/broken.pdf': 'this is not a PDF at all' })
    const run = await runCli(['ingest', 'in', '--kb', kb, '--url', proxy.url, '--wait', '--poll-ms', '50'], { cwd: dir })
    assert.equal(run.code, 1, run.stderr)
    assert.deepEqual(summaryCounts(run.stdout), { indexed: 3, skipped: 0, failed: 1 })
    const broken = (await listDocs(svc.url, kb)).find((d) => d.source === 'broken.pdf')!
    assert.equal(broken.status, 'failed')
    assert.ok(run.stdout.includes(broken.last_error!.slice(0, 40)), 'the indexing failure reason is in the summary')
    assert.match(run.stderr, /^indexing: 100% 4\/4 documents/m)
    // --wait returned only once the service was done: no document of the KB is still in progress.
    const counts = (await (await svc.request(`/api/kb/${kb}/docs/status`)).json()) as { doc_counts: Record<string, number> }
    assert.equal(counts.doc_counts.indexed, 3)
    assert.equal(counts.doc_counts.pending + counts.doc_counts.running, 0)
  })

  for (const signal of ['SIGINT', 'SIGKILL'] as const) {
    it(`${label}: resumes after ${signal} mid-run without uploading any file twice`, TIMEOUT, async (t) => {
      const { svc, kb, proxy, dir } = await setUpIngest(t, opts, markdownFiles('bulk/f', 30))
      const state = join(dir, 'job-state.jsonl')
      const args = ['ingest', 'bulk/*.md', '--kb', kb, '--url', proxy.url, '--concurrency', '2', '--state', state]

      proxy.holdAfter(5)
      const cli = startCli(args, { cwd: dir })
      await waitForHeld(proxy)
      cli.child.kill(signal)
      if (signal === 'SIGINT') {
        // Ctrl-C lets the uploads in flight finish: release them once the CLI has said it is stopping.
        await waitFor(async () => /stopping after the uploads in flight/.test(cli.stderr()), 'the CLI to acknowledge SIGINT')
        proxy.release()
        const stopped = await cli.exited
        assert.equal(stopped.code, 130, stopped.stderr)
        assert.match(stopped.stdout, /Interrupted: \d+ file\(s\) not attempted\. Run the same command again to resume/)
        assert.ok(summaryCounts(stopped.stdout)['not attempted'] > 0)
      } else {
        const stopped = await cli.exited
        assert.equal(stopped.signal, 'SIGKILL')
        // The uploads that were in flight reach the service after the client died: a resume must find them.
        proxy.release()
        await waitFor(async () => proxy.accepted.length >= 5 && proxy.held() === 0, 'the held uploads to land')
      }
      assert.ok(existsSync(state), 'the state file outlives the interruption')
      const before = proxy.accepted.length
      assert.ok(before >= 5 && before < 30, `some, not all, files were uploaded before the interruption (${before})`)

      const resumed = await runCli(args, { cwd: dir })
      assert.equal(resumed.code, 0, resumed.stderr)
      assert.deepEqual(duplicates(proxy.accepted), [], 'no file is uploaded twice')
      assert.equal(proxy.accepted.length, 30)
      const counts = summaryCounts(resumed.stdout)
      assert.equal(counts.uploaded + counts.skipped, 30, resumed.stdout)
      // Ctrl-C recorded every upload it let finish; after kill -9 the ones that landed unrecorded are found by etag.
      if (signal === 'SIGINT') assert.equal(counts.skipped, 0, resumed.stdout)
      else assert.ok(counts.skipped >= 1, resumed.stdout)
      assert.equal(counts.failed, 0)
      assert.equal((await listDocs(svc.url, kb)).length, 30)
      assert.ok(!existsSync(state), 'a finished job removes its state file')
    })
  }
}
