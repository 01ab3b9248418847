/** NFKC, lower case, whitespace runs collapsed to one space, trimmed: the text the dedup signatures read. */
export function normalizeForDedup(text: string): string {
  return text.normalize('NFKC').toLowerCase().replace(/\s+/g, ' ').trim()
}
