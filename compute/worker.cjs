// The compute pool's worker entry as Piscina loads it. Piscina require()s its entry before it tries import(),
// and on Node 20.19+ require() of an ES module once aborted a whole process as a pool worker started (a
// native assertion, ModuleWrap::CreateRequiredModuleFacade, in CI). This entry is CommonJS, so require() takes
// no such path; the real entry (worker.mjs) is loaded by import(), started here so that it is ready by the
// first task.
'use strict'

const entry = import('./worker.mjs')
// A failed load is reported by every task (below), not as an unhandled rejection of the thread.
entry.catch(() => {})

module.exports = async function runTask(message) {
  return (await entry).default(message)
}
