import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { createServer } from 'node:net'
import { describe, it, type TestContext } from 'node:test'
import { fileURLToPath } from 'node:url'
import { AppError } from '../../kernel/errors.ts'
import { BUILTIN_MODEL, createBuiltinEmbedder, embedText, embedTexts, stemAscii } from '../../adapters/embedders/builtin.ts'
import { createOllamaEmbedder, ollamaBaseUrl } from '../../adapters/embedders/ollama.ts'
import { createOpenAIEmbedder, openAIEndpoints } from '../../adapters/embedders/openai.ts'
import { createEmbedder, knownDimensions } from '../../adapters/embedders/index.ts'
import { retryAfterMs, type RetryEvent } from '../../adapters/embedders/http.ts'
import { startFakeEmbeddingServer, type FakeEmbeddingServer, type FakeEmbeddingServerOptions } from '../helpers/fake-embedding-server.ts'

const norm = (v: Float32Array) => Math.sqrt(v.reduce((a, x) => a + x * x, 0))
const cos = (a: Float32Array, b: Float32Array) => a.reduce((s, x, i) => s + x * b[i], 0) / (norm(a) * norm(b))
const closeTo = (a: Float32Array, b: Float32Array, eps = 1e-5) => {
  assert.equal(a.length, b.length)
  for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i] - b[i]) <= eps, `index ${i}: ${a[i]} vs ${b[i]}`)
}

async function rejects(p: Promise<unknown>): Promise<AppError> {
  try {
    await p
  } catch (err) {
    assert.ok(err instanceof AppError, `expected an AppError, got ${String(err)}`)
    return err
  }
  assert.fail('expected a rejection')
}

async function fakeServer(t: TestContext, opts: FakeEmbeddingServerOptions = {}): Promise<FakeEmbeddingServer> {
  const server = await startFakeEmbeddingServer(opts)
  t.after(() => server.close())
  return server
}

/** A port nothing listens on: bound, then released. */
async function deadPort(): Promise<number> {
  const srv = createServer()
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve))
  const { port } = srv.address() as { port: number }
  await new Promise<void>((resolve) => srv.close(() => resolve()))
  return port
}

const FAST = { retryBaseMs: 1, retryMaxMs: 5 }

describe('builtin embedder', () => {
  const en = 'Diffusion tensor imaging shows the microstructure of cerebral white matter in newborn infants.'
  const ko = '지방은행이 시중은행으로 전환하려면 금융위원회의 인가를 받아야 합니다.'

  it('is deterministic within a process and across embedder instances', async () => {
    const a = await createBuiltinEmbedder({ dimensions: 256 }).embed([en, ko])
    const b = await createBuiltinEmbedder({ dimensions: 256 }).embed([en, ko])
    assert.deepEqual(a, b)
    assert.deepEqual(a[0], embedText(en, 256))
  })

  it('gives the same vector in another process', () => {
    const here = fileURLToPath(new URL('../../adapters/embedders/builtin.ts', import.meta.url))
    const script = `import { embedText } from ${JSON.stringify(here)}; process.stdout.write(JSON.stringify(Array.from(embedText(${JSON.stringify(en + ' ' + ko)}, 64))))`
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' })
    assert.deepEqual(JSON.parse(out), Array.from(embedText(`${en} ${ko}`, 64)))
  })

  it('has the requested dimensions and unit length, for English and Korean', async () => {
    for (const dims of [1, 7, 768, 1024, 1536]) {
      const [e, k] = await createBuiltinEmbedder({ dimensions: dims }).embed([en, ko])
      assert.equal(e.length, dims)
      assert.equal(k.length, dims)
      assert.ok(e instanceof Float32Array && k instanceof Float32Array)
      assert.ok(Math.abs(norm(e) - 1) < 1e-5, `english norm at ${dims}: ${norm(e)}`)
      assert.ok(Math.abs(norm(k) - 1) < 1e-5, `korean norm at ${dims}: ${norm(k)}`)
    }
  })

  it('reports its name and model', () => {
    const e = createBuiltinEmbedder({ dimensions: 32 })
    assert.equal(e.name, 'builtin')
    assert.equal(e.model, BUILTIN_MODEL)
    assert.equal(e.dimensions, 32)
  })

  it('puts similar texts closer than unrelated ones (English)', () => {
    const d = 1024
    const q = embedText('Aspirin treatment reduces the risk of heart attacks in patients', d)
    const near = embedText('Patients treated with aspirin had fewer heart attacks than those given placebo', d)
    const far = embedText('The stock market fell sharply on Monday as investors sold technology shares', d)
    assert.ok(cos(q, near) > cos(q, far) + 0.1, `near ${cos(q, near)} far ${cos(q, far)}`)
  })

  it('puts similar texts closer than unrelated ones (Korean)', () => {
    const d = 1024
    const q = embedText('은행법에 따른 예비인가 신청 절차는 무엇인가요?', d)
    const near = embedText('예비인가를 신청하려는 은행은 은행법이 정한 절차에 따라 금융위원회에 신청한다.', d)
    const far = embedText('오늘 서울의 날씨는 맑고 오후에는 기온이 크게 오르겠습니다.', d)
    assert.ok(cos(q, near) > cos(q, far) + 0.1, `near ${cos(q, near)} far ${cos(q, far)}`)
  })

  it('matches inflected forms and spelling variants', () => {
    const d = 1024
    const a = embedText('clinical trials of vaccines', d)
    const b = embedText('a clinical trial of a vaccine', d)
    const c = embedText('weather forecast for tomorrow', d)
    assert.ok(cos(a, b) > 0.5, `inflected ${cos(a, b)}`)
    assert.ok(cos(a, b) > cos(a, c) + 0.3)
    // NFKC: fullwidth letters are the ASCII ones.
    assert.deepEqual(embedText('ＣＲＩＳＰＲ gene editing', d), embedText('CRISPR gene editing', d))
  })

  it('stems English inflections onto one form', () => {
    const stem = (w: string) => {
      const b = new Uint16Array(w.length + 2)
      for (let i = 0; i < w.length; i++) b[i + 1] = w.charCodeAt(i)
      return String.fromCharCode(...b.subarray(1, stemAscii(b, w.length) + 1))
    }
    assert.equal(stem('studies'), stem('study'))
    assert.equal(stem('treated'), stem('treating'))
    assert.equal(stem('cells'), stem('cell'))
    assert.equal(stem('stopped'), stem('stop'))
    assert.equal(stem('virus'), 'virus')
    assert.equal(stem('analysis'), 'analysis')
  })

  it('handles empty and feature-less text with a zero vector', async () => {
    const e = createBuiltinEmbedder({ dimensions: 8 })
    const [empty, punct] = await e.embed(['', ' ... !!! ---'])
    assert.deepEqual(Array.from(empty), new Array(8).fill(0))
    assert.deepEqual(Array.from(punct), new Array(8).fill(0))
    assert.deepEqual(await e.embed([]), [])
    // only stop words: nothing topical, still no NaN
    const [stop] = await e.embed(['the of and'])
    assert.ok(Array.from(stop).every((x) => Number.isFinite(x)))
  })

  it('embedTexts writes each row like embedText, into a reused buffer', () => {
    const texts = ['alpha beta', '감마 델타', '', 'epsilon 123.5']
    const buf = new Float32Array(texts.length * 32 + 5).fill(9)
    const out = embedTexts(texts, 32, buf)
    assert.equal(out, buf)
    texts.forEach((t, i) => assert.deepEqual(out.subarray(i * 32, (i + 1) * 32), embedText(t, 32)))
    assert.equal(embedTexts(texts, 32).length, texts.length * 32)
  })

  it('returns independent arrays and rejects bad dimensions and aborted calls', async () => {
    const e = createBuiltinEmbedder({ dimensions: 16 })
    const [a, b] = await e.embed(['one text', 'another text'])
    assert.notEqual(a.buffer, b.buffer)
    assert.throws(() => createBuiltinEmbedder({ dimensions: 0 }), RangeError)
    assert.throws(() => embedText('x', 2.5), RangeError)
    await assert.rejects(e.embed(['x'], { signal: AbortSignal.abort() }), { name: 'AbortError' })
    assert.equal(await e.ping(), true)
  })
})

describe('ollama embedder (local)', () => {
  it('POSTs {model, input} to /api/embed and returns normalised vectors in order across batches', async (t) => {
    const server = await fakeServer(t)
    const e = createOllamaEmbedder({ url: server.url, model: 'bge-m3', dimensions: 16, batchSize: 3 })
    assert.equal(e.name, 'local')
    const texts = Array.from({ length: 10 }, (_, i) => `text number ${i} about topic ${i * 7}`)
    const vectors = await e.embed(texts)
    assert.equal(vectors.length, 10)
    vectors.forEach((v, i) => {
      assert.ok(v instanceof Float32Array)
      closeTo(v, embedText(texts[i], 16))
    })
    const reqs = server.embedRequests()
    assert.deepEqual(reqs.map((r) => r.path), ['/api/embed', '/api/embed', '/api/embed', '/api/embed'])
    assert.deepEqual(reqs.map((r) => (r.body as { input: string[] }).input), [texts.slice(0, 3), texts.slice(3, 6), texts.slice(6, 9), texts.slice(9)])
    assert.deepEqual(Object.keys(reqs[0].body as object).sort(), ['input', 'model'])
    assert.equal((reqs[0].body as { model: string }).model, 'bge-m3')
    assert.equal(reqs[0].headers['content-type'], 'application/json')
    assert.equal(reqs[0].headers.authorization, undefined)
  })

  it('sends a bearer key when one is set, and makes no request for no texts', async (t) => {
    const server = await fakeServer(t, { requireKey: 'ollama-key-1' })
    const e = createOllamaEmbedder({ url: `${server.url}/`, model: 'm', dimensions: 16, apiKey: 'ollama-key-1' })
    assert.deepEqual(await e.embed([]), [])
    assert.equal(server.requests.length, 0)
    await e.embed(['hello'])
    assert.equal(server.embedRequests()[0].headers.authorization, 'Bearer ollama-key-1')
  })

  it('retries 5xx and then succeeds', async (t) => {
    const server = await fakeServer(t)
    server.fail({ status: 500 }, 2)
    const retries: RetryEvent[] = []
    const e = createOllamaEmbedder({ url: server.url, model: 'm', dimensions: 16, ...FAST, onRetry: (r) => retries.push(r) })
    const [v] = await e.embed(['retry me'])
    closeTo(v, embedText('retry me', 16))
    assert.equal(server.embedRequests().length, 3)
    assert.deepEqual(retries.map((r) => r.status), [500, 500])
  })

  it('gives up after maxRetries with 503 and the provider message', async (t) => {
    const server = await fakeServer(t)
    server.setDefault({ status: 502, message: 'upstream model crashed' })
    const e = createOllamaEmbedder({ url: server.url, model: 'm', dimensions: 16, maxRetries: 2, ...FAST })
    const err = await rejects(e.embed(['x']))
    assert.equal(err.status, 503)
    assert.equal(err.code, 'SERVICE_UNAVAILABLE')
    assert.match(err.message, /502/)
    assert.match(err.message, /upstream model crashed/)
    assert.match(err.message, /3 attempts/)
    assert.ok(err.message.includes(`${server.url}/api/embed`), err.message)
    assert.equal(server.embedRequests().length, 3)
  })

  it('does not retry another 4xx: 500 EMBEDDING_FAILED with the provider message', async (t) => {
    const server = await fakeServer(t)
    server.fail({ status: 404, message: 'model "nope" not found, try pulling it first' })
    const e = createOllamaEmbedder({ url: server.url, model: 'nope', dimensions: 16, ...FAST })
    const err = await rejects(e.embed(['x']))
    assert.equal(err.status, 500)
    assert.equal(err.code, 'EMBEDDING_FAILED')
    assert.match(err.message, /model "nope" not found, try pulling it first/)
    assert.match(err.message, /404/)
    assert.equal(server.embedRequests().length, 1)
  })

  it('reports a dimension mismatch without retrying', async (t) => {
    const server = await fakeServer(t)
    server.setDefault({ dimensions: 12 })
    const e = createOllamaEmbedder({ url: server.url, model: 'nomic-embed-text', dimensions: 16, ...FAST })
    const err = await rejects(e.embed(['x']))
    assert.equal(err.status, 500)
    assert.equal(err.code, 'EMBEDDING_DIMENSION_MISMATCH')
    assert.equal(err.message, "embedding model 'nomic-embed-text' returned vectors of 12 dimensions, but embedding.vector_size is 16")
    assert.equal(server.embedRequests().length, 1)
  })

  it('reports malformed JSON as EMBEDDING_FAILED', async (t) => {
    const server = await fakeServer(t)
    server.fail({ malformed: true })
    const e = createOllamaEmbedder({ url: server.url, model: 'm', dimensions: 16, ...FAST })
    const err = await rejects(e.embed(['x']))
    assert.equal(err.code, 'EMBEDDING_FAILED')
    assert.match(err.message, /malformed JSON/)
  })

  it('times out each attempt with a clear 503', async (t) => {
    const server = await fakeServer(t)
    server.setDefault({ delayMs: 10_000 })
    const retries: RetryEvent[] = []
    const e = createOllamaEmbedder({ url: server.url, model: 'm', dimensions: 16, timeoutMs: 100, maxRetries: 1, ...FAST, onRetry: (r) => retries.push(r) })
    const err = await rejects(e.embed(['slow']))
    assert.equal(err.status, 503)
    assert.match(err.message, /timed out after 100 ms/)
    assert.match(err.message, /2 attempts/)
    assert.deepEqual(retries.map((r) => r.reason), ['timeout'])
    assert.equal(server.embedRequests().length, 2)
  })

  it('retries a closed socket, and names the URL when the server is unreachable', async (t) => {
    const server = await fakeServer(t)
    server.fail({ close: true })
    const e = createOllamaEmbedder({ url: server.url, model: 'm', dimensions: 16, ...FAST })
    const [v] = await e.embed(['after a reset'])
    closeTo(v, embedText('after a reset', 16))
    assert.equal(server.embedRequests().length, 2)

    const port = await deadPort()
    const dead = createOllamaEmbedder({ url: `127.0.0.1:${port}`, model: 'm', dimensions: 16, maxRetries: 1, ...FAST })
    const err = await rejects(dead.embed(['x']))
    assert.equal(err.status, 503)
    assert.equal(err.code, 'SERVICE_UNAVAILABLE')
    assert.ok(err.message.includes(`http://127.0.0.1:${port}/api/embed`), err.message)
    assert.match(err.message, /unreachable/)
    assert.match(err.message, /ECONNREFUSED/)
  })

  it('stops at once when the caller aborts', async (t) => {
    const server = await fakeServer(t)
    server.setDefault({ delayMs: 10_000 })
    const e = createOllamaEmbedder({ url: server.url, model: 'm', dimensions: 16, ...FAST })
    const ctl = new AbortController()
    const p = e.embed(['x'], { signal: ctl.signal })
    setTimeout(() => ctl.abort(), 50)
    await assert.rejects(p, { name: 'AbortError' })
    assert.equal(server.embedRequests().length, 1)
  })

  it('ping: /v1/models, /api/tags when the listing is absent, false otherwise', async (t) => {
    const server = await fakeServer(t)
    const e = createOllamaEmbedder({ url: server.url, model: 'm', dimensions: 16 })
    assert.equal(await e.ping(), true)
    assert.deepEqual(server.requests.map((r) => `${r.method} ${r.path}`), ['GET /v1/models'])
    server.setModelsStatus(404)
    assert.equal(await e.ping(), true)
    assert.deepEqual(server.requests.slice(1).map((r) => r.path), ['/v1/models', '/api/tags'])
    server.setModelsStatus(500)
    assert.equal(await e.ping(), false)
    const port = await deadPort()
    assert.equal(await createOllamaEmbedder({ url: `http://127.0.0.1:${port}`, model: 'm', dimensions: 16 }).ping(), false)
  })

  it('close(): ends a call in flight, and no more calls', async (t) => {
    const server = await fakeServer(t)
    server.fail({ delayMs: 10_000 })
    const busy = createOllamaEmbedder({ url: server.url, model: 'm', dimensions: 16, ...FAST })
    const inFlight = rejects(busy.embed(['x']))
    setTimeout(() => void busy.close(), 50)
    const stopped = await inFlight
    assert.equal(stopped.status, 503)
    assert.match(stopped.message, /closed/)
    assert.equal(server.embedRequests().length, 1)

    server.requests.length = 0
    const e = createOllamaEmbedder({ url: server.url, model: 'm', dimensions: 16 })
    await e.close()
    const err = await rejects(e.embed(['x']))
    assert.equal(err.status, 503)
    assert.equal(await e.ping(), false)
    assert.equal(server.requests.length, 0)
  })

  it('reads provider.url as a bare host', () => {
    assert.equal(ollamaBaseUrl('').href, 'http://localhost:11434/')
    assert.equal(ollamaBaseUrl('gpu-box:11434').href, 'http://gpu-box:11434/')
    assert.equal(ollamaBaseUrl('http://h:11434/').href, 'http://h:11434/')
    assert.equal(ollamaBaseUrl('http://h:11434/v1').href, 'http://h:11434/')
    assert.equal(ollamaBaseUrl('http://h:11434/api/embed').href, 'http://h:11434/')
    assert.equal(ollamaBaseUrl('https://proxy/ollama/').href, 'https://proxy/ollama')
    assert.throws(() => ollamaBaseUrl('ftp://h'), (e: AppError) => e.code === 'EMBEDDING_CONFIG')
  })
})

describe('openai-compatible embedder (hosted and others)', () => {
  it('hosted: POSTs {model, input, encoding_format} to /v1/embeddings with the bearer key', async (t) => {
    const server = await fakeServer(t, { requireKey: 'sk-test-1' })
    const e = createOpenAIEmbedder({ url: server.url, apiKey: 'sk-test-1', model: 'text-embedding-3-small', dimensions: 16 })
    assert.equal(e.name, 'hosted')
    const texts = ['first', 'second text', '세 번째']
    const vectors = await e.embed(texts)
    vectors.forEach((v, i) => closeTo(v, embedText(texts[i], 16)))
    const [req] = server.embedRequests()
    assert.equal(req.path, '/v1/embeddings')
    assert.equal(req.headers.authorization, 'Bearer sk-test-1')
    assert.deepEqual(req.body, { model: 'text-embedding-3-small', input: texts, encoding_format: 'float' })
    assert.equal(await e.ping(), true)
    assert.equal(server.requests.at(-1)?.path, '/v1/models')
  })

  it('orders by index, across batches', async (t) => {
    const server = await fakeServer(t, { shuffle: true })
    const e = createOpenAIEmbedder({ url: `${server.url}/v1`, model: 'm', dimensions: 16, batchSize: 4 })
    const texts = Array.from({ length: 9 }, (_, i) => `document ${i} on subject ${String.fromCharCode(97 + i)}`)
    const vectors = await e.embed(texts)
    vectors.forEach((v, i) => closeTo(v, embedText(texts[i], 16)))
    assert.deepEqual(server.embedRequests().map((r) => (r.body as { input: string[] }).input.length), [4, 4, 1])
    assert.equal(server.embedRequests()[0].headers.authorization, undefined)
  })

  it('another name: the full URL including the version prefix', async (t) => {
    const server = await fakeServer(t)
    const e = createOpenAIEmbedder({ name: 'myvllm', url: `${server.url}/compat/v2`, model: 'm', dimensions: 16 })
    assert.equal(e.name, 'myvllm')
    await e.embed(['x'])
    assert.equal(server.embedRequests()[0].path, '/compat/v2/embeddings')
    assert.equal(await e.ping(), true)
    assert.equal(server.requests.at(-1)?.path, '/compat/v2/models')
  })

  it('forms endpoint URLs by the documented rule', () => {
    const ep = (name: string, url: string) => {
      const { embeddings, models } = openAIEndpoints(name, url)
      return [embeddings.href, models.href]
    }
    assert.deepEqual(ep('hosted', ''), ['https://api.openai.com/v1/embeddings', 'https://api.openai.com/v1/models'])
    assert.deepEqual(ep('hosted', 'https://gw.example/'), ['https://gw.example/v1/embeddings', 'https://gw.example/v1/models'])
    assert.deepEqual(ep('hosted', 'https://gw.example/v1/'), ['https://gw.example/v1/embeddings', 'https://gw.example/v1/models'])
    assert.deepEqual(ep('hosted', 'https://gw.example/openai'), ['https://gw.example/openai/v1/embeddings', 'https://gw.example/openai/v1/models'])
    assert.deepEqual(ep('other', 'https://gw.example/api/v1'), ['https://gw.example/api/v1/embeddings', 'https://gw.example/api/v1/models'])
    assert.deepEqual(ep('other', 'https://gw.example/x/embeddings'), ['https://gw.example/x/embeddings', 'https://gw.example/x/models'])
    assert.deepEqual(ep('other', 'https://gw.example'), ['https://gw.example/v1/embeddings', 'https://gw.example/v1/models'])
    assert.deepEqual(ep('other', 'https://gw.example/v1?api-version=2'), ['https://gw.example/v1/embeddings?api-version=2', 'https://gw.example/v1/models?api-version=2'])
    assert.throws(() => openAIEndpoints('other', ''), (e: AppError) => e.code === 'EMBEDDING_CONFIG' && /provider\.url is required/.test(e.message))
    assert.throws(() => openAIEndpoints('hosted', 'not a url'), (e: AppError) => e.code === 'EMBEDDING_CONFIG')
  })

  it('retries 429, honouring Retry-After', { timeout: 20_000 }, async (t) => {
    const server = await fakeServer(t)
    server.fail({ status: 429, retryAfter: '0' }, 2)
    const retries: RetryEvent[] = []
    // A backoff of a minute would hang the test: only Retry-After: 0 lets it finish.
    const e = createOpenAIEmbedder({ url: server.url, model: 'm', dimensions: 16, retryBaseMs: 60_000, retryMaxMs: 60_000, onRetry: (r) => retries.push(r) })
    const [v] = await e.embed(['rate limited'])
    closeTo(v, embedText('rate limited', 16))
    assert.equal(server.embedRequests().length, 3)
    assert.deepEqual(retries.map((r) => [r.status, r.delayMs]), [[429, 0], [429, 0]])
  })

  it('a Retry-After beyond the limit ends the retries with 503 carrying it', async (t) => {
    const server = await fakeServer(t)
    server.setDefault({ status: 429, retryAfter: '3600', message: 'Rate limit reached for requests' })
    const e = createOpenAIEmbedder({ url: server.url, model: 'm', dimensions: 16, ...FAST })
    const err = await rejects(e.embed(['x']))
    assert.equal(err.status, 503)
    assert.equal(err.headers?.['Retry-After'], '3600')
    assert.match(err.message, /Rate limit reached/)
    assert.equal(server.embedRequests().length, 1)
  })

  it('gives up on persistent 429 after maxRetries', async (t) => {
    const server = await fakeServer(t)
    server.setDefault({ status: 429 })
    const e = createOpenAIEmbedder({ url: server.url, model: 'm', dimensions: 16, maxRetries: 3, ...FAST })
    const err = await rejects(e.embed(['x']))
    assert.equal(err.status, 503)
    assert.match(err.message, /429/)
    assert.equal(server.embedRequests().length, 4)
  })

  it('never puts the api key in an error message', async (t) => {
    const key = 'sk-SECRET-abcdef123456'
    const server = await fakeServer(t, { requireKey: 'the-right-key' })
    const e = createOpenAIEmbedder({ url: server.url, apiKey: key, model: 'm', dimensions: 16, ...FAST })
    const err = await rejects(e.embed(['x']))
    assert.equal(err.status, 500)
    assert.equal(err.code, 'EMBEDDING_FAILED')
    assert.match(err.message, /401/)
    assert.match(err.message, /Incorrect API key provided/)
    assert.ok(!err.message.includes(key), err.message)
    assert.equal(await e.ping(), false)

    const port = await deadPort()
    const dead = createOpenAIEmbedder({ url: `http://127.0.0.1:${port}`, apiKey: key, model: 'm', dimensions: 16, maxRetries: 0 })
    const err2 = await rejects(dead.embed(['x']))
    assert.equal(err2.status, 503)
    assert.ok(!err2.message.includes(key), err2.message)
    assert.ok(!String((err2.cause as Error | undefined)?.message ?? '').includes(key))
  })

  it('credentials in the URL become a header and never show in messages', async (t) => {
    const server = await fakeServer(t)
    server.fail({ status: 400, message: 'bad input' })
    const url = server.url.replace('http://', 'http://user:pa55word@')
    const e = createOpenAIEmbedder({ name: 'proxy', url: `${url}/v1`, model: 'm', dimensions: 16 })
    const err = await rejects(e.embed(['x']))
    assert.equal(err.code, 'EMBEDDING_FAILED')
    assert.ok(!err.message.includes('pa55word'), err.message)
    assert.equal(server.embedRequests()[0].headers.authorization, `Basic ${Buffer.from('user:pa55word').toString('base64')}`)
  })

  it('rejects an answer with a vector missing or of the wrong size', async (t) => {
    const server = await fakeServer(t, { dimensions: 16 })
    server.fail({ count: 1 })
    server.fail({ dimensions: 17 })
    const e = createOpenAIEmbedder({ url: server.url, model: 'text-embedding-3-small', dimensions: 16, ...FAST })
    const missing = await rejects(e.embed(['a', 'b']))
    assert.equal(missing.code, 'EMBEDDING_FAILED')
    assert.match(missing.message, /1 embeddings for 2 inputs/)
    const wrong = await rejects(e.embed(['a', 'b']))
    assert.equal(wrong.code, 'EMBEDDING_DIMENSION_MISMATCH')
    assert.equal(wrong.message, "embedding model 'text-embedding-3-small' returned vectors of 17 dimensions, but embedding.vector_size is 16")
    assert.equal(server.embedRequests().length, 2)
  })
})

describe('createEmbedder', () => {
  it('chooses the driver by provider.name with per-family default models', async (t) => {
    const server = await fakeServer(t, { dimensions: 1024 })
    const builtin = createEmbedder({ name: 'builtin', model: '', dimensions: 64 })
    assert.deepEqual([builtin.name, builtin.model, builtin.dimensions], ['builtin', 'quarry-hash-v1', 64])

    const local = createEmbedder({ name: 'local', url: server.url, model: '', dimensions: 1024 }, FAST)
    assert.deepEqual([local.name, local.model], ['local', 'bge-m3'])
    await local.embed(['x'])
    assert.equal(server.embedRequests().at(-1)?.path, '/api/embed')

    const hosted = createEmbedder({ name: 'hosted', url: server.url, model: '', dimensions: 1536 })
    assert.deepEqual([hosted.name, hosted.model], ['hosted', 'text-embedding-3-small'])

    const other = createEmbedder({ name: 'acme', url: `${server.url}/v1`, model: 'acme-embed', dimensions: 1024 })
    assert.equal(other.name, 'acme')
    await other.embed(['x'])
    assert.equal(server.embedRequests().at(-1)?.path, '/v1/embeddings')
  })

  it('takes ollama and openai as aliases of local and hosted, keeping the name given', async (t) => {
    const server = await fakeServer(t, { dimensions: 1024 })
    const ollama = createEmbedder({ name: 'ollama', url: server.url, model: '', dimensions: 1024 }, FAST)
    assert.deepEqual([ollama.name, ollama.model], ['ollama', 'bge-m3'])
    await ollama.embed(['x'])
    assert.deepEqual([server.embedRequests().at(-1)?.path, (server.embedRequests().at(-1)?.body as { model: string }).model], ['/api/embed', 'bge-m3'])

    const wide = await fakeServer(t, { dimensions: 1536 })
    const openai = createEmbedder({ name: 'openai', url: wide.url, model: '', dimensions: 1536 }, FAST)
    assert.deepEqual([openai.name, openai.model], ['openai', 'text-embedding-3-small'])
    await openai.embed(['x'])
    assert.deepEqual([wide.embedRequests().at(-1)?.path, (wide.embedRequests().at(-1)?.body as { model: string }).model], ['/v1/embeddings', 'text-embedding-3-small'])
    const { embeddings } = openAIEndpoints('openai', '')
    assert.equal(embeddings.href, 'https://api.openai.com/v1/embeddings', 'openai needs no URL, as hosted')
    assert.throws(() => createEmbedder({ name: 'openai', model: '', dimensions: 1024 }), (e: AppError) => /set embedding\.vector_size to 1536/.test(e.message))
  })

  it('fails on a vector size that does not fit a known model', () => {
    const bad = (fn: () => unknown, re: RegExp) => assert.throws(fn, (e: AppError) => e.code === 'EMBEDDING_CONFIG' && re.test(e.message))
    bad(() => createEmbedder({ name: 'local', model: 'bge-m3:latest', dimensions: 768 }), /'bge-m3:latest' produces 1024/)
    bad(() => createEmbedder({ name: 'hosted', model: '', dimensions: 1024 }), /set embedding\.vector_size to 1536/)
    bad(() => createEmbedder({ name: 'builtin', model: 'bge-m3', dimensions: 1024 }), /only model is 'quarry-hash-v1'/)
    assert.equal(knownDimensions('BAAI/bge-m3'), 1024)
    assert.equal(knownDimensions('nomic-embed-text:v1.5'), 768)
    assert.equal(knownDimensions('my-own-model'), undefined)
    // an unknown model is accepted; its first answer is checked instead
    assert.equal(createEmbedder({ name: 'local', model: 'my-own-model', dimensions: 300 }).dimensions, 300)
  })
})

describe('Retry-After parsing', () => {
  it('reads seconds, an HTTP date and retry-after-ms', () => {
    const now = Date.parse('2025-01-01T00:00:00Z')
    assert.equal(retryAfterMs(new Headers({ 'retry-after': '2' }), now), 2000)
    assert.equal(retryAfterMs(new Headers({ 'retry-after': 'Wed, 01 Jan 2025 00:00:05 GMT' }), now), 5000)
    assert.equal(retryAfterMs(new Headers({ 'retry-after-ms': '250', 'retry-after': '9' }), now), 250)
    assert.equal(retryAfterMs(new Headers({ 'retry-after': 'soon' }), now), undefined)
    assert.equal(retryAfterMs(new Headers(), now), undefined)
  })
})
