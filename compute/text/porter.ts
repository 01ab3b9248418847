// The Porter (1980) stemmer, as in Martin Porter's reference C implementation (with its "bli"->"ble" and
// "logi"->"log" departures from the paper). English-only: callers apply it to ASCII-letter tokens.

let b = '' // the word being stemmed
let k = 0 // end of the current word (inclusive)
let j = 0 // end of the stem before a matched suffix (inclusive)

function cons(i: number): boolean {
  switch (b.charCodeAt(i)) {
    case 97: case 101: case 105: case 111: case 117: return false
    case 121: return i === 0 ? true : !cons(i - 1)
    default: return true
  }
}

/** Number of VC sequences in b[0..j]. */
function m(): number {
  let n = 0
  let i = 0
  for (;;) {
    if (i > j) return n
    if (!cons(i)) break
    i++
  }
  i++
  for (;;) {
    for (;;) {
      if (i > j) return n
      if (cons(i)) break
      i++
    }
    i++
    n++
    for (;;) {
      if (i > j) return n
      if (!cons(i)) break
      i++
    }
    i++
  }
}

function vowelInStem(): boolean {
  for (let i = 0; i <= j; i++) if (!cons(i)) return true
  return false
}

function doubleC(i: number): boolean {
  return i >= 1 && b.charCodeAt(i) === b.charCodeAt(i - 1) && cons(i)
}

function cvc(i: number): boolean {
  if (i < 2 || !cons(i) || cons(i - 1) || !cons(i - 2)) return false
  const c = b.charCodeAt(i)
  return c !== 119 && c !== 120 && c !== 121 // w x y
}

function ends(s: string): boolean {
  const len = s.length
  if (len > k + 1) return false
  if (b.charCodeAt(k) !== s.charCodeAt(len - 1)) return false
  if (b.substr(k - len + 1, len) !== s) return false
  j = k - len
  return true
}

function setTo(s: string): void {
  b = b.slice(0, j + 1) + s + b.slice(k + 1)
  k = j + s.length
}

function r(s: string): void {
  if (m() > 0) setTo(s)
}

function step1ab(): void {
  if (b[k] === 's') {
    if (ends('sses')) k -= 2
    else if (ends('ies')) setTo('i')
    else if (b[k - 1] !== 's') k--
  }
  if (ends('eed')) {
    if (m() > 0) k--
  } else if ((ends('ed') || ends('ing')) && vowelInStem()) {
    k = j
    if (ends('at')) setTo('ate')
    else if (ends('bl')) setTo('ble')
    else if (ends('iz')) setTo('ize')
    else if (doubleC(k)) {
      k--
      const c = b[k]
      if (c === 'l' || c === 's' || c === 'z') k++
    } else if (m() === 1 && cvc(k)) setTo('e')
  }
}

function step1c(): void {
  if (ends('y') && vowelInStem()) b = b.slice(0, k) + 'i' + b.slice(k + 1)
}

const STEP2: Record<string, [string, string][]> = {
  a: [['ational', 'ate'], ['tional', 'tion']],
  c: [['enci', 'ence'], ['anci', 'ance']],
  e: [['izer', 'ize']],
  l: [['bli', 'ble'], ['alli', 'al'], ['entli', 'ent'], ['eli', 'e'], ['ousli', 'ous']],
  o: [['ization', 'ize'], ['ation', 'ate'], ['ator', 'ate']],
  s: [['alism', 'al'], ['iveness', 'ive'], ['fulness', 'ful'], ['ousness', 'ous']],
  t: [['aliti', 'al'], ['iviti', 'ive'], ['biliti', 'ble']],
  g: [['logi', 'log']],
}

const STEP3: Record<string, [string, string][]> = {
  e: [['icate', 'ic'], ['ative', ''], ['alize', 'al']],
  i: [['iciti', 'ic']],
  l: [['ical', 'ic'], ['ful', '']],
  s: [['ness', '']],
}

const STEP4: Record<string, string[]> = {
  a: ['al'], c: ['ance', 'ence'], e: ['er'], i: ['ic'], l: ['able', 'ible'], n: ['ant', 'ement', 'ment', 'ent'],
  o: ['ion', 'ou'], s: ['ism'], t: ['ate', 'iti'], u: ['ous'], v: ['ive'], z: ['ize'],
}

function applyRules(rules: [string, string][] | undefined): void {
  if (!rules) return
  for (const [suffix, repl] of rules) {
    if (ends(suffix)) { r(repl); return }
  }
}

function step4(): void {
  const rules = STEP4[b[k - 1]]
  if (!rules) return
  let matched = false
  for (const suffix of rules) {
    if (ends(suffix)) {
      if (suffix === 'ion' && !(j >= 0 && (b[j] === 's' || b[j] === 't'))) return
      matched = true
      break
    }
  }
  if (matched && m() > 1) k = j
}

function step5(): void {
  j = k
  if (b[k] === 'e') {
    const a = m()
    if (a > 1 || (a === 1 && !cvc(k - 1))) k--
  }
  if (b[k] === 'l' && doubleC(k) && m() > 1) k--
}

/** Porter stem of a lower-case ASCII word; words of one or two letters are returned unchanged. */
export function porterStem(word: string): string {
  if (word.length <= 2) return word
  b = word
  k = word.length - 1
  j = 0
  step1ab()
  if (k > 0) {
    step1c()
    applyRules(STEP2[b[k - 1]])
    applyRules(STEP3[b[k]])
    step4()
    step5()
  }
  return b.slice(0, k + 1)
}
