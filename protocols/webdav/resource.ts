/** Derived HTTP facts about an entry: ETag, content type, dates. */
import type { Entry } from '../../src/vfs/types.js';

/** A strong validator from mtime and size (x/net/webdav's form), quoted. */
export function etagOf(e: Pick<Entry, 'modified' | 'size'>): string {
  return `"${e.modified.getTime().toString(16)}-${e.size.toString(16)}"`;
}

/** RFC 1123 date, as getlastmodified and Last-Modified want it. */
export const httpDate = (d: Date) => d.toUTCString();

// Null prototype: looked up by the file's extension (`a.constructor`).
const TYPES: Record<string, string> = Object.assign(Object.create(null) as Record<string, string>, {
  txt: 'text/plain; charset=utf-8', md: 'text/markdown; charset=utf-8', html: 'text/html; charset=utf-8', htm: 'text/html; charset=utf-8',
  css: 'text/css; charset=utf-8', js: 'text/javascript; charset=utf-8', mjs: 'text/javascript; charset=utf-8', json: 'application/json',
  xml: 'application/xml', csv: 'text/csv; charset=utf-8', pdf: 'application/pdf', zip: 'application/zip', gz: 'application/gzip',
  tar: 'application/x-tar', '7z': 'application/x-7z-compressed', rar: 'application/vnd.rar', png: 'image/png', jpg: 'image/jpeg',
  jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp', svg: 'image/svg+xml', ico: 'image/x-icon', bmp: 'image/bmp',
  mp3: 'audio/mpeg', flac: 'audio/flac', wav: 'audio/wav', ogg: 'audio/ogg', m4a: 'audio/mp4', mp4: 'video/mp4', mkv: 'video/x-matroska',
  webm: 'video/webm', mov: 'video/quicktime', avi: 'video/x-msvideo', doc: 'application/msword', xls: 'application/vnd.ms-excel',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  pptx: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
  epub: 'application/epub+zip', iso: 'application/x-iso9660-image', wasm: 'application/wasm',
});

export function contentTypeOf(name: string): string {
  const dot = name.lastIndexOf('.');
  return (dot > 0 && TYPES[name.slice(dot + 1).toLowerCase()]) || 'application/octet-stream';
}
