/**
 * The front end's static folders (/assets, /images, /static, /streamer) served from dist_dir, with
 * AList's long cache header. Paths are decoded and normalised by src/paths.ts (`..`, NUL and `\` are
 * refused), resolved inside dist_dir, and the real path (symlinks followed) must still be inside
 * dist_dir's real path: a symlink pointing out of it answers 404 like a missing file. dist_dir's real
 * path is taken per request: dist_dir may be a link switched to a new release while we run.
 */
import { createReadStream } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import { join, sep } from 'node:path';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { normalize } from '../../../src/paths.js';
import { etagOf, notModified, planRange, preconditionFailed } from '../http-range.js';
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

/** The file under `dir` (dist_dir) for a URL path, or undefined when it is refused or missing. */
export async function resolveAsset(dir: string, urlPath: string): Promise<{ file: string; name: string; size: number; mtime: Date } | undefined> {
  let vpath: string;
  try {
    vpath = normalize(decodeURIComponent(urlPath));
  } catch {
    return undefined; // bad escape, `..`, NUL or backslash
  }
  try {
    const root = await realpath(dir);
    const file = await realpath(join(root, ...vpath.split('/').filter(Boolean)));
    if (!file.startsWith(root + sep)) return undefined; // a symlink out of dist_dir
    const st = await stat(file);
    // `name` is the requested one: its type is the asset's even when `file` is a link target named
    // otherwise (a content-addressed store without extensions), as Go's FileServer (AList) types it.
    return st.isFile() ? { file, name: vpath, size: st.size, mtime: st.mtime } : undefined;
  } catch {
    return undefined;
  }
}

/** A GET/HEAD handler for the static folders under `dir` (dist_dir, absolute). */
export function staticHandler(dir: string) {
  return async (req: FastifyRequest, reply: FastifyReply) => {
    const found = await resolveAsset(dir, req.url.split('?')[0]!);
    if (!found) return reply.code(404).type('text/plain; charset=utf-8').send('404 page not found');
    const etag = etagOf(found.mtime, found.size);
    reply.header('Cache-Control', STATIC_CACHE).header('ETag', etag).header('Last-Modified', found.mtime.toUTCString());
    // Checked first, as Go's FileServer (AList) does: a resumed download of a file that changed since
    // must not get the new file's bytes under the old one's.
    if (preconditionFailed(req.headers, etag, found.mtime)) return reply.code(412).send();
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
    reply.type(assetType(found.name)).header('Content-Length', Math.max(0, end - start + 1));
    if (req.method === 'HEAD' || end < start) return reply.send();
    // Always bounded by `end`: a file that grew since the stat sent more than its Content-Length, and
    // a keep-alive client read the surplus as the start of the next response.
    return reply.send(createReadStream(found.file, { start, end }));
  };
}
