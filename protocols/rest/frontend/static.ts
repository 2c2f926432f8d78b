/**
 * The front end's static folders (/assets, /images, /static, /streamer) served from dist_dir, with
 * AList's long cache header. Paths are decoded and normalised by src/paths.ts (`..`, NUL and `\` are
 * refused), resolved inside dist_dir, and the real path (symlinks followed) must still be inside
 * dist_dir's real path: a symlink pointing out of it answers 404 like a missing file. dist_dir's real
 * path is taken per request: dist_dir may be a link switched to a new release while we run.
 */
import { constants } from 'node:fs';
import { open, realpath, type FileHandle } from 'node:fs/promises';
import { join, sep } from 'node:path';
import { pipeline, Transform, type Readable } from 'node:stream';
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

interface Asset { handle: FileHandle; name: string; size: number; mtime: Date }

/**
 * The file under `dir` (dist_dir) for a URL path, opened, or undefined when it is refused or missing.
 * The caller closes `handle` (a stream made from it closes it when done).
 */
export async function resolveAsset(dir: string, urlPath: string): Promise<Asset | undefined> {
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
    // Opened before it is described, and served from the handle: a file a rebuild deleted between a
    // stat and the open answered an error under the asset's cache headers (cached for 180 days), and
    // one replaced in between sent its bytes under the old one's length and ETag. O_NONBLOCK: the
    // open of a FIFO must not hang (it is refused by isFile below); regular files ignore it.
    const handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
    const st = await handle.stat().catch(() => undefined);
    // `name` is the requested one: its type is the asset's even when `file` is a link target named
    // otherwise (a content-addressed store without extensions), as Go's FileServer (AList) types it.
    if (st?.isFile()) return { handle, name: vpath, size: st.size, mtime: st.mtime };
    await handle.close();
    return undefined;
  } catch {
    return undefined;
  }
}

/**
 * `src` failing when it ends before `length` bytes (the file shrank since its stat): fastify then cuts
 * the connection, as the download route does. Ended short, the response left a keep-alive client
 * waiting for the missing bytes and reading the next response's as them.
 */
function exactly(src: Readable, length: number): Readable {
  let seen = 0;
  const check = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      seen += chunk.length;
      cb(null, chunk);
    },
    flush(cb) {
      cb(seen < length ? new Error(`static file shrank while it was sent (${seen} of ${length} bytes)`) : null);
    },
  });
  return pipeline(src, check, () => undefined); // errors reach fastify through `check`
}

/** A GET/HEAD handler for the static folders under `dir` (dist_dir, absolute). */
export function staticHandler(dir: string) {
  return async (req: FastifyRequest, reply: FastifyReply) => {
    const found = await resolveAsset(dir, req.url.split('?')[0]!);
    if (!found) return reply.code(404).type('text/plain; charset=utf-8').send('404 page not found');
    let body: ReturnType<typeof serveAsset>;
    try {
      body = serveAsset(req, reply, found);
    } finally {
      // A body stream closes the handle when it is done; every other answer leaves it to us.
      if (typeof body !== 'object') await found.handle.close();
    }
    return reply.send(body);
  };
}

/** Sets the status and headers for `found`; returns the body (a stream of the file, a message or none). */
function serveAsset(req: FastifyRequest, reply: FastifyReply, found: Asset): Readable | string | undefined {
  const etag = etagOf(found.mtime, found.size);
  reply.header('Cache-Control', STATIC_CACHE).header('ETag', etag).header('Last-Modified', found.mtime.toUTCString());
  // Checked first, as Go's FileServer (AList) does: a resumed download of a file that changed since
  // must not get the new file's bytes under the old one's.
  if (preconditionFailed(req.headers, etag, found.mtime)) return void reply.code(412);
  if (notModified(req.headers, etag, found.mtime)) return void reply.code(304);
  // Ranges as AList's http.FileServer answers them (a media file under /static or /streamer
  // does not play in Safari without them).
  reply.header('Accept-Ranges', 'bytes');
  const plan = planRange(req.headers, found.size, etag, found.mtime);
  if (plan.kind === 'unsatisfiable') {
    reply.header('Content-Range', `bytes */${found.size}`);
    reply.code(416).type('text/plain; charset=utf-8');
    return 'invalid range: failed to overlap';
  }
  const { start, end } = plan.kind === 'partial' ? plan : { start: 0, end: found.size - 1 };
  if (plan.kind === 'partial') reply.code(206).header('Content-Range', `bytes ${start}-${end}/${found.size}`);
  reply.type(assetType(found.name)).header('Content-Length', Math.max(0, end - start + 1));
  if (req.method === 'HEAD' || end < start) return undefined;
  // Always bounded by `end`: a file that grew since the stat sent more than its Content-Length, and
  // a keep-alive client read the surplus as the start of the next response.
  return exactly(found.handle.createReadStream({ start, end }), end - start + 1);
}
