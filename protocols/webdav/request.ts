/**
 * Per-request plumbing shared by the method handlers: the request object they receive, URL ↔ user
 * path conversion, bodies, and small response helpers. Nothing here touches files: that is the VFS.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import proxyaddr from '@fastify/proxy-addr';
import type { Logger } from 'pino';
import type { AccessContext } from '../../src/auth/principal.js';
import type { Accounts } from '../../src/auth/accounts.js';
import type { KvRepo } from '../../src/store/store.js';
import type { VfsChangeListener } from '../../src/vfs/events.js';
import type { VfsApi } from '../../src/vfs/types.js';
import type { SignSettings } from '../../src/sign.js';
import { join, normalize } from '../../src/paths.js';
import { DavError } from './errors.js';
import { xmlText } from './xml.js';
import type { LockManager } from './locks.js';
import type { DeadProps } from './dead-props.js';

export const DAV_PREFIX = '/dav';

/** What the adapter needs from the Core (narrow, so unit tests can fake it). */
export interface DavDeps {
  vfs: VfsApi;
  accounts: Pick<Accounts, 'authenticateCached' | 'credentialKey' | 'cachedLogin' | 'admin'>;
  kv: KvRepo;
  settings: SignSettings;
  log: Logger;
  /** trusted_proxies compiled by proxy-addr; undefined when none (X-Forwarded-For is ignored). */
  trustProxy?: (addr: string, i: number) => boolean;
  /** site_url's path (`/tg` behind a proxy at https://nas/tg), '' at the root: prefixed to hrefs. */
  siteBase: string;
  /** The VFS's change feed (Vfs.onChange): locks and dead properties follow the tree. */
  onChange(listener: VfsChangeListener): () => void;
  /** Every storage's mount path (dead properties below a storage stay with it: dead-props.ts). */
  mountPaths?: () => readonly string[];
}

export interface Dav {
  deps: DavDeps;
  req: IncomingMessage;
  res: ServerResponse;
  ctx: AccessContext;
  method: string;
  /** The request's user path, normalised (`/` is the user's root), under its stored names. */
  path: string;
  /**
   * The same path as the client wrote it. It differs from `path` only in the Unicode form of names
   * (unicode-names.ts); PROPFIND's hrefs use it, as WebDAVFS tells a folder's own response from its
   * members' by the length of the decoded href, which must not shrink to NFC.
   */
  asSent: string;
  locks: LockManager;
  props: DeadProps;
  /** Resolves once locks and properties follow every tree change so far (follow-changes.ts). */
  settled(): Promise<void>;
}

/** The user path a `/dav/...` URL (or absolute URL) names; undefined when it is outside /dav. */
export function userPathOf(url: string, siteBase = ''): string | undefined {
  let p = url;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(p)) {
    try {
      p = new URL(p).pathname;
    } catch {
      throw new DavError(400, 'bad URL');
    }
  }
  const q = p.indexOf('?');
  if (q >= 0) p = p.slice(0, q);
  if (siteBase && (p === siteBase + DAV_PREFIX || p.startsWith(siteBase + DAV_PREFIX + '/'))) p = p.slice(siteBase.length);
  if (p !== DAV_PREFIX && !p.startsWith(DAV_PREFIX + '/')) return undefined;
  let decoded: string;
  try {
    decoded = decodeURIComponent(p.slice(DAV_PREFIX.length));
  } catch {
    throw new DavError(400, 'bad percent-encoding');
  }
  return normalize(decoded); // INVALID (400) for `..`, NUL and backslashes
}

/** The absolute virtual path of a user path (what locks and dead properties are keyed by). */
export function vpathOf(dav: Pick<Dav, 'ctx'>, userPath: string): string {
  return join(dav.ctx.principal.basePath, userPath);
}

const encodeSeg = (s: string) => encodeURIComponent(s);

/** The href of a user path; collections end in `/`. */
export function hrefOf(userPath: string, isDir: boolean, siteBase = ''): string {
  if (userPath === '/') return siteBase + DAV_PREFIX + '/';
  let out = siteBase + DAV_PREFIX;
  for (const s of userPath.split('/')) if (s) out += '/' + encodeSeg(s);
  return isDir ? out + '/' : out;
}

/** The href prefix for children of a folder (ends in `/`), for building thousands of hrefs fast. */
export function childHrefBase(userPath: string, siteBase = ''): string {
  return hrefOf(userPath, true, siteBase);
}

export const hrefSegment = encodeSeg;

export function parentOf(userPath: string): string {
  const i = userPath.lastIndexOf('/');
  return i <= 0 ? '/' : userPath.slice(0, i);
}

export function nameOf(userPath: string): string {
  return userPath.slice(userPath.lastIndexOf('/') + 1);
}

const MAX_XML_BODY = 1 << 20;

export function hasBody(req: IncomingMessage): boolean {
  const len = req.headers['content-length'];
  return (len !== undefined && len !== '0') || req.headers['transfer-encoding'] !== undefined;
}

/** Read a (small, XML) request body as text; 413 beyond 1 MiB. */
export async function readBody(req: IncomingMessage): Promise<string> {
  if (!hasBody(req)) return '';
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > MAX_XML_BODY) throw new DavError(413, 'request body too large');
    chunks.push(c);
  }
  return xmlText(Buffer.concat(chunks));
}

/** Discard an unread body so the connection can be reused. */
export function drain(req: IncomingMessage): void {
  if (!req.complete && !req.readableEnded) req.resume();
}

/** A short plain answer: the status and its text, as AList's WebDAV does. */
export function sendStatus(res: ServerResponse, status: number, headers: Record<string, string | number> = {}, body?: string): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const text = body ?? '';
  // 204 and 304 have no body, and RFC 9110 §8.6 forbids their Content-Length (on a 304 it would
  // be the file's length, not 0: a cache updating its copy's headers read the file as empty).
  const bodiless = status === 204 || status === 304;
  // Built in place, not spread from three objects: every PUT answers through here.
  const all: Record<string, string | number> = {};
  if (text) all['Content-Type'] = body?.startsWith('<?xml') ? 'application/xml; charset=utf-8' : 'text/plain; charset=utf-8';
  if (!bodiless) all['Content-Length'] = Buffer.byteLength(text);
  for (const k in headers) all[k] = headers[k]!;
  res.writeHead(status, all);
  res.end(text);
}

/**
 * The client's IP: the socket peer, or X-Forwarded-For's nearest untrusted hop when the peer is a
 * trusted proxy. `trusted_proxies` is read as REST's (fastify's) proxy-addr reads it: addresses, CIDR
 * ranges and the names loopback, linklocal, uniquelocal, so both protocols see the same client (the
 * login throttle counts per IP across them). An IPv4 client on a dual-stack socket loses `::ffff:`.
 */
export function clientIp(req: IncomingMessage, trust: ((addr: string, i: number) => boolean) | undefined): string {
  const ip = trust ? proxyaddr(req, trust) : (req.socket.remoteAddress ?? '');
  return ip.startsWith('::ffff:') && ip.includes('.') ? ip.slice('::ffff:'.length) : ip;
}
