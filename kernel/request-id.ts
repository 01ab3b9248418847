// Request ids the kernel makes: `<process start in base 36>-<count in base 36>`. A made id travels as its count (a
// number) and becomes a string only when something reads it (a log line, req.id, inject); the transport writes the
// newest one's bytes, kept up to date by counting in place, so that a request answered before the next one starts
// (most) makes no string and hands uWS no string to convert.

const PREFIX = `${Date.now().toString(36)}-`

/**
 * The bytes the uWS transport writes in front of a made id when it writes a JSON answer's two headers as one value
 * (kernel/http/uws.ts): the newest id is also kept after them, so that the transport hands uWS a buffer as it is.
 */
export const JSON_THEN_REQUEST_ID = 'application/json\r\nx-request-id: '

const ZERO = 0x30
const ONE = 0x31
const NINE = 0x39
const A = 0x61
const Z = 0x7a

let count = 0

/**
 * The newest id's bytes: PREFIX and count in base 36, alone (id) and after JSON_THEN_REQUEST_ID (withLead). Each
 * ArrayBuffer is kept beside its view: reading a small Uint8Array's .buffer goes through V8's runtime every time.
 * New buffers, one byte longer, when the count gains a digit.
 */
export interface Bytes { buffer: ArrayBuffer; view: Uint8Array }
/** A string of one-byte characters as bytes in an ArrayBuffer of its own (no shared pool slab). */
export const asciiBytes = (text: string): Bytes => {
  const buffer = new ArrayBuffer(text.length)
  const view = new Uint8Array(buffer)
  for (let i = 0; i < text.length; i++) view[i] = text.charCodeAt(i)
  return { buffer, view }
}
let id = asciiBytes(`${PREFIX}0`)
let withLead = asciiBytes(`${JSON_THEN_REQUEST_ID}${PREFIX}0`)
const LEAD = JSON_THEN_REQUEST_ID.length

/** A request id: the client's (a string) or one made here (its count). */
export type RequestId = string | number

/** The next id, as its count. */
export function nextRequestId(): number {
  count++
  const alone = id.view
  const led = withLead.view
  for (let i = alone.length - 1; i >= PREFIX.length; i--) {
    const c = alone[i]
    const next = c === Z ? ZERO : c === NINE ? A : c + 1
    alone[i] = next
    led[LEAD + i] = next
    if (c !== Z) return count
  }
  // every digit was z: one digit more, 1 followed by zeros
  const digits = `${String.fromCharCode(ONE)}${'0'.repeat(alone.length - PREFIX.length)}`
  id = asciiBytes(PREFIX + digits)
  withLead = asciiBytes(JSON_THEN_REQUEST_ID + PREFIX + digits)
  return count
}

export function requestIdText(value: RequestId): string {
  return typeof value === 'string' ? value : PREFIX + value.toString(36)
}

/** What a transport writes as the x-request-id header: the newest made id's bytes (valid until the next id). */
export function requestIdBytes(value: RequestId): string | ArrayBuffer {
  return value === count ? id.buffer : requestIdText(value)
}

/** JSON_THEN_REQUEST_ID and the id's bytes when it is the newest made id (valid until the next one), else null. */
export function jsonThenRequestId(value: RequestId | undefined): ArrayBuffer | null {
  return value === count ? withLead.buffer : null
}
