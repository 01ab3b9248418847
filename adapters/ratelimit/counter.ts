// The rate limiter's counter store ([ENT], spec 8): fixed-window counters keyed by rule and user. Redis with the
// services (shared by every process), in process with the embedded engines.

export interface WindowCount {
  /** The window's total, this hit included. */
  count: number
  /** Milliseconds left in the window. */
  ttlMs: number
}

export interface RateCounter {
  readonly name: 'memory' | 'redis'
  /**
   * Adds `weight` to the counter `key`; a counter that does not exist (or whose window ended) starts a window of
   * `windowMs`. One atomic step. Throws when the store cannot be reached (the caller fails open).
   */
  hit(key: string, weight: number, windowMs: number): Promise<WindowCount>
  close(): Promise<void>
}
