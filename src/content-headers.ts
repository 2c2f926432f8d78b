/**
 * The Content-Type and Content-Disposition of a file by its name: for streamed downloads, and for
 * drivers that store a type with an object (S3: a presigned link answers with it).
 */

/** Content-Type by file extension (`application/octet-stream` otherwise). */
const TYPES: Record<string, string> = {
  txt: 'text/plain; charset=utf-8', md: 'text/markdown; charset=utf-8', html: 'text/html; charset=utf-8', htm: 'text/html; charset=utf-8',
  css: 'text/css; charset=utf-8', csv: 'text/csv; charset=utf-8', xml: 'text/xml; charset=utf-8', js: 'text/javascript; charset=utf-8',
  mjs: 'text/javascript; charset=utf-8', json: 'application/json', pdf: 'application/pdf', zip: 'application/zip',
  gz: 'application/gzip', tar: 'application/x-tar', '7z': 'application/x-7z-compressed', rar: 'application/vnd.rar',
  wasm: 'application/wasm', epub: 'application/epub+zip', doc: 'application/msword',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  xls: 'application/vnd.ms-excel', xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  ppt: 'application/vnd.ms-powerpoint', pptx: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp', svg: 'image/svg+xml',
  bmp: 'image/bmp', ico: 'image/x-icon', tif: 'image/tiff', tiff: 'image/tiff', avif: 'image/avif',
  mp3: 'audio/mpeg', flac: 'audio/flac', ogg: 'audio/ogg', opus: 'audio/ogg', m4a: 'audio/mp4', wav: 'audio/wav', wma: 'audio/x-ms-wma',
  mp4: 'video/mp4', mkv: 'video/x-matroska', webm: 'video/webm', avi: 'video/x-msvideo', mov: 'video/quicktime', flv: 'video/x-flv',
  m3u8: 'application/vnd.apple.mpegurl', srt: 'application/x-subrip', vtt: 'text/vtt; charset=utf-8',
};

export function contentTypeOf(name: string): string {
  const dot = name.lastIndexOf('.');
  return (dot >= 0 && TYPES[name.slice(dot + 1).toLowerCase()]) || 'application/octet-stream';
}

/** A name as an RFC 5987 value (`filename*=UTF-8''<this>`), header-safe for any name. */
export function rfc5987(name: string): string {
  // encodeURIComponent leaves ' ( ) * as they are, which are not value-chars: strict parsers refuse them.
  return encodeURIComponent(name).replace(/['()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
}

/** `attachment; filename="<escaped>"; filename*=UTF-8''<escaped>`. */
export function attachment(name: string): string {
  const enc = rfc5987(name);
  return `attachment; filename="${enc}"; filename*=UTF-8''${enc}`;
}
