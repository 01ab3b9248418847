// Recursive chunking throughput against LangChain's RecursiveCharacterTextSplitter, same chunk size and
// overlap, on the same deterministic English + Korean prose.
//
//   npx tsx bench/chunk.bench.ts            5 MB, 5 rounds
//   npx tsx bench/chunk.bench.ts --quick    1 MB, 3 rounds
import os from 'node:os'
import { pathToFileURL } from 'node:url'
import { chunkDocument } from '../compute/chunk/index.ts'
import type { ChunkingOptions } from '../compute/types.ts'
import { mulberry32 } from './lib/rng.ts'

const EN = ('the of retrieval service document chunk search vector index query model result system data text user ' +
  'knowledge base embedding sparse dense hybrid score rank page section paragraph sentence word language korean ' +
  'english storage queue worker connector settings option value process pipeline quality speed benchmark test ' +
  'reliable careful simple large small fast slow new old first last every each many few some other').split(' ')
const KO = ('검색 문서 서비스 데이터 사용자 시스템 결과 모델 벡터 색인 질문 답변 지식 기반 설정 작업 처리 방법 성능 품질 ' +
  '속도 한국어 영어 문장 단락 페이지 저장소 연결 오늘 내일 사람 회사 정부 경제 사회 문화 기술 연구 개발 교육').split(' ')
const KO_PARTICLES = ['은', '는', '이', '가', '을', '를', '에서', '으로', '와', '의', '도', '']
const KO_ENDINGS = ['한다.', '했다.', '있다.', '합니다.', '해요.', '인가요?', '할까?', '입니다.', '되었다.', '하지만', '하고', '했으며']


/** Deterministic prose: paragraphs of 3-8 sentences, alternating English and Korean, some list lines. */
export function generateProse(chars: number, seed = 42): string {
  const rnd = mulberry32(seed)
  const pick = <T>(a: readonly T[]) => a[Math.floor(rnd() * a.length)]
  const parts: string[] = []
  let size = 0
  let korean = false
  while (size < chars) {
    const sentences: string[] = []
    const count = 3 + Math.floor(rnd() * 6)
    for (let s = 0; s < count; s++) {
      const words: string[] = []
      const len = 6 + Math.floor(rnd() * 15)
      if (korean) {
        for (let w = 0; w < len - 1; w++) words.push(pick(KO) + pick(KO_PARTICLES) + (rnd() < 0.08 ? ',' : ''))
        const end = pick(KO_ENDINGS)
        words.push(pick(KO) + (end.endsWith('.') || end.endsWith('?') ? end : end + '.'))
      } else {
        for (let w = 0; w < len; w++) words.push(pick(EN) + (w > 0 && w < len - 1 && rnd() < 0.07 ? ',' : ''))
        words[0] = words[0][0].toUpperCase() + words[0].slice(1)
        words[len - 1] += rnd() < 0.85 ? '.' : rnd() < 0.5 ? '?' : '!'
      }
      sentences.push(words.join(' '))
    }
    const para = rnd() < 0.1 ? sentences.map((s) => `- ${s}`).join('\n') : sentences.join(' ')
    parts.push(para)
    size += para.length + 2
    korean = !korean
  }
  return parts.join('\n\n').slice(0, chars)
}

function machine() {
  return { cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.cpus().length, node: process.version }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

export async function run(opts: { quick: boolean; bytes?: number; rounds?: number }): Promise<Record<string, unknown>> {
  const { RecursiveCharacterTextSplitter } = await import('@langchain/textsplitters')
  const bytes = opts.bytes ?? (opts.quick ? 1_000_000 : 5_000_000)
  const rounds = opts.rounds ?? (opts.quick ? 3 : 5)
  const chunkSize = 1024
  const chunkOverlap = 128
  const text = generateProse(bytes)
  const mb = Buffer.byteLength(text, 'utf8') / 1e6
  const options: ChunkingOptions = { strategy: 'recursive', chunk_size: chunkSize, chunk_overlap: chunkOverlap, min_chunk_chars: 0, semantic_threshold: 0.8, code_max_chars: 1500 }
  const pages = [{ page_num: 1, page_label: '1', text }]
  const splitter = new RecursiveCharacterTextSplitter({ chunkSize, chunkOverlap })

  const ours = () => chunkDocument(pages, options).chunks.length
  const theirs = async () => (await splitter.splitText(text)).length
  // warm-up (JIT and the lazy character-class tables)
  const ourCount = ours()
  const theirCount = await theirs()
  ours()
  await theirs()
  const tOurs: number[] = []
  const tTheirs: number[] = []
  for (let r = 0; r < rounds; r++) {
    let t = performance.now()
    ours()
    tOurs.push(performance.now() - t)
    t = performance.now()
    await theirs()
    tTheirs.push(performance.now() - t)
  }
  const oursMBs = mb / (median(tOurs) / 1000)
  const theirsMBs = mb / (median(tTheirs) / 1000)
  const result = {
    machine: machine(),
    text: { chars: text.length, mb: Number(mb.toFixed(2)) },
    chunkSize,
    chunkOverlap,
    rounds,
    quarry: { mbPerSec: Number(oursMBs.toFixed(1)), medianMs: Number(median(tOurs).toFixed(1)), chunks: ourCount },
    langchain: { mbPerSec: Number(theirsMBs.toFixed(1)), medianMs: Number(median(tTheirs).toFixed(1)), chunks: theirCount },
    ratio: Number((oursMBs / theirsMBs).toFixed(2)),
  }
  console.log(`machine: ${result.machine.cpu}, ${result.machine.cores} cores, Node ${result.machine.node}`)
  console.log(`text: ${text.length} chars (${mb.toFixed(2)} MB UTF-8), chunk_size ${chunkSize}, overlap ${chunkOverlap}, ${rounds} rounds (median)`)
  console.log(`quarry recursive:          ${oursMBs.toFixed(1)} MB/s (${ourCount} chunks)`)
  console.log(`langchain RecursiveCharacterTextSplitter: ${theirsMBs.toFixed(1)} MB/s (${theirCount} chunks)`)
  console.log(`ratio: ${result.ratio}x`)
  return result
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await run({ quick: process.argv.includes('--quick') })
}
