// Request ids the kernel makes: `<process start in base 36>-<count in base 36>`. A made id travels as its count (a
// number) and becomes a string only when something reads it (a log line, req.id, inject); the transport writes the
// newest one's bytes, kept up to date by counting in place, so that a request answered before the next one starts
// (most) makes no string and hands uWS no string to convert.

const PREFIX = `${Date.now().toString(36)}-`
const DIGITS = '0123456789abcdefghijklmnopqrstuvwxyz'

let count = 0
/**
 * PREFIX and count in base 36, as ASCII bytes; a new buffer (one longer) when the count gains a digit. The
 * ArrayBuffer is kept beside its view: reading a small Uint8Array's .buffer goes through V8's runtime every time.
 */
let currentBuffer = new ArrayBuffer(PREFIX.length + 1)
let current = new Uint8Array(currentBuffer)
for (let i = 0; i < PREFIX.length; i++) current[i] = PREFIX.charCodeAt(i)
current[PREFIX.length] = 0x30

const ZERO = 0x30
const NINE = 0x39
const A = 0x61
const Z = 0x7a

/** A request id: the client's (a string) or one made here (its count). */
export type RequestId = string | number

/** The next id, as its count. */
export function nextRequestId(): number {
  count++
  const bytes = current
  for (let i = bytes.length - 1; i >= PREFIX.length; i--) {
    const c = bytes[i]
    if (c === Z) {
      bytes[i] = ZERO
      continue
    }
    bytes[i] = c === NINE ? A : c + 1
    return count
  }
  // every digit was z: one digit more, 1 followed by zeros
  currentBuffer = new ArrayBuffer(bytes.length + 1)
  const longer = new Uint8Array(currentBuffer)
  longer.set(bytes.subarray(0, PREFIX.length))
  longer.fill(ZERO, PREFIX.length)
  longer[PREFIX.length] = DIGITS.charCodeAt(1)
  current = longer
  return count
}

export function requestIdText(id: RequestId): string {
  return typeof id === 'string' ? id : PREFIX + id.toString(36)
}

/** What a transport writes as the x-request-id header: the newest made id's bytes (valid until the next id). */
export function requestIdBytes(id: RequestId): string | ArrayBuffer {
  return id === count ? currentBuffer : requestIdText(id)
}
