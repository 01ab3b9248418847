// Object keys of stored originals: `<kb>/<doc_id>-<name>`, one file beside the other documents of its KB. The key
// had a folder per document (`<kb>/<doc_id>/<name>`); in the local object store that folder cost each upload a
// failed rename, a mkdir (a directory inode) and a second folder fsync, and each delete an rmdir. A name too long
// to share one path segment with the doc_id keeps the folder form. Keys are opaque once stored: a row keeps the
// key it was written with, of either form, and is read, deleted and exported through it.
import { MAX_SEGMENT_BYTES } from '../../adapters/objects/keys.ts'

/** The key of document docId's original, named fileName, in KB kbId. */
export function documentKey(kbId: string, docId: string, fileName: string): string {
  const flat = `${docId}-${fileName}`
  return Buffer.byteLength(flat) <= MAX_SEGMENT_BYTES ? `${kbId}/${flat}` : `${kbId}/${docId}/${fileName}`
}

/** The file name in a key that documentKey made, in either form, for (kbId, docId); otherwise the key's last segment. */
export function documentKeyName(key: string, kbId: string, docId: string): string {
  for (const prefix of [`${kbId}/${docId}/`, `${kbId}/${docId}-`]) if (key.startsWith(prefix)) return key.slice(prefix.length)
  return key.slice(key.lastIndexOf('/') + 1)
}
