// Accepted upload formats (spec 1): by extension at upload, confirmed by content sniffing in the pipeline.
import type { DocType } from '../../compute/types.ts'

const BY_EXTENSION: Record<string, DocType> = {
  pdf: 'pdf', docx: 'docx', txt: 'txt', md: 'md', markdown: 'md', hwp: 'hwp', hwpx: 'hwpx', html: 'html', htm: 'html', rst: 'rst',
}

export const SUPPORTED_EXTENSIONS = Object.keys(BY_EXTENSION)

export const CONTENT_TYPES: Record<DocType, string> = {
  pdf: 'application/pdf',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  txt: 'text/plain; charset=utf-8',
  md: 'text/markdown; charset=utf-8',
  hwp: 'application/x-hwp',
  hwpx: 'application/hwp+zip',
  html: 'text/html; charset=utf-8',
  rst: 'text/x-rst; charset=utf-8',
  code: 'text/plain; charset=utf-8',
}

export function extensionOf(filename: string): string {
  const dot = filename.lastIndexOf('.')
  return dot > 0 ? filename.slice(dot + 1).toLowerCase() : ''
}

export function docTypeOf(filename: string): DocType | null {
  return BY_EXTENSION[extensionOf(filename)] ?? null
}

/** The file name a client sent, without any folder part (some clients send full paths). */
export function baseName(filename: string): string {
  return filename.replace(/^.*[\\/]/, '').trim()
}

export function titleFromFilename(filename: string): string {
  const dot = filename.lastIndexOf('.')
  return dot > 0 ? filename.slice(0, dot) : filename
}

/** Content-Disposition with an ASCII fallback and the UTF-8 name (RFC 6266 / 5987). */
export function contentDisposition(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|["\\]/g, '_')
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`
}
