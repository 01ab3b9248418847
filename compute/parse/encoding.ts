// Text decoding for txt, md, rst and html: BOM, UTF-16 without BOM (NUL pattern), UTF-8, an HTML-declared
// charset, then CP949/EUC-KR. Anything else is refused with a message saying why, rather than indexed as
// mojibake.
import { decodeCp949 } from './cp949.ts'
import { ParseCode, parseError } from './errors.ts'

export interface DecodedText {
  text: string
  /** WHATWG name of what was used ('utf-8', 'utf-16le', 'utf-16be', 'euc-kr', ...). */
  encoding: string
}

const KOREAN_LABELS = new Set(['euc-kr', 'cp949', 'uhc', 'windows-949', 'ks_c_5601-1987', 'ks_c_5601-1989', 'ksc5601', 'ksc_5601', 'korean', 'csksc56011987', 'iso-ir-149', 'x-windows-949', 'ms949'])

function decodeStrict(bytes: Uint8Array, label: string): string | null {
  try {
    return new TextDecoder(label, { fatal: true }).decode(bytes)
  } catch {
    return null
  }
}

/** 'le' / 'be' when the NUL bytes sit on one side of the code units, as in mostly-ASCII UTF-16. */
function utf16ByNulPattern(bytes: Uint8Array): 'le' | 'be' | null {
  const n = Math.min(bytes.length, 4096) >> 1
  if (n < 2) return null
  let even = 0
  let odd = 0
  for (let i = 0; i < n; i++) {
    if (bytes[2 * i] === 0) even++
    if (bytes[2 * i + 1] === 0) odd++
  }
  if (odd / n > 0.2 && even <= odd * 0.2) return 'le'
  if (even / n > 0.2 && odd <= even * 0.2) return 'be'
  return null
}

/** Control codes no text file uses (ESC, tab, LF, CR, FF are allowed) in more than a trace amount. */
function looksBinary(bytes: Uint8Array): boolean {
  const n = Math.min(bytes.length, 65536)
  let bad = 0
  for (let i = 0; i < n; i++) {
    const b = bytes[i]
    if (b < 0x09 || (b > 0x0d && b < 0x20 && b !== 0x1b) || b === 0x7f) bad++
  }
  // A stray control character is noise in a text file; many of them are data.
  return bad > 8 && bad / n > 0.01
}

/** Share of the non-ASCII characters that are Hangul: what makes a CP949 reading plausible. */
function hangulShare(text: string): number {
  let nonAscii = 0
  let hangul = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x80) continue
    nonAscii++
    if ((c >= 0xac00 && c <= 0xd7a3) || (c >= 0x3130 && c <= 0x318f) || (c >= 0x1100 && c <= 0x11ff)) hangul++
  }
  return nonAscii === 0 ? 1 : hangul / nonAscii
}

export function decodeText(bytes: Uint8Array, opts: { declaredCharset?: string } = {}): DecodedText {
  if (bytes.length === 0) throw parseError(ParseCode.EMPTY, 'file is empty')
  const [b0, b1, b2, b3] = bytes
  if (b0 === 0xef && b1 === 0xbb && b2 === 0xbf) {
    const text = decodeStrict(bytes, 'utf-8')
    if (text === null) throw parseError(ParseCode.ENCODING, 'file starts with a UTF-8 byte-order mark but is not valid UTF-8')
    return { text, encoding: 'utf-8' }
  }
  if ((b0 === 0xff && b1 === 0xfe && b2 === 0 && b3 === 0) || (b0 === 0 && b1 === 0 && b2 === 0xfe && b3 === 0xff)) {
    throw parseError(ParseCode.ENCODING, 'unsupported text encoding: UTF-32 (convert the file to UTF-8)')
  }
  const bom16 = b0 === 0xff && b1 === 0xfe ? 'le' : b0 === 0xfe && b1 === 0xff ? 'be' : null
  const utf16 = bom16 ?? utf16ByNulPattern(bytes)
  if (utf16) {
    const text = decodeStrict(bytes, `utf-16${utf16}`)
    if (text === null) throw parseError(ParseCode.ENCODING, `file looks like UTF-16${utf16.toUpperCase()} but is not valid UTF-16`)
    return { text, encoding: `utf-16${utf16}` }
  }
  if (bytes.includes(0)) throw parseError(ParseCode.NOT_TEXT, 'file is not text: it contains NUL bytes (binary data)')
  if (looksBinary(bytes)) throw parseError(ParseCode.NOT_TEXT, 'file is not text: it is full of control bytes (binary data)')

  const utf8 = decodeStrict(bytes, 'utf-8')
  if (utf8 !== null) return { text: utf8, encoding: 'utf-8' }

  const declared = opts.declaredCharset?.trim().toLowerCase()
  if (declared && !KOREAN_LABELS.has(declared) && declared !== 'utf-8' && declared !== 'utf8') {
    const text = decodeStrict(bytes, declared)
    if (text !== null) return { text, encoding: new TextDecoder(declared).encoding }
  }
  const korean = decodeCp949(bytes)
  if (korean !== null && (hangulShare(korean) >= 0.5 || (declared !== undefined && KOREAN_LABELS.has(declared)))) {
    return { text: korean, encoding: 'euc-kr' }
  }
  throw parseError(
    ParseCode.ENCODING,
    `unsupported text encoding: the file is not valid UTF-8, UTF-16 or EUC-KR/CP949${declared ? ` (it declares '${declared}')` : ''}; convert it to UTF-8`,
  )
}
