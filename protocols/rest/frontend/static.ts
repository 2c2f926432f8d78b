/**
 * The front end's static folders (/assets, /images, /static, /streamer) served from dist_dir, with
 * AList's long cache header. Paths are decoded and normalised by src/paths.ts (`..`, NUL and `\` are
 * refused), resolved inside dist_dir, and the real path (symlinks followed) must still be inside
 * dist_dir's real path: a symlink pointing out of it answers 404 like a missing file.
 */
import { createReadStream } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import { join, sep } from 'node:path';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { normalize } from '../../../src/paths.js';
import { etagOf, notModified, planRange } from '../http-range.js';
import { contentTypeOf } from '../../../src/content-headers.js';

export const STATIC_FOLDERS = ['assets', 'images', 'static', 'streamer'] as const;

/** AList's Cache-Control for the static folders (180 days). */
export const STATIC_CACHE = 'public, max-age=15552000';

/** Types a front end build has that mime.ts (made for user files) does not know or types differently. */
const EXTRA_TYPES: Record<string, string> = {
  woff: 'font/woff', woff2: 'font/woff2', ttf: 'font/ttf', otf: 'font/otf', eot: 'application/vnd.ms-fontobject',
  map: 'application/json', webmanifest: 'application/manifest+json', json: 'application/json; charset=utf-8',
  txt: 'text/plain; charset=utf-8', wasm: 'application/wasm',
};

export function assetType(name: string): string {
  const ext = name.slice(name.lastIndexOf('.') + 1).toLowerCase();
  return (name.includes('.') && EXTRA_TYPES[ext]) || contentTypeOf(name);
}

/** The file under `root` for a URL path, or undefined when it is refused or missing. */
export async function resolveAsset(root: string, urlPath: string): Promise<{ file: string; size: number; mtime: Date } | undefined> {
  let vpath: string;
  try {
    vpath = normalize(decodeURIComponent(urlPath));
  } catch {
    return undefined; // bad escape, `..`, NUL or backslash
  }
  try {
    const file = await realpath(join(root, ...vpath.split('/').filter(Boolean)));
    if (!file.startsWith(root + sep)) return undefined; // a symlink out of dist_dir
    const st = await stat(file);
    return st.isFile() ? { file, size: st.size, mtime: st.mtime } : undefined;
  } catch {
    return undefined;
  }
}

/** A GET/HEAD handler for the static folders; `root` must be dist_dir's real path. */
export function staticHandler(root: string) {
  return async (req: FastifyRequest, reply: FastifyReply) => {
    const found = await resolveAsset(root, req.url.split('?')[0]!);
    if (!found) return reply.code(404).type('text/plain; charset=utf-8').send('404 page not found');
    const etag = etagOf(found.mtime, found.size);
    reply.header('Cache-Control', STATIC_CACHE).header('ETag', etag).header('Last-Modified', found.mtime.toUTCString());
    if (notModified(req.headers, etag, found.mtime)) return reply.code(304).send();
    // Ranges as AList's http.FileServer answers them (a media file under /static or /streamer
    // does not play in Safari without them).
    reply.header('Accept-Ranges', 'bytes');
    const plan = planRange(req.headers, found.size, etag, found.mtime);
    if (plan.kind === 'unsatisfiable') {
      reply.header('Content-Range', `bytes */${found.size}`);
      return reply.code(416).type('text/plain; charset=utf-8').send('invalid range: failed to overlap');
    }
    const { start, end } = plan.kind === 'partial' ? plan : { start: 0, end: found.size - 1 };
    if (plan.kind === 'partial') reply.code(206).header('Content-Range', `bytes ${start}-${end}/${found.size}`);
    reply.type(assetType(found.file)).header('Content-Length', Math.max(0, end - start + 1));
    if (req.method === 'HEAD') return reply.send();
    return reply.send(createReadStream(found.file, plan.kind === 'partial' ? { start, end } : {}));
  };
}
