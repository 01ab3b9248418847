// A plain worker thread (no pool) running the parse benchmark's direct pdf.js loop for a set time: N of these
// at once show how far this machine lets N threads of that work go, beside which the pool's figures are read.
// Plain ESM that registers tsx itself, as compute/worker.mjs does.
import { parentPort, workerData } from 'node:worker_threads'
import { register } from 'tsx/esm/api'

register()
const { directPdfjs } = await import('./pdfjs-direct.ts')
const { pdfs, warmups, seconds } = workerData
for (let i = 0; i < warmups; i++) await directPdfjs(pdfs)
parentPort.postMessage({ ready: true })
parentPort.once('message', async () => {
  const t0 = performance.now()
  let pages = 0
  while (performance.now() - t0 < seconds * 1000) pages += await directPdfjs(pdfs)
  parentPort.postMessage({ pagesPerSec: pages / ((performance.now() - t0) / 1000) })
})
