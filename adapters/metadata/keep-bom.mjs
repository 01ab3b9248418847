// Imported by the metadata thread (pglite-thread.mjs) before PGlite, for its side effect: every TextDecoder made in
// that thread keeps a leading U+FEFF (byte order mark) unless told otherwise. PGlite decodes each text value of a result
// with `new TextDecoder('utf-8')` (its protocol reader), whose default drops a U+FEFF at the start of what it decodes:
// a value stored as '\uFEFFabc' (length 4 in the database) was read back as 'abc', and one stored as '\uFEFF' as ''.
// PostgreSQL's driver returns the value as stored. The fuzz run of the access-controlled edition found it: a KB handed
// to the user id '\uFEFF' read its owner back as '', so the next transfer-owner missed that row and answered 500.
// The thread runs nothing but PGlite and our codecs, and no file it reads as text starts with a mark, so the setting
// changes no other value. A caller that passes ignoreBOM itself keeps its own choice.
const Native = globalThis.TextDecoder

class KeepBomTextDecoder extends Native {
  constructor(label = 'utf-8', options = {}) {
    super(label, { ...options, ignoreBOM: options.ignoreBOM ?? true })
  }
}

globalThis.TextDecoder = KeepBomTextDecoder
