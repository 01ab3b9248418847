// Argument checks shared by the queue drivers, so both refuse the same calls with the same words.

export function checkTopic(topic: string): void {
  if (typeof topic !== 'string' || topic.length === 0) throw new TypeError('queue topic must be a non-empty string')
}

export function checkDelay(delayMs: number): void {
  if (!Number.isFinite(delayMs) || delayMs < 0) throw new TypeError(`queue delayMs must be a finite number >= 0, got ${delayMs}`)
}

/** Checks an enqueue and returns its delay (whole ms) and its payload as JSON. */
export function checkEnqueue(topic: string, key: string, payload: unknown, opts: { delayMs?: number } = {}): { delayMs: number; payloadJson: string } {
  checkTopic(topic)
  if (typeof key !== 'string') throw new TypeError('queue message key must be a string')
  const delayMs = opts.delayMs ?? 0
  checkDelay(delayMs)
  // Payloads travel as JSON (journal, Redis); undefined becomes null like a JSON field would.
  const payloadJson = JSON.stringify(payload ?? null) as string | undefined
  if (payloadJson === undefined) throw new TypeError('queue payload must be JSON-serialisable')
  return { delayMs: Math.ceil(delayMs), payloadJson }
}

export function checkReserve(topic: string, max: number, leaseMs: number): void {
  checkTopic(topic)
  if (!Number.isInteger(max) || max < 1) throw new TypeError(`queue reserve max must be an integer >= 1, got ${max}`)
  if (!Number.isFinite(leaseMs) || leaseMs <= 0) throw new TypeError(`queue reserve leaseMs must be a number > 0, got ${leaseMs}`)
}
