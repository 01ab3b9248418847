// One benchmark in a process of its own, forked by bench/run.ts: a crash, a leaked handle or a hang stays
// here, memory from one benchmark does not weigh on the next, and the runner can stop it on a time limit.
// Protocol (IPC): the parent sends { file, options }; this answers { type: 'result', result } or
// { type: 'error', message }, then exits.
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'

export interface ChildRequest {
  /** Absolute path of the benchmark module. */
  file: string
  options: Record<string, unknown>
}

export type ChildAnswer = { type: 'result'; result: unknown } | { type: 'error'; message: string }

const send = (m: ChildAnswer) => new Promise<void>((done) => process.send!(m, () => done()))

process.once('message', (req: ChildRequest) => {
  void (async () => {
    try {
      const mod = (await import(pathToFileURL(resolve(req.file)).href)) as { run?: (o: Record<string, unknown>) => Promise<unknown> }
      if (typeof mod.run !== 'function') throw new Error(`${req.file} exports no run()`)
      const result = await mod.run(req.options)
      await send({ type: 'result', result })
      process.exit(0)
    } catch (err) {
      await send({ type: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) })
      process.exit(1)
    }
  })()
})
