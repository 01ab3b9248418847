// CP949 (Unified Hangul Code), the superset of EUC-KR that Korean Windows writes. Node's ICU 'euc-kr' decoder
// knows only KS X 1001 and, even with fatal: true, passes UHC bytes through as C1 controls, so the
// extension is decoded here. It needs no table file: UHC places the 8,822 Hangul syllables missing from
// KS X 1001 in code point order on lead bytes 0x81..0xC6, and ICU provides the KS X 1001 half.

const LEAD_MIN = 0x81
const TRAIL_MIN = 0x41
const ROW = 0xfe - TRAIL_MIN + 1
let table: Uint16Array | null = null

const slot = (lead: number, trail: number) => (lead - LEAD_MIN) * ROW + (trail - TRAIL_MIN)

function buildTable(): Uint16Array {
  const t = new Uint16Array((0xfe - LEAD_MIN + 1) * ROW)
  const ks = new TextDecoder('euc-kr')
  const inKs = new Set<number>()
  const pair = new Uint8Array(2)
  for (let lead = 0xa1; lead <= 0xfe; lead++) {
    for (let trail = 0xa1; trail <= 0xfe; trail++) {
      pair[0] = lead
      pair[1] = trail
      const s = ks.decode(pair)
      if (s.length !== 1 || s === '\uFFFD') continue
      const cp = s.charCodeAt(0)
      t[slot(lead, trail)] = cp
      if (cp >= 0xac00 && cp <= 0xd7a3) inKs.add(cp)
    }
  }
  let cp = 0xac00
  for (let lead = 0x81; lead <= 0xc6 && cp <= 0xd7a3; lead++) {
    for (let trail = TRAIL_MIN; trail <= 0xfe && cp <= 0xd7a3; trail++) {
      if ((trail > 0x5a && trail < 0x61) || (trail > 0x7a && trail < 0x81)) continue
      if (lead >= 0xa1 && trail >= 0xa1) break
      while (cp <= 0xd7a3 && inKs.has(cp)) cp++
      if (cp > 0xd7a3) break
      t[slot(lead, trail)] = cp++
    }
  }
  return t
}

/** Decodes CP949/EUC-KR; returns null at the first byte sequence that is not valid CP949. */
export function decodeCp949(bytes: Uint8Array): string | null {
  table ??= buildTable()
  const units = new Uint16Array(bytes.length)
  let n = 0
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]
    if (b < 0x80) {
      units[n++] = b
      continue
    }
    if (b < LEAD_MIN || b > 0xfe || i + 1 >= bytes.length) return null
    const trail = bytes[++i]
    if (trail < TRAIL_MIN || trail > 0xfe) return null
    const u = table[slot(b, trail)]
    if (u === 0) return null
    units[n++] = u
  }
  let out = ''
  for (let i = 0; i < n; i += 8192) out += String.fromCharCode(...units.subarray(i, Math.min(n, i + 8192)))
  return out
}
