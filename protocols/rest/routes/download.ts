/**
 * `/d/*path` and `/p/*path` (GET, HEAD), alist-compat §9. No user auth: the path is absolute in the
 * tree (never joined to a base path) and access is proven by a sign when one is required (sign_all,
 * the storage's enable_sign, or a path password reaching the file).
 *
 * The VFS is called as one of two internal principals (never a user record):
 * - LINK: userId 0, username `(link)`, role -1 (no role: neither guest nor admin, so no role-based
 *   grant ever applies), base `/`, permission 0 — no see-hidden (decision 3: hide rules hold on every
 *   surface) and no skip-password. Used to find out whether the path needs a sign, and to serve it
 *   when it does not.
 * - SIGNED_LINK: the same plus "access without path password" and "see hidden", used only after a
 *   valid sign proved that someone allowed to list the file handed the link out (fs/list and fs/get
 *   sign hidden files for principals who see them, even where signs are otherwise off).
 * Errors are AList's JSON envelope with HTTP 200 (the envelope's error handler).
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PERM, type AccessContext, type Principal, type Role } from '../../../src/auth/principal.js';
import type { Core } from '../../../src/core.js';
import { isVfsError, VfsError } from '../../../src/errors.js';
import { basename, encodePathForUrl, locationOf, normalize } from '../../../src/paths.js';
import { signPath, verifySign } from '../../../src/sign.js';
import type { Entry, StorageInfo } from '../../../src/vfs/types.js';
import type { RoutePlugin } from '../route-types.js';
import { ApiError } from '../envelope.js';
import { extOf, settingOr, thumbSourceOf, typeList } from '../entry.js';
import { downProxy, mustProxy } from '../fs-common.js';
import { knownModTime } from '../../http-date.js';
import { etagOf, notModified, planRange, preconditionFailed } from '../http-range.js';
import { queryString } from '../input.js';
import { attachment, contentTypeOf } from '../../../src/content-headers.js';

/** See the file comment. role -1 is deliberately outside ROLE's values. */
export const LINK_PRINCIPAL: Principal = Object.freeze({
  userId: 0, username: '(link)', role: -1 as unknown as Role, basePath: '/', permission: 0, disabled: false, otp: false, pwdTs: 0,
});
export const SIGNED_LINK_PRINCIPAL: Principal = Object.freeze({ ...LINK_PRINCIPAL, permission: PERM.NO_PASSWORD | PERM.SEE_HIDDEN });

/** The absolute tree path of a /d or /p URL (percent-decoded; `..`, NUL and `\` refused by normalize). */
function treePath(req: FastifyRequest, prefix: '/d' | '/p'): string {
  const raw = req.url.split('?')[0]!.slice(prefix.length);
  let decoded: string;
  try {
    decoded = decodeURIComponent(raw);
  } catch {
    throw new ApiError(400, 'invalid URL escape');
  }
  return normalize(decoded);
}

/**
 * Find out whether the path needs a sign and check it; returns the context to serve with. A sign
 * is needed with sign_all, with the storage's enable_sign, or when the VFS asks the link principal
 * for a path password; only then, and only after the sign verified, is the password skipped.
 */
async function authorize(core: Core, req: FastifyRequest, path: string, signal: AbortSignal): Promise<{ ctx: AccessContext; storage?: StorageInfo }> {
  // `request`: the signed context below reads from the `.balance` member the probe got (one turn per download).
  const probe: AccessContext = { principal: LINK_PRINCIPAL, protocol: 'rest', ip: req.ip, signal, request: req };
  if (!core.settings.bool('sign_all')) {
    try {
      const storage = await core.vfs.storageOf(probe, path, 'read');
      if (!storage?.enableSign) {
        await core.vfs.stat(probe, path);
        return { ctx: probe, storage };
      }
    } catch (e) {
      // Hidden from an anonymous link: only a sign can open it (it is checked below).
      const signedHidden = isVfsError(e, 'NOT_FOUND') && queryString(req, 'sign') !== '';
      if (!isVfsError(e, 'PASSWORD_REQUIRED') && !signedHidden) throw e;
    }
  }
  const failure = verifySign(core.settings.get('token'), path, queryString(req, 'sign').replace(/\/+$/, ''));
  if (failure) throw new ApiError(401, failure);
  const ctx: AccessContext = { ...probe, principal: SIGNED_LINK_PRINCIPAL };
  return { ctx, storage: await core.vfs.storageOf(ctx, path, 'read') };
}

function abortOnClose(reply: FastifyReply): AbortSignal {
  const ac = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) ac.abort(new Error('client disconnected'));
  });
  return ac.signal;
}

/** Times serve describes the file anew when it changed between its look-up and the read. */
const SERVE_TRIES = 3;

/** Stream a file with validators and single-range support (Go's ServeContent behaviour). */
async function serve(core: Core, req: FastifyRequest, reply: FastifyReply, ctx: AccessContext, path: string, entry: Entry, tries = SERVE_TRIES): Promise<unknown> {
  reply.removeHeader('Content-Range');
  const size = entry.size;
  const etag = etagOf(entry.modified, size);
  reply.header('Accept-Ranges', 'bytes');
  reply.header('ETag', etag);
  if (knownModTime(entry.modified)) reply.header('Last-Modified', entry.modified.toUTCString());
  reply.header('Content-Type', contentTypeOf(entry.name));
  reply.header('Content-Disposition', attachment(entry.name));
  if (preconditionFailed(req.headers, etag, entry.modified)) {
    reply.removeHeader('Content-Type');
    return reply.code(412).send();
  }
  if (notModified(req.headers, etag, entry.modified)) {
    reply.removeHeader('Content-Type');
    return reply.code(304).send();
  }
  const plan = planRange(req.headers, size, etag, entry.modified);
  if (plan.kind === 'unsatisfiable') {
    reply.header('Content-Range', `bytes */${size}`);
    return reply.code(416).type('text/plain; charset=utf-8').send('invalid range: failed to overlap');
  }
  const status = plan.kind === 'partial' ? 206 : 200;
  const start = plan.kind === 'partial' ? plan.start : 0;
  const end = plan.kind === 'partial' ? plan.end : size - 1;
  if (plan.kind === 'partial') reply.header('Content-Range', `bytes ${start}-${end}/${size}`);
  reply.header('Content-Length', String(Math.max(0, end - start + 1)));
  if (req.method === 'HEAD') return reply.code(status).send();
  const r = await core.vfs.read(ctx, path, plan.kind === 'partial' ? { start, end } : undefined);
  // An upload renamed another file over the path since `entry` was looked up: the headers above
  // describe the old one, and the new one's first bytes under them would pass for a whole file.
  if (r.entry.size !== entry.size || r.entry.modified.getTime() !== entry.modified.getTime()) {
    r.stream.destroy();
    if (tries <= 1) throw new VfsError('UPSTREAM', 'the file changed while it was being read', { path });
    return serve(core, req, reply, ctx, path, r.entry, tries - 1);
  }
  // Written by hand rather than reply.send(stream), so local files go out through sendTo's reused
  // buffers (src/vfs/file-copy.ts). fastify still runs the onResponse hook (the request log line).
  reply.hijack();
  reply.raw.writeHead(status, reply.getHeaders() as OutgoingHttpHeaders);
  try {
    await r.sendTo(reply.raw);
  } catch (e) {
    // The headers are out, so there is no error answer left to give: cut the response short.
    if ((e as NodeJS.ErrnoException).code !== 'ERR_STREAM_PREMATURE_CLOSE') req.log.warn({ err: e, path }, 'download failed mid-body');
    reply.raw.destroy();
  }
}

/**
 * A thumbnail: a PNG made for this request or read from the driver's cache, so without the file's
 * validators and ranges (AList's answer has neither for a thumbnail it has just made).
 */
function serveThumb(req: FastifyRequest, reply: FastifyReply, t: { size?: number; stream: Readable }): FastifyReply {
  reply.header('Content-Type', 'image/png');
  if (t.size !== undefined) reply.header('Content-Length', String(t.size));
  if (req.method === 'HEAD') {
    t.stream.destroy();
    return reply.code(200).send();
  }
  return reply.code(200).send(t.stream);
}

type Kind = 'd' | 'p';

/** forward_direct_link_params: copy the request's query onto a 302 target, minus the ignored keys. */
function forwardParams(core: Core, req: FastifyRequest, target: string): string {
  if (!core.settings.bool('forward_direct_link_params')) return target;
  const ignored = new Set(settingOr(core.settings, 'ignore_direct_link_params', 'sign,alist_ts').split(',').map((s) => s.trim()));
  const url = new URL(target);
  const q = new URLSearchParams(req.url.split('?')[1] ?? '');
  for (const [k, v] of q) if (!ignored.has(k)) url.searchParams.append(k, v);
  return url.toString();
}

function proxyAllowed(core: Core, storage: StorageInfo | undefined, name: string): boolean {
  const ext = extOf(name);
  return mustProxy(storage) || storage?.webdavPolicy === 'use_proxy_url' ||
    typeList(core.settings, 'proxy_types').includes(ext) || typeList(core.settings, 'text_types').includes(ext);
}

const routes: RoutePlugin = async (app, { core }) => {
  const handle = (kind: Kind) => async (req: FastifyRequest, reply: FastifyReply) => {
    const path = treePath(req, kind === 'd' ? '/d' : '/p');
    const signal = abortOnClose(reply);
    const { ctx, storage } = await authorize(core, req, path, signal);
    const name = basename(path);
    const proxied = kind === 'p' || mustProxy(storage) || typeList(core.settings, 'proxy_types').includes(extOf(name));
    if (kind === 'p' && !proxyAllowed(core, storage, name)) throw new ApiError(403, 'proxy not allowed');
    if (queryString(req, 'type') === 'thumb') {
      // Through the VFS with the same principal as the file: its password and hide rules hold.
      const thumb = await core.vfs.thumbnail(ctx, path, thumbSourceOf(core.settings, name));
      if (thumb) return serveThumb(req, reply, thumb);
    }
    if (proxied) {
      const dpu = downProxy(storage);
      const q = (req.query ?? {}) as Record<string, unknown>;
      if (dpu && q.d === undefined) {
        if ((await core.vfs.stat(ctx, path)).isDir) throw new ApiError(500, 'failed link: not a file');
        return reply.redirect(locationOf(`${dpu}${encodePathForUrl(path)}?sign=${encodeURIComponent(signPath(core.settings, path))}`), 302);
      }
      const entry = await core.vfs.stat(ctx, path);
      if (entry.isDir) throw new ApiError(500, 'failed link: not a file');
      return serve(core, req, reply, ctx, path, entry);
    }
    const { entry, link } = await core.vfs.link(ctx, path);
    if (link.kind === 'url') {
      reply.header('Referrer-Policy', 'no-referrer');
      reply.header('Cache-Control', 'max-age=0, no-cache, no-store, must-revalidate');
      return reply.redirect(locationOf(forwardParams(core, req, link.url)), 302);
    }
    return serve(core, req, reply, ctx, path, entry);
  };

  /** AList's messages for the two common failures (`failed link: ...`). */
  const withLinkErrors = (kind: Kind) => async (req: FastifyRequest, reply: FastifyReply) => {
    try {
      return await handle(kind)(req, reply);
    } catch (e) {
      if (isVfsError(e, 'IS_A_DIR')) throw new ApiError(500, 'failed link: not a file');
      if (isVfsError(e, 'NOT_FOUND')) throw new ApiError(500, 'failed link: failed to get file: object not found');
      throw e;
    }
  };
  for (const kind of ['d', 'p'] as const) {
    app.route({ method: ['GET', 'HEAD'], url: `/${kind}/*`, handler: withLinkErrors(kind) });
  }
};

export default routes;
