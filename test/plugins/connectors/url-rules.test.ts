// The web connector's URL rules (notes.md "Connectors (decisions)") and robots.txt matching, as pure functions:
// the crawl tests exercise them through HTTP, these pin the edge cases.
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { parseRobots } from '../../../plugins/connectors/robots.ts'
import { fnmatch, inScope, isPagination, normaliseUrl, passesPatterns } from '../../../plugins/connectors/url.ts'

it('normalises URLs: lower-case host, no fragment, no trailing slash, tracking keys dropped, query keys sorted, scheme kept', () => {
  assert.equal(normaliseUrl('HTTP://Example.COM/Docs/?b=2&utm_source=x&a=1&fbclid=z&gclid=q&ref=home#top'), 'http://example.com/Docs?a=1&b=2')
  assert.equal(normaliseUrl('https://example.com/'), 'https://example.com')
  assert.equal(normaliseUrl('../b/', 'https://example.com/a/c/'), 'https://example.com/a/b')
  assert.equal(normaliseUrl('https://example.com/a?utm_medium=m'), 'https://example.com/a')
  assert.equal(normaliseUrl('https://user:pw@example.com/a'), 'https://example.com/a', 'credentials in a link are dropped')
  for (const bad of ['mailto:a@b.c', 'javascript:void(0)', 'ftp://example.com/x', 'not a url']) assert.equal(normaliseUrl(bad), null, bad)
})

it('scope: equal to a seed path or below it; patterns: exclude first, include narrows; pagination URLs', () => {
  const seeds = ['https://example.com/docs']
  assert.ok(inScope('https://example.com/docs', seeds))
  assert.ok(inScope('https://example.com/docs/a?x=1', seeds))
  assert.ok(!inScope('https://example.com/docsearch', seeds), 'a path that merely starts with the seed is out')
  assert.ok(!inScope('http://example.com/docs/a', seeds), 'another scheme is another site')
  assert.ok(fnmatch('https://x/a/b.html', '*/a/*.html'))
  assert.ok(fnmatch('https://x/a1', '*/a[0-9]') && !fnmatch('https://x/ab', '*/a[0-9]') && fnmatch('https://x/ab', '*/a[!0-9]'))
  assert.ok(fnmatch('https://x/a?', '*/a?') && !fnmatch('https://x/A', '*/a'), 'case-sensitive, ? matches one character')
  assert.ok(!passesPatterns('https://x/docs/private/1', ['*/docs/*'], ['*/private/*']), 'exclude wins over include')
  assert.ok(passesPatterns('https://x/docs/1', [], []))
  assert.ok(!passesPatterns('https://x/blog/1', ['*/docs/*'], []))
  assert.ok(isPagination('https://x/blog/page/3') && isPagination('https://x/list?page=2') && isPagination('https://x/list?p=7'))
  assert.ok(!isPagination('https://x/page/about') && !isPagination('https://x/list?page=last'))
})

it('robots.txt: our group over *, longest match wins, Allow on a tie, * and $ wildcards', () => {
  const r = parseRobots([
    'User-agent: *', 'Disallow: /', '',
    'User-agent: Quarry-WebConnector', 'Disallow: /private/', 'Allow: /private/open', 'Disallow: /*.pdf$', '# comment',
  ].join('\n'), 'quarry-webconnector')
  assert.ok(r.allowed('https://x/docs/a'), 'our own group replaces *')
  assert.ok(!r.allowed('https://x/private/secret'))
  assert.ok(r.allowed('https://x/private/open/file'), 'the longer Allow wins')
  assert.ok(!r.allowed('https://x/files/a.pdf') && r.allowed('https://x/files/a.pdf?download=1'))
  const star = parseRobots('User-agent: *\nDisallow: /tmp\nAllow: /tmp\n', 'quarry-webconnector')
  assert.ok(star.allowed('https://x/tmp/a'), 'Allow wins a tie')
  assert.ok(parseRobots('', 'quarry-webconnector').allowed('https://x/anything'))
})
